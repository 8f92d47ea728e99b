"""examples/probe/make_probe.py: a file `rc1 eval --items` reads, with gold answers its own verifiers accept."""

from __future__ import annotations

import re
from collections import Counter

from examples.probe.make_probe import main as make_probe
from rc1.envs.verifiers import verify
from rc1.eval.splits import named_set
from rc1.runtime.workspace import Workspace


def _worked(question: str) -> int:
    """The answer recomputed from the question's words, independently of the generator's arithmetic."""
    nums = [int(x) for x in re.findall(r"\d+", question)]
    if "buys" in question:
        return nums[0] + nums[1] - nums[2]
    if "more" in question or question.startswith("Add"):
        return nums[0] + nums[1]
    if question.startswith("Take"):
        return nums[1] - nums[0]
    return nums[0] - nums[1]


def test_the_probe_loads_as_an_item_file_and_its_answers_are_right(tmp_path):
    ws = Workspace(tmp_path)
    make_probe(["--out", str(ws.path("data/probe.jsonl"))])
    items = named_set(ws, "data/probe.jsonl").items
    kinds = Counter(it["id"].split("-")[1] for it in items)
    assert kinds == {"word1": 40, "bare": 40, "word2": 40, "yesno": 40}
    assert len({it["question"] for it in items}) == 160
    for it in items:
        assert verify(it["task"], it["answer"], it["answer"]).success, it["id"]
        if it["task"] == "gsm8k":
            assert int(it["answer"]) == _worked(it["question"]) >= 0, it["id"]
        else:
            colour, asked = re.match(r".* is (\w+)\. Is .* (\w+)\?$", it["question"]).groups()
            assert it["answer"] == ("yes" if colour == asked else "no"), it["id"]
            assert not verify(it["task"], "no" if it["answer"] == "yes" else "yes", it["answer"]).success
    assert Counter(it["answer"] for it in items if it["task"] == "strategyqa") == {"yes": 20, "no": 20}
    # the same seed writes the same file
    make_probe(["--out", str(ws.path("data/again.jsonl"))])
    assert ws.path("data/again.jsonl").read_bytes() == ws.path("data/probe.jsonl").read_bytes()
