"""Task verifiers: did the model's final answer match the gold answer?

- GSM8K: numeric match ("#### 1,234", "$12.50", "12.0" == "12", last number as a fallback).
- HotpotQA: exact match and token F1 with SQuAD normalization (lowercase, no punctuation/articles).
- StrategyQA: yes/no (also true/false): the answer's FIRST word, or an explicit "the answer is yes";
  never a yes/no word met somewhere else in the text.

The final answer itself is read out of the model's text by rc1.envs.answers (the answer line, the
`Final answer:`, the last `\\boxed{}`, else the last line; never from inside `<think>`).

`verify_episode(item, episode)` is THE success of rc1: reward, calibration, shadow run, sampler,
training metrics and eval all call it. A truncated episode (it hit max_new_tokens or the turn limit
before answering) fails, whatever its text contains: an answer pulled out of cut-off text is not an
answer the model gave.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from rc1.envs.answers import boxed_contents

_NUMBER = re.compile(r"-?\$?\s*\d[\d,]*(?:\.\d+)?|-?\.\d+")


@dataclass(frozen=True)
class Verdict:
    success: bool
    score: float  # in [0, 1]; F1 for hotpotqa, 0/1 otherwise


# ----------------------------------------------------------------------------- GSM8K
def parse_number(text: str | None) -> Decimal | None:
    """The number a GSM8K answer states: after '####' if present, else the last number in the text."""
    if text is None:
        return None
    s = str(text)
    if "####" in s:
        s = s.split("####")[-1]
    boxed = boxed_contents(s)
    if boxed:
        s = boxed[-1]
    nums = _NUMBER.findall(s)
    if not nums:
        return None
    raw = nums[-1].replace("$", "").replace(",", "").replace(" ", "")
    try:
        return Decimal(raw).normalize()
    except InvalidOperation:
        return None


def verify_gsm8k(prediction: str | None, gold: str, aliases=()) -> Verdict:
    pred = parse_number(prediction)
    if pred is None:
        return Verdict(False, 0.0)
    for g in (gold, *aliases):
        gv = parse_number(g)
        if gv is not None and abs(pred - gv) <= Decimal("1e-6"):
            return Verdict(True, 1.0)
    return Verdict(False, 0.0)


# ----------------------------------------------------------------------------- HotpotQA (SQuAD normalization)
def normalize_answer(s: str) -> str:
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def exact_match(prediction: str, gold: str) -> bool:
    return normalize_answer(prediction) == normalize_answer(gold)


def f1_score(prediction: str, gold: str) -> float:
    norm_pred, norm_gold = normalize_answer(prediction), normalize_answer(gold)
    # yes/no/noanswer must match exactly (as in the official HotpotQA eval)
    special = {"yes", "no", "noanswer"}
    if (norm_pred in special or norm_gold in special) and norm_pred != norm_gold:
        return 0.0
    pred_toks, gold_toks = norm_pred.split(), norm_gold.split()
    common = Counter(pred_toks) & Counter(gold_toks)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_toks)
    recall = same / len(gold_toks)
    return 2 * precision * recall / (precision + recall)


def verify_hotpotqa(prediction: str | None, gold: str, aliases=()) -> Verdict:
    if not prediction:
        return Verdict(False, 0.0)
    golds = [g for g in (gold, *aliases) if g]
    em = any(exact_match(prediction, g) for g in golds)
    f1 = max((f1_score(prediction, g) for g in golds), default=0.0)
    return Verdict(em, 1.0 if em else f1)


# ----------------------------------------------------------------------------- StrategyQA
_YES = {"yes", "true", "y", "correct"}
_NO = {"no", "false", "n", "incorrect"}


_ANSWER_IS = re.compile(r"\banswer\s+is\s+(\w+)")


def parse_yes_no(text: str | None) -> str | None:
    """yes/no of an answer: its first word, or the word after an explicit "answer is". A yes/no word
    anywhere else ("Paris is not in Spain, yes it is in France") is not read as the answer."""
    if not text:
        return None
    norm = normalize_answer(text)
    words = norm.split()
    if not words:
        return None
    for w in (words[0], *(m.group(1) for m in _ANSWER_IS.finditer(norm))):
        if w in _YES:
            return "yes"
        if w in _NO:
            return "no"
    return None


def verify_strategyqa(prediction: str | None, gold, aliases=()) -> Verdict:
    pred = parse_yes_no(prediction)
    g = gold if isinstance(gold, str) else ("yes" if gold else "no")
    gold_yn = parse_yes_no(g)
    ok = pred is not None and pred == gold_yn
    return Verdict(ok, 1.0 if ok else 0.0)


_VERIFIERS = {"gsm8k": verify_gsm8k, "hotpotqa": verify_hotpotqa, "strategyqa": verify_strategyqa}


def verify(task: str, prediction: str | None, gold, aliases=()) -> Verdict:
    try:
        fn = _VERIFIERS[task]
    except KeyError:
        raise ValueError(f"unknown task {task!r}; known: {sorted(_VERIFIERS)}") from None
    return fn(prediction, gold, tuple(aliases or ()))


FAILED = Verdict(False, 0.0)


def verify_episode(item: dict, episode) -> Verdict:
    """Did this episode solve this item? The one definition of success (see the module docstring).

    `episode` is anything with `truncated` and `final_answer` (rc1.envs.episode.Episode or a record
    read back from JSON). A truncated episode fails; otherwise its final answer is verified.
    """
    if bool(getattr(episode, "truncated", False)):
        return FAILED
    task = item.get("task") or getattr(episode, "task", "")
    return verify(task, getattr(episode, "final_answer", None), item.get("answer", ""), item.get("aliases") or ())
