"""Prompt template packs (templates/pack_v2/*.json), validated on load.

A pack file holds the templates of one task::

    {"pack": "v2", "task": "gsm8k", "templates": [
        {"id": "gsm8k/t01", "task": "gsm8k", "role": "tutor", "style": "formal",
         "system": "... {tools} ... {max_turns} ...", "user": ["... {question} ...", ...]}]}

`system` may use {tools} and {max_turns}; every `user` variant must use {question}, and hotpotqa
variants must also place the passages with {context}. Schema errors name the file and the field.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rc1.config.load import format_validation_error
from rc1.config.names import TASKS
from rc1.runtime.errors import ConfigError

SYSTEM_FIELDS = {"tools", "max_turns"}
USER_FIELDS = {"question", "context"}


def _fields(text: str) -> set[str]:
    try:
        return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}
    except ValueError as exc:
        raise ValueError(f"bad placeholder syntax: {exc}") from None


class Template(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^(hotpotqa|strategyqa|gsm8k)/[A-Za-z0-9_.-]+$")
    task: Literal["hotpotqa", "strategyqa", "gsm8k"]
    role: str = Field(min_length=1, pattern=r"^[a-z_]+$")
    style: str = Field(min_length=1, pattern=r"^[a-z_]+$")
    system: str = Field(min_length=10)
    user: list[str] = Field(min_length=1)

    @field_validator("system")
    @classmethod
    def _system_fields(cls, v: str) -> str:
        unknown = _fields(v) - SYSTEM_FIELDS
        if unknown:
            raise ValueError(f"unknown placeholder(s) {sorted(unknown)}; allowed: {sorted(SYSTEM_FIELDS)}")
        return v

    @field_validator("user")
    @classmethod
    def _user_fields(cls, v: list[str]) -> list[str]:
        for i, text in enumerate(v):
            f = _fields(text)
            if "question" not in f:
                raise ValueError(f"variant {i} must contain {{question}}")
            if f - USER_FIELDS:
                raise ValueError(f"variant {i}: unknown placeholder(s) {sorted(f - USER_FIELDS)}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "Template":
        if not self.id.startswith(self.task + "/"):
            raise ValueError(f"id {self.id!r} must start with its task {self.task!r}/")
        if self.task == "hotpotqa" and any("{context}" not in u for u in self.user):
            raise ValueError("hotpotqa user variants must contain {context}")
        return self


class PackFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pack: str = Field(min_length=1)
    task: Literal["hotpotqa", "strategyqa", "gsm8k"]
    templates: list[Template] = Field(min_length=1)

    @model_validator(mode="after")
    def _same_task(self) -> "PackFile":
        for i, t in enumerate(self.templates):
            if t.task != self.task:
                raise ValueError(f"templates.{i}.task is {t.task!r} but the file is for {self.task!r}")
        return self


def load_pack(directory: str | Path, *, min_per_task: int = 1, tasks: tuple[str, ...] = TASKS) -> dict[str, list[Template]]:
    """Load every *.json in `directory`; ConfigError naming the file and field on any problem."""
    d = Path(directory)
    if not d.is_dir():
        raise ConfigError(f"{d}: templates directory not found")
    files = sorted(d.glob("*.json"))
    if not files:
        raise ConfigError(f"{d}: no *.json template files")
    by_task: dict[str, list[Template]] = {t: [] for t in TASKS}
    seen: dict[str, str] = {}
    for f in files:
        try:
            raw = json.loads(f.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{f}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
        try:
            pack = PackFile.model_validate(raw)
        except ValidationError as err:
            lines = format_validation_error(err)
            raise ConfigError(f"{f}: {lines[0]}", lines=lines[1:]) from None
        for t in pack.templates:
            if t.id in seen:
                raise ConfigError(f"{f}: templates: duplicate id {t.id!r} (also in {seen[t.id]})")
            seen[t.id] = f.name
            by_task[t.task].append(t)
    for task in tasks:
        if len(by_task[task]) < min_per_task:
            raise ConfigError(f"{d}: task {task!r} has {len(by_task[task])} template(s); needs >= {min_per_task}")
    return by_task



def render(template: Template, variant: int, *, question: str, context: str, tools: list[str],
           max_turns: int) -> list[dict]:
    """The rendered prompt messages (content braces in the question/context are kept verbatim)."""
    system = template.system.format(tools=", ".join(tools) if tools else "none", max_turns=max_turns)
    user = template.user[variant % len(template.user)]
    # str.format would choke on braces inside the question, so substitute placeholders directly
    user = user.replace("{question}", "\0Q\0").replace("{context}", "\0C\0")
    user = user.replace("{{", "{").replace("}}", "}")
    user = user.replace("\0Q\0", question).replace("\0C\0", context)
    return [{"role": "system", "content": system}, {"role": "user", "content": user.strip()}]
