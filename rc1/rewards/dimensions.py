"""The seven rule-based reward dimensions, each in [0, 1].

They are cheap (regexes and token counts) because they run inside the training loop for every
completion. The LLM judge (rc1.judge) is used to calibrate their weights, not per step.

- correctness: the task verifier's score (EM/F1 for hotpotqa, numeric match, yes/no).
- reasoning: there is reasoning before the answer, and it shows steps (numbers/operators or connectives).
- grounding: the output uses the item's evidence (supporting facts' content words; the question's
  numbers for gsm8k).
- clarity: not repetitive (distinct bigram ratio of the output's words) and not cut off.
- conciseness: the visible answer part is short for the task; a truncated episode scores 0.
- format: an explicit answer line (`ANSWER:`), balanced <think> tags, not truncated.
- clarification: asked when the item needs it, did not ask when it does not.
"""

from __future__ import annotations

import re
from typing import Any

from rc1.config.names import REWARD_DIMENSIONS
from rc1.envs.answers import has_answer_line, strip_think, think_well_formed
from rc1.envs.verifiers import verify_episode

_WORD = re.compile(r"[A-Za-z0-9\u4e00-\u9fff]+(?:[.,][0-9]+)?")
_NUM = re.compile(r"\d+(?:\.\d+)?")
_STEP = re.compile(r"(\d\s*[-+*/×x=]\s*\d)|\b(because|since|so|therefore|thus|then|first|second|next|hence|"
                   r"which means|so that|所以|因为|因此|然后)\b", re.I)
_THINK_INNER = re.compile(r"<think>(.*?)(?:</think>|\Z)", re.S | re.I)
_STOP = frozenset("""a an the of in on at to for by with from and or but is are was were be been it its this that
these those as he she they his her their them what which who whom when where why how did do does not no yes
than then there here into about over under after before during one two""".split())

# Visible-answer length (words) at which conciseness starts to fall off, per task.
CONCISE_WORDS = {"gsm8k": 160, "hotpotqa": 90, "strategyqa": 90}


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text or "")]


def reasoning_text(model_text: str) -> str:
    """The reasoning part: <think> contents, or (with no think block) the lines before the answer line."""
    inner = " ".join(m.group(1) for m in _THINK_INNER.finditer(model_text or ""))
    if "</think>" in (model_text or "") and "<think>" not in model_text:
        inner = model_text.split("</think>", 1)[0]
    if inner.strip():
        return inner
    visible = strip_think(model_text or "")
    lines = [ln for ln in visible.splitlines() if ln.strip()]
    return "\n".join(ln for ln in lines if not re.match(r"^\s*(answer|final answer)\s*[:：]", ln, re.I))


def score_reasoning(model_text: str) -> float:
    text = reasoning_text(model_text)
    words = _words(text)
    if not words:
        return 0.0
    steps = len(_STEP.findall(text))
    return 0.5 * min(1.0, len(words) / 30.0) + 0.5 * min(1.0, steps / 3.0)


def _evidence_terms(item: dict) -> set[str]:
    if item.get("task") == "gsm8k":
        return set(_NUM.findall(item.get("question", "")))
    text = " ".join(item.get("supporting") or [])
    return {w for w in _words(text) if w not in _STOP and len(w) > 2}


def score_grounding(item: dict, model_text: str) -> float:
    terms = _evidence_terms(item)
    if not terms:
        return 0.0
    if item.get("task") == "gsm8k":
        used = set(_NUM.findall(model_text or ""))
    else:
        used = set(_words(model_text))
    # Using about half of the evidence terms is full marks: outputs paraphrase.
    return min(1.0, len(terms & used) / (0.5 * len(terms)))


def score_clarity(model_text: str, truncated: bool) -> float:
    words = _words(strip_think(model_text or "")) or _words(model_text)
    if not words:
        return 0.0
    bigrams = list(zip(words, words[1:]))
    distinct = len(set(bigrams)) / len(bigrams) if bigrams else 1.0
    return distinct * (0.5 if truncated else 1.0)


def score_conciseness(task: str, model_text: str, truncated: bool) -> float:
    if truncated:
        return 0.0
    n = len(_words(strip_think(model_text or "")))
    if n == 0:
        return 0.0
    limit = CONCISE_WORDS.get(task, 100)
    return 1.0 if n <= limit else limit / n


def score_format(model_text: str, truncated: bool) -> float:
    return (0.6 * has_answer_line(model_text) + 0.2 * think_well_formed(model_text)
            + 0.2 * (not truncated))


def score_clarification(needs_clarification: bool, clarifications: int) -> float:
    if needs_clarification:
        return 1.0 if clarifications >= 1 else 0.0
    return max(0.0, 1.0 - 0.5 * clarifications)


def score_dimensions(item: dict, episode: Any) -> tuple[dict[str, float], bool]:
    """All seven dimensions for one episode, and whether the task was solved."""
    task = item.get("task") or getattr(episode, "task", "")
    text = getattr(episode, "model_text", "") or ""
    truncated = bool(getattr(episode, "truncated", False))
    clar = int(getattr(episode, "clarifications", 0) or 0)
    verdict = verify_episode(item, episode)
    dims = {
        "correctness": float(verdict.score),
        "reasoning": score_reasoning(text),
        "grounding": score_grounding(item, text),
        "clarity": score_clarity(text, truncated),
        "conciseness": score_conciseness(task, text, truncated),
        "format": score_format(text, truncated),
        "clarification": score_clarification(bool(item.get("needs_clarification")), clar),
    }
    assert tuple(dims) == REWARD_DIMENSIONS
    return dims, verdict.success
