"""Offline task generators: records in the real source formats, with gold answers.

* `gen_gsm8k`  - multi-step arithmetic word problems, GSM8K format (`question`, `answer` ending `#### N`).
* `gen_hotpotqa` - multi-hop questions over a generated encyclopedia, HotpotQA format (`question`,
  `answer`, `supporting_facts` [[title, sent_idx]], `context` [[title, [sentences]]], `type`, `level`).
* `gen_strategyqa` - yes/no questions composed from facts, StrategyQA format (`question`, `answer`
  bool, `facts`, `decomposition`).

Difficulty is designed in, not labelled after the fact: harder items have more steps/hops,
more entities and distractors, more connectives and pronouns, and supporting text that is
paraphrased away from the question (low clue overlap). Every generator also returns a
clarification variant (the question with one needed detail removed, and the sentence that
gives it back) so the pool builder can make clarify items.

Everything is a pure function of the `random.Random` passed in: same seed, same record.
"""

from __future__ import annotations

import random

from rc1.data import vocab as V
from rc1.data.text import jaccard, ngram_set

LEVELS = ("easy", "medium", "hard")
# clue-overlap band each level aims for (3-gram Jaccard of question vs supporting text)
# below this an item gives the solver almost nothing to match (the round 1 table's hard minimum is 0.10)
FLOOR = 0.115
OVERLAP_BAND = {"easy": (0.44, 0.62), "medium": (0.18, 0.40), "hard": (0.115, 0.19)}


def tune_support(question: str, pieces: list[tuple[str, str]], level: str, rng: random.Random,
                 fixed: list[str] = ()) -> list[str]:
    """Pick, per supporting fact, its literal or paraphrased wording so that the question/support
    overlap lands in the level's band. Falls back to the closest it can get (measured honestly later)."""
    lo, hi = OVERLAP_BAND[level]
    q = ngram_set(question, 3)
    # per-sentence 3-gram sets (trigrams across sentence boundaries are ignored while tuning;
    # generate() re-measures the joined text)
    base = set().union(*(ngram_set(f, 3) for f in fixed)) if fixed else set()
    sets = [(ngram_set(a, 3), ngram_set(b, 3)) for a, b in pieces]
    choice = [1] * len(pieces)  # 1 = paraphrase, 0 = literal

    def overlap() -> float:
        u = base.union(*(st[c] for st, c in zip(sets, choice)))
        inter = len(q & u)
        return inter / (len(q) + len(u) - inter) if (q or u) else 0.0

    target = (lo + hi) / 2
    cur = overlap()
    best, best_choice = cur, list(choice)
    order = list(range(len(pieces)))
    rng.shuffle(order)
    for i in order:
        if lo <= cur <= hi:
            break
        if cur < lo:
            choice[i] = 0
            new = overlap()
            if new > hi:
                choice[i] = 1
            else:
                cur = new
        if abs(cur - target) < abs(best - target):
            best, best_choice = cur, list(choice)
    if not (lo <= cur <= hi):
        choice = best_choice
    return list(fixed) + [p[c] for p, c in zip(pieces, choice)]


def pick_level(rng: random.Random, weights=(0.30, 0.40, 0.30)) -> str:
    return rng.choices(LEVELS, weights=weights)[0]


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


# ============================================================================ GSM8K
def gen_gsm8k(rng: random.Random, level: str) -> dict:
    name = rng.choice(V.FIRST_NAMES)
    friend = rng.choice([n for n in V.FIRST_NAMES if n != name])
    obj, box = rng.choice(V.OBJECTS)
    room, town = rng.choice(V.ROOMS), V.place(rng)
    she = rng.choice(("she", "he", "they"))
    have = "have" if she == "they" else "has"
    steps = {"easy": rng.randint(1, 2), "medium": rng.randint(2, 3), "hard": rng.randint(4, 7)}[level]
    ops_pool = {"easy": ["add", "sub"], "medium": ["add", "sub", "add", "sub", "mul"],
                "hard": ["add", "sub", "mul", "pack", "div", "pct", "share"]}[level]
    value = rng.randint(5, 60) if level != "hard" else rng.randint(20, 240)
    opening = rng.choice([
        f"{name} {have if she != 'they' else 'has'} {value} {obj} at the {room} in {town}.",
        f"At the {room} in {town}, {name} keeps {value} {obj}.",
        f"{name} started the week with {value} {obj} stored in the {room}.",
        f"There are {value} {obj} in {name}'s {room} near {town}.",
        f"{name} runs a small {room} in {town} and counts {value} {obj} on the shelves.",
    ])
    story_start = value
    story, pieces, calc_lines, ops = [opening], [], [], 0
    pieces.append((opening if level != "hard" else f"{name} starts with {value} {obj} at the {room}.",
                   f"Initial amount: {value}."))
    connect = ["Then", "After that", "Later", "Next", "Afterwards", "Soon after", "Because business was slow",
               "Once the delivery arrived", "Meanwhile", "Since the shelves were full"]
    clar = None
    for k in range(steps):
        op = rng.choice(ops_pool)
        if value < 4 and op not in ("add", "mul", "pack"):
            op = "add"  # keep every intermediate amount positive
        when = rng.choice(V.TIME_WORDS)
        lead = rng.choice(connect) + ", " if level == "hard" else (rng.choice(connect) + " " if level == "medium" and rng.random() < .5 else "")
        subj = she if (level != "easy" and rng.random() < 0.7) else name
        if op == "add":
            n = rng.randint(2, 40)
            pres, past = rng.choice(V.ACQUIRE)
            sent = f"{lead}{when} {subj} {past} {n} more {obj}."
            new = value + n
            lit, para = (f"{_cap(subj)} {past} {n} more {obj}, so {value} + {n} = {new}.", f"{value} + {n} = {new}.")
            ops += 1
        elif op == "sub" or (op in ("pct", "div", "share") and value < 4):
            n = rng.randint(1, max(1, value - 1))
            pres, past = rng.choice(V.RELEASE)
            sent = f"{lead}{when} {subj} {past} {n} of the {obj}."
            new = value - n
            lit, para = (f"{_cap(subj)} {past} {n} of the {obj}, so {value} - {n} = {new}.", f"{value} - {n} = {new}.")
            ops += 1
        elif op == "mul":
            m = rng.choice((2, 3, 4))
            word = {2: "doubles", 3: "triples", 4: "quadruples"}[m]
            sent = f"{lead}{when} the number of {obj} {word} because {friend} sends a matching shipment."
            new = value * m
            lit, para = (f"The number of {obj} {word}, so {value} x {m} = {new}.", f"{value} x {m} = {new}.")
            ops += 1
        elif op == "pack":
            c, per = rng.randint(2, 9), rng.randint(3, 12)
            sent = f"{lead}{when} {friend} delivers {c} {box} with {per} {obj} in each."
            new = value + c * per
            lit, para = (f"{friend} delivers {c} {box} with {per} {obj} in each, so {c} x {per} = {c * per} and "
                         f"{value} + {c * per} = {new}.", f"{c} x {per} = {c * per}; {value} + {c * per} = {new}.")
            ops += 2
        elif op == "div":
            divisors = [d for d in (2, 3, 4, 5, 6) if value % d == 0]
            if not divisors:
                n = value % 2 or 1
                sent = f"{lead}{when} {subj} {rng.choice(V.RELEASE)[1]} {n} of the {obj}."
                new = value - n
                lit, para = (f"{_cap(subj)} removes {n}, so {value} - {n} = {new}.", f"{value} - {n} = {new}.")
                ops += 1
            else:
                d = rng.choice(divisors)
                sent = f"{lead}{when} {subj} splits the {obj} equally into {d} {box} and keeps only one of them."
                new = value // d
                lit, para = (f"{_cap(subj)} splits the {obj} equally into {d} {box}, so {value} / {d} = {new}.",
                             f"{value} / {d} = {new}.")
                ops += 1
        elif op == "pct":
            pct = rng.choice([p for p in (10, 20, 25, 50, 75) if value * p % 100 == 0] or [50 if value % 2 == 0 else 0])
            if pct == 0:
                n = 1
                sent = f"{lead}{when} {subj} {rng.choice(V.RELEASE)[1]} one of the {obj}."
                new = value - 1
                lit, para = (f"{_cap(subj)} loses one, so {value} - 1 = {new}.", f"{value} - 1 = {new}.")
                ops += 1
            else:
                n = value * pct // 100
                pres, past = rng.choice(V.RELEASE)
                sent = f"{lead}{when} {subj} {past} {pct}% of the {obj}."
                new = value - n
                lit, para = (f"{_cap(subj)} {past} {pct}% of the {obj}: {pct}% of {value} = {n}, and "
                             f"{value} - {n} = {new}.", f"{pct}% of {value} is {n}; {value} - {n} = {new}.")
                ops += 2
        else:  # share: give each of k friends m items
            k_, m_ = rng.randint(2, 5), rng.randint(1, max(1, value // 6))
            if k_ * m_ >= value:
                k_, m_ = 1, 1
            sent = f"{lead}{when} {subj} {'give' if subj == 'they' else 'gives'} {m_} {obj} to each of {k_} neighbours."
            new = value - k_ * m_
            lit, para = (f"{_cap(subj)} gives {m_} {obj} to each of {k_} neighbours, so {k_} x {m_} = {k_ * m_} "
                         f"and {value} - {k_ * m_} = {new}.", f"{k_} x {m_} = {k_ * m_}; {value} - {k_ * m_} = {new}.")
            ops += 2
        # a clarification hides the first number introduced by a step
        if clar is None and op in ("add", "sub"):
            num = str(n)
            masked = sent.replace(f" {num} ", " some ", 1)
            if masked != sent:
                clar = {"index": len(story), "masked": masked, "detail": sent}
        story.append(sent[0].upper() + sent[1:])
        calc_lines.append(para)
        eq = para.split("; ")[-1].rstrip(".") if "=" in para else para
        pieces.append((story[-1].rstrip(".") + f", so {eq}." if level != "hard" else lit, para))
        value = new
    ask = rng.choice([f"How many {obj} does {name} have now?", f"How many {obj} are left with {name} at the end?",
                      f"What is the final number of {obj} that {name} has?",
                      f"Count the {obj} {name} ends up with: how many are there?",
                      f"After all of this, how many {obj} remain in the {room}?"])
    question = " ".join(story + [ask])
    support = tune_support(question, pieces, level, rng)
    answer_text = "\n".join(support) + f"\n#### {value}"
    record = {"question": question, "answer": answer_text}
    if clar is None:
        masked = opening.replace(f" {story_start} ", " some ", 1)
        if masked != opening:
            clar = {"index": 0, "masked": masked, "detail": opening}
    clar_out = None
    if clar is not None:
        masked_story = list(story)
        masked_story[clar["index"]] = clar["masked"][0].upper() + clar["masked"][1:]
        clar_out = {"question": " ".join(masked_story + [ask]),
                    "hidden_detail": clar["detail"][0].upper() + clar["detail"][1:]}
    return {"source": record, "level": level, "steps": ops, "entities": [name, friend, town],
            "clarify": clar_out}


# ============================================================================ HotpotQA
def gen_hotpotqa(rng: random.Random, level: str) -> dict:
    founder, prof, town, ctry = V.person(rng), rng.choice(V.PROFESSIONS), V.place(rng), V.country(rng)
    byear = rng.randint(1620, 1960)
    orgname = V.org(rng)
    fyear = byear + rng.randint(22, 60)
    otown = V.place(rng)
    ents = [founder, town, ctry, orgname, otown]
    qtype = "comparison" if rng.random() < 0.3 else "bridge"
    hops = {"easy": 2, "medium": 2, "hard": 3}[level]
    kind = orgname.split()[-1].lower()
    # each supporting fact: (doc title, literal wording, paraphrased wording, other sentences of the doc)
    f_org = (orgname, f"The {orgname} was founded by {founder} in {fyear}.",
             rng.choice([f"In {fyear}, {founder} set up what is now the {orgname}, in {otown}.",
                         f"Located in {otown}, this {kind} owes its existence to {founder}, who started it in {fyear}."]),
             [rng.choice([f"{V.pick(rng, 'its main building is made of').capitalize()} {rng.choice(V.MATERIALS)} "
                          f"{V.pick(rng, 'and painted')} {rng.choice(V.COLORS)}.",
                          f"{V.pick(rng, 'it holds about').capitalize()} {rng.randint(2, 90) * 100} {V.pick(rng, 'items')}.",
                          f"{V.pick(rng, 'it was restored in').capitalize()} {fyear + rng.randint(40, 120)}."])])
    f_person = (founder, f"{founder} was born in {town} in {byear}.",
                rng.choice([f"A {prof} by training, {founder} came into the world at {town} ({byear}).",
                            f"{founder}'s birthplace, {town}, also gave its name to a {rng.choice(V.GENRES)} collection; "
                            f"the year was {byear}."]),
                [(founder, byear)])
    f_town = (town, f"{town} is a town in {ctry}.",
              rng.choice([f"Administratively, {town} belongs to {ctry}.", f"{ctry} counts {town} among its market towns."]),
              [f"{V.pick(rng, 'it had about').capitalize()} {rng.randint(3, 900) * 100} {V.pick(rng, 'inhabitants in')} "
               f"{rng.randint(1850, 2020)}."])
    if qtype == "bridge":
        if hops == 2:
            answer, facts = town, [f_org, f_person]
            qs = {"easy": [f"The {orgname} was founded by {founder} in {fyear}, and {founder} was born in which town?",
                           f"The {orgname} was founded by {founder} in {fyear}; {V.pick(rng, 'in which town')} "
                           f"was {founder} born?"],
                  "medium": [f"The {orgname} was founded by {founder} in {fyear}. {V.pick(rng, 'where was').capitalize()} "
                             f"{V.pick(rng, 'that person')} born?",
                             f"The {orgname} was founded by {founder}; {V.pick(rng, 'in which town')} was {founder} "
                             f"born?"]}[level]
        else:
            answer, facts = ctry, [f_org, f_person, f_town]
            P = lambda k: V.pick(rng, k)  # noqa: E731
            qs = [f"The {orgname} was founded by {P('someone')}, and {P('that person')} "
                  f"{P('was born in a town')}; {P('because every town is a town in some country')}, "
                  f"{P('which country is it?')}",
                  f"The {orgname} was founded by {P('someone')}. {P('then think of').capitalize()} "
                  f"{P('the town where they were born')}. {P('which country is that town in?').capitalize()}",
                  f"The {orgname} was founded by a {prof} who {P('was born in a town')}: "
                  f"{P('which country is that town in?')}"]
    else:
        rival, ryear = V.person(rng), byear + rng.choice([-1, 1]) * rng.randint(1, 60)
        rprof, rtown = rng.choice(V.PROFESSIONS), V.place(rng)
        ents += [rival, rtown]
        f_rival = (rival, f"{rival} was born in {rtown} in {ryear}.",
                   rng.choice([f"A {rprof} by training, {rival} came into the world at {rtown} ({ryear}).",
                               f"Records from {rtown} list {rival} among the children christened in {ryear}."]),
                   [(rival, ryear)])
        answer = founder if byear < ryear else rival
        if hops == 2:
            facts = [f_person, f_rival]
            qs = {"easy": [f"{founder} was born in {town} in {byear}, and {rival} was born in {rtown}; who was born first?",
                           f"{rival} was born in {rtown} in {ryear}, and {founder} was born in {town}; which of the two "
                           f"{V.pick(rng, 'was born first')}?"],
                  "medium": [f"{founder} was born in {town} and {rival} was born in {rtown}; "
                             f"{V.pick(rng, 'who was born first')}?",
                             f"{rival} was born in {rtown}, {founder} in {town}: {V.pick(rng, 'who was born first')}?"]}[level]
        else:
            facts = [f_org, f_person, f_rival]
            P = lambda k: V.pick(rng, k)  # noqa: E731
            qs = [f"The {orgname} was founded by {P('someone')}; was {P('that person')} born before {rival} "
                  f"was born, {P('or was it the other way round?')} {P('name whoever was born first').capitalize()}.",
                  f"The {orgname} was founded by {P('someone')}. {P('compare the birth years of').capitalize()} "
                  f"{rival} and {P('that person')}, then say {P('which of them came first')}."]
    question = rng.choice(qs)
    chosen = tune_support(question, [(lit, para) for _, lit, para, _ in facts], level, rng)
    support_docs = [(title, [sent] + (rest if isinstance(rest[0], str) else [])) for (title, _, _, rest), sent
                    in zip(facts, chosen)]
    later = [(k, rest[0]) for k, (_, _, _, rest) in enumerate(facts) if not isinstance(rest[0], str)]
    context = [[t, s] for t, s in support_docs]
    sf = [[title, 0] for title, _ in support_docs]
    record = {"_id": None, "question": question, "answer": answer, "type": qtype, "level": level,
              "supporting_facts": sf, "context": context}  # distractors are added by add_distractors()
    # clarification. If the question names the institution but not its founder, the encyclopedia gets a
    # namesake (same name, another town, another founder born elsewhere): the question is ambiguous until
    # the user says which one. Otherwise the name the question hinges on is left out.
    clar = None
    if orgname in question and founder not in question:
        twin_town, twin_founder = V.place(rng), V.person(rng)
        twin_year = fyear + rng.choice([-1, 1]) * rng.randint(3, 40)
        twin_pages = [[f"{orgname} ({twin_town})", [f"The {orgname} in {twin_town} was founded by {twin_founder} in "
                                                    f"{twin_year}."]],
                      [twin_founder, [f"{twin_founder} was born in {V.place(rng)} in {twin_year - rng.randint(25, 60)}."]]]
        clar = {"question": question, "hidden_detail": rng.choice([f"I mean the {orgname} in {otown}.",
                                                                  f"The one in {otown}.",
                                                                  f"It is the {orgname} located in {otown}."]),
                "rename": {orgname: f"{orgname} ({otown})"}, "extra_pages": twin_pages}
    else:
        for needle, vague, detail in (
                (founder, "a person I have in mind", f"The person is {founder}."),
                (rival if qtype == "comparison" else "\0", "another person I am thinking of",
                 f"The other person is {rival if qtype == 'comparison' else ''}.")):
            if needle in question:
                clar = {"question": question.replace(needle, vague), "hidden_detail": detail}
                break
    return {"source": record, "level": level, "steps": 0, "hops": hops, "entities": ents, "clarify": clar,
            "_person_pages": [(support_docs[k][0], name, year) for k, (name, year) in later]}


def add_distractors(rng: random.Random, out: dict) -> dict:
    """Distractor pages (people and institutions with the same kinds of facts), shuffled in with the support."""
    level = out["level"]
    context = out["source"]["context"]
    pages = dict((t, s) for t, s in context)
    for title, name, year in out.pop("_person_pages", []):
        pages[title].extend(_person_extra(rng, name, year, level, out["entities"]))
    for _ in range({"easy": rng.randint(1, 2), "medium": rng.randint(2, 4), "hard": rng.randint(5, 7)}[level]):
        if rng.random() < 0.5:
            dn, dy = V.person(rng), rng.randint(1600, 1990)
            sents = [rng.choice([f"{dn} {V.pick(rng, 'was born in')} {V.place(rng)} in {dy}.",
                                 f"{dn} (born {dy}) was a {rng.choice(V.PROFESSIONS)} from {V.place(rng)}.",
                                 f"{dn}, a {rng.choice(V.PROFESSIONS)}, {V.pick(rng, 'was born in')} {V.place(rng)} "
                                 f"around {dy}."])] + _person_extra(rng, dn, dy, "easy", [])
        else:
            dn = V.org(rng)
            sents = [rng.choice([f"The {dn} {V.pick(rng, 'was founded by')} {V.person(rng)} in {rng.randint(1650, 2000)}.",
                                 f"{V.person(rng)} opened the {dn} in {V.place(rng)} in {rng.randint(1650, 2000)}.",
                                 f"Since {rng.randint(1650, 2000)} the {dn} has stood in {V.place(rng)}."]),
                     rng.choice([f"{V.pick(rng, 'it is known for its').capitalize()} {rng.choice(V.COLORS)} "
                                 f"{rng.choice(V.MATERIALS)} {V.pick(rng, 'facade')}.",
                                 f"{V.pick(rng, 'it holds about').capitalize()} {rng.randint(2, 90) * 100} "
                                 f"{rng.choice(V.GENRES)} donated by {V.person(rng)}.",
                                 f"Its {rng.choice(V.COLORS)} {rng.choice(('tower', 'dome', 'gate', 'courtyard', 'roof', 'stair'))} "
                                 f"was added in {rng.randint(1700, 2010)} by the {rng.choice(V.PROFESSIONS)} {V.person(rng)}."])]
        context.append([dn, sents])
    rng.shuffle(context)
    return out


def _person_extra(rng: random.Random, name: str, year: int, level: str, entities: list) -> list[str]:
    first = name.split()[0]
    out = []
    for _ in range({"easy": 1, "medium": 1, "hard": 2}[level]):
        other = V.person(rng)
        entities.append(other)
        k = int(rng.random() * 4)
        if k == 0:
            out.append(f"{first} {V.pick(rng, 'studied under')} {other} {V.pick(rng, 'and later published')} "
                       f"{rng.randint(2, 40)} {rng.choice(V.GENRES)}.")
        elif k == 1:
            out.append(f"In {year + rng.randint(18, 40)}, {first} {V.pick(rng, 'moved to')} {V.place(rng)}, "
                       f"{V.pick(rng, rng.choice(('where he met', 'where she met')))} {other}.")
        elif k == 2:
            out.append(f"{V.pick(rng, 'critics often compare').capitalize()} {first}'s {rng.choice(V.GENRES)} "
                       f"{V.pick(rng, 'with those of')} {other}.")
        else:
            out.append(f"{first} {V.pick(rng, 'was elected to')} the {V.org(rng)} in {year + rng.randint(20, 50)}.")
    return out


# ============================================================================ StrategyQA
_CREATURES = """otter heron lynx tortoise parrot badger marmot ibex gecko salamander falcon wombat
tapir kestrel newt beaver stoat ferret crane pelican""".split()


def gen_strategyqa(rng: random.Random, level: str) -> dict:
    kind = rng.choice(("lifespan", "era", "size", "founding"))
    region = V.place(rng)
    P = lambda k: V.pick(rng, k)  # noqa: E731
    ents = [region]
    # facts: (literal, paraphrase); hard questions mention what a fact is about without its value. Each kind below
    # fills the same frame (two facts, questions per level, a decomposition) with its own wording and draws: alike
    # in shape by design, and a shared table would change the draws and so every generated pool
    if kind == "lifespan":
        a, b = rng.sample(_CREATURES, 2)
        la, lb = rng.randint(3, 80), rng.randint(3, 80)
        while la == lb:
            lb = rng.randint(3, 80)
        answer = la > lb
        facts = [(f"The {region} {a} lives about {la} years.", f"Specimens of the {region} {a} reach an age near {la}."),
                 (f"A {b} lives about {lb} years.", f"Records give the {b} a life expectancy close to {lb}.")]
        qs = {"easy": [f"Does the {region} {a} live longer than a {b}?"],
              "medium": [f"Would a {region} {a} usually outlive a {b} if both were born on the same day?",
                         f"Is a {b} likely to die before a {region} {a} when they hatch together and live a normal life?"],
              "hard": [f"The {region} {a} {P('lives about')} {P('as long as its kind usually does')}, and so does a "
                       f"{b}; {P('if both hatched on the same day')}, {P('would the')} {a} {P('still be alive when')} "
                       f"the {b} died?",
                       f"Since a {b} {P('lives about')} a typical span for its species, {P('would it die before')} the "
                       f"{region} {a} if the two started life together, {P('assuming neither meets an accident')}?"]}
        decomposition = [f"How long does the {region} {a} live?", f"How long does a {b} live?",
                         "Is #1 greater than #2?"]
        ents += [a, b]
    elif kind == "era":
        p = V.person(rng)
        o = V.org(rng)
        born = rng.randint(1600, 1930)
        died = born + rng.randint(30, 90)
        opened = born + rng.randint(-30, 120)
        answer = born + 5 <= opened <= died
        facts = [(f"{p} lived from {born} to {died}.", f"{p}'s life spanned the years {born} through {died}."),
                 (f"The {o} opened in {opened}.", f"Its doors first welcomed visitors in {opened}, as the {o} reports.")]
        qs = {"easy": [f"Could {p} have visited the {o} in the year it opened?"],
              "medium": [f"Could {p} have attended the opening of the {o} as an adult, and if so, was it before they died?",
                         f"Was {p} alive and grown up when the {o} opened, so that they could attend?"],
              "hard": [f"{p} {P('lived from one year to another')}, and the {o} {P('opened in some year')}; "
                       f"{P('would')} {p} {P('have been old enough')} {P('and still alive')} "
                       f"{P('to walk in on the day it opened')}?",
                       f"Had {p} {P('had wanted to see')[4:]} the {o} on the day the {o} opened, "
                       f"{P('would that have been possible')}, {P('given the years')} {p} lived?"]}
        decomposition = [f"When did {p} live?", f"When did the {o} open?", "Was #1 an adult at #2?"]
        ents += [p, o]
    elif kind == "size":
        obj = rng.choice(V.OBJECTS)[0]
        o = V.org(rng)
        width = rng.randint(40, 400)
        door = rng.randint(60, 300)
        while door == width:
            door = rng.randint(60, 300)
        answer = width < door
        facts = [(f"A crate of {obj} from {region} is {width} cm wide.",
                  f"Shippers measure {region} crates of {obj} at {width} centimetres across."),
                 (f"The main door of the {o} is {door} cm wide.", f"Its entrance, at the {o}, spans {door} centimetres.")]
        qs = {"easy": [f"Is a crate of {obj} from {region} narrower than the main door of the {o}?"],
              "medium": [f"Could a crate of {obj} from {region} pass through the main door of the {o} if it is carried flat?",
                         f"If the movers carry it straight, would a crate of {obj} from {region} pass through the main door of the {o}?"],
              "hard": [f"{P('movers want to carry').capitalize()} a crate of {obj} from {region} into the {o}; the "
                       f"main door of the {o} {P('is the only way in')}, {P('so would the crate fit through it')} "
                       f"{P('without tilting')}?",
                       f"If a crate of {obj} from {region} {P('had to go through')} the main door of the {o}, "
                       f"{P('and nothing else blocked the way')}, {P('would it get through')}?"]}
        decomposition = [f"How wide is a crate of {obj} from {region}?", f"How wide is the main door of the {o}?",
                         "Is #1 less than #2?"]
        ents += [o]
    else:
        o1, o2 = V.org(rng), V.org(rng)
        y1, y2 = rng.randint(1500, 2000), rng.randint(1500, 2000)
        while y1 == y2:
            y2 = rng.randint(1500, 2000)
        answer = y1 < y2
        facts = [(f"The {o1} was founded in {y1}.", f"Its charter dates the {o1} to {y1}."),
                 (f"The {o2} was founded in {y2}.", f"Historians place the start of the {o2} in {y2}.")]
        qs = {"easy": [f"Was the {o1} founded before the {o2}?"],
              "medium": [f"Is the {o1} older than the {o2}, and if so, by more than a year?",
                         f"Did the {o1} exist before the {o2} was founded, or did it come after?"],
              "hard": [f"The {o2} was founded in one year and the {o1} was founded in another; had the {o2} "
                       f"{P('had already been set up when')[4:]} the {o1} {P('began')}, {P('or is the')} {o1} "
                       f"{P('the older of the two')}?",
                       f"If {P('someone')} {P('toured')} the {o1} the year the {o1} was founded, "
                       f"{P('could they also have toured')} the {o2}, {P('which was founded in its own year')}?"]}
        decomposition = [f"When was the {o1} founded?", f"When was the {o2} founded?", "Is #1 before #2?"]
        ents += [o1, o2]
    extra = []
    if level != "easy":
        for _ in range({"medium": 1, "hard": 3}[level]):
            e = V.person(rng)
            ents.append(e)
            extra.append((f"{e} {V.pick(rng, 'wrote about')} {region} in {rng.randint(1700, 2020)}.",
                          f"{V.pick(rng, 'writings by').capitalize()} {e} {V.pick(rng, 'also mention the area around')} "
                          f"{region}."))
    question = rng.choice(qs[level])
    if level in ("easy", "medium"):  # easier items state one of the two facts in the question itself
        question = rng.choice(facts)[0] + " " + question
    chosen = tune_support(question, facts + extra, level, rng)
    if level == "hard":
        decomposition = decomposition[:-1] + ["Does anything in the facts change #1 or #2?", decomposition[-1]]
    record = {"qid": None, "term": ents[1] if len(ents) > 1 else region, "description": "generated",
              "question": question, "answer": bool(answer), "facts": chosen, "decomposition": decomposition}
    # clarification: leave out the name that pins the entity down
    clar = None
    target = ents[1] if kind in ("era", "founding") else region
    if target in question:
        vague = "a place I know" if target == region else ("someone I have in mind" if kind == "era" else "a place I have in mind")
        clar = {"question": question.replace(f"the {target}", vague).replace(target, vague),
                "hidden_detail": rng.choice([f"I mean {target}.", f"I am asking about {target}.",
                                             f"The one I mean is {target}."])}
    return {"source": record, "level": level, "steps": 1, "hops": 2, "entities": ents, "clarify": clar}


GENERATORS = {"gsm8k": gen_gsm8k, "hotpotqa": gen_hotpotqa, "strategyqa": gen_strategyqa}


def source_supporting(task: str, record: dict) -> list[str]:
    """The supporting text of a source-format record (what clue_overlap is measured against)."""
    if task == "gsm8k":
        return [ln for ln in record["answer"].split("\n") if not ln.startswith("####") and ln.strip()]
    if task == "strategyqa":
        return list(record.get("facts") or [])
    docs = {title: sents for title, sents in record["context"]}
    out = []
    for title, idx in record["supporting_facts"]:
        sents = docs.get(title) or []
        if 0 <= idx < len(sents):
            out.append(sents[idx])
    return out


def generate(task: str, rng: random.Random, level: str, attempts: int = 16, clarify: bool = False) -> dict:
    """Draw records until one lands in the level's clue-overlap band (keeps the closest otherwise).

    This is how difficulty is designed into the data: an easy item is one whose question echoes its
    supporting text, a hard one paraphrases it away. The metric itself is recomputed later, never copied.
    """
    lo, hi = OVERLAP_BAND[level]
    if clarify:  # a clarify item lacks a detail its support states: allow it less overlap, never below FLOOR
        lo = min(lo, FLOOR)
    mid = (lo + hi) / 2
    best, best_gap = None, None
    for _ in range(attempts):
        out = GENERATORS[task](rng, level)
        shown = out["clarify"]["question"] if (clarify and out["clarify"]) else out["source"]["question"]
        ov = jaccard(ngram_set(shown, 3),
                     ngram_set(" ".join(source_supporting(task, out["source"])), 3))
        if lo <= ov <= hi:
            return _finish(task, rng, out)
        gap = abs(ov - mid) + (1.0 if ov < FLOOR else 0.0)  # never prefer an item with almost no clue
        if best is None or gap < best_gap:
            best, best_gap = out, gap
    if clarify:  # masking moved every draw out of the band: draw an item that is not a clarify item
        out = generate(task, rng, level, attempts, clarify=False)
        out["clarify"] = None
        return out
    if best_gap >= 1.0:  # even the closest draw gives almost no clue: keep drawing until one does
        for _ in range(4 * attempts):
            out = GENERATORS[task](rng, level)
            ov = jaccard(ngram_set(out["source"]["question"], 3),
                         ngram_set(" ".join(source_supporting(task, out["source"])), 3))
            if ov >= FLOOR:
                return _finish(task, rng, out)
    return _finish(task, rng, best)


def _finish(task: str, rng: random.Random, out: dict) -> dict:
    return add_distractors(rng, out) if task == "hotpotqa" else out
