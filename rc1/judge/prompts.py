"""What the judge is asked and how its replies are read: prompts, llama.cpp grammars, grade parsing.

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

Rubric dimensions (training with reward.source judge or hybrid, rc1.judge.live): ONE prompt per episode
asks for a 0-10 grade of each judged dimension (`dimension: grade` lines, versioned by RUBRIC_DIMS_VERSION,
which is part of the cache key); a reply must grade every asked dimension within 0-10, else it is asked again
(up to scorer.max_retries, every try billed) and the sample failed when none did.
K samples -> per-dimension median; the score's variance is the largest per-dimension variance. This is the
`grade` method whatever `scorer.method` says: reference_match matches answers, it cannot grade reasoning or
clarity (SmolLM2-135M's rubric grades are not discriminative; rc1 says so when training with it).
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass

from rc1.envs.answers import extract_final_answer, strip_think

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
