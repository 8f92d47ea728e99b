"""Task verifiers: did the model's final answer match the gold answer?

- GSM8K: numeric match ("#### 1,234", "$12.50", "12.0" == "12", last number as a fallback).
- HotpotQA: exact match and token F1 with SQuAD normalization (lowercase, no punctuation/articles).
- StrategyQA: yes/no (also true/false).

The final answer is read after removing the model's reasoning (`<think>...</think>`, or everything
after an unclosed `<think>`): a line starting `ANSWER:` (the episode protocol of rc1.envs), else
`Final answer:`, else the last `\\boxed{...}`; with none of these the last non-empty line is used.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.S | re.I)
_THINK_OPEN = re.compile(r"<think>.*\Z", re.S | re.I)
_THINK_CLOSE_ONLY = re.compile(r"\A.*?</think>", re.S | re.I)  # Qwen3-Thinking omits the opening tag
_ANSWER_LINE = re.compile(r"^\s*(?:\*\*)?\s*answer\s*(?:\*\*)?\s*[:：]\s*(.*)$", re.I | re.M)
_FINAL_LINE = re.compile(r"final\s+answer\s*(?:is)?\s*[:：]?\s*(.+)$", re.I | re.M)
_BOXED = re.compile(r"\\boxed\{")
_NUMBER = re.compile(r"-?\$?\s*\d[\d,]*(?:\.\d+)?|-?\.\d+")


@dataclass(frozen=True)
class Verdict:
    success: bool
    score: float  # in [0, 1]; F1 for hotpotqa, 0/1 otherwise


def strip_think(text: str) -> str:
    """Remove reasoning: closed <think> blocks, a dangling `...</think>` prefix, an unclosed <think> tail."""
    text = _THINK_BLOCK.sub("", text)
    if re.search(r"</think>", text, re.I):
        text = _THINK_CLOSE_ONLY.sub("", text)
    return _THINK_OPEN.sub("", text)


def _boxed_contents(text: str) -> list[str]:
    out = []
    for m in _BOXED.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            out.append(text[m.end():i - 1])
    return out


def _clean(ans: str) -> str:
    ans = ans.strip().strip("*").strip()
    boxed = _boxed_contents(ans)
    if boxed:
        ans = boxed[-1]
    return ans.strip().rstrip(".").strip()


def extract_final_answer(text: str | None) -> str | None:
    """The final answer of a model output, or None when there is none to read."""
    if not text:
        return None
    body = strip_think(text)
    lines = _ANSWER_LINE.findall(body)
    if lines:
        ans = _clean(lines[-1])
        return ans or None
    finals = _FINAL_LINE.findall(body)
    if finals:
        ans = _clean(finals[-1])
        return ans or None
    boxed = _boxed_contents(body)
    if boxed:
        return boxed[-1].strip() or None
    rest = [ln.strip() for ln in body.splitlines() if ln.strip()]
    return _clean(rest[-1]) if rest else None


def has_answer_line(text: str | None) -> bool:
    """The output follows the protocol: an explicit answer marker after the reasoning."""
    if not text:
        return False
    body = strip_think(text)
    return bool(_ANSWER_LINE.search(body) or _FINAL_LINE.search(body) or _boxed_contents(body))


def think_well_formed(text: str | None) -> bool:
    """<think> tags, if any, are balanced and not nested (a closing tag alone is Qwen3-Thinking's format)."""
    if not text:
        return True
    opens = len(re.findall(r"<think>", text, re.I))
    closes = len(re.findall(r"</think>", text, re.I))
    return (opens == closes) or (opens == 0 and closes == 1)


# ----------------------------------------------------------------------------- GSM8K
def parse_number(text: str | None) -> Decimal | None:
    """The number a GSM8K answer states: after '####' if present, else the last number in the text."""
    if text is None:
        return None
    s = str(text)
    if "####" in s:
        s = s.split("####")[-1]
    boxed = _boxed_contents(s)
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


def parse_yes_no(text: str | None) -> str | None:
    if not text:
        return None
    words = normalize_answer(text).split()
    if not words:
        return None
    if words[0] in _YES:
        return "yes"
    if words[0] in _NO:
        return "no"
    # "The answer is no" / "so, yes": take the last yes/no word
    for w in reversed(words):
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
