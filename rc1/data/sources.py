"""Task sources in the real formats, normalised to the core of a pool item.

Real datasets are read with `datasets` from local JSON / JSONL / parquet files, or from the hub
by name when the user has network access (`load_source("gsm8k", "openai/gsm8k:main", split="train")`).
The offline generators (rc1.data.generators) emit the same formats, so one normaliser serves both.

Normalised core: {question, answer, aliases, supporting, corpus, meta}.
"""

from __future__ import annotations

import re
from pathlib import Path

from rc1.runtime.errors import ConfigError

_CALC_ANN = re.compile(r"<<[^>]*>>")
LOCAL_BUILDERS = {".json": "json", ".jsonl": "json", ".parquet": "parquet"}


def load_source(task: str, where: str, *, split: str = "train", limit: int | None = None) -> list[dict]:
    """Records of `task` from a local file (by suffix) or a hub dataset `name[:config]`."""
    import datasets

    p = Path(where)
    if p.suffix in LOCAL_BUILDERS:
        if not p.exists():
            raise ConfigError(f"{p}: source file not found")
        try:
            ds = datasets.load_dataset(LOCAL_BUILDERS[p.suffix], data_files=str(p), split="train")
        except Exception as exc:  # datasets raises many types for unreadable files
            raise ConfigError(f"{p}: cannot read as {task} data ({exc.__class__.__name__}: {exc})") from None
    else:
        name, _, config = where.partition(":")
        try:
            ds = datasets.load_dataset(name, config or None, split=split)
        except Exception as exc:
            raise ConfigError(f"{where}: cannot load dataset from the hub ({exc.__class__.__name__}: {exc})") from None
    if limit is not None:
        ds = ds.select(range(min(limit, len(ds))))
    out = []
    for i, rec in enumerate(ds):
        try:
            out.append(normalize(task, rec))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: record {i}: not in {task} format ({exc.__class__.__name__}: {exc})") from None
    return out


def normalize(task: str, rec: dict) -> dict:
    if task == "gsm8k":
        return normalize_gsm8k(rec)
    if task == "hotpotqa":
        return normalize_hotpotqa(rec)
    if task == "strategyqa":
        return normalize_strategyqa(rec)
    raise ConfigError(f"unknown task {task!r}")


def gsm8k_final(answer_text: str) -> str:
    if "####" not in answer_text:
        raise ValueError("gsm8k answer has no '#### N' line")
    final = answer_text.rsplit("####", 1)[1].strip().replace(",", "")
    if not final:
        raise ValueError("gsm8k answer after '####' is empty")
    return final


def normalize_gsm8k(rec: dict) -> dict:
    question, answer_text = str(rec["question"]), str(rec["answer"])
    final = gsm8k_final(answer_text)
    steps = [_CALC_ANN.sub("", ln).strip() for ln in answer_text.rsplit("####", 1)[0].splitlines() if ln.strip()]
    return {"question": question, "answer": final, "aliases": [], "supporting": steps, "corpus": [],
            "meta": {"answer_text": answer_text}}


def _hotpot_context(ctx) -> list[tuple[str, list[str]]]:
    if isinstance(ctx, dict):  # HF hub layout: {"title": [...], "sentences": [[...], ...]}
        return list(zip(ctx["title"], ctx["sentences"]))
    return [(t, list(s)) for t, s in ctx]  # original JSON: [[title, [sentences]], ...]


def _hotpot_sf(sf) -> list[tuple[str, int]]:
    if isinstance(sf, dict):  # {"title": [...], "sent_id": [...]}
        return list(zip(sf["title"], sf["sent_id"]))
    return [(t, int(i)) for t, i in sf]


def normalize_hotpotqa(rec: dict) -> dict:
    docs = _hotpot_context(rec["context"])
    by_title = dict(docs)
    sf = _hotpot_sf(rec["supporting_facts"])
    supporting = [by_title[t][i] for t, i in sf if t in by_title and 0 <= i < len(by_title[t])]
    corpus = [{"title": t, "text": " ".join(s).strip()} for t, s in docs]
    return {"question": str(rec["question"]), "answer": str(rec["answer"]), "aliases": [], "supporting": supporting,
            "corpus": corpus,
            "meta": {"supporting_facts": [[t, i] for t, i in sf], "type": rec.get("type"), "level": rec.get("level"),
                     "support_titles": sorted({t for t, _ in sf})}}


def normalize_strategyqa(rec: dict) -> dict:
    ans = rec["answer"]
    if isinstance(ans, str):
        if ans.strip().lower() not in ("true", "false", "yes", "no"):
            raise ValueError(f"strategyqa answer must be boolean, got {ans!r}")
        ans = ans.strip().lower() in ("true", "yes")
    facts = rec.get("facts") or []
    if isinstance(facts, str):
        facts = [f.strip() for f in re.split(r"(?<=\.)\s+", facts) if f.strip()]
    facts = [str(f) for f in facts]
    term = rec.get("term") or "fact"
    corpus = [{"title": f"{term} ({i + 1})", "text": f} for i, f in enumerate(facts)]
    return {"question": str(rec["question"]), "answer": "yes" if bool(ans) else "no", "aliases": [],
            "supporting": facts, "corpus": corpus,
            "meta": {"facts": facts, "decomposition": list(rec.get("decomposition") or []), "term": term}}


_NUM = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")
_NAME = re.compile(r"\b(?:the )?[A-Z][a-z]+(?: [A-Z][a-z]+)+")


def mask_detail(task: str, question: str) -> tuple[str, str] | None:
    """For real records: hide one needed detail (a number for gsm8k, a named entity otherwise).

    Returns (masked question, the sentence the simulated user reveals) or None if nothing fits.
    """
    if task == "gsm8k":
        sentences = re.split(r"(?<=[.!?])\s+", question)
        for i, s in enumerate(sentences[1:-1], 1) or ():
            m = _NUM.search(s)
            if m:
                masked = sentences[:i] + [s[:m.start()] + "some" + s[m.end():]] + sentences[i + 1:]
                return " ".join(masked), s
        return None
    m = _NAME.search(question)
    if not m:
        return None
    return question[:m.start()] + "a certain one" + question[m.end():], f"I mean {m.group(0)}."
