"""The difficulty ladder: numbered levels per built-in task, set by the generator, from below today's
"easy" to today's "hard" and above.

Every level is a generator setting, not a label put on afterwards; an item records its level as a
number (`meta.level_n`) and keeps the easy / medium / hard bucket (`meta.level`) the existing metrics
and gates read. The lowest levels are plain single-turn items (no protocol, no tools: the question
and a one-line reply instruction), which is what a small model can answer; the upper levels are the
generators' multi-turn, tool-using items of today.

=====  ==========================================  =========================================  ======
task   level                                       how                                        bucket
=====  ==========================================  =========================================  ======
gsm8k  0  1 operation, bare numbers below 20       "What is 7 + 5?", single turn              easy
gsm8k  1  1 operation, numbers below 20            a one-step story, single turn              easy
gsm8k  2  1 operation, two-digit numbers            a one-step story, single turn              easy
gsm8k  3  2 operations, numbers below 20            add / subtract chain, single turn          easy
gsm8k  4  3 operations, numbers below 20            add / subtract chain, single turn          medium
gsm8k  5  today's easy   (1-2 steps, tools)         rc1.data.generators, protocol              easy
gsm8k  6  today's medium (2-3 steps)                                                           medium
gsm8k  7  today's hard   (4-7 steps, x / % / pack)                                             hard
hotpo  0  1 hop, one short paragraph                the answer sentence and one other          easy
hotpo  1  1 hop among 2-3 distractor paragraphs                                                easy
hotpo  2  2 hops, both pages shown, distractors     single turn                                medium
hotpo  3  today's easy   (2 hops, tools)                                                       easy
hotpo  4  today's medium (2 hops, pages looked up)                                             medium
hotpo  5  today's hard   (3 hops)                                                              hard
strat  0  the deciding fact stated in the context   a stated comparison, asked either way      easy
strat  1  the deciding fact among distractors                                                  easy
strat  2  implied by two stated facts (numbers)     compare two values                         medium
strat  3  today's easy   (one fact looked up)                                                  easy
strat  4  today's medium                                                                       medium
strat  5  today's hard                                                                         hard
=====  ==========================================  =========================================  ======

A hint (QuestA) is a prefix of the gold solution shown with the question (`with_hint`): the share
of the solution shown shrinks as training goes on; the fit can choose the hinted lowest level of a
task when even the lowest level is out of reach.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from rc1.data import generators as G
from rc1.data import vocab as V

LADDER_VERSION = "ladder-v1"


@dataclass(frozen=True)
class Level:
    n: int
    name: str
    bucket: str            # easy / medium / hard: the seeds' buckets the existing gates and metrics read
    generator_level: str | None = None   # today's generator level for the protocol rungs, else None (plain)


LADDER: dict[str, tuple[Level, ...]] = {
    "gsm8k": (Level(0, "1 op, bare numbers < 20", "easy"), Level(1, "1 op, numbers < 20", "easy"),
              Level(2, "1 op, two-digit", "easy"), Level(3, "2 ops, numbers < 20", "easy"),
              Level(4, "3 ops, numbers < 20", "medium"), Level(5, "1-2 steps, tools", "easy", "easy"),
              Level(6, "2-3 steps, tools", "medium", "medium"), Level(7, "4-7 steps, tools", "hard", "hard")),
    "hotpotqa": (Level(0, "1 hop, one paragraph", "easy"), Level(1, "1 hop, distractors", "easy"),
                 Level(2, "2 hops shown, distractors", "medium"), Level(3, "2 hops, tools", "easy", "easy"),
                 Level(4, "2 hops, lookups", "medium", "medium"), Level(5, "3 hops, lookups", "hard", "hard")),
    "strategyqa": (Level(0, "fact stated", "easy"), Level(1, "fact among distractors", "easy"),
                   Level(2, "two facts to compare", "medium"), Level(3, "one fact looked up", "easy", "easy"),
                   Level(4, "medium, tools", "medium", "medium"), Level(5, "hard, tools", "hard", "hard")),
}

REPLY = {"gsm8k": "Reply with only the final number.",
         "hotpotqa": "Reply with only the answer, a name, place or year.",
         "strategyqa": "Reply with only yes or no."}


def levels(task: str) -> tuple[Level, ...]:
    return LADDER[task]


def level(task: str, n: int) -> Level:
    for lv in LADDER[task]:
        if lv.n == n:
            return lv
    raise KeyError(f"{task} has no level {n}; levels: {[lv.n for lv in LADDER[task]]}")


def is_plain(task: str, n: int) -> bool:
    """A single-turn rung (the question and a reply instruction, no protocol and no tools)."""
    return level(task, n).generator_level is None


# ============================================================================ plain rungs
def _arith(rng: random.Random, ops: int, lo: int, hi: int) -> dict:
    """An add/subtract story of `ops` operations on numbers in [lo, hi] (never below zero)."""
    name = rng.choice(V.FIRST_NAMES)
    obj, _ = rng.choice(V.OBJECTS)
    value = rng.randint(lo, hi)
    story = [rng.choice([f"{name} has {value} {obj}.", f"There are {value} {obj} in {name}'s bag.",
                         f"{name} starts with {value} {obj}."])]
    lines = []
    for _ in range(ops):
        if value <= 1 or rng.random() < 0.5:
            n = rng.randint(lo, hi)
            _, past = rng.choice(V.ACQUIRE)
            story.append(rng.choice([f"Then {name} {past} {n} more.", f"{name} {past} {n} more {obj}."]))
            lines.append(f"{value} + {n} = {value + n}")
            value += n
        else:
            top = min(hi, value - 1)
            n = rng.randint(1, top) if top < lo else rng.randint(lo, top)
            _, past = rng.choice(V.RELEASE)
            story.append(rng.choice([f"Then {name} {past} {n} of them.", f"{name} {past} {n} {obj}."]))
            lines.append(f"{value} - {n} = {value - n}")
            value -= n
    ask = rng.choice([f"How many {obj} does {name} have now?", f"How many {obj} are left?",
                      f"How many {obj} does {name} end up with?"])
    return {"question": " ".join(story + [ask]), "answer": "\n".join(lines) + f"\n#### {value}"}


def _bare(rng: random.Random, lo: int, hi: int) -> dict:
    """One operation on bare numbers: "What is 7 + 5?" (never below zero)."""
    a, b = rng.randint(lo, hi), rng.randint(lo, hi)
    if rng.random() < 0.5:
        line, q = f"{a} + {b} = {a + b}", rng.choice([f"What is {a} + {b}?", f"Compute {a} + {b}.", f"Add {a} and {b}."])
        value = a + b
    else:
        a, b = max(a, b), min(a, b)
        line, q = f"{a} - {b} = {a - b}", rng.choice([f"What is {a} - {b}?", f"Compute {a} - {b}.",
                                                       f"Subtract {b} from {a}."])
        value = a - b
    return {"question": q, "answer": f"{line}\n#### {value}"}


_PAGE_OTHER = ("It is known for its {color} {material} front.", "It holds about {k} {genre}.",
               "Its {color} gate was added in {y}.")


def _filler(rng: random.Random) -> str:
    return rng.choice(_PAGE_OTHER).format(color=rng.choice(V.COLORS), material=rng.choice(V.MATERIALS),
                                          k=rng.randint(2, 90) * 100, genre=rng.choice(V.GENRES),
                                          y=rng.randint(1700, 2010))


def _distractor_page(rng: random.Random) -> tuple[str, list[str]]:
    if rng.random() < 0.5:
        p = V.person(rng)
        return p, [f"{p} was born in {V.place(rng)} in {rng.randint(1600, 1990)}.",
                   f"{p.split()[0]} worked as a {rng.choice(V.PROFESSIONS)}."]
    o = V.org(rng)
    return o, [f"The {o} was founded by {V.person(rng)} in {rng.randint(1650, 2000)}.", _filler(rng)]


def _hotpot_plain(rng: random.Random, n: int) -> dict:
    founder, org, town, ctry = V.person(rng), V.org(rng), V.place(rng), V.country(rng)
    fyear, byear = rng.randint(1700, 1990), rng.randint(1620, 1940)
    if n <= 1:  # one hop: the answer is in one sentence of one page
        kind = rng.choice(("founder", "year", "birthplace"))
        if kind == "founder":
            title, page = org, [f"The {org} was founded by {founder} in {fyear}.", _filler(rng)]
            q, a = rng.choice([f"Who founded the {org}?", f"Who was the founder of the {org}?"]), founder
        elif kind == "year":
            title, page = org, [f"The {org} was founded by {founder} in {fyear}.", _filler(rng)]
            q, a = rng.choice([f"In which year was the {org} founded?", f"When was the {org} founded?"]), str(fyear)
        else:
            title = founder
            page = [f"{founder} was born in {town} in {byear}.",
                    f"{founder.split()[0]} worked as a {rng.choice(V.PROFESSIONS)}."]
            q, a = rng.choice([f"In which town was {founder} born?", f"Where was {founder} born?"]), town
        pages = [(title, page)] + [_distractor_page(rng) for _ in range(0 if n == 0 else rng.randint(2, 3))]
        supporting = [page[0]]
    else:  # two hops, both pages shown
        f_org = (org, [f"The {org} was founded by {founder} in {fyear}.", _filler(rng)])
        f_person = (founder, [f"{founder} was born in {town} in {byear}."])
        if rng.random() < 0.5:
            f_town = (town, [f"{town} is a town in {ctry}."])
            q, a = f"The {org} was founded by a person born in which town?", town
            pages, supporting = [f_org, f_person, f_town], [f_org[1][0], f_person[1][0]]
        else:
            q, a = f"In which year was the founder of the {org} born?", str(byear)
            pages, supporting = [f_org, f_person], [f_org[1][0], f_person[1][0]]
        pages += [_distractor_page(rng) for _ in range(rng.randint(1, 2))]
    rng.shuffle(pages)
    return {"question": q, "answer": a, "context": pages, "supporting": supporting}


def _relation(rng: random.Random) -> tuple[str, str, str, list[str]]:
    """(stated fact, question asked the same way, the question reversed, the numeric facts behind it)."""
    kind = rng.choice(("lifespan", "founding", "size"))
    region = V.place(rng)
    if kind == "lifespan":
        a, b = rng.sample(G._CREATURES, 2)
        la, lb = rng.sample(range(3, 80), 2)
        if la < lb:
            a, b, la, lb = b, a, lb, la
        return (f"The {region} {a} lives longer than the {b}.", f"Does the {region} {a} live longer than the {b}?",
                f"Does the {b} live longer than the {region} {a}?",
                [f"The {region} {a} lives about {la} years.", f"The {b} lives about {lb} years."])
    if kind == "founding":
        o1, o2 = V.org(rng), V.org(rng)
        y1, y2 = sorted(rng.sample(range(1500, 2000), 2))
        return (f"The {o1} was founded before the {o2}.", f"Was the {o1} founded before the {o2}?",
                f"Was the {o2} founded before the {o1}?",
                [f"The {o1} was founded in {y1}.", f"The {o2} was founded in {y2}."])
    obj = rng.choice(V.OBJECTS)[0]
    o = V.org(rng)
    w, d = sorted(rng.sample(range(40, 400), 2))
    return (f"A crate of {obj} from {region} is narrower than the main door of the {o}.",
            f"Is a crate of {obj} from {region} narrower than the main door of the {o}?",
            f"Is the main door of the {o} narrower than a crate of {obj} from {region}?",
            [f"A crate of {obj} from {region} is {w} cm wide.", f"The main door of the {o} is {d} cm wide."])


def _strategy_plain(rng: random.Random, n: int) -> dict:
    fact, same, reverse, numeric = _relation(rng)
    yes = rng.random() < 0.5
    question = same if yes else reverse
    if n == 2:  # implied only by two facts: compare their values
        facts = list(numeric)
        rng.shuffle(facts)
    else:
        facts = [fact]
        if n == 1:
            facts += [_relation(rng)[0] for _ in range(2)] + [rng.choice(_distractor_page(rng)[1])]
            rng.shuffle(facts)
    return {"question": question, "answer": yes, "facts": facts, "supporting": [fact] if n < 2 else list(numeric)}


def plain_item_text(task: str, rec: dict) -> str:
    """The user message of a plain rung: context (if any), the question, the reply instruction."""
    if task == "hotpotqa":
        ctx = "\n".join(f"[{t}] {' '.join(s)}" for t, s in rec["context"])
        return f"{ctx}\n\nQuestion: {rec['question']}\n{REPLY[task]}"
    if task == "strategyqa":
        return f"{' '.join(rec['facts'])}\n\nQuestion: {rec['question']}\n{REPLY[task]}"
    return f"{rec['question']}\n{REPLY[task]}"


def generate_plain(task: str, n: int, rng: random.Random) -> dict:
    """A plain rung's record: {question, answer, supporting, corpus, steps, hops, text}."""
    if task == "gsm8k":
        ops, lo, hi = {0: (1, 1, 19), 1: (1, 1, 19), 2: (1, 10, 99), 3: (2, 1, 19), 4: (3, 1, 19)}[n]
        rec = _bare(rng, lo, hi) if n == 0 else _arith(rng, ops, lo, hi)
        lines = rec["answer"].split("\n")[:-1]
        return {"question": rec["question"], "answer": rec["answer"].rsplit("#### ", 1)[1], "supporting": lines,
                "corpus": [], "steps": ops, "hops": 0, "text": plain_item_text(task, rec),
                "solution": lines}
    if task == "hotpotqa":
        rec = _hotpot_plain(rng, n)
        corpus = [{"title": t, "text": " ".join(s)} for t, s in rec["context"]]
        return {"question": rec["question"], "answer": rec["answer"], "supporting": rec["supporting"],
                "corpus": corpus, "steps": 0, "hops": 1 if n <= 1 else 2, "text": plain_item_text(task, rec),
                "solution": rec["supporting"]}
    rec = _strategy_plain(rng, n)
    corpus = [{"title": f"fact ({i + 1})", "text": f} for i, f in enumerate(rec["facts"])]
    return {"question": rec["question"], "answer": "yes" if rec["answer"] else "no", "supporting": rec["supporting"],
            "corpus": corpus, "steps": 1, "hops": 1 if n < 2 else 2, "text": plain_item_text(task, rec),
            "solution": rec["supporting"]}


def with_hint(item: dict, share: float) -> dict:
    """The item with a prefix of its gold solution shown (QuestA): the first ceil(share x lines) lines of
    the solution, never its last line (which states the answer). share 0 returns the item unchanged."""
    lines = list((item.get("meta") or {}).get("solution") or [])
    k = min(len(lines) - 1, int(-(-share * len(lines) // 1))) if lines else 0
    if share <= 0 or k <= 0:
        return item
    hint = "Hint: " + " ".join(lines[:k])
    msgs = [dict(m) for m in item["messages"]]
    last = msgs[-1]
    last["content"] = f"{last['content']}\n{hint}"
    return dict(item, messages=msgs, meta=dict(item.get("meta") or {}, hint_share=share, hint_lines=k))
