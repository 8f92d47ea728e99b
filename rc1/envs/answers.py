"""How a final answer is read out of a model's text (the answer half of the episode protocol).

Reasoning is removed first (`<think>...</think>`, a dangling `...</think>` prefix as Qwen3-Thinking
writes it, or everything after an unclosed `<think>`). Qwen3-Thinking's template opens the think block
itself, so its raw output has no `<think>`; rc1.envs.env keeps the opening tag the template wrote in the
episode's text, so a block the model never closed is read as reasoning (no answer), not as an answer. Then the answer is, in order: the last line
starting `ANSWER:` (rc1's action protocol), else the last `Final answer:`, else the last
`\\boxed{...}`, else the last non-empty line. rc1.envs.verifiers checks that answer against the gold.
"""

from __future__ import annotations

import re

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.S | re.I)
_THINK_OPEN = re.compile(r"<think>.*\Z", re.S | re.I)
_THINK_CLOSE_ONLY = re.compile(r"\A.*?</think>", re.S | re.I)  # Qwen3-Thinking omits the opening tag
_ANSWER_LINE = re.compile(r"^\s*(?:\*\*)?\s*answer\s*(?:\*\*)?\s*[:：]\s*(.*)$", re.I | re.M)
_FINAL_LINE = re.compile(r"final\s+answer\s*(?:is)?\s*[:：]?\s*(.+)$", re.I | re.M)
_BOXED = re.compile(r"\\boxed\{")


def strip_think(text: str) -> str:
    """Remove reasoning: closed <think> blocks, a dangling `...</think>` prefix, an unclosed <think> tail."""
    text = _THINK_BLOCK.sub("", text)
    if re.search(r"</think>", text, re.I):
        text = _THINK_CLOSE_ONLY.sub("", text)
    return _THINK_OPEN.sub("", text)


def boxed_contents(text: str) -> list[str]:
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
    boxed = boxed_contents(ans)
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
    boxed = boxed_contents(body)
    if boxed:
        return boxed[-1].strip() or None
    rest = [ln.strip() for ln in body.splitlines() if ln.strip()]
    return _clean(rest[-1]) if rest else None


def has_answer_line(text: str | None) -> bool:
    """The output follows the protocol: an explicit answer marker after the reasoning."""
    if not text:
        return False
    body = strip_think(text)
    return bool(_ANSWER_LINE.search(body) or _FINAL_LINE.search(body) or boxed_contents(body))


def think_well_formed(text: str | None) -> bool:
    """<think> tags, if any, are balanced and not nested (a closing tag alone is Qwen3-Thinking's format)."""
    if not text:
        return True
    opens = len(re.findall(r"<think>", text, re.I))
    closes = len(re.findall(r"</think>", text, re.I))
    return (opens == closes) or (opens == 0 and closes == 1)
