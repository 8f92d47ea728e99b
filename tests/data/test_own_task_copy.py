"""The README's "copy configs/arith.yaml for your own file": a user with another task file of about 1,000 items
copies the shipped config, changes only the task's name and path, and the data stages run, because the pool
and shadow-set sizes follow from the file; a size set larger than the file gives is one error line naming it."""

from __future__ import annotations

import json
import random
import shutil

import pytest
import yaml

from rc1.runtime.workspace import Workspace
from tests.helpers.cli import REPO, run_cli

CONFIG = "configs/words.yaml"
C = ["--config", CONFIG]


def word_items(n: int, seed: int = 11) -> list[dict]:
    """A task other than the example's: how many letters a made-up word has (a number the `numeric` verifier
    checks, as configs/arith.yaml's), ids of its own, so its held-out split falls differently."""
    rng, seen, out = random.Random(seed), set(), []
    while len(out) < n:
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 14)))
        if word not in seen:
            seen.add(word)
            out.append({"id": f"words-{len(out)}", "question": f"How many letters does the word '{word}' have?",
                        "answer": str(len(word))})
    return out


def copied_ws(root, n: int, pool: dict | None = None) -> Workspace:
    """A workspace with the user's task file and configs/arith.yaml copied with the task renamed and repointed
    (and `pool` keys changed, for the tests of explicit sizes)."""
    ws = Workspace(root)
    ws.path("configs").mkdir(parents=True)
    for name in ("gates_local.yaml", "weights.json"):
        shutil.copy(REPO / "configs" / name, ws.path("configs") / name)
    ws.path("data").mkdir()
    ws.path("data/words.jsonl").write_text("".join(json.dumps(x) + "\n" for x in word_items(n)))
    data = yaml.safe_load((REPO / "configs/arith.yaml").read_text())
    data["datasets"]["mix"] = {"words": data["datasets"]["mix"].pop("arith")}
    data["datasets"]["tasks"] = {"words": {**data["datasets"]["tasks"].pop("arith"), "path": "data/words.jsonl"}}
    data["pool"].update(pool or {})
    ws.path(CONFIG).write_text(yaml.safe_dump(data, sort_keys=False))
    return ws


def _lines(ws, rel: str) -> list[dict]:
    return [json.loads(x) for x in ws.path(rel).read_text().splitlines() if x.strip()]


def test_a_copy_of_the_example_config_for_another_1000_item_file_runs_the_data_stages(tmp_path):
    from rc1.config.load import load_train_config
    from rc1.data.generic import load_tasks

    ws = copied_ws(tmp_path, 1000)
    cfg = load_train_config(CONFIG, ws)
    task = load_tasks(ws, cfg.datasets.tasks)["words"]
    # the file's hash split is not the example's 800 / 200: sizes written for the example would not fit it
    assert len(task.train) + len(task.heldout) == 1000 and (len(task.train) < 800 or len(task.heldout) < 200)
    for args in (["data", "build-pool", *C], ["data", "shadow-set", *C], ["data", "difficulty", "metrics", *C],
                 ["data", "difficulty", "bucketize", *C], ["data", "validate-pool", *C]):
        res = run_cli(ws, *args)
        assert res.exit_code == 0, (args, res.output)
    pool, shadow = _lines(ws, cfg.pool.out), _lines(ws, cfg.data.shadow_path)
    assert sorted(it["id"] for it in pool) == sorted(it["id"] for it in task.train)         # every training item
    assert sorted(it["id"] for it in shadow) == sorted(it["id"] for it in task.heldout)     # every held-out item
    assert {it["task"] for it in pool + shadow} == {"words"}
    assert len(_lines(ws, cfg.seed_pool)) == len(task.train)


@pytest.mark.parametrize("key,command,kind", [("n", "build-pool", "training"), ("shadow_n", "shadow-set", "held-out")])
def test_an_explicit_size_larger_than_the_file_gives_is_one_error_line_naming_the_key(tmp_path, key, command, kind):
    from rc1.config.load import load_train_config
    from rc1.data.generic import load_tasks

    ws = copied_ws(tmp_path, 600, pool={key: 5000})
    task = load_tasks(ws, load_train_config(CONFIG, ws).datasets.tasks)["words"]
    have = len(task.train if kind == "training" else task.heldout)
    res = run_cli(ws, "data", command, *C)
    assert res.exit_code == 2, res.output
    assert [line for line in res.output.splitlines() if line.strip()] == [
        f"error: pool.{key}: 5000 asks for 5000 {kind} items of task words; its file gives {have} after the held-out "
        f"split (leave pool.{key} out, or set it to auto, to take every one)"]
    assert not ws.path("data/rollouts").exists() and not ws.path("data/arith_shadow.jsonl").exists()
    # `auto` is the key left out: every item the file gives
    ws.path(CONFIG).write_text(ws.path(CONFIG).read_text().replace(f"{key}: 5000", f"{key}: auto"))
    res = run_cli(ws, "data", command, *C)
    assert res.exit_code == 0 and f"({have} items" in res.output, res.output
