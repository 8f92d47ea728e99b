"""The judge's endpoints: a configured provider resolved to a URL, a model and a key, and its grading method.

`auto` = reference_match for rc1's own llama.cpp judge (provider `local` with base_url `auto`, which
serves grammars and logprobs), grade for every other endpoint.

API keys are read from the environment variable the provider names and are never logged or written; a
remote provider without one is a ConfigError before any call.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from rc1.config.schema import ScorerSection
from rc1.runtime.errors import ConfigError
from rc1.runtime.workspace import Workspace

LOCAL_PLACEHOLDER_KEY = "local-no-key"  # llama.cpp's server needs no key; the client needs a string
DETERMINISTIC_METHODS = ("reference_match",)


@dataclass(frozen=True)
class ResolvedProvider:
    name: str
    base_url: str
    model: str
    api_key_env: str | None
    api_key: str = field(repr=False, default="")
    rc1_server: bool = False  # rc1's own llama.cpp judge (base_url 'auto'): grammars and logprobs

    @property
    def is_local(self) -> bool:
        return self.name == "local"


def resolve_provider(ws: Workspace, scorer: ScorerSection, name: str | None = None) -> ResolvedProvider:
    """Provider settings with the key from the environment. Raises ConfigError before any call."""
    name = name or scorer.provider
    if name not in scorer.providers:
        raise ConfigError(f"scorer provider {name!r} is not configured; known: {sorted(scorer.providers)}")
    p = scorer.providers[name]
    base_url = p.base_url
    rc1_server = base_url == "auto"
    if rc1_server:
        from rc1.judge.server import running_judge

        info = running_judge(ws)
        if info is None:
            raise ConfigError(f"provider {name!r} has base_url 'auto' but no local judge is running; "
                              "start it with `rc1 judge serve`")
        base_url = info["base_url"]
    key = ""
    if p.api_key_env:
        key = os.environ.get(p.api_key_env, "")
        if not key:
            raise ConfigError(f"scorer provider {name!r} needs an API key: environment variable "
                              f"{p.api_key_env} is not set")
    elif name != "local" and not is_loopback(base_url):
        raise ConfigError(f"scorer provider {name!r} at {base_url} has no api_key_env; remote providers need one")
    return ResolvedProvider(name, base_url.rstrip("/"), p.model, p.api_key_env, key or LOCAL_PLACEHOLDER_KEY,
                            rc1_server)


def grading_method(scorer: ScorerSection, provider: ResolvedProvider) -> str:
    """`scorer.method`, with `auto` resolved (see the module docstring)."""
    if scorer.method != "auto":
        return scorer.method
    return "reference_match" if provider.rc1_server else "grade"


def is_loopback(url: str) -> bool:
    return bool(re.match(r"^https?://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(/|$)", url))
