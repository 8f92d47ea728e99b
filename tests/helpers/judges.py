"""Scripted judges for the test fault server (tests/rewards/conftest.py `FaultServer.responder`).

Each is a function of the chat-completion request body. A grading judge answers rc1's `grade` rubric
prompt (it reads "Reference answer:" and "Response:" from the user turn, as an outside judge would);
`logprob_judge` answers the `reference_match` method (grammar + logprobs) the way llama.cpp does.
"""

from __future__ import annotations

import json
import random
import re
import threading

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
    rng, lock = random.Random(seed), threading.Lock()

    def judge(body):
        with lock:
            return str(rng.randint(0, 10))
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
