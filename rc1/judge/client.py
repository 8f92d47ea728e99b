"""LLM judge client over OpenAI-compatible chat APIs (openai, deepseek, gemini, local llama.cpp).

What it asks and how it reads a reply (the `grade` and `reference_match` methods, the rubric dimensions)
is rc1.judge.prompts; which endpoint and method, rc1.judge.providers.

A variance above cfg.reward.unstable_variance is written to reports/unstable_samples.jsonl and the
score is down-weighted. Each sample is looked up in the persistent cache (rc1.judge.cache) first; a
miss is a live call through the official `openai` client with `max_retries=0`: retries are ours, so
every attempt is counted. 429 and 5xx (and timeouts, dropped connections, malformed or empty bodies)
are retried with exponential backoff + jitter, honouring Retry-After; 400/401/403/404/422 fail fast. A
reply that holds no valid grade (no number, a number outside 0-10, an empty reply, no logprobs) is a
failed sample with the reason (counted, never a silent 0) and is never cached.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import statistics
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rc1.config.schema import RewardSection, ScorerSection
from rc1.judge.cache import JudgeStore, LedgerRow, cache_key
from rc1.judge.prompts import (LOCAL_GRADE_GRAMMAR, MATCH_PREFIX, RUBRIC_DIMS_VERSION, JudgeRequest, dims_grammar,
                               gbnf_literal, match_messages, read_dims, read_grade, read_match, reference_text,
                               response_answer, rubric_messages)
from rc1.judge.providers import DETERMINISTIC_METHODS, grading_method, resolve_provider
from rc1.runtime.atomic import append_line, atomic_write_json
from rc1.runtime.errors import Rc1Error
from rc1.runtime.layout import JUDGE_STATS, JUDGE_UNSTABLE
from rc1.runtime.secrets import redact
from rc1.runtime.workspace import Workspace


log = logging.getLogger("rc1.judge.client")

FAIL_FAST = {400, 401, 403, 404, 422}


class JudgeRequestError(Rc1Error):
    """A request the server refused outright (400/401/...): retrying cannot help."""


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


def percentile(xs: list[float], q: float) -> float | None:
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
class CallTally:
    """Counts over judge samples: the client's run totals (judge_stats.json) and the live judge's step figures."""

    samples: int = 0
    cache_hits: int = 0
    live: int = 0
    failed: int = 0
    errors: int = 0
    attempts: int = 0
    n429: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, r: SampleResult) -> None:
        self.samples += 1
        self.cache_hits += r.provenance == "cache"
        self.live += r.provenance == "live" and r.status != "error"
        self.failed += r.status == "failed"
        self.errors += r.status == "error"
        self.attempts += r.attempts
        self.n429 += r.n429
        self.prompt_tokens += r.prompt_tokens
        self.completion_tokens += r.completion_tokens


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
                 backoff_base: float = 0.5, backoff_max: float = 30.0, stats_path: str | None = JUDGE_STATS):
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
        self._tally = CallTally()
        self._scored = {"unstable": 0, "scores": 0}
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
            self._tally.add(r)
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
            self._scored["scores"] += 1
            self._scored["unstable"] += unstable
        if unstable:
            append_line(self.ws.path(JUDGE_UNSTABLE), json.dumps({
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "run_id": self.run_id,
                "provider": self.provider.name, "model": self.provider.model, "item_id": item_id,
                "scores": good, "median": med, "variance": var, "threshold": self.reward.unstable_variance,
                "weight": score.weight, "dims": per_dim,
                "grades": [s.grades for s in samples if s.grades] if dims else None}))
        return score

    # ------------------------------------------------------------------ stats
    def stats(self) -> dict:
        with self._lock:
            s = {**asdict(self._tally), **self._scored}
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
            "latency_p50_s": percentile(lat, 0.5), "latency_p95_s": percentile(lat, 0.95),
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
