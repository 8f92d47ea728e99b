"""The two tools of an episode: `wiki` (lookup over the item's corpus) and `calc` (safe arithmetic).

`calc` parses with `ast` and evaluates only number literals and + - * / // % ** with unary +/-
(no names, calls, attributes, subscripts — nothing `eval` could abuse), with limits on length,
node count, exponent size and result magnitude so that `9**9**9` cannot hang the trainer.
"""

from __future__ import annotations

import ast
import math
import operator
import re

WIKI_MAX_CHARS = 400
CALC_MAX_CHARS = 200
CALC_MAX_NODES = 64
CALC_MAX_EXPONENT = 64
CALC_MAX_ABS = 1e15

_STOPWORDS = frozenset(
    "a an the of in on at to for from by with and or is are was were be been what which who whom whose when "
    "where why how did does do that this these those it its as than then there their his her he she they "
    "many much about into over under after before".split())


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOPWORDS}


def wiki_search(corpus: list[dict], query: str) -> str:
    """The best paragraph of `corpus` for `query` by word overlap (title words count double)."""
    q = _words(query)
    if not q:
        return "No results (empty query)."
    best, best_score = None, 0.0
    for doc in corpus or []:
        title = str(doc.get("title", ""))
        title_words = _words(title)
        for para in [p.strip() for p in str(doc.get("text", "")).split("\n\n") if p.strip()]:
            score = 2 * len(q & title_words) + len(q & _words(para))
            if score > best_score:  # strict: the earliest paragraph wins ties
                best, best_score = (title, para), score
    if best is None:
        return f"No results for {query.strip()[:80]!r}."
    title, para = best
    if len(para) > WIKI_MAX_CHARS:
        para = para[:WIKI_MAX_CHARS].rsplit(" ", 1)[0] + " ..."
    return f"{title}: {para}" if title else para


class CalcError(ValueError):
    pass


_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _normalize(expr: str) -> str:
    expr = expr.strip().rstrip("=").strip()
    expr = re.sub(r"(?<=\d),(?=\d{3}\b)", "", expr)        # 1,000 -> 1000
    expr = expr.replace("×", "*").replace("÷", "/").replace("^", "**").replace("−", "-")
    expr = re.sub(r"(?<=\d)\s*[xX]\s*(?=\d)", "*", expr)   # 3 x 4 -> 3*4
    return expr.replace("$", "")


def _eval(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            if abs(right) > CALC_MAX_EXPONENT:
                raise CalcError(f"exponent {right} too large (max {CALC_MAX_EXPONENT})")
            if abs(left) > CALC_MAX_ABS:
                raise CalcError("base too large")
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0:
            raise CalcError("division by zero")
        value = _BIN[type(node.op)](left, right)
        if isinstance(value, complex):
            raise CalcError("complex result")
        if abs(value) > CALC_MAX_ABS:
            raise CalcError("result too large")
        return value
    raise CalcError(f"not allowed: {type(node).__name__}")


def calc(expression: str) -> str:
    """The value of an arithmetic expression as text; raises CalcError for anything else."""
    expr = _normalize(expression)
    if not expr:
        raise CalcError("empty expression")
    if len(expr) > CALC_MAX_CHARS:
        raise CalcError(f"expression longer than {CALC_MAX_CHARS} characters")
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise CalcError(f"cannot parse {expr[:60]!r}") from None
    if sum(1 for _ in ast.walk(tree)) > CALC_MAX_NODES:
        raise CalcError("expression too long")
    value = _eval(tree)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CalcError("non-finite result")
        if value.is_integer():
            return str(int(value))
        return f"{value:.10g}"
    return str(value)


def run_calc(expression: str) -> str:
    """`calc` for the environment: errors become a message the model can read."""
    try:
        return calc(expression)
    except CalcError as exc:
        return f"error: {exc}"
