"""Seed pool builder: generated (or loaded) task records -> rendered pool items.

Deterministic per seed: every item draws from its own `random.Random("<space>:<seed>:<index>")`,
so the same arguments give a byte-identical file, and the shadow set (space "shadow") never
shares a random stream or an id with a training pool (space "pool").

Custom tasks (rc1.data.generic) bring finished items: the pool takes as many of a task's training
items as its mix share asks for, in a seeded order, each at most once.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from pathlib import Path

from rc1.config.names import DEFAULT_MIX, TASKS, check_mix, task_order
from rc1.config.schema import PoolSection
from rc1.data import generators as G
from rc1.data import ladder as L
from rc1.data.sources import mask_detail, normalize
from rc1.data.templates import Template, load_pack, render
from rc1.runtime.errors import ConfigError

log = logging.getLogger("rc1.data")

KNOWN_TOOLS = ("wiki", "calc")
# intended difficulty mix of generated items (balancing later resamples per task to the target)
LEVEL_WEIGHTS = {"gsm8k": (0.28, 0.50, 0.22), "hotpotqa": (0.22, 0.30, 0.48), "strategyqa": (0.22, 0.28, 0.50)}
# clarify items lean hard: a missing detail adds a turn (relative weights, renormalised to clarify_rate)
CLARIFY_WEIGHT = {"easy": 0.45, "medium": 1.0, "hard": 1.45}


def parse_shares(text: str | dict, flag: str, form: str, not_a_number: str) -> dict[str, float]:
    """'a:0.4,b:0.6' (or a mapping) -> {name: share}; a part that is not `form`, or whose share is not a
    number (`not_a_number`, formatted with name and val), is a ConfigError naming `flag`."""
    if isinstance(text, dict):
        return {str(k): float(v) for k, v in text.items()}
    shares: dict[str, float] = {}
    for part in (p.strip() for p in str(text).split(",") if p.strip()):
        name, sep, val = part.partition(":")
        if not sep:
            raise ConfigError(f"{flag}: {part!r} is not {form}")
        try:
            shares[name.strip()] = float(val)
        except ValueError:
            raise ConfigError(f"{flag}: " + not_a_number.format(name=name, val=val)) from None
    return shares


def parse_mix(text: str | dict, custom=()) -> dict[str, float]:
    """'hotpotqa:0.45,strategyqa:0.30,gsm8k:0.25' (or a mapping) -> dict, judged by the config's own mix check
    (rc1.config.names.check_mix); unknown task / bad sum -> ConfigError naming --mix.
    `custom`: the custom task names the mix may use besides the built-in tasks."""
    mix = parse_shares(text, "--mix", "TASK:WEIGHT", "weight {val!r} of {name!r} is not a number")
    try:
        return check_mix(mix, custom, None if custom else "a custom task comes from --source FILE --verifier NAME "
                                                          "or --config")
    except ValueError as exc:
        raise ConfigError(f"--mix: {exc}") from None


def parse_tools(text: str | list[str]) -> list[str]:
    tools = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t.strip()]
    bad = sorted(set(tools) - set(KNOWN_TOOLS))
    if bad:
        raise ConfigError(f"--tools: unknown tool(s) {bad}; known: {list(KNOWN_TOOLS)}")
    return sorted(set(tools), key=tools.index)


def allocate(n: int, weights: dict[str, float]) -> dict[str, int]:
    """Largest-remainder split of n over the weights (exact total)."""
    raw = {k: n * w for k, w in weights.items()}
    counts = {k: int(v) for k, v in raw.items()}
    rest = n - sum(counts.values())
    for k in sorted(raw, key=lambda k: (-(raw[k] - counts[k]), k))[:rest]:
        counts[k] += 1
    return counts


# The run config's pool section is where the build's defaults live; BuildParams reads them from it.
_POOL = PoolSection()


@dataclass
class BuildParams:
    n: int = _POOL.n
    mix: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_MIX))
    max_turns: int = _POOL.max_turns
    clarify_rate: float = _POOL.clarify_rate
    tools: list[str] = field(default_factory=lambda: list(_POOL.tools))
    templates_dir: str | Path = _POOL.templates_dir
    seed: int = _POOL.seed
    space: str = "pool"
    id_prefix: str = "rc1"
    sources: dict[str, list[dict]] | None = None  # task -> normalised records (real data instead of generators)
    custom: dict[str, list[dict]] | None = None   # custom task -> its training items (rc1.data.generic)
    levels: dict[str, tuple[int, int]] | None = None  # built-in task -> ladder level range, drawn uniformly

    def validate(self) -> None:
        if not isinstance(self.n, int) or self.n < 1:
            raise ConfigError(f"--n must be >= 1 (got {self.n})")
        self.mix = parse_mix(self.mix, custom=self.custom or ())
        counts = allocate(self.n, self.mix)
        for task, items in (self.custom or {}).items():
            if counts.get(task, 0) > len(items):
                raise ConfigError(f"--n {self.n} with {task} at {self.mix[task]:g} asks for {counts[task]} {task} items; "
                                  f"the task has {len(items)} training items (lower --n / pool.n, or add items)")
        if not 1 <= self.max_turns <= 16:
            raise ConfigError(f"--max-turns must be in [1, 16] (got {self.max_turns})")
        if not 0.0 <= self.clarify_rate <= 1.0:
            raise ConfigError(f"--clarify-rate must be in [0, 1] (got {self.clarify_rate})")
        self.tools = parse_tools(self.tools)


def build_pool(params: BuildParams, pack: dict[str, list[Template]] | None = None, start: int = 0,
               stop: int | None = None) -> list[dict]:
    """Items [start, stop) of the pool these params define (the whole pool by default)."""
    params.validate()
    generated = [t for t, w in params.mix.items() if w > 0 and t in TASKS]
    if pack is None:
        pack = load_pack(params.templates_dir, tasks=tuple(generated)) if generated else {}
    counts = allocate(params.n, params.mix)
    order = [t for t in task_order(counts) for _ in range(counts.get(t, 0))]
    random.Random(f"{params.space}:{params.seed}:order").shuffle(order)
    level_mean = {t: sum(w * CLARIFY_WEIGHT[lv] for w, lv in zip(ws, G.LEVELS)) for t, ws in LEVEL_WEIGHTS.items()}
    custom = _custom_draws(params, order)
    items = []
    for i in range(start, len(order) if stop is None else min(stop, len(order))):
        task = order[i]
        if task in custom:
            items.append(custom[task][i])
            continue
        rng = random.Random(f"{params.space}:{params.seed}:{i}")
        item_id = f"{params.id_prefix}-{params.seed}-{i:06d}"
        if params.levels and task in params.levels:
            lo, hi = params.levels[task]
            items.append(make_level_item(task, rng.randint(lo, hi), rng, params, pack[task], item_id, level_mean[task]))
        else:
            items.append(make_item(task, rng, params, pack[task], item_id, level_mean[task]))
    return items


def _custom_draws(params: BuildParams, order: list[str]) -> dict[str, dict[int, dict]]:
    """For each custom task: pool position -> the training item placed there (a seeded order of the
    task's items, each used at most once)."""
    out: dict[str, dict[int, dict]] = {}
    for task, items in (params.custom or {}).items():
        positions = [i for i, t in enumerate(order) if t == task]
        if not positions:
            continue
        picks = list(items)
        random.Random(f"{params.space}:{params.seed}:{task}:items").shuffle(picks)
        out[task] = {i: dict(it) for i, it in zip(positions, picks)}
    return out


_TOOL_WORDS = ("tool", "cite", "looked up")


def make_plain_item(task: str, n: int, rng: random.Random, p: BuildParams, templates: list[Template],
                    item_id: str) -> dict:
    """An item of a plain (single-turn) rung of the ladder: a template's user wording without its protocol
    system prompt, the rung's generated question and one reply instruction (rc1.data.ladder)."""
    gen = L.generate_plain(task, n, rng)
    choices = [(t, v) for t in templates for v, u in enumerate(t.user) if not any(w in u for w in _TOOL_WORDS)]
    template, variant = rng.choice(choices or [(t, 0) for t in templates])
    if task == "hotpotqa":
        context = "\n".join(f"[{d['title']}] {d['text']}" for d in gen["corpus"])
        question = gen["question"]
    else:
        context, question = "", gen["text"].rsplit("\n", 1)[0]
    user = render(template, variant, question=question, context=context, tools=[], max_turns=1)[-1]["content"]
    lv = L.level(task, n)
    meta = {"level": lv.bucket, "level_n": n, "level_name": lv.name, "ladder": L.LADDER_VERSION,
            "steps": gen["steps"], "hops": gen["hops"], "solution": gen["solution"],
            "plan": {"lookups": [], "calc": 0, "clarify": False, "turns": 1, "tool_hops": 0},
            "template_variant": variant, "space": p.space}
    return {
        "id": item_id, "task": task, "template": template.id, "role": template.role, "style": template.style,
        "messages": [{"role": "user", "content": f"{user}\n{L.REPLY[task]}"}], "single_turn": True,
        "question": gen["question"], "answer": gen["answer"], "aliases": [], "supporting": gen["supporting"],
        "corpus": gen["corpus"], "needs_clarification": False, "hidden_detail": None, "tools": [], "max_turns": 1,
        "meta": meta,
    }


def make_level_item(task: str, n: int, rng: random.Random, p: BuildParams, templates: list[Template],
                    item_id: str, level_mean: float) -> dict:
    """An item of ladder level `n` of `task` (plain rungs single-turn, the upper rungs today's generator)."""
    lv = L.level(task, n)
    if lv.generator_level is None:
        return make_plain_item(task, n, rng, p, templates, item_id)
    item = make_item(task, rng, p, templates, item_id, level_mean, level=lv.generator_level)
    item["meta"].update({"level_n": n, "level_name": lv.name, "ladder": L.LADDER_VERSION})
    return item


def make_item(task: str, rng: random.Random, p: BuildParams, templates: list[Template], item_id: str,
              level_mean: float, level: str | None = None) -> dict:
    level = level or G.pick_level(rng, LEVEL_WEIGHTS[task])
    if p.sources and p.sources.get(task):
        core = dict(rng.choice(p.sources[task]))
        gen = {"level": None, "steps": None, "hops": None, "clarify": None, "source": None}
        masked = mask_detail(task, core["question"])
        if masked:
            gen["clarify"] = {"question": masked[0], "hidden_detail": masked[1]}
    want_clar = rng.random() < p.clarify_rate * CLARIFY_WEIGHT.get(level, 1.0) / level_mean
    if not (p.sources and p.sources.get(task)):
        gen = G.generate(task, rng, level, clarify=want_clar)
        core = normalize(task, gen["source"])
    clar = gen["clarify"] if (want_clar and gen["clarify"]) else None
    question = clar["question"] if clar else core["question"]
    if clar and clar.get("rename"):  # ambiguity by a namesake page (see generators.gen_hotpotqa)
        ren = clar["rename"]
        core = dict(core, meta=dict(core["meta"]))
        core["corpus"] = [dict(d, title=ren.get(d["title"], d["title"])) for d in core["corpus"]]
        core["corpus"] += [{"title": t, "text": " ".join(s)} for t, s in clar["extra_pages"]]
        rng.shuffle(core["corpus"])
        core["meta"]["supporting_facts"] = [[ren.get(t, t), i] for t, i in core["meta"]["supporting_facts"]]
        core["meta"]["support_titles"] = sorted({t for t, _ in core["meta"]["supporting_facts"]})

    # what the prompt shows vs what must be looked up (wiki) or computed (calc)
    lookups: list[str] = []
    shown_docs = list(core["corpus"])
    if task == "hotpotqa":
        titles = [t for t, _ in core["meta"]["supporting_facts"]]
        if gen.get("level") in ("medium", "hard") and "wiki" in p.tools:
            # medium/hard: the supporting pages are not in the prompt (open-domain hops via the wiki tool)
            lookups = list(dict.fromkeys(titles))
        shown_docs = [d for d in core["corpus"] if d["title"] not in lookups]
    elif task == "strategyqa" and "wiki" in p.tools:
        stated = [f for f in core["supporting"] if f in question]
        lookups = [d["title"] for d in core["corpus"] if d["text"] not in stated][: (2 if level == "hard" else 1)]
    calc = 0
    if task == "gsm8k" and "calc" in p.tools:
        ops = int(gen.get("steps") or len(core["supporting"]))
        calc = ops if ops >= 3 else 0  # one or two small steps are done in the head, longer chains with calc
    elif task == "strategyqa" and gen.get("level") in ("medium", "hard") and "calc" in p.tools:
        calc = 1  # the reference plan computes the gap between the two looked-up values
    budget = max(0, p.max_turns - 1 - (1 if clar else 0))
    if len(lookups) > budget:  # not enough turns to look everything up: show those pages instead
        lookups = lookups[:budget]
        if task == "hotpotqa":
            shown_docs = [d for d in core["corpus"] if d["title"] not in lookups]
    calc = min(calc, budget - len(lookups))
    tool_hops = len(lookups) + calc
    turns = 1 + (1 if clar else 0) + tool_hops

    template = rng.choice(templates)
    variant = rng.randrange(len(template.user))
    context = "\n".join(f"[{d['title']}] {d['text']}" for d in shown_docs) if task == "hotpotqa" else ""
    messages = render(template, variant, question=question, context=context, tools=p.tools, max_turns=p.max_turns)
    meta = dict(core["meta"])
    meta.update({"level": gen.get("level"), "steps": gen.get("steps"), "hops": gen.get("hops"),
                 "plan": {"lookups": lookups, "calc": calc, "clarify": bool(clar), "turns": turns,
                          "tool_hops": tool_hops},
                 "template_variant": variant, "space": p.space})
    return {
        "id": item_id, "task": task, "template": template.id, "role": template.role, "style": template.style,
        "messages": messages, "question": question, "answer": core["answer"], "aliases": core["aliases"],
        "supporting": core["supporting"], "corpus": core["corpus"],
        "needs_clarification": bool(clar), "hidden_detail": clar["hidden_detail"] if clar else None,
        "tools": list(p.tools), "max_turns": p.max_turns, "meta": meta,
    }
