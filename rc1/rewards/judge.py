"""LLM judge over OpenAI-compatible chat APIs (openai, deepseek, gemini, local llama.cpp).

Two grading methods (`scorer.method`; `auto` picks per endpoint):

  grade            the rubric prompt (question, reference answer, response) -> a 0-10 grade in the reply
                   text, scaled to [0, 1]. K samples (cfg.scorer.samples) at the configured temperature
                   -> median and variance. For capable chat models (the remote providers).
  reference_match  reference-guided answer matching for small local models, which cannot grade 0-10
                   (SmolLM2-135M's 0-10 grades did not separate correct from wrong answers: AUC 0.50 on
                   the probe; asked yes/no "does it match?", 0.32-0.67). The judge is asked to restate the
                   reference answer, and a llama.cpp grammar makes it write the response's final answer
                   instead; the grade is the geometric-mean token probability the judge gave that answer
                   (from `logprobs`): a response that repeats the reference is likely, a different answer
                   is not. It reads the reference and the final answer only (adding the question let the
                   judge copy wrong entities from it: AUC 0.92 instead of 1.00), so it judges answer
                   equivalence, not reasoning. One request per score: the grade is deterministic, so K
                   samples would be K identical requests (variance 0 by construction); identical
                   (reference, answer) pairs are one cached request, which keeps training-time grading cheap.

Rubric dimensions (training with reward.source judge or hybrid, rc1.rewards.live): ONE prompt per episode
asks for a 0-10 grade of each judged dimension (`dimension: grade` lines, versioned by RUBRIC_DIMS_VERSION,
which is part of the cache key); a reply must grade every asked dimension within 0-10, else it is asked again
(up to scorer.max_retries, every try billed) and the sample failed when none did.
K samples -> per-dimension median; the score's variance is the largest per-dimension variance. This is the
`grade` method whatever `scorer.method` says: reference_match matches answers, it cannot grade reasoning or
clarity (SmolLM2-135M's rubric grades are not discriminative; rc1 says so when training with it).

`auto` = reference_match for rc1's own llama.cpp judge (provider `local` with base_url `auto`, which
serves grammars and logprobs), grade for every other endpoint.

A variance above cfg.reward.unstable_variance is written to reports/unstable_samples.jsonl and the
score is down-weighted. Each sample is looked up in the persistent cache (rc1.rewards.cache) first; a
miss is a live call through the official `openai` client with `max_retries=0`: retries are ours, so
every attempt is counted. 429 and 5xx (and timeouts, dropped connections, malformed or empty bodies)
are retried with exponential backoff + jitter, honouring Retry-After; 400/401/403/404/422 fail fast. A
reply that holds no valid grade (no number, a number outside 0-10, an empty reply, no logprobs) is a
failed sample with the reason (counted, never a silent 0) and is never cached. API keys are read from
the environment variable the provider names and are never logged or written.
"""

from __future__ import annotations

import email.utils
import json
import logging
import math
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
from rc1.envs.answers import extract_final_answer, strip_think
from rc1.runtime.atomic import append_line, atomic_write_json
from rc1.runtime.errors import ConfigError, Rc1Error
from rc1.runtime.secrets import redact
from rc1.runtime.workspace import Workspace


log = logging.getLogger("rc1.rewards.judge")

STATS_PATH = "reports/judge_stats.json"
UNSTABLE_PATH = "reports/unstable_samples.jsonl"
LOCAL_PLACEHOLDER_KEY = "local-no-key"  # llama.cpp's server needs no key; the client needs a string
FAIL_FAST = {400, 401, 403, 404, 422}
METHODS = ("grade", "reference_match")
DETERMINISTIC_METHODS = ("reference_match",)
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
# llama.cpp grammar: with method `grade` the local judge can only answer with a grade.
LOCAL_GRADE_GRAMMAR = 'root ::= ("10" | [0-9])'

RUBRIC_SYSTEM = (
    "You grade answers to questions. Compare the response with the reference answer. "
    "Give a grade from 0 to 10: 10 = correct and well justified, 5 = partly correct, 0 = wrong or no answer. "
    "Reply with the grade only, a single integer.")
# reference_match: the judge is asked to restate the reference; the grammar makes it write this prefix and
# then the response's final answer, whose token probabilities are the grade.
MATCH_INSTRUCTION = "Repeat the reference answer exactly."
MATCH_PREFIX = "The answer is "
MATCH_MAX_CHARS = 100
NO_ANSWER = "(no answer)"

# The rubric of the reward dimensions. Change the text -> bump the version (cached grades of the old rubric
# then miss).
RUBRIC_DIMS_VERSION = "dims-v1"
DIMENSION_RUBRIC = {
    "correctness": "the final answer agrees with the reference answer",
    "reasoning": "the reasoning before the answer is sound and shows its steps",
    "grounding": "the response uses the evidence given in the question and passages, invents nothing",
    "clarity": "the response is clear, not repetitive, not cut off",
    "conciseness": "the visible answer is no longer than it needs to be",
    "format": "the response ends with an explicit 'ANSWER:' line and well-formed <think> tags",
    "clarification": "it asked a clarifying question exactly when the question is ambiguous or underspecified",
}
_DIM_LINE = re.compile(r"([a-z_]+)\s*[:=]\s*([-+]?\d+(?:\.\d+)?)", re.I)


class JudgeRequestError(Rc1Error):
    """A request the server refused outright (400/401/...): retrying cannot help."""


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
    return ResolvedProvider(name, base_url.rstrip("/"), p.model, p.api_key_env, key or LOCAL_PLACEHOLDER_KEY,
                            rc1_server)


def grading_method(scorer: ScorerSection, provider: ResolvedProvider) -> str:
    """`scorer.method`, with `auto` resolved (see the module docstring)."""
    if scorer.method != "auto":
        return scorer.method
    return "reference_match" if provider.rc1_server else "grade"


def _is_loopback(url: str) -> bool:
    return bool(re.match(r"^https?://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(/|$)", url))


def reference_text(item: dict) -> str:
    ref = str(item.get("answer", ""))
    aliases = [a for a in item.get("aliases") or [] if a]
    return f"{ref} (also accepted: {', '.join(aliases[:3])})" if aliases else ref


def rubric_messages(question: str, reference: str, response: str) -> list[dict]:
    visible = strip_think(response or "").strip() or "(empty response)"
    return [{"role": "system", "content": RUBRIC_SYSTEM},
            {"role": "user", "content": f"Question: {question.strip()}\nReference answer: {reference}\n"
                                        f"Response: {visible[:2000]}\nGrade (0-10):"}]


def dims_messages(question: str, reference: str, response: str, clarifications: int,
                  dims: tuple[str, ...]) -> list[dict]:
    """The one rubric prompt of an episode: a 0-10 grade per dimension in `dims`."""
    visible = (response or "").strip() or "(empty response)"
    rubric = "\n".join(f"- {d}: {DIMENSION_RUBRIC[d]}" for d in dims)
    fmt = "\n".join(f"{d}: <0-10>" for d in dims)
    return [{"role": "system", "content": (
                "You grade a model's response to a question on several dimensions, each from 0 (bad) to 10 (good):\n"
                f"{rubric}\nReply with exactly these lines and nothing else:\n{fmt}")},
            {"role": "user", "content": f"Question: {question.strip()}\nReference answer: {reference}\n"
                                        f"Clarifying questions the model asked: {int(clarifications)}\n"
                                        f"Response: {visible[-3000:]}\nGrades:"}]


def dims_grammar(dims: tuple[str, ...]) -> str:
    """llama.cpp grammar of a rubric reply: one `dimension: grade` line per dimension."""
    lines = ' "\\n" '.join(f'{gbnf_literal(d + ": ")} g' for d in dims)
    return f'root ::= {lines}\ng ::= ("10" | [0-9])'


def read_dims(text: str | None, dims: tuple[str, ...]) -> tuple[dict[str, float] | None, str | None]:
    """({dimension: grade in [0, 1]}, None) from a rubric reply, or (None, why there is none)."""
    if text is None or not text.strip():
        return None, "empty reply"
    found: dict[str, str] = {}
    for name, value in _DIM_LINE.findall(text):
        found.setdefault(name.lower(), value)
    missing = [d for d in dims if d not in found]
    if missing:
        return None, f"reply {text.strip()[:80]!r} grades no {', '.join(missing)}"
    out = {}
    for d in dims:
        v = float(found[d])
        if not 0 <= v <= 10:
            return None, f"{d} grade {found[d]} is out of range 0-10"
        out[d] = v / 10.0
    return out, None


def match_messages(reference: str) -> list[dict]:
    return [{"role": "user", "content": f"Reference answer: {reference}\n{MATCH_INSTRUCTION}"}]


def response_answer(response: str) -> str:
    """The final answer the reference_match judge is made to write (rc1.envs.answers reads it)."""
    ans = " ".join((extract_final_answer(response or "") or "").split())
    return ans[:MATCH_MAX_CHARS] or NO_ANSWER


def gbnf_literal(text: str) -> str:
    """`text` as a GBNF string literal (JSON's escapes are GBNF's: \\", \\\\, \\n, \\uXXXX)."""
    return json.dumps(text)


@dataclass(frozen=True)
class JudgeRequest:
    """One thing to grade: the chat messages, and for reference_match the text the grammar forces."""

    item_id: str
    messages: list[dict]
    forced: str | None = None
    dims: tuple[str, ...] | None = None   # a rubric-dimensions request (dims_messages)


def read_grade(text: str | None) -> tuple[float | None, str | None]:
    """(grade in [0, 1], None) from a 0-10 grade reply, or (None, why there is none)."""
    if text is None or not text.strip():
        return None, "empty reply"
    m = _NUMBER.search(text)
    if not m:
        return None, f"reply {text.strip()[:60]!r} holds no number (expected a 0-10 grade)"
    value = float(m.group(0))
    if not 0 <= value <= 10:
        return None, f"grade {m.group(0)} is out of range 0-10"
    return value / 10.0, None


def parse_grade(text: str | None) -> float | None:
    """A 0-10 grade scaled to [0, 1], or None when the reply holds none."""
    return read_grade(text)[0]


def read_match(reply: dict, forced: str) -> tuple[float | None, str | None]:
    """(grade, None) of a reference_match reply: exp(mean logprob) of the tokens past MATCH_PREFIX; or (None, why)."""
    tokens = reply.get("logprobs")
    text = reply.get("text") or ""
    if not tokens:
        return None, ("empty reply" if not text.strip() else
                      f"reply {text[:60]!r} has no logprobs (method reference_match needs an endpoint that "
                      "returns logprobs and follows a llama.cpp grammar)")
    produced = "".join(t for t, _ in tokens)
    if not forced.startswith(produced) and not produced.startswith(forced):
        return None, (f"reply {produced[:60]!r} does not follow the grammar (expected {forced[:60]!r}): "
                      "method reference_match needs llama.cpp grammars")
    lps, seen = [], 0
    for tok, lp in tokens:
        seen += len(tok)
        if seen > len(MATCH_PREFIX):
            if lp is None or not (lp <= 0.0):
                return None, f"logprob {lp!r} of token {tok!r} is not a log-probability"
            lps.append(lp)
    if not lps:
        return None, "the reply stopped before the answer (raise scorer.max_tokens)"
    return math.exp(statistics.fmean(lps)), None


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
    status: str  # ok | failed (a reply without a valid grade) | error (the request failed)
    latency_s: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0
    n429: int = 0
    reply: str | None = None
    error: str | None = None
    grades: dict[str, float] | None = None   # a rubric-dimensions reply: grade per dimension


@dataclass
class JudgeScore:
    item_id: str
    median: float | None
    variance: float | None
    samples: list[SampleResult]
    unstable: bool = False
    weight: float = 1.0
    dims: dict[str, float] | None = None     # rubric-dimensions request: median grade per dimension

    @property
    def ok(self) -> bool:
        return self.median is not None

    @property
    def provenance(self) -> list[str]:
        return [s.provenance for s in self.samples]

    @property
    def errors(self) -> list[str]:
        return [f"sample {s.sample}: {s.error}" for s in self.samples if s.error]

    def to_dict(self) -> dict:
        return {"item_id": self.item_id, "median": self.median, "variance": self.variance, "unstable": self.unstable,
                "weight": self.weight, "dims": self.dims, "samples": [s.__dict__ for s in self.samples]}


class JudgeClient:
    """Scores responses with K judge samples each; see the module docstring."""

    def __init__(self, ws: Workspace, scorer: ScorerSection, reward: RewardSection | None = None, *,
                 provider: str | None = None, run_id: str | None = None, use_cache: bool = True,
                 backoff_base: float = 0.5, backoff_max: float = 30.0, stats_path: str | None = STATS_PATH):
        self.ws = ws
        self.scorer = scorer
        self.reward = reward or RewardSection()
        self.provider = resolve_provider(ws, scorer, provider)  # ConfigError before any call
        self.method = grading_method(scorer, self.provider)
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

    @property
    def deterministic(self) -> bool:
        return self.method in DETERMINISTIC_METHODS

    @property
    def samples_per_score(self) -> int:
        """K: cfg.scorer.samples, or 1 for a deterministic method (K identical requests would add nothing)."""
        return 1 if self.deterministic else self.scorer.samples

    # ------------------------------------------------------------------ request parameters
    def sampling_params(self, sample: int, forced: str | None = None, dims: tuple[str, ...] | None = None) -> dict:
        if dims:
            params: dict[str, Any] = {"temperature": self.scorer.temperature,
                                      "max_tokens": max(self.scorer.max_tokens, 8 * len(dims))}
            if self.provider.is_local:
                params["extra_body"] = {"grammar": dims_grammar(dims), "seed": 1000 + sample}
            elif self.provider.name != "gemini":
                params["seed"] = 1000 + sample
            return params
        if forced is not None:  # reference_match: greedy, the grammar writes `forced`, logprobs give the grade
            return {"temperature": 0.0, "max_tokens": max(self.scorer.max_tokens, 96), "logprobs": True,
                    "top_logprobs": 1, "extra_body": {"grammar": f"root ::= {gbnf_literal(forced)}"}}
        params: dict[str, Any] = {"temperature": self.scorer.temperature, "max_tokens": self.scorer.max_tokens}
        if self.provider.is_local:
            params["extra_body"] = {"grammar": LOCAL_GRADE_GRAMMAR, "seed": 1000 + sample}
        else:
            params["seed"] = 1000 + sample if self.provider.name != "gemini" else None
            params = {k: v for k, v in params.items() if v is not None}
        return params

    def request(self, item: dict, response: str, item_id: str | None = None) -> JudgeRequest:
        """What this client's method asks the judge about one response."""
        iid = item_id if item_id is not None else str(item.get("id", ""))
        ref = reference_text(item)
        if self.method == "reference_match":
            return JudgeRequest(iid, match_messages(ref), MATCH_PREFIX + response_answer(response))
        return JudgeRequest(iid, rubric_messages(item.get("question", ""), ref, response))

    # ------------------------------------------------------------------ one sample
    def _call(self, messages: list[dict], params: dict) -> tuple[dict, dict, int, int, float]:
        """Live call with our retry loop. Returns (reply, usage, attempts, n429, latency of the good attempt);
        reply = {"text", "logprobs": [(token, logprob)] or None}."""
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
                choice = resp.choices[0]
                lp = getattr(choice, "logprobs", None)
                content = getattr(lp, "content", None) if lp is not None else None
                reply = {"text": choice.message.content or "",
                         "logprobs": [(t.token, t.logprob) for t in content] if content else None}
                u = resp.usage
                usage = {"prompt_tokens": int(getattr(u, "prompt_tokens", 0) or 0),
                         "completion_tokens": int(getattr(u, "completion_tokens", 0) or 0)} if u else {}
                return reply, usage, attempts, n429, latency
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
            except (openai.APIResponseValidationError, ValueError, json.JSONDecodeError, AttributeError,
                    TypeError) as exc:
                why = _malformed(exc)
            if attempts > self.scorer.max_retries:
                raise _GiveUp(redact(f"{why} (after {attempts} attempts)"), attempts, n429)
            wait = retry_after if retry_after is not None else min(
                self.backoff_max, self.backoff_base * 2 ** (attempts - 1))
            wait += random.uniform(0, 0.1 * wait if retry_after is not None else 0.5 * wait)  # jitter
            log.warning("judge %s attempt %d: %s; retrying in %.2fs", self.provider.name, attempts, why, wait)
            time.sleep(wait)

    def _grade(self, reply: dict, forced: str | None,
               dims: tuple[str, ...] | None = None) -> tuple[float | None, str | None, dict | None]:
        if dims:
            grades, why = read_dims(reply.get("text"), dims)
            return (statistics.fmean(grades.values()) if grades else None), why, grades
        score, why = read_match(reply, forced) if forced is not None else read_grade(reply.get("text"))
        return score, why, None

    def rubric_version_of(self, dims: tuple[str, ...] | None) -> str:
        return f"{self.scorer.rubric_version}+{RUBRIC_DIMS_VERSION}" if dims else self.scorer.rubric_version

    def sample(self, item_id: str, messages: list[dict], k: int, forced: str | None = None,
               dims: tuple[str, ...] | None = None) -> SampleResult:
        params = self.sampling_params(k, forced, dims)
        key = cache_key(self.provider.base_url, self.provider.model, messages,
                        {**params, "sample": k}, self.rubric_version_of(dims))
        hit = self.store.get(key) if self.use_cache else None
        if hit is not None:
            reply, usage = _from_cache(hit[0], forced), hit[1]
            score, why, grades = self._grade(reply, forced, dims)
            res = SampleResult(k, score, "cache", "ok" if score is not None else "failed", reply=reply["text"][:200],
                               error=why, grades=grades)
        else:
            # a rubric reply without every grade is asked again (up to scorer.max_retries): a sampled judge may
            # answer properly the next time; the tokens of every try are billed
            tries = 1 + (self.scorer.max_retries if dims else 0)
            spent = {"prompt_tokens": 0, "completion_tokens": 0, "attempts": 0, "n429": 0}
            for _ in range(tries):
                try:
                    reply, usage, attempts, n429, latency = self._call(messages, params)
                except _GiveUp as g:
                    res = SampleResult(k, None, "live", "error", attempts=spent["attempts"] + g.attempts,
                                       n429=spent["n429"] + g.n429, prompt_tokens=spent["prompt_tokens"],
                                       completion_tokens=spent["completion_tokens"], error=str(g))
                    break
                spent["prompt_tokens"] += usage.get("prompt_tokens", 0)
                spent["completion_tokens"] += usage.get("completion_tokens", 0)
                spent["attempts"] += attempts
                spent["n429"] += n429
                score, why, grades = self._grade(reply, forced, dims)
                res = SampleResult(k, score, "live", "ok" if score is not None else "failed", latency_s=latency,
                                   reply=reply["text"][:200], error=why, grades=grades, **spent)
                if score is not None:  # only good answers are cached
                    self.store.put(key, _to_cache(reply, forced), usage)
                    break
        if res.error:
            log.warning("judge %s, %s sample %d: %s", self.provider.name, item_id, k, res.error)
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
    def score_requests(self, requests: list[JudgeRequest]) -> list[JudgeScore]:
        """K samples for each request, run with at most cfg.scorer.concurrency in flight."""
        Ks = [self.scorer.samples if r.dims else self.samples_per_score for r in requests]
        jobs = [(i, k) for i in range(len(requests)) for k in range(Ks[i])]
        with ThreadPoolExecutor(max_workers=self.scorer.concurrency, thread_name_prefix="rc1-judge") as pool:
            futs = [pool.submit(self.sample, requests[i].item_id, requests[i].messages, k, requests[i].forced,
                                requests[i].dims) for i, k in jobs]
            results = [f.result() for f in futs]  # JudgeRequestError propagates (fail fast)
        out, at = [], 0
        for r, K in zip(requests, Ks):
            out.append(self._aggregate(r.item_id, results[at:at + K], r.dims))
            at += K
        self.write_stats()
        return out

    def score_messages(self, requests: list[tuple[str, list[dict]]]) -> list[JudgeScore]:
        """K samples for each (item_id, messages) of the `grade` method (a 0-10 grade in the reply)."""
        return self.score_requests([JudgeRequest(iid, msgs) for iid, msgs in requests])

    def score(self, item: dict, response: str, item_id: str | None = None) -> JudgeScore:
        return self.score_many([(item, response)], [item_id] if item_id else None)[0]

    def score_many(self, pairs: list[tuple[dict, str]], ids: list[str] | None = None) -> list[JudgeScore]:
        return self.score_requests([self.request(item, response, ids[n] if ids else str(item.get("id", n)))
                                    for n, (item, response) in enumerate(pairs)])

    def _aggregate(self, item_id: str, samples: list[SampleResult], dims: tuple[str, ...] | None = None) -> JudgeScore:
        good = [s.score for s in samples if s.score is not None]
        if not good:
            return JudgeScore(item_id, None, None, samples, unstable=False, weight=0.0)
        med = statistics.median(good)
        var = statistics.pvariance(good) if len(good) > 1 else 0.0
        per_dim = None
        if dims:  # per-dimension medians; the score's variance is the largest dimension's
            per_dim = {d: statistics.median([s.grades[d] for s in samples if s.grades]) for d in dims}
            var = max((statistics.pvariance([s.grades[d] for s in samples if s.grades]) if len(good) > 1 else 0.0)
                      for d in dims)
        unstable = var > self.reward.unstable_variance
        score = JudgeScore(item_id, med, var, samples, unstable, self.reward.unstable_downweight if unstable else 1.0,
                           dims=per_dim)
        with self._lock:
            self._stats["scores"] += 1
            self._stats["unstable"] += unstable
        if unstable:
            append_line(self.ws.path(UNSTABLE_PATH), json.dumps({
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "run_id": self.run_id,
                "provider": self.provider.name, "model": self.provider.model, "item_id": item_id,
                "scores": good, "median": med, "variance": var, "threshold": self.reward.unstable_variance,
                "weight": score.weight, "dims": per_dim,
                "grades": [s.grades for s in samples if s.grades] if dims else None}))
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
            "method": self.method, "samples_per_score": self.samples_per_score, "concurrency": self.scorer.concurrency,
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


def _malformed(exc: Exception) -> str:
    """One line for a body that is not a chat completion (an empty body says so)."""
    body = getattr(getattr(exc, "response", None), "text", None)
    if isinstance(exc, json.JSONDecodeError) and exc.doc is not None and not exc.doc.strip():
        return "empty response body"
    if body is not None and not str(body).strip():
        return "empty response body"
    return f"malformed response: {exc.__class__.__name__}"


def _to_cache(reply: dict, forced: str | None) -> str:
    """The cached content: the reply text (grade), or text and token logprobs as JSON (reference_match)."""
    return reply["text"] if forced is None else json.dumps({"text": reply["text"], "logprobs": reply["logprobs"]})


def _from_cache(content: str, forced: str | None) -> dict:
    if forced is not None:
        try:
            d = json.loads(content)
            return {"text": d.get("text", ""), "logprobs": [tuple(t) for t in d.get("logprobs") or []] or None}
        except (ValueError, AttributeError, TypeError):
            return {"text": "", "logprobs": None}  # read_match names it; a good reply replaces it
    return {"text": content, "logprobs": None}


class _GiveUp(Exception):
    def __init__(self, why: str, attempts: int, n429: int):
        super().__init__(why)
        self.attempts, self.n429 = attempts, n429
