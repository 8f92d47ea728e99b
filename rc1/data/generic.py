"""Custom tasks ("bring your own task"): a JSONL task file judged by a named verifier -> pool items.

One JSON object per line::

    {"id": "q17",                                 optional; default <task>-<sha256 of prompt + answer, 12 hex>
     "question": "...",                           the prompt as one user message, or
     "messages": [{"role": "user", "content": "..."}, ...],   a chat prompt ending with a user message
     "answer": "42",                              required: a string, number or boolean
     "aliases": ["forty-two"],                    optional: other accepted answers
     "supporting": ["..."],                       optional: text the answer rests on (enables clue overlap)
     "meta": {"difficulty": "hard", ...}}         optional, free-form; meta.difficulty (or meta.bucket) in
                                                  easy|medium|hard is the item's difficulty bucket

Every line becomes an item of rc1's pool contract (the keys rc1.data.pool.make_item writes) with
`task` = the task's name and `verifier` = its verifier, so reward, eval, calibration and the sampler
all judge it the same way (rc1.envs.verifiers.verify_episode). Such an item has no template
(role/style None), no documents, never needs clarification, and records `source` = "file:line".

A task file is read strictly: a malformed line, a missing answer, an answer the verifier cannot
check, an unknown field or a repeated id is an error naming file:line (exit 2).

Held-out items for the shadow/eval set are either a separate file or a share of the task file
chosen by a hash of each id (stable when the file grows); `check_disjoint` refuses a pool and a
held-out set that share an item.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from rc1.config.load import format_validation_error
from rc1.config.names import BUCKETS, task_name_problem
from rc1.config.schema import TaskSection
from rc1.envs.verifiers import as_verdict, gold_problem, resolve_verifier
from rc1.runtime.errors import ConfigError
from rc1.runtime.fingerprint import sha256_file
from rc1.runtime.workspace import Workspace

MAX_REPORTED = 20  # bad lines reported in one error


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant"]
    content: str


class TaskLine(BaseModel):
    """One line of a task file, as written by the user."""

    model_config = ConfigDict(extra="forbid")
    id: str | int | None = None
    question: str | None = None
    messages: list[_Message] | None = None
    answer: bool | int | float | str
    aliases: list[str | int | float] = []
    supporting: list[str] | str | None = None
    meta: dict[str, Any] = {}

    @field_validator("id")
    @classmethod
    def _id(cls, v):
        if v is not None and not str(v).strip():
            raise ValueError("is empty")
        return v

    @field_validator("meta")
    @classmethod
    def _difficulty(cls, v: dict) -> dict:
        for key in ("difficulty", "bucket"):
            if key in v and v[key] not in BUCKETS:
                raise ValueError(f"{key} {v[key]!r} is not one of {', '.join(BUCKETS)}")
        return v

    @model_validator(mode="after")
    def _prompt(self):
        if self.messages is None and (self.question is None or not self.question.strip()):
            raise ValueError("needs a non-empty 'question' or 'messages'")
        if self.messages is not None:
            if not self.messages or self.messages[-1].role != "user":
                raise ValueError("messages must end with a user message (the model answers it)")
            if not self.messages[-1].content.strip():
                raise ValueError("the last user message is empty")
        return self


def _gold(answer) -> str:
    if isinstance(answer, bool):
        return "yes" if answer else "no"
    return str(answer).strip()


def content_id(task: str, messages: list[dict], answer: str) -> str:
    """The id of an item that gives none: stable under reordering of the file, changes with its content."""
    body = json.dumps({"messages": messages, "answer": answer}, sort_keys=True, ensure_ascii=False)
    return f"{task}-{hashlib.sha256(body.encode()).hexdigest()[:12]}"


def to_item(line: TaskLine, *, task: str, verifier: str, source: str, max_turns: int,
            tools: list[str], plain: bool = False, reply: str = "") -> dict:
    """A validated task line as a pool item. `plain`: a single-turn chat item (rc1.envs.env.is_single_turn)
    whose last user message ends with `reply` (an answer-format instruction); the id does not depend on it."""
    if line.messages is not None:
        messages = [m.model_dump() for m in line.messages]
        question = line.question.strip() if line.question else messages[-1]["content"]
    else:
        question = line.question.strip()
        messages = [{"role": "user", "content": question}]
    answer = _gold(line.answer)
    supporting = [line.supporting] if isinstance(line.supporting, str) else list(line.supporting or [])
    item_id = str(line.id).strip() if line.id is not None else content_id(task, messages, answer)
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    if plain and reply and users:
        last = users[-1]
        messages[last] = {**messages[last], "content": f"{messages[last]['content'].rstrip()}\n{reply}"}
    return {
        **({"single_turn": True} if plain else {}),
        "id": item_id,
        "task": task, "verifier": verifier, "template": None, "role": None, "style": None,
        "messages": messages, "question": question, "answer": answer,
        "aliases": [str(a) for a in line.aliases], "supporting": [s for s in supporting if s.strip()],
        "corpus": [], "needs_clarification": False, "hidden_detail": None, "tools": list(tools),
        "max_turns": max_turns, "meta": dict(line.meta), "source": source,
    }


def _parse_line(raw: str, where: str, verifier: str) -> tuple[TaskLine | None, list[str]]:
    """(the validated line, []) or (None, its errors as 'file:line: ...')."""
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, [f"{where}: malformed JSON ({exc.msg} at column {exc.colno})"]
    if not isinstance(obj, dict):
        return None, [f"{where}: expected a JSON object, got {type(obj).__name__}"]
    try:
        line = TaskLine.model_validate(obj)
    except ValidationError as exc:
        return None, [f"{where}: {msg}" for msg in format_validation_error(exc)]
    problem = gold_problem(verifier, _gold(line.answer))
    if problem:
        return None, [f"{where}: answer: {problem} (verifier {verifier})"]
    return line, []


def read_task_file(path: Path, *, task: str, verifier: str, shown: str | None = None, max_turns: int = 3,
                   tools: list[str] | tuple[str, ...] = (), plain: bool = False, reply: str = "") -> list[dict]:
    """Every line of a task file as a pool item; the bad lines (the first MAX_REPORTED) in one ConfigError."""
    shown = shown or str(path)
    if not path.is_file():
        raise ConfigError(f"{shown}: task file not found")
    items: list[dict] = []
    errors: list[str] = []
    bad_lines = 0
    first_line: dict[str, int] = {}
    with open(path, encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            where = f"{shown}:{lineno}"
            line, errs = _parse_line(raw, where, verifier)
            if line is not None:
                item = to_item(line, task=task, verifier=verifier, source=where, max_turns=max_turns, tools=list(tools),
                               plain=plain, reply=reply)
                if item["id"] in first_line:
                    what = "id" if line.id is not None else "content (same prompt and answer)"
                    errs = [f"{where}: {what} {item['id']!r} repeats line {first_line[item['id']]}"]
                else:
                    first_line[item["id"]] = lineno
                    items.append(item)
            if errs:
                errors += errs
                bad_lines += 1
                if bad_lines == MAX_REPORTED:
                    errors.append(f"(stopped reading after {MAX_REPORTED} bad lines)")
                    break
    if errors:
        raise ConfigError(f"{shown}: {bad_lines} bad line(s) in task {task!r}", lines=errors)
    if not items:
        raise ConfigError(f"{shown}: task file has no items")
    return items


def split_heldout(items: list[dict], share: float, seed: int) -> tuple[list[dict], list[dict]]:
    """(training items, held-out items): an item is held out when the hash of (seed, id) falls below
    `share`, so an item keeps its side when the file grows or is reordered."""
    def u(it: dict) -> float:
        return int(hashlib.sha256(f"{seed}:{it['id']}".encode()).hexdigest()[:15], 16) / 16 ** 15
    held = [it for it in items if u(it) < share]
    held_ids = {it["id"] for it in held}
    return [it for it in items if it["id"] not in held_ids], held


@dataclass
class TaskData:
    """A custom task read from its file(s): training and held-out items, and the files they came from."""

    name: str
    verifier: str
    train: list[dict]
    heldout: list[dict]
    files: dict[str, str] = field(default_factory=dict)   # workspace-relative path -> sha256

    def provenance(self) -> dict:
        return {"verifier": self.verifier, "files": self.files, "train": len(self.train), "heldout": len(self.heldout)}


def check_own_answers(items: list[dict], verifier: str, fn) -> None:
    """A `python:` verifier must judge each item's own gold answer without raising and return a verdict
    (a bool, a number in [0, 1] or a Verdict): found here, before anything is written, rather than in
    the middle of training. The first MAX_REPORTED failures, each naming its item (file:line and id)."""
    errors = []
    for it in items:
        try:
            as_verdict(fn(it["answer"], it["answer"], tuple(it["aliases"])))
        except Exception as exc:  # noqa: BLE001 - whatever the user's code does wrong, name the item
            why = " ".join(f"{exc.__class__.__name__}: {exc}".split())
            errors.append(f"{it['source']}: item {it['id']!r}: verifier {verifier} on the item's own answer: {why}")
            if len(errors) == MAX_REPORTED:
                break
    if errors:
        raise ConfigError(errors[0] if len(errors) == 1 else
                          f"verifier {verifier}: failed on {len(errors)} item(s)' own answers", lines=errors)


def load_task(ws: Workspace, name: str, spec: TaskSection) -> TaskData:
    """Read a custom task: its verifier must resolve, its file(s) must be valid, and a `python:` verifier
    must judge every item's own answer."""
    fn = resolve_verifier(spec.verifier, root=ws.root)  # UnknownVerifier (exit 2) before any item is read
    kw = dict(task=name, verifier=spec.verifier, max_turns=spec.max_turns, tools=list(spec.tools),
              plain=spec.format == "plain", reply=spec.reply_text)
    items = read_task_file(ws.path(spec.path), shown=spec.path, **kw)
    if spec.verifier.startswith("python:"):
        check_own_answers(items, spec.verifier, fn)
    files = {ws.rel(ws.path(spec.path)): sha256_file(ws.path(spec.path))}
    if spec.heldout_path:
        train, held = items, read_task_file(ws.path(spec.heldout_path), shown=spec.heldout_path, **kw)
        if spec.verifier.startswith("python:"):
            check_own_answers(held, spec.verifier, fn)
        files[ws.rel(ws.path(spec.heldout_path))] = sha256_file(ws.path(spec.heldout_path))
        check_disjoint(train, held, spec.path, spec.heldout_path)
    else:
        train, held = split_heldout(items, spec.heldout_share, spec.split_seed)
    if not train:
        raise ConfigError(f"task {name!r}: no training items left in {spec.path} after holding out "
                          f"{spec.heldout_share:.0%}")
    return TaskData(name, spec.verifier, train, held, files)


def load_tasks(ws: Workspace, specs: dict[str, TaskSection], names=None) -> dict[str, TaskData]:
    """The custom tasks `names` (default: all) of a config's datasets.tasks; item ids unique across tasks."""
    out = {n: load_task(ws, n, specs[n]) for n in (names if names is not None else specs)}
    seen: dict[str, str] = {}
    for name, data in out.items():
        for it in data.train + data.heldout:
            other = seen.setdefault(it["id"], name)
            if other != name:
                raise ConfigError(f"item id {it['id']!r} appears in task {other!r} and task {name!r}: ids must be "
                                  "unique across tasks (prefix them, or leave them out to get content ids)")
    return out


def dev_split(tasks: dict[str, TaskData], mix: dict[str, float], n: int, seed: int) -> list[dict]:
    """The dev split of a run on custom tasks: `n` of their training items (never held-out ones), each task
    by its mix share (largest remainder), seeded. The base model answers it (difficulty outcome check,
    calibration) and best/ is chosen on it, so it must be the run's own task, not the built-in tasks."""
    shares = {t: w for t, w in mix.items() if w > 0 and t in tasks}
    total = sum(shares.values())
    quota = {t: n * w / total for t, w in shares.items()}
    take = {t: min(int(q), len(tasks[t].train)) for t, q in quota.items()}
    for t in sorted(shares, key=lambda t: quota[t] - int(quota[t]), reverse=True):
        if sum(take.values()) < n and take[t] < len(tasks[t].train):
            take[t] += 1
    out = []
    for t in sorted(shares):
        rng = random.Random(f"dev:{seed}:{t}")
        out += sorted(rng.sample(tasks[t].train, take[t]), key=lambda it: it["id"])
    return out


def check_heldout_sizes(tasks: dict[str, TaskData], mix: dict[str, float], n_shadow: int | None) -> None:
    """The eval judges `eval.n_shadow` held-out items (None: all there are), a custom task its mix share of
    them: a held-out share that leaves fewer is an error naming the task, before any file is written."""
    if not n_shadow:
        for name, data in tasks.items():
            if mix.get(name, 0) > 0 and not data.heldout:
                raise ConfigError(f"datasets.tasks.{name}.heldout: holds out no item of {data.name}, and the eval "
                                  "needs held-out items (raise heldout, or give heldout_path)")
        return
    for name, data in sorted(tasks.items()):
        need = math.ceil(n_shadow * mix.get(name, 0.0) - 1e-9)
        if need > len(data.heldout):
            raise ConfigError(f"datasets.tasks.{name}.heldout: {len(data.heldout)} held-out item(s) of {name}, and "
                              f"eval.n_shadow {n_shadow} needs {need} (raise heldout, give heldout_path, or lower "
                              "eval.n_shadow)")


def check_set_sizes(tasks: dict[str, TaskData], mix: dict[str, float], key: str, n: int) -> None:
    """A pool or held-out set size the run config sets (`key`: pool.n or pool.shadow_n) must fit what each custom
    task's file gives after its held-out split; left out (or `auto`), the stage takes every item there is."""
    from rc1.data.pool import allocate

    held = key == "pool.shadow_n"
    for task, count in sorted(allocate(n, {t: w for t, w in mix.items() if w > 0}).items()):
        if task not in tasks:
            continue
        have = len(tasks[task].heldout if held else tasks[task].train)
        if count > have:
            share = "" if mix[task] == 1 else f" at {mix[task]:g} of the mix"
            raise ConfigError(f"{key}: {n} asks for {count} {'held-out' if held else 'training'} items of task {task}"
                              f"{share}; its file gives {have} after the held-out split (leave {key} out, or set it "
                              "to auto, to take every one)")


def task_name_for(path: str) -> str:
    """A task name from a file name: data/My-Arith.jsonl -> my_arith."""
    name = re.sub(r"[^a-z0-9_]+", "_", Path(path).stem.lower()).strip("_") or "task"
    name = name if name[0].isalpha() else f"t_{name}"
    if task_name_problem(name):
        raise ConfigError(f"--task: cannot name a custom task after {path} ({task_name_problem(name)}); pass --task NAME")
    return name


def _key(it: dict) -> tuple[str, str]:
    return (" ".join(str(it.get("question", "")).lower().split()), " ".join(str(it.get("answer", "")).lower().split()))


def check_disjoint(pool: list[dict], heldout: list[dict], pool_label: str, heldout_label: str) -> None:
    """Refuse a pool and a held-out set that share an item (same id, or same question and answer)."""
    ids = {it["id"]: it for it in heldout}
    keys = {_key(it): it for it in heldout}
    shared = []
    for it in pool:
        other = ids.get(it["id"]) or keys.get(_key(it))
        if other is not None:
            shared.append(f"{it['id']} ~ {other['id']}")
    if shared:
        raise ConfigError(f"{pool_label} and the held-out set {heldout_label} share {len(shared)} item(s): held-out "
                          "items must never be trained on", lines=shared[:MAX_REPORTED])
