"""Real-format loaders on small local files, and template pack validation."""

from __future__ import annotations

import json

import pytest

from rc1.runtime.errors import ConfigError


def test_gsm8k_jsonl(tmp_path):
    from rc1.data.sources import load_source

    p = tmp_path / "gsm8k.jsonl"
    p.write_text(json.dumps({"question": "Natalia sold clips to 48 of her friends in April, and then she sold half as "
                             "many clips in May. How many clips did Natalia sell altogether in April and May?",
                             "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = "
                             "<<48+24=72>>72 clips altogether in April and May.\n#### 72"}) + "\n")
    [rec] = load_source("gsm8k", str(p))
    assert rec["answer"] == "72"
    assert rec["supporting"][0] == "Natalia sold 48/2 = 24 clips in May."


def test_hotpotqa_json_list(tmp_path):
    from rc1.data.sources import load_source

    p = tmp_path / "hotpot_dev_distractor.json"
    p.write_text(json.dumps([{
        "_id": "5a8b57f25542995d1e6f1371", "type": "comparison", "level": "hard",
        "question": "Were Scott Derrickson and Ed Wood of the same nationality?", "answer": "yes",
        "supporting_facts": [["Scott Derrickson", 0], ["Ed Wood", 0]],
        "context": [["Scott Derrickson", ["Scott Derrickson (born July 16, 1966) is an American director.", "He lives in LA."]],
                    ["Ed Wood", ["Edward Davis Wood Jr. was an American filmmaker."]],
                    ["Other", ["A distractor sentence."]]]}]))
    [rec] = load_source("hotpotqa", str(p))
    assert rec["supporting"] == ["Scott Derrickson (born July 16, 1966) is an American director.",
                                 "Edward Davis Wood Jr. was an American filmmaker."]
    assert [d["title"] for d in rec["corpus"]] == ["Scott Derrickson", "Ed Wood", "Other"]


def test_strategyqa_parquet_and_build_from_sources(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.helpers.cli import new_ws, run_cli

    rows = [{"qid": f"q{i}", "term": "Hydrogen", "description": "element", "question": f"Is hydrogen's atomic number "
             f"squared larger than the number of Spice Girls (case {i})?", "answer": bool(i % 2),
             "facts": ["Hydrogen has an atomic number of 1.", "The Spice Girls has 5 members."],
             "decomposition": ["What is hydrogen's atomic number?", "How many Spice Girls are there?", "Is #1^2 > #2?"]}
            for i in range(4)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "strategyqa.parquet")
    from rc1.data.sources import load_source

    recs = load_source("strategyqa", str(tmp_path / "strategyqa.parquet"))
    assert [r["answer"] for r in recs] == ["no", "yes", "no", "yes"] and recs[0]["supporting"][1].startswith("The Spice")
    ws = new_ws(tmp_path / "ws")
    res = run_cli(ws, "data", "build-pool", "--n", "20", "--mix", "strategyqa:1.0",
                  "--source", f"strategyqa={tmp_path / 'strategyqa.parquet'}", "--out", "real.jsonl")
    assert res.exit_code == 0, res.output
    from rc1.data.io import read_jsonl

    items = read_jsonl(ws.path("real.jsonl"))
    assert all("Spice Girls" in it["question"] or it["needs_clarification"] for it in items)


def test_malformed_source_names_the_record(tmp_path):
    from rc1.data.sources import load_source

    p = tmp_path / "g.jsonl"
    p.write_text(json.dumps({"question": "q", "answer": "no final line"}) + "\n")
    with pytest.raises(ConfigError, match="record 0: not in gsm8k format"):
        load_source("gsm8k", str(p))


def test_pack_v2_meets_the_spec():
    from pathlib import Path

    from rc1.data.templates import load_pack

    pack = load_pack(Path(__file__).resolve().parents[2] / "templates" / "pack_v2", min_per_task=6)
    for task, tpls in pack.items():
        assert len(tpls) >= 6, task
        assert len({t.role for t in tpls}) >= 4 and len({t.style for t in tpls}) >= 3


@pytest.mark.parametrize("mutate,needle", [
    (lambda t: t["templates"][2].update(user=["no placeholder here"]), "templates.2.user: Value error" ),
    (lambda t: t["templates"][0].update(system="Hello {name}, tools {tools}"), "templates.0.system"),
    (lambda t: t["templates"][1].pop("role"), "templates.1.role: Field required"),
    (lambda t: t["templates"][0].update(colour="red"), "templates.0.colour: unknown key"),
])
def test_template_errors_name_file_and_field(tmp_path, mutate, needle):
    from pathlib import Path

    from rc1.data.templates import load_pack

    src = Path(__file__).resolve().parents[2] / "templates" / "pack_v2" / "gsm8k.json"
    data = json.loads(src.read_text())
    mutate(data)
    (tmp_path / "gsm8k.json").write_text(json.dumps(data))
    with pytest.raises(ConfigError) as ei:
        load_pack(tmp_path, tasks=("gsm8k",))
    text = ei.value.message + " " + " ".join(ei.value.lines)
    assert "gsm8k.json" in ei.value.message and needle.split(":")[0] in text, text
