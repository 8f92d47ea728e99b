"""LLM judge over OpenAI-compatible chat APIs (openai, deepseek, gemini, local llama.cpp).

One score = K samples (cfg.scorer.samples) of the same rubric prompt -> median and variance of the
parsed 0-10 grades (scaled to [0, 1]). A variance above cfg.reward.unstable_variance is written
to reports/unstable_samples.jsonl and the score is down-weighted.

Each sample is looked up in the persistent cache (rc1.rewards.cache) first; a miss is a live call
through the official `openai` client with `max_retries=0`: retries are ours, so every attempt is
counted. 429 and 5xx (and timeouts, dropped connections, malformed bodies) are retried with
exponential backoff + jitter, honouring Retry-After; 400/401/403/404/422 fail fast. A reply that
holds no grade is a failed sample (counted, never a silent 0) and is not cached. API keys are read
from the environment variable the provider names and are never logged or written.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import random
import re
import statistics
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rc1.config.schema import RewardSection, ScorerSection
from rc1.rewards.cache import JudgeStore, LedgerRow, cache_key
from rc1.envs.answers import strip_think
from rc1.runtime.atomic import append_line, atomic_write_json
from rc1.runtime.errors import ConfigError, Rc1Error
from rc1.runtime.secrets import redact
from rc1.runtime.workspace import Workspace

log = logging.getLogger("rc1.rewards.judge")

STATS_PATH = "reports/judge_stats.json"
UNSTABLE_PATH = "reports/unstable_samples.jsonl"
LOCAL_PLACEHOLDER_KEY = "local-no-key"  # llama.cpp's server needs no key; the client needs a string
FAIL_FAST = {400, 401, 403, 404, 422}
_GRADE = re.compile(r"(?<![\d.])(10|[0-9])(?:\.\d+)?(?![\d])")
# llama.cpp grammar: the local judge can only answer with a grade, so a tiny model stays parseable.
LOCAL_GRADE_GRAMMAR = 'root ::= ("10" | [0-9])'

RUBRIC_SYSTEM = (
    "You grade answers to questions. Compare the response with the reference answer. "
    "Give a grade from 0 to 10: 10 = correct and well justified, 5 = partly correct, 0 = wrong or no answer. "
    "Reply with the grade only, a single integer.")


class JudgeRequestError(Rc1Error):
    """A request the server refused outright (400/401/...): retrying cannot help."""


@dataclass(frozen=True)
class ResolvedProvider:
    name: str
    base_url: str
    model: str
    api_key_env: str | None
    api_key: str = field(repr=False, default="")

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
    if base_url == "auto":
        from rc1.rewards.judge_server import running_judge

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
    elif name != "local" and not _is_loopback(base_url):
        raise ConfigError(f"scorer provider {name!r} at {base_url} has no api_key_env; remote providers need one")
    return ResolvedProvider(name, base_url.rstrip("/"), p.model, p.api_key_env, key or LOCAL_PLACEHOLDER_KEY)


def _is_loopback(url: str) -> bool:
    return bool(re.match(r"^https?://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(/|$)", url))


def rubric_messages(question: str, reference: str, response: str) -> list[dict]:
    visible = strip_think(response or "").strip() or "(empty response)"
    return [{"role": "system", "content": RUBRIC_SYSTEM},
            {"role": "user", "content": f"Question: {question.strip()}\nReference answer: {reference}\n"
                                        f"Response: {visible[:2000]}\nGrade (0-10):"}]


def parse_grade(text: str | None) -> float | None:
    """A 0-10 grade scaled to [0, 1], or None when the reply holds none."""
    if not text:
        return None
    m = _GRADE.search(text.strip())
    if not m:
        return None
    return float(m.group(0)) / 10.0 if float(m.group(0)) <= 10 else None


def _retry_after(exc: Any) -> float | None:
    resp = getattr(exc, "response", None)
    raw = resp.headers.get("retry-after") if resp is not None else None
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(raw) if raw else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def _percentile(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


@dataclass
class SampleResult:
    sample: int
    score: float | None
    provenance: str  # live | cache
    status: str  # ok | failed | error
    latency_s: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0
    n429: int = 0
    reply: str | None = None
    error: str | None = None


@dataclass
class JudgeScore:
    item_id: str
    median: float | None
    variance: float | None
    samples: list[SampleResult]
    unstable: bool = False
    weight: float = 1.0

    @property
    def ok(self) -> bool:
        return self.median is not None

    @property
    def provenance(self) -> list[str]:
        return [s.provenance for s in self.samples]

    def to_dict(self) -> dict:
        return {"item_id": self.item_id, "median": self.median, "variance": self.variance, "unstable": self.unstable,
                "weight": self.weight, "samples": [s.__dict__ for s in self.samples]}


class JudgeClient:
    """Scores responses with K judge samples each; see the module docstring."""

    def __init__(self, ws: Workspace, scorer: ScorerSection, reward: RewardSection | None = None, *,
                 provider: str | None = None, run_id: str | None = None, use_cache: bool = True,
                 backoff_base: float = 0.5, backoff_max: float = 30.0, stats_path: str | None = STATS_PATH):
        self.ws = ws
        self.scorer = scorer
        self.reward = reward or RewardSection()
        self.provider = resolve_provider(ws, scorer, provider)  # ConfigError before any call
        self.run_id = run_id or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:6]
        self.use_cache = use_cache
        self.backoff_base, self.backoff_max = backoff_base, backoff_max
        self.stats_path = stats_path
        self.store = JudgeStore(ws.path(scorer.cache_path))
        self._lock = threading.Lock()
        self._stats = {"samples": 0, "cache_hits": 0, "live": 0, "failed": 0, "errors": 0, "attempts": 0,
                       "n429": 0, "prompt_tokens": 0, "completion_tokens": 0, "unstable": 0, "scores": 0}
        self._latencies: list[float] = []
        self._started = time.time()
        from openai import OpenAI

        self._client = OpenAI(base_url=self.provider.base_url, api_key=self.provider.api_key, max_retries=0,
                              timeout=scorer.timeout_s)

    # ------------------------------------------------------------------ request parameters
    def sampling_params(self, sample: int) -> dict:
        params: dict[str, Any] = {"temperature": self.scorer.temperature, "max_tokens": self.scorer.max_tokens}
        if self.provider.is_local:
            params["extra_body"] = {"grammar": LOCAL_GRADE_GRAMMAR, "seed": 1000 + sample}
        else:
            params["seed"] = 1000 + sample if self.provider.name != "gemini" else None
            params = {k: v for k, v in params.items() if v is not None}
        return params

    # ------------------------------------------------------------------ one sample
    def _call(self, messages: list[dict], params: dict) -> tuple[str, dict, int, int, float]:
        """Live call with our retry loop. Returns (content, usage, attempts, n429, latency of the good attempt)."""
        import openai

        attempts = n429 = 0
        while True:
            attempts += 1
            t0 = time.perf_counter()
            retry_after: float | None = None
            try:
                resp = self._client.chat.completions.create(model=self.provider.model, messages=messages, **params)
                latency = time.perf_counter() - t0
                if not getattr(resp, "choices", None):
                    raise ValueError("response has no choices")
                content = resp.choices[0].message.content or ""
                u = resp.usage
                usage = {"prompt_tokens": int(getattr(u, "prompt_tokens", 0) or 0),
                         "completion_tokens": int(getattr(u, "completion_tokens", 0) or 0)} if u else {}
                return content, usage, attempts, n429, latency
            except openai.APIStatusError as exc:
                code = exc.status_code
                if code == 429:
                    n429 += 1
                    why = "429 rate limited"
                elif code >= 500 or code in (408, 409):
                    why = f"{code} server error"
                elif code in FAIL_FAST or 400 <= code < 500:
                    hint = f" (check {self.provider.api_key_env})" if code in (401, 403) and self.provider.api_key_env else ""
                    raise JudgeRequestError(redact(f"judge {self.provider.name} refused the request: HTTP {code}{hint}: "
                                                   f"{str(exc)[:200]}")) from None
                else:
                    why = f"HTTP {code}"
                retry_after = _retry_after(exc)
            except openai.APITimeoutError:
                why = f"timeout after {self.scorer.timeout_s:g}s"
            except openai.APIConnectionError as exc:
                why = f"connection error: {exc.__class__.__name__}"
            except (openai.APIResponseValidationError, ValueError, json.JSONDecodeError, AttributeError) as exc:
                why = f"malformed response: {exc.__class__.__name__}"
            if attempts > self.scorer.max_retries:
                raise _GiveUp(redact(why), attempts, n429)
            wait = retry_after if retry_after is not None else min(
                self.backoff_max, self.backoff_base * 2 ** (attempts - 1))
            wait += random.uniform(0, 0.1 * wait if retry_after is not None else 0.5 * wait)  # jitter
            log.warning("judge %s attempt %d: %s; retrying in %.2fs", self.provider.name, attempts, why, wait)
            time.sleep(wait)

    def sample(self, item_id: str, messages: list[dict], k: int) -> SampleResult:
        params = self.sampling_params(k)
        key = cache_key(self.provider.base_url, self.provider.model, messages,
                        {**params, "sample": k}, self.scorer.rubric_version)
        hit = self.store.get(key) if self.use_cache else None
        if hit is not None:
            content, usage = hit
            res = SampleResult(k, parse_grade(content), "cache", "ok", reply=content)
        else:
            try:
                content, usage, attempts, n429, latency = self._call(messages, params)
            except _GiveUp as g:
                res = SampleResult(k, None, "live", "error", attempts=g.attempts, n429=g.n429, error=str(g))
            else:
                score = parse_grade(content)
                res = SampleResult(k, score, "live", "ok" if score is not None else "failed", latency_s=latency,
                                   prompt_tokens=usage.get("prompt_tokens", 0),
                                   completion_tokens=usage.get("completion_tokens", 0), attempts=attempts,
                                   n429=n429, reply=content[:200],
                                   error=None if score is not None else "reply holds no 0-10 grade")
                if score is not None:  # only good answers are cached
                    self.store.put(key, content, usage)
        self.store.record(LedgerRow(self.run_id, self.provider.name, self.provider.model, item_id, k, key,
                                    res.provenance, res.status, res.score, res.latency_s, res.prompt_tokens,
                                    res.completion_tokens, res.attempts, res.n429, res.error))
        self._account(res)
        return res

    def _account(self, r: SampleResult) -> None:
        with self._lock:
            s = self._stats
            s["samples"] += 1
            s["cache_hits"] += r.provenance == "cache"
            s["live"] += r.provenance == "live" and r.status != "error"
            s["failed"] += r.status == "failed"
            s["errors"] += r.status == "error"
            s["attempts"] += r.attempts
            s["n429"] += r.n429
            s["prompt_tokens"] += r.prompt_tokens
            s["completion_tokens"] += r.completion_tokens
            if r.latency_s is not None:
                self._latencies.append(r.latency_s)

    # ------------------------------------------------------------------ scores
    def score_messages(self, requests: list[tuple[str, list[dict]]]) -> list[JudgeScore]:
        """K samples for each (item_id, messages), run with at most cfg.scorer.concurrency in flight."""
        K = self.scorer.samples
        jobs = [(i, k) for i in range(len(requests)) for k in range(K)]
        with ThreadPoolExecutor(max_workers=self.scorer.concurrency, thread_name_prefix="rc1-judge") as pool:
            futs = [pool.submit(self.sample, requests[i][0], requests[i][1], k) for i, k in jobs]
            results = [f.result() for f in futs]  # JudgeRequestError propagates (fail fast)
        out = []
        for i, (item_id, _msgs) in enumerate(requests):
            samples = results[i * K:(i + 1) * K]
            out.append(self._aggregate(item_id, samples))
        self.write_stats()
        return out

    def score(self, item: dict, response: str, item_id: str | None = None) -> JudgeScore:
        return self.score_many([(item, response)], [item_id] if item_id else None)[0]

    def score_many(self, pairs: list[tuple[dict, str]], ids: list[str] | None = None) -> list[JudgeScore]:
        reqs = []
        for n, (item, response) in enumerate(pairs):
            ref = item.get("answer", "")
            aliases = [a for a in item.get("aliases") or [] if a]
            if aliases:
                ref = f"{ref} (also accepted: {', '.join(aliases[:3])})"
            reqs.append((ids[n] if ids else str(item.get("id", n)),
                         rubric_messages(item.get("question", ""), ref, response)))
        return self.score_messages(reqs)

    def _aggregate(self, item_id: str, samples: list[SampleResult]) -> JudgeScore:
        good = [s.score for s in samples if s.score is not None]
        if not good:
            return JudgeScore(item_id, None, None, samples, unstable=False, weight=0.0)
        med = statistics.median(good)
        var = statistics.pvariance(good) if len(good) > 1 else 0.0
        unstable = var > self.reward.unstable_variance
        score = JudgeScore(item_id, med, var, samples, unstable, self.reward.unstable_downweight if unstable else 1.0)
        with self._lock:
            self._stats["scores"] += 1
            self._stats["unstable"] += unstable
        if unstable:
            append_line(self.ws.path(UNSTABLE_PATH), json.dumps({
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "run_id": self.run_id,
                "provider": self.provider.name, "model": self.provider.model, "item_id": item_id,
                "scores": good, "median": med, "variance": var, "threshold": self.reward.unstable_variance,
                "weight": score.weight}))
        return score

    # ------------------------------------------------------------------ stats
    def stats(self) -> dict:
        with self._lock:
            s = dict(self._stats)
            lat = list(self._latencies)
        requests = s["attempts"]
        return {
            "run_id": self.run_id, "provider": self.provider.name, "model": self.provider.model,
            "base_url": self.provider.base_url, "rubric_version": self.scorer.rubric_version,
            "samples_per_score": self.scorer.samples, "concurrency": self.scorer.concurrency,
            **s,
            "cache_hit_rate": s["cache_hits"] / s["samples"] if s["samples"] else None,
            "rate_429": s["n429"] / requests if requests else 0.0,
            "billable_tokens": s["prompt_tokens"] + s["completion_tokens"],
            "latency_p50_s": _percentile(lat, 0.5), "latency_p95_s": _percentile(lat, 0.95),
            "latency_mean_s": statistics.fmean(lat) if lat else None,
            "wall_s": time.time() - self._started,
            "cache_path": self.scorer.cache_path,
        }

    def write_stats(self) -> Path | None:
        if not self.stats_path:
            return None
        return atomic_write_json(self.ws.path(self.stats_path), self.stats())

    def close(self) -> None:
        self._client.close()
        self.store.close()

    def __enter__(self) -> "JudgeClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _GiveUp(Exception):
    def __init__(self, why: str, attempts: int, n429: int):
        super().__init__(why)
        self.attempts, self.n429 = attempts, n429
