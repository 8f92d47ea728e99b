"""Scripted judges for the test fault server (tests/rewards/conftest.py `FaultServer.responder`).

Each is a function of the chat-completion request body. A grading judge answers rc1's `grade` rubric
prompt (it reads "Reference answer:" and "Response:" from the user turn, as an outside judge would);
`logprob_judge` answers the `reference_match` method (grammar + logprobs) the way llama.cpp does.
"""

from __future__ import annotations

import hashlib
import json
import random
import re

from rc1.envs.answers import extract_final_answer

_REF = re.compile(r"^Reference answer: (.*)$", re.M)
_RESP = re.compile(r"^Response: (.*?)\nGrade \(0-10\):", re.S | re.M)


def _norm(s: str | None) -> str:
    return " ".join((s or "").lower().replace(".", " ").split())


def answer_is_right(body: dict) -> bool:
    """Does the graded response's final answer equal the reference answer? (read from the rubric prompt)"""
    user = body["messages"][-1]["content"]
    ref = _REF.search(user).group(1)
    resp = _RESP.search(user).group(1)
    return _norm(extract_final_answer(resp)) == _norm(ref)


def constant_judge(text: str = "7"):
    return lambda body: text


def random_judge(seed: int = 0):
    """A grade drawn at random for each (reference, response) pair: unrelated to correctness, and the same
    whatever order concurrent requests arrive in (a shared stream of draws made the verdict order-dependent)."""

    def judge(body):
        user = body["messages"][-1]["content"]
        pair = f"{seed}|{_REF.search(user).group(1)}|{_RESP.search(user).group(1)}"
        return str(random.Random(hashlib.sha256(pair.encode()).digest()).randint(0, 10))
    return judge


def honest_judge(body) -> str:
    return "9" if answer_is_right(body) else "1"


def inverted_judge(body) -> str:
    return "1" if answer_is_right(body) else "9"


def forced_text(body: dict) -> str:
    """The text a reference_match request's grammar forces (`root ::= "<literal>"`)."""
    grammar = body["grammar"]  # the openai client sends extra_body keys at the top level
    return json.loads(grammar.split("::=", 1)[1].strip())


def logprob_judge(body):
    """Like llama.cpp for method reference_match: writes what the grammar forces, with token logprobs that
    are high when the forced answer repeats the reference and low when it does not."""
    text = forced_text(body)
    ref = _REF.search(body["messages"][-1]["content"]).group(1)
    prefix, answer = text[:len("The answer is ")], text[len("The answer is "):]
    lp = -0.1 if _norm(answer) == _norm(ref) else -4.0
    return text, [(prefix, -0.5), *((w, lp) for w in re.findall(r"\S+\s*", answer))]


_DIMS_ASKED = re.compile(r"^([a-z_]+): <0-10>$", re.M)


def rubric_judge(spread: int = 0, unstable_on: tuple[str, ...] = ()):
    """A deterministic judge of rc1's rubric-dimensions prompt: each asked dimension's grade is a hash of the
    user turn (the response) and the dimension; sample k (its `seed`) adds `spread * (k mod 3 - 1)`, clipped to
    0-10. Responses whose user turn contains a text of `unstable_on` get grades 0 / 10 / 5 by sample."""
    import hashlib

    def judge(body):
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        dims = _DIMS_ASKED.findall(system)
        k = int(body.get("seed", 1000)) - 1000
        lines = []
        for d in dims:
            g = int(hashlib.sha256(f"{d}|{user}".encode()).hexdigest(), 16) % 11
            g = min(10, max(0, g + spread * (k % 3 - 1)))
            if any(text in user for text in unstable_on):
                g = (0, 10, 5)[k % 3]
            lines.append(f"{d}: {g}")
        return "\n".join(lines)
    return judge
