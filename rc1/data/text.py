"""Text helpers shared by the builder, the diversity report and the difficulty metrics."""

from __future__ import annotations

import re

_ALNUM = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]")


def words(text: str) -> list[str]:
    """Lower-cased word tokens (punctuation dropped); CJK characters count as one word each."""
    return _ALNUM.findall(text.lower())


def ngrams(tokens: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def ngram_set(text: str, n: int) -> set[tuple[str, ...]]:
    w = words(text)
    if len(w) < n:
        return {tuple(w)} if w else set()
    return set(ngrams(w, n))


def jaccard(a: set, b: set) -> float:
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)


def clue_overlap(question: str, supporting: list[str]) -> float:
    """3-gram Jaccard between the question and the supporting text (lower = harder)."""
    return jaccard(ngram_set(question, 3), ngram_set(" ".join(supporting), 3))
