"""Pool validation: the checks fail on the pools they exist to stop, with the offending items named."""

from __future__ import annotations

import json

import pytest

from tests.helpers.cli import run_cli

POOL = "data/rollouts/rc1_seed.jsonl"


def _validate(ws, pool=POOL, *extra):
    res = run_cli(ws, "data", "validate-pool", pool, "--report", "reports/div.json", *extra)
    rep = json.loads(ws.path("reports/div.json").read_text()) if ws.path("reports/div.json").exists() else None
    return res, rep


def _checks(rep):
    return {c["name"]: c for c in rep["checks"]}


def _write(ws, rel, items):
    from rc1.data.io import write_jsonl

    write_jsonl(ws.path(rel), items)


def test_generated_pool_passes_every_check(small_ws):
    res, rep = _validate(small_ws)
    assert res.exit_code == 0, res.output
    c = _checks(rep)
    assert c["distinct-2"]["measured"] >= 0.60
    # the window is in the threshold text, the whole-pool value beside the windowed one
    assert c["distinct-2"]["threshold"].startswith(">= 0.6 (mean over windows of 64 items")
    assert "whole pool (1500 items): 0." in c["distinct-2"]["detail"]
    assert rep["diversity"]["whole_pool_distinct2"] < c["distinct-2"]["measured"]
    kl = c["3-gram KL vs v1 beyond split-half baseline"]
    assert kl["measured"] >= 0.15 and "split-half baseline" in kl["threshold"]
    assert rep["diversity"]["kl3_vs_v1"]["kl_split_half"] > 0.15  # chance alone would pass the raw KL
    assert rep["tokenizer"] and rep["inputs"]["pool"]["sha256"]
    assert small_ws.path("reports/div.json.sha256").exists()


def test_a_pasted_shadow_item_is_a_leak_named_in_the_report(small_ws):
    from rc1.data.io import read_jsonl

    items = read_jsonl(small_ws.path(POOL))
    shadow = read_jsonl(small_ws.path("data/shadow_eval_245.jsonl"))
    pasted = dict(shadow[17], id="pasted-from-shadow")
    _write(small_ws, "data/leaky.jsonl", items[:700] + [pasted] + items[700:])
    res, rep = _validate(small_ws, "data/leaky.jsonl")
    assert res.exit_code == 3
    leak = _checks(rep)["leak vs shadow set (max 5-gram similarity)"]
    assert not leak["passed"] and "pasted-from-shadow" in leak["detail"]
    assert rep["leak"]["offenders"][0]["id"] == "pasted-from-shadow"
    assert rep["leak"]["offenders"][0]["shadow_id"] == shadow[17]["id"]
    assert "pasted-from-shadow" in res.output


def test_five_percent_duplicates_fail_the_duplicate_check(small_ws):
    from rc1.data.io import read_jsonl

    items = read_jsonl(small_ws.path(POOL))
    # 5 %: 75 copies - half exact, half near (one word of the question changed)
    copies = []
    longer = [it for it in items if len(it["question"].split()) >= 20]
    for k, it in enumerate(longer[:75]):
        c = dict(it, id=f"copy-{k}")
        if k % 2:  # one extra word at the end: 5-gram Jaccard n/(n+1) >= 0.94
            c["question"] = it["question"] + " Thanks"
        copies.append(c)
    _write(small_ws, "data/dups.jsonl", items + copies)
    res, rep = _validate(small_ws, "data/dups.jsonl")
    assert res.exit_code == 3
    dup = _checks(rep)["duplicates after dedup (%)"]
    assert not dup["passed"] and dup["measured"] > 2.0
    flagged = {d["id"] for d in rep["duplicates"]["items"]}
    assert {f"copy-{k}" for k in range(0, 75, 2)} <= flagged  # every exact copy is named
    assert {f"copy-{k}" for k in range(1, 75, 2)} <= flagged  # and every near copy


def test_a_single_template_pool_fails_diversity(small_ws):
    from rc1.data.pipeline import build_pool_file
    from rc1.data.pool import BuildParams
    from rc1.data.templates import load_pack

    import shutil
    one = small_ws.path("one_template")
    shutil.rmtree(one, ignore_errors=True)
    one.mkdir()
    pack = json.loads(small_ws.path("templates/pack_v2/gsm8k.json").read_text())
    pack["templates"] = pack["templates"][:1]
    (one / "gsm8k.json").write_text(json.dumps(pack))
    assert len(load_pack(one, tasks=("gsm8k",))["gsm8k"]) == 1
    build_pool_file(small_ws, BuildParams(n=600, mix={"gsm8k": 1.0}, templates_dir=one, seed=5), "data/one.jsonl")
    res, rep = _validate(small_ws, "data/one.jsonl")
    assert res.exit_code == 3
    c = _checks(rep)
    assert not c["roles covered"]["passed"] and not c["styles covered"]["passed"]
    assert not c["task mix max deviation (pp)"]["passed"]
    assert not c["distinct-2"]["passed"], c["distinct-2"]  # one wrapper repeated: few distinct bigrams per window


def test_missing_v1_or_shadow_fails_naming_the_command(small_ws):
    res, rep = _validate(small_ws, POOL, "--v1", "data/none.jsonl", "--shadow", "data/none2.jsonl")
    assert res.exit_code == 3
    c = _checks(rep)
    assert "rc1 data build-pool --version v1" in c["3-gram KL vs v1 beyond split-half baseline"]["detail"]
    assert "rc1 data shadow-set" in c["leak vs shadow set"]["detail"]


def test_malformed_jsonl_line_names_file_and_line(small_ws):
    p = small_ws.path("data/broken.jsonl")
    lines = small_ws.path(POOL).read_text().splitlines()[:5]
    lines.insert(3, '{"id": "x", "task": ')
    p.write_text("\n".join(lines) + "\n")
    small_ws.path("reports/broken.json").unlink(missing_ok=True)
    res = run_cli(small_ws, "data", "validate-pool", "data/broken.jsonl", "--report", "reports/broken.json")
    assert res.exit_code == 2
    assert "broken.jsonl:4: malformed JSON line" in res.output
    assert not small_ws.path("reports/broken.json").exists()


def test_kl_is_small_between_two_pools_of_one_generator(small_ws):
    from rc1.data import diversity as DV
    from rc1.data.io import read_jsonl

    items = read_jsonl(small_ws.path(POOL))
    a, b = [DV.user_text(it) for it in items[:700]], [DV.user_text(it) for it in items[700:1400]]
    same = DV.kl_divergence(DV.trigram_counts(a), DV.trigram_counts(b))
    v1 = [DV.user_text(it) for it in read_jsonl(small_ws.path("data/rollouts/rc1_v1.jsonl"))[:700]]
    assert DV.kl_divergence(DV.trigram_counts(a), DV.trigram_counts(v1)) > same


def test_kl_check_fails_when_v1_is_just_another_sample_of_the_same_pool(small_ws):
    """Two pools of one generator and template pack differ by sampling noise only: the raw KL between
    them clears 0.15, the excess over the split-half baseline does not."""
    from rc1.data.pipeline import build_pool_file
    from rc1.data.pool import BuildParams

    build_pool_file(small_ws, BuildParams(n=1500, templates_dir=small_ws.path("templates/pack_v2"), seed=99),
                    "data/same_gen.jsonl")
    res, rep = _validate(small_ws, POOL, "--v1", "data/same_gen.jsonl")
    assert res.exit_code == 3
    kl = _checks(rep)["3-gram KL vs v1 beyond split-half baseline"]
    raw = rep["diversity"]["kl3_vs_v1"]
    assert not kl["passed"] and kl["measured"] < 0.15 and raw["kl_v1"] > 0.15


@pytest.mark.parametrize("limit", [0.85])
def test_signatures_equal_datasketch_minhash(limit):
    import xxhash
    from datasketch import MinHash

    from rc1.data import diversity as DV
    from rc1.data.text import words

    text = "Mira bought 14 crates of plums at a market in Tallowbrook and then sold 3 of them to Osei."
    w = words(text)
    ref = MinHash(num_perm=64, seed=1, scheme="legacy", hashfunc=lambda b: xxhash.xxh64_intdigest(b) & 0xffffffff)
    ref.update_batch([" ".join(w[i:i + 5]).encode() for i in range(len(w) - 4)])
    sg = DV.Signatures()
    assert (sg.compute([DV.shingles(text)])[0] == ref.hashvalues).all()


def test_too_short_too_long_and_too_few_items_fail(small_ws):
    """A one-line prompt, a prompt padded past the limit, and a pool smaller than the gates config asks for."""
    from rc1.data.io import read_jsonl

    items = read_jsonl(small_ws.path(POOL))
    short = dict(items[3], id="too-short", messages=[{"role": "user", "content": "Why?"}])
    long_ = dict(items[4], id="too-long", messages=[{"role": "user", "content": items[4]["question"] + " filler" * 5000}])
    _write(small_ws, "data/lengths.jsonl", items[:3] + [short, long_] + items[5:])
    res, rep = _validate(small_ws, "data/lengths.jsonl")
    assert res.exit_code == 3
    c = _checks(rep)
    assert not c["sample length min (tokens)"]["passed"] and "too-short" in c["sample length min (tokens)"]["detail"]
    assert not c["sample length max (tokens)"]["passed"] and "too-long" in c["sample length max (tokens)"]["detail"]
    assert c["items"]["passed"]  # the test gates ask for >= 1 item; production asks for 30000
    from rc1.config.gates import PoolGate
    from rc1.data import diversity as DV

    prod = DV.validate(items, None, None, PoolGate(min_items=30000), lengths=[100] * len(items))
    assert {x["name"]: x for x in prod["checks"]}["items"] == {"name": "items", "measured": 1500,
                                                              "threshold": ">= 30000", "passed": False, "detail": ""}
