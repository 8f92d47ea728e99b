"""The ANSWER / TOOL / ASK action grammar between the model and the episode environment (any chat template).

In each of its turns the model writes free text; the FIRST line (outside `<think>…</think>`)
that starts with one of these keywords is its action (keywords are case-insensitive; leading
markdown like `**`, `-`, `#` or `>` is ignored):

    TOOL: wiki <query>         look the query up in the item's documents → best matching paragraph
    TOOL: calc <expression>    safe arithmetic (+ - * / // % ** ^, parentheses) → the value
    ASK: <question>            ask the user; they reveal the missing detail if the task has one
    ANSWER: <final answer>     end the episode with this answer

The environment answers TOOL and ASK with a user-role message (`RESULT (wiki): …`,
`RESULT (calc): …`, `USER: …`) and the model takes another turn. A turn with NO action line
ends the episode too, and its visible text (after any think block) is the final answer, so a
model that just answers in one turn still works. A turn that stops at max_new_tokens without an
action, or an action turn at the `max_turns` limit, ends the episode as `truncated` with no final
answer.

Reasoning: `<think>…</think>` blocks are ignored when looking for the action. A generation
prompt that already opened a think block (Qwen3-Thinking) is handled: text before the first
`</think>` is reasoning. Text inside a think block that never closes is reasoning, not an answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

TOOL_HELP = {
    "wiki": "TOOL: wiki <query>  (search the documents)",
    "calc": "TOOL: calc <expression>  (arithmetic, e.g. 12*(3+4))",
}


def system_prompt(tools: list[str] | tuple[str, ...] = ("wiki", "calc")) -> str:
    """The short protocol explanation put first in every episode's system message."""
    lines = ["Solve the task. Each reply: think briefly, then write exactly one action line:"]
    lines += [TOOL_HELP[t] for t in tools if t in TOOL_HELP]
    lines += ["ASK: <question>  (if a needed detail is missing)",
              "ANSWER: <final answer>  (short: a number, yes/no, or a name)",
              "After TOOL or ASK, wait for the result."]
    return "\n".join(lines)


@dataclass(frozen=True)
class Action:
    kind: str            # "tool" | "ask" | "answer" | "none"
    arg: str = ""        # query/expression, question, answer or (kind none) the visible text
    tool: str | None = None


_ACTION = re.compile(r"^[\s>*#_`-]*(TOOL|ASK|ANSWER)\s*[*_`]*\s*:\s*[*_`]*\s*(.*)$", re.IGNORECASE)


def visible_text(text: str, *, starts_in_think: bool = False) -> str:
    """`text` without reasoning: complete think blocks removed, an unclosed one dropped to the end."""
    if starts_in_think:
        if THINK_CLOSE not in text:
            return ""
        text = text.split(THINK_CLOSE, 1)[1]
    text = re.sub(re.escape(THINK_OPEN) + r".*?" + re.escape(THINK_CLOSE), "", text, flags=re.DOTALL)
    if THINK_OPEN in text:
        text = text.split(THINK_OPEN, 1)[0]
    return text.replace(THINK_CLOSE, "").strip()


def _clean_arg(arg: str) -> str:
    arg = arg.strip().strip("*_`").strip()
    if len(arg) >= 2 and arg[0] == arg[-1] and arg[0] in "\"'":
        arg = arg[1:-1].strip()
    return arg


def _wrapped_in_parens(s: str) -> bool:
    """True when the "(" at the start closes exactly at the end: "(1+2)" yes, "(1+2)*(3+4)" no."""
    if not (s.startswith("(") and s.endswith(")")):
        return False
    depth = 0
    for i, ch in enumerate(s):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            return i == len(s) - 1
    return False


def parse_action(text: str, *, starts_in_think: bool = False) -> Action:
    """The action of one model turn (see the module docstring)."""
    visible = visible_text(text, starts_in_think=starts_in_think)
    lines = visible.splitlines()
    for i, line in enumerate(lines):
        m = _ACTION.match(line)
        if not m:
            continue
        keyword, rest = m.group(1).upper(), _clean_arg(m.group(2))
        if keyword == "ANSWER":
            if not rest:  # "ANSWER:" on its own line: the answer is the next non-empty line
                rest = next((_clean_arg(x) for x in lines[i + 1:] if x.strip()), "")
            return Action("answer", rest)
        if keyword == "ASK":
            return Action("ask", rest)
        m2 = re.match(r"^([A-Za-z_]+)\s*(.*)$", rest)
        if not m2:
            return Action("tool", "", tool="")
        name, arg = m2.group(1).lower(), m2.group(2).strip()
        if _wrapped_in_parens(arg):  # call style: calc(2+2)
            arg = arg[1:-1]
        elif arg.startswith(":"):
            arg = arg[1:]
        return Action("tool", _clean_arg(arg), tool=name)
    return Action("none", visible)


def has_complete_action(text: str, *, starts_in_think: bool = False) -> bool:
    """True once `text` holds an action line followed by a newline (generation may stop there)."""
    visible_region = text
    if starts_in_think:
        if THINK_CLOSE not in text:
            return False
        visible_region = text.split(THINK_CLOSE, 1)[1]
    visible_region = re.sub(re.escape(THINK_OPEN) + r".*?" + re.escape(THINK_CLOSE), "", visible_region,
                            flags=re.DOTALL)
    if THINK_OPEN in visible_region:
        visible_region = visible_region.split(THINK_OPEN, 1)[0]
    for line in visible_region.split("\n")[:-1]:  # only lines already ended by a newline
        m = _ACTION.match(line)
        if m and (m.group(1).upper() != "ANSWER" or _clean_arg(m.group(2))):
            return True
    return False
