"""Verifiers: did the model's final answer match the gold answer?

Named verifiers (`VERIFIERS`), each `fn(prediction, gold, aliases) -> Verdict`:
- numeric: numeric match ("#### 1,234", "$12.50", "12.0" == "12", last number as a fallback). GSM8K.
- exact: normalised exact match (SQuAD normalization: lowercase, no punctuation/articles).
- f1: solved on exact match, scored by token F1 (partial credit). HotpotQA.
- yes_no: yes/no (also true/false): the answer's FIRST word, or an explicit "the answer is yes";
  never a yes/no word met somewhere else in the text. StrategyQA.
- choice: a multiple-choice option letter ("B", "(B)", "B) Paris", "the answer is B").
- `python:MODULE:FUNCTION`: a user's function with the same signature, returning a Verdict, a bool
  or a float in [0, 1]; MODULE is a file under the workspace root or an installed package.

A pool item names its verifier in `verifier` (custom tasks, rc1.data.generic); the built-in tasks
map onto the named ones (`TASK_VERIFIERS`).

The final answer itself is read out of the model's text by rc1.envs.answers (the answer line, the
`Final answer:`, the last `\\boxed{}`, else the last line; never from inside `<think>`).

`verify_episode(item, episode)` is THE success of rc1: reward, calibration, shadow run, sampler,
training metrics and eval all call it. A truncated episode (it hit max_new_tokens or the turn limit
before answering) fails, whatever its text contains: an answer pulled out of cut-off text is not an
answer the model gave.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import numbers
import re
import string
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Callable

from rc1.config.names import PYTHON_VERIFIER, TASK_VERIFIERS, verifier_problem
from rc1.envs.answers import boxed_contents
from rc1.runtime.errors import EXIT_CRASH, ConfigError, Rc1Error
from rc1.runtime.workspace import resolve_workspace

_NUMBER = re.compile(r"-?\$?\s*\d[\d,]*(?:\.\d+)?|-?\.\d+")


@dataclass(frozen=True)
class Verdict:
    success: bool
    score: float  # in [0, 1]; F1 for hotpotqa, 0/1 otherwise


FAILED = Verdict(False, 0.0)


# ----------------------------------------------------------------------------- GSM8K
def parse_number(text: str | None) -> Decimal | None:
    """The number a GSM8K answer states: after '####' if present, else the last number in the text."""
    if text is None:
        return None
    s = str(text)
    if "####" in s:
        s = s.split("####")[-1]
    boxed = boxed_contents(s)
    if boxed:
        s = boxed[-1]
    nums = _NUMBER.findall(s)
    if not nums:
        return None
    raw = nums[-1].replace("$", "").replace(",", "").replace(" ", "")
    try:
        return Decimal(raw).normalize()
    except InvalidOperation:
        return None


def verify_gsm8k(prediction: str | None, gold: str, aliases=()) -> Verdict:
    pred = parse_number(prediction)
    if pred is None:
        return Verdict(False, 0.0)
    for g in (gold, *aliases):
        gv = parse_number(g)
        if gv is not None and abs(pred - gv) <= Decimal("1e-6"):
            return Verdict(True, 1.0)
    return Verdict(False, 0.0)


# ----------------------------------------------------------------------------- HotpotQA (SQuAD normalization)
def normalize_answer(s: str) -> str:
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def exact_match(prediction: str, gold: str) -> bool:
    return normalize_answer(prediction) == normalize_answer(gold)


def f1_score(prediction: str, gold: str) -> float:
    norm_pred, norm_gold = normalize_answer(prediction), normalize_answer(gold)
    # yes/no/noanswer must match exactly (as in the official HotpotQA eval)
    special = {"yes", "no", "noanswer"}
    if (norm_pred in special or norm_gold in special) and norm_pred != norm_gold:
        return 0.0
    pred_toks, gold_toks = norm_pred.split(), norm_gold.split()
    common = Counter(pred_toks) & Counter(gold_toks)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_toks)
    recall = same / len(gold_toks)
    return 2 * precision * recall / (precision + recall)


def verify_hotpotqa(prediction: str | None, gold: str, aliases=()) -> Verdict:
    if not prediction:
        return Verdict(False, 0.0)
    golds = [g for g in (gold, *aliases) if g]
    em = any(exact_match(prediction, g) for g in golds)
    f1 = max((f1_score(prediction, g) for g in golds), default=0.0)
    return Verdict(em, 1.0 if em else f1)


# ----------------------------------------------------------------------------- StrategyQA
_YES = {"yes", "true", "y", "correct"}
_NO = {"no", "false", "n", "incorrect"}


_ANSWER_IS = re.compile(r"\banswer\s+is\s+(\w+)")


def parse_yes_no(text: str | None) -> str | None:
    """yes/no of an answer: its first word, or the word after an explicit "answer is". A yes/no word
    anywhere else ("Paris is not in Spain, yes it is in France") is not read as the answer."""
    if not text:
        return None
    norm = normalize_answer(text)
    words = norm.split()
    if not words:
        return None
    for w in (words[0], *(m.group(1) for m in _ANSWER_IS.finditer(norm))):
        if w in _YES:
            return "yes"
        if w in _NO:
            return "no"
    return None


def verify_strategyqa(prediction: str | None, gold, aliases=()) -> Verdict:
    pred = parse_yes_no(prediction)
    g = gold if isinstance(gold, str) else ("yes" if gold else "no")
    gold_yn = parse_yes_no(g)
    ok = pred is not None and pred == gold_yn
    return Verdict(ok, 1.0 if ok else 0.0)


# ----------------------------------------------------------------------------- multiple choice
_CHOICE_ALONE = re.compile(r"^[(\[]?([A-Za-z])[)\]]?[.:]?$")
_CHOICE_BRACKET = re.compile(r"^[(\[]([A-Za-z])[)\]]")
_CHOICE_MARKED = re.compile(r"^([A-Za-z])[).:](?:\s|$)")
_CHOICE_SAID = re.compile(r"\b(?:answer\s+is|option|choice)\s*:?\s*[(\[]?([A-Za-z])[)\]]?(?![\w])", re.I)


def parse_choice(text: str | None) -> str | None:
    """The option letter an answer names: "B", "(B)", "B) Paris", "B. Paris", "the answer is B", "option b".

    A capital word that merely starts a sentence ("A dog barks") is not an option letter."""
    if not text:
        return None
    s = str(text).strip().strip("*").strip()
    for pattern in (_CHOICE_ALONE, _CHOICE_BRACKET, _CHOICE_MARKED):
        m = pattern.match(s)
        if m:
            return m.group(1).upper()
    said = _CHOICE_SAID.findall(s)
    return said[-1].upper() if said else None


def verify_choice(prediction: str | None, gold, aliases=()) -> Verdict:
    """The predicted option letter equals the gold letter; an answer that IS an alias (the option's
    text, normalised) counts too."""
    pred = parse_choice(prediction)
    ok = pred is not None and pred == parse_choice(str(gold))
    if not ok and prediction:
        ok = any(exact_match(prediction, str(a)) for a in aliases if str(a).strip())
    return Verdict(ok, 1.0 if ok else 0.0)


def verify_exact(prediction: str | None, gold, aliases=()) -> Verdict:
    if not prediction:
        return FAILED
    ok = any(exact_match(prediction, str(g)) for g in (gold, *aliases) if str(g).strip())
    return Verdict(ok, 1.0 if ok else 0.0)


# ----------------------------------------------------------------------------- the registry
@dataclass(frozen=True)
class NamedVerifier:
    name: str
    fn: Callable[[str | None, Any, tuple], Verdict]
    gold_problem: Callable[[Any], str | None]   # why this gold answer cannot be checked, or None


def _text_gold(gold) -> str | None:
    if not str(gold).strip():
        return "the answer is empty"
    if not normalize_answer(str(gold)):
        return f"the answer {gold!r} is empty once normalised (case, punctuation and articles removed)"
    return None


# Keys in the order of rc1.config.names.VERIFIER_NAMES, which the config schema validates against.
VERIFIERS: dict[str, NamedVerifier] = {v.name: v for v in (
    NamedVerifier("numeric", verify_gsm8k,
                  lambda g: None if parse_number(str(g)) is not None else f"the answer {g!r} holds no number"),
    NamedVerifier("exact", verify_exact, _text_gold),
    NamedVerifier("f1", verify_hotpotqa, _text_gold),
    NamedVerifier("yes_no", verify_strategyqa,
                  lambda g: None if isinstance(g, bool) or parse_yes_no(str(g)) else f"the answer {g!r} is not yes/no"),
    NamedVerifier("choice", verify_choice,
                  lambda g: None if parse_choice(str(g)) else f"the answer {g!r} is not an option letter (A, B, ...)"),
)}
PYTHON_PREFIX = "python:"


class UnknownVerifier(ConfigError, ValueError):
    """A verifier name that names nothing, or a `python:` verifier that cannot be loaded (exit 2)."""


class VerifierError(Rc1Error):
    """A verifier raised (or returned something that is not a verdict) on one item: the run stops,
    naming the item. Exit 1: the verifier's code failed, not the configuration."""

    exit_code = EXIT_CRASH

    def __init__(self, item_id: str, verifier: str, cause: BaseException):
        why = " ".join(f"{cause.__class__.__name__}: {cause}".split())
        super().__init__(f"verifier {verifier} failed on item {item_id}: {why}")
        self.item_id, self.verifier, self.cause = item_id, verifier, cause


# `python:` verifiers load from the workspace (a module file under its root) or an installed package,
# never from whatever else is on sys.path. The CLI names the workspace (use_workspace); library callers
# that do not get $RC1_WORKDIR, else the current directory (rc1.runtime.workspace).
_workspace_root: Path | None = None
_loaded: dict[tuple, Callable] = {}  # (spec, root, module file's mtime and size)


def use_workspace(root: str | Path | None) -> None:
    """The workspace `python:` verifiers load from (None: back to $RC1_WORKDIR, else the current directory)."""
    global _workspace_root
    _workspace_root = Path(root).resolve() if root is not None else None


def _root() -> Path:
    return _workspace_root or resolve_workspace().root


@functools.lru_cache(maxsize=1)
def _installed_top_level() -> frozenset[str]:
    return frozenset(importlib.metadata.packages_distributions())


def _workspace_file(module: str, root: Path) -> Path | None:
    rel = Path(*module.split("."))
    return next((f for f in (root / rel.with_suffix(".py"), root / rel / "__init__.py") if f.is_file()), None)


def _load_python(spec: str, root: Path, file: Path | None) -> Callable:
    module, func = PYTHON_VERIFIER.match(spec).groups()
    if file is not None:
        real = file.resolve()
        if not real.is_relative_to(root):
            raise UnknownVerifier(f"{spec}: {file.relative_to(root)} points outside the workspace ({real})")
        name = f"rc1_workspace_verifier_{hashlib.sha256(str(real).encode()).hexdigest()[:12]}"
        loader_spec = importlib.util.spec_from_file_location(name, real)
        mod = importlib.util.module_from_spec(loader_spec)
        try:
            loader_spec.loader.exec_module(mod)
        except Exception as exc:  # noqa: BLE001 - the user's module: any error is reported, one line
            raise UnknownVerifier(f"{spec}: importing {file.relative_to(root).as_posix()} failed: "
                                  f"{' '.join(f'{exc.__class__.__name__}: {exc}'.split())}") from None
        where = f"{file.relative_to(root).as_posix()} in the workspace"
    elif module.split(".")[0] in _installed_top_level():
        try:
            mod = importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001
            raise UnknownVerifier(f"{spec}: importing {module} failed: {exc.__class__.__name__}: {exc}") from None
        where = f"installed module {module}"
    else:
        raise UnknownVerifier(f"{spec}: no {Path(*module.split('.')).as_posix()}.py in the workspace ({root}) and no "
                              f"installed package provides {module.split('.')[0]!r}")
    fn = getattr(mod, func, None)
    if not callable(fn):
        raise UnknownVerifier(f"{spec}: {where} has no function {func!r}")
    return fn


def resolve_verifier(spec: str, root: str | Path | None = None) -> Callable:
    """The function behind a verifier name: fn(prediction, gold, aliases) -> Verdict | bool | float.
    A `python:` module is looked for under `root` (default: the workspace, see use_workspace); a
    workspace module is loaded again when its file changes."""
    if spec in VERIFIERS:
        return VERIFIERS[spec].fn
    problem = verifier_problem(spec)
    if problem:
        raise UnknownVerifier(problem)
    base = Path(root).resolve() if root is not None else _root()
    file = _workspace_file(PYTHON_VERIFIER.match(spec).group(1), base)
    stat = file.stat() if file else None
    key = (spec, str(base), (stat.st_mtime_ns, stat.st_size) if stat else None)
    if key not in _loaded:
        _loaded[key] = _load_python(spec, base, file)
    return _loaded[key]


def verifier_file(spec: str, root: str | Path | None = None) -> Path | None:
    """The workspace module file behind a `python:` verifier (None for named ones and installed packages)."""
    if spec in VERIFIERS or verifier_problem(spec):
        return None
    return _workspace_file(PYTHON_VERIFIER.match(spec).group(1), Path(root).resolve() if root is not None else _root())


def verifier_code(spec: str, root: str | Path | None = None) -> str:
    """What identifies the code behind a verifier, for cache keys: the name of a named verifier (its
    code is this file), the sha256 of a workspace module, or an installed module's distribution version."""
    if spec in VERIFIERS or verifier_problem(spec):
        return spec
    file = verifier_file(spec, root)
    if file is not None:
        return f"{spec} sha256:{hashlib.sha256(file.read_bytes()).hexdigest()}"
    dists = importlib.metadata.packages_distributions().get(PYTHON_VERIFIER.match(spec).group(1).split(".")[0], [])
    return f"{spec} " + ",".join(f"{d}=={importlib.metadata.version(d)}" for d in sorted(dists))


def gold_problem(spec: str, gold) -> str | None:
    """Why a named verifier cannot check this gold answer (e.g. no number for `numeric`), or None.
    A `python:` verifier judges its own gold answers."""
    return VERIFIERS[spec].gold_problem(gold) if spec in VERIFIERS else None


def as_verdict(value) -> Verdict:
    """A user verifier's result as a Verdict: a bool, a float in [0, 1] (partial credit; only 1.0 is
    solved) or a Verdict. Anything else is a TypeError / ValueError naming what came back."""
    if isinstance(value, Verdict):
        if not isinstance(value.success, bool):
            raise TypeError(f"returned Verdict(success={value.success!r}); success must be a bool")
        score = value.score
        if isinstance(score, bool) or not isinstance(score, numbers.Real) or not 0.0 <= float(score) <= 1.0:
            raise ValueError(f"returned Verdict(score={score!r}); score must be a number in [0, 1]")
        return Verdict(value.success, float(score))
    if isinstance(value, bool) or getattr(getattr(value, "dtype", None), "kind", "") == "b":  # numpy bools too
        return Verdict(bool(value), 1.0 if value else 0.0)
    if isinstance(value, numbers.Real):
        x = float(value)
        if not 0.0 <= x <= 1.0:  # NaN fails this too
            raise ValueError(f"returned {x!r}; a score must be in [0, 1]")
        return Verdict(x >= 1.0, x)
    shown = repr(value)
    raise TypeError(f"returned {type(value).__name__} {shown[:60]}; a verifier returns a bool, a float in [0, 1] "
                    "or a Verdict")


def verifier_of(item: dict) -> str:
    """The verifier that judges an item: its own `verifier` (custom tasks), else its built-in task's."""
    spec = item.get("verifier") or TASK_VERIFIERS.get(item.get("task") or "")
    if not spec:
        raise UnknownVerifier(f"item {item.get('id')!r} of task {item.get('task')!r} names no verifier "
                              f"(built-in tasks: {', '.join(TASK_VERIFIERS)}; a custom task's items carry one)")
    return spec


def verify(task_or_verifier: str, prediction: str | None, gold, aliases=()) -> Verdict:
    """Verify one answer with a built-in task's verifier or a verifier name."""
    spec = TASK_VERIFIERS.get(task_or_verifier, task_or_verifier)
    if spec not in VERIFIERS and not spec.startswith(PYTHON_PREFIX):
        raise UnknownVerifier(f"unknown task {task_or_verifier!r}; known: {sorted(TASK_VERIFIERS)} "
                              f"or a verifier {sorted(VERIFIERS)}")
    return as_verdict(resolve_verifier(spec)(prediction, gold, tuple(aliases or ())))


def verify_episode(item: dict, episode) -> Verdict:
    """Did this episode solve this item? The one definition of success (see the module docstring).

    `episode` is anything with `truncated` and `final_answer` (rc1.envs.episode.Episode or a record
    read back from JSON). A truncated episode fails; otherwise its final answer is verified by the
    item's verifier. A verifier that raises, or returns no verdict, raises VerifierError naming the item.
    """
    if bool(getattr(episode, "truncated", False)):
        return FAILED
    spec = verifier_of(item)
    fn = resolve_verifier(spec)
    try:
        return as_verdict(fn(getattr(episode, "final_answer", None), item.get("answer", ""),
                             tuple(item.get("aliases") or ())))
    except Exception as exc:  # noqa: BLE001 - whatever the verifier does wrong, the run names the item
        raise VerifierError(str(item.get("id", "?")), spec, exc) from exc
