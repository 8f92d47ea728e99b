"""The episode environment: one `EpisodeState` per rollout, advanced one model turn at a time.

Token bookkeeping (token-in/token-out: the trained tokens are exactly the generated ones): the
conversation is never re-tokenized. The first prompt is rendered with the tokenizer's chat
template and tokenized once; each model turn appends the generated token ids exactly as sampled
(action_mask 1); the environment then appends the tokens of the text the chat template puts
between the end of that assistant message and the next generation prompt, with the reply in the
middle (action_mask 0). That text is found once per tokenizer by rendering a conversation with
sentinel strings (`ChatFormat`), so it works with any chat template. When the model ended its
turn with an end-of-turn token, the template's own end-of-turn text is not inserted again.

Multi-turn episodes, two ways (`multi_turn`, config strategy.multi_turn):

- `concat`: every turn is generated from the whole conversation so far, the model's earlier turns
  (their reasoning included) exactly as it generated them. The episode is ONE training sample, and
  a forward pass over it recomputes the log-probabilities of generation.
- `split_turns`: every turn is generated from the chat template's rendering of the conversation so
  far, as the model will be prompted at inference. A template that rewrites history (Qwen3's drops
  the `<think>` blocks of assistant turns before the last user message) makes turn k's prompt differ
  from the token sequence of turn k-1 plus the reply, so the turns cannot be one sequence: each
  model turn becomes its own training sample (`Episode.samples`) whose prompt is exactly the tokens
  the model was conditioned on — the verl / prime-rl way.
- `auto` (the default): `split_turns` when the template rewrites history (`ChatFormat.rewrites_history`,
  measured by rendering a conversation, not guessed from the model name), else `concat` — where the
  template keeps history the two give the same context, and one sample per episode is cheaper to
  train on. Why split for a rewriting template: Qwen3-Thinking was trained, and will be served, with
  its earlier reasoning stripped; rolling out with it kept would train the policy on contexts it
  never meets at inference.

Qwen3-Thinking's generation prompt opens the think block (`<think>\n`): the model writes its
reasoning, `</think>`, then the visible reply. The opening tag the template wrote is part of the
assistant's message, so `model_text` and the transcript carry it (`ChatFormat.think_prefix`): an
unclosed block is then reasoning everywhere text is read (answer parsing, reward dimensions, judge).

A plain single-turn task (`item["single_turn"]` true, see `is_single_turn`) skips the protocol: its
messages are the whole prompt (no protocol system prompt), the model answers in one turn, and the
visible text of that turn is read for the final answer. The same chat-formatted prompt a plain
trainer (TRL's GRPOTrainer) would give the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from rc1.envs.answers import extract_final_answer
from rc1.envs.episode import Episode, TurnSample
from rc1.envs.actions import THINK_CLOSE, THINK_OPEN, parse_action, system_prompt, visible_text
from rc1.envs.tools import run_calc, wiki_search

DEFAULT_MAX_TURNS = 6
NO_CLARIFICATION_NEEDED = "The question is complete as stated; please answer it."
_SENT_A = "\x1fRC1ASSISTANT\x1f"
_SENT_U = "\x1fRC1REPLY\x1f"
_SENT_R = "\x1fRC1REASONING\x1f"
MULTI_TURN_MODES = ("auto", "concat", "split_turns")


class ChatFormat:
    """Chat-template facts about a tokenizer that the environment needs, computed once."""

    def __init__(self, tokenizer, eos_ids: Iterable[int] = ()):
        self.tok = tokenizer
        eos = {int(i) for i in eos_ids if i is not None}
        if tokenizer.eos_token_id is not None:
            eos.add(int(tokenizer.eos_token_id))
        if not eos:
            raise ValueError("tokenizer has no eos token: cannot tell where a model turn ends")
        self.eos_ids = frozenset(eos)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(eos)
        rendered = self.render([{"role": "user", "content": "x"}, {"role": "assistant", "content": _SENT_A},
                                {"role": "user", "content": _SENT_U}], add_generation_prompt=True)
        if _SENT_A not in rendered or _SENT_U not in rendered:
            raise ValueError("chat template does not render message contents verbatim")
        between = rendered[rendered.rindex(_SENT_A) + len(_SENT_A):]
        self.reply_prefix, self.reply_suffix = between.split(_SENT_U, 1)
        first = self.render([{"role": "user", "content": "x"}], add_generation_prompt=True)
        self.starts_in_think = first.rstrip().endswith(THINK_OPEN)
        # the text of the think block the generation prompt opened ("<think>\n"), part of the assistant message
        self.think_prefix = first[first.rindex(THINK_OPEN):] if self.starts_in_think else ""
        self.rewrites_history = self._drops_earlier_reasoning()
        self._eos_text = {i: tokenizer.decode([i], skip_special_tokens=False) for i in self.eos_ids}

    def _drops_earlier_reasoning(self) -> bool:
        """Whether the template removes an earlier assistant turn's <think> block from later prompts."""
        reasoned = f"{THINK_OPEN}\n{_SENT_R}\n{THINK_CLOSE}\n\n{_SENT_A}"
        rendered = self.render([{"role": "user", "content": "x"}, {"role": "assistant", "content": reasoned},
                                {"role": "user", "content": _SENT_U}], add_generation_prompt=True)
        return _SENT_R not in rendered

    def render(self, messages: list[dict], *, add_generation_prompt: bool) -> str:
        return self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)

    def encode(self, text: str) -> list[int]:
        return list(self.tok(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        return self.encode(self.render(messages, add_generation_prompt=True))

    def reply_ids(self, reply: str, last_generated: int | None) -> list[int]:
        """Tokens from the end of a model turn to the next generation prompt, `reply` in between."""
        prefix = self.reply_prefix
        end = self._eos_text.get(last_generated) if last_generated is not None else None
        if end and prefix.startswith(end):  # the model already closed its turn
            prefix = prefix[len(end):]
        return self.encode(prefix + reply + self.reply_suffix)

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=True)


def resolve_multi_turn(mode: str, fmt: ChatFormat) -> str:
    """`concat` or `split_turns` for this chat template (see the module docstring; `auto` measures it)."""
    if mode == "auto":
        return "split_turns" if fmt.rewrites_history else "concat"
    if mode not in MULTI_TURN_MODES:
        raise ValueError(f"multi_turn {mode!r}: expected one of {list(MULTI_TURN_MODES)}")
    return mode


def as_rendered(transcript: list[dict]) -> list[dict]:
    """The transcript as the chat template renders it: tool results are user messages (`RESULT ...`)."""
    return [{"role": "user" if m["role"] == "tool" else m["role"], "content": m["content"]} for m in transcript]


def is_single_turn(item: dict) -> bool:
    """A plain single-turn task: no protocol system prompt, one model turn, its visible text is the answer."""
    return bool(item.get("single_turn"))


def episode_messages(item: dict) -> list[dict]:
    """The first prompt of an item: the protocol system prompt (+ the item's own system text), then its
    messages; a single-turn item's messages as they are."""
    if is_single_turn(item):
        msgs = [{"role": m["role"], "content": m["content"]} for m in item.get("messages") or []]
        return msgs or [{"role": "user", "content": item["question"]}]
    tools = [t for t in item.get("tools", ["wiki", "calc"]) if t in ("wiki", "calc")]
    system = system_prompt(tools)
    rest = []
    for m in item.get("messages") or []:
        if m.get("role") == "system":
            system = f"{system}\n\n{m['content']}"
        else:
            rest.append({"role": m["role"], "content": m["content"]})
    if not rest:
        rest = [{"role": "user", "content": item["question"]}]
    return [{"role": "system", "content": system}] + rest


@dataclass
class EpisodeState:
    """A rollout in progress. `add_model_turn` applies one generated turn; `done` says when to stop.

    `ids` is what the next turn is generated from (the rollout loop reads it): the whole conversation
    with concatenated turns, the current turn's rendered prompt with split turns (then the
    conversation's tokens are kept apart, for `Episode.input_ids`)."""

    item: dict
    fmt: ChatFormat
    max_turns: int
    max_length: int | None = None
    multi_turn: str = "concat"
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    transcript: list[dict] = field(default_factory=list)
    model_texts: list[str] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    samples: list[TurnSample] = field(default_factory=list)
    conversation_ids: list[int] = field(default_factory=list)     # split turns only
    conversation_mask: list[int] = field(default_factory=list)
    prompt_len: int = 0
    turns: int = 0
    tool_hops: int = 0
    clarifications: int = 0
    final_answer: str | None = None
    truncated: bool = False
    done: bool = False

    @classmethod
    def start(cls, item: dict, fmt: ChatFormat, *, max_turns: int | None = None,
              max_length: int | None = None, multi_turn: str = "concat") -> "EpisodeState":
        limit = 1 if is_single_turn(item) else (max_turns or item.get("max_turns") or DEFAULT_MAX_TURNS)
        state = cls(item=item, fmt=fmt, max_turns=int(limit), max_length=max_length,
                    multi_turn=resolve_multi_turn(multi_turn, fmt))
        state.transcript = episode_messages(item)
        state.ids = fmt.prompt_ids(state.transcript)
        state.mask = [0] * len(state.ids)
        state.prompt_len = len(state.ids)
        if state.split:
            state.conversation_ids, state.conversation_mask = list(state.ids), list(state.mask)
        return state

    @property
    def split(self) -> bool:
        return self.multi_turn == "split_turns"

    @property
    def single_turn(self) -> bool:
        return is_single_turn(self.item)

    def room_for(self, max_new_tokens: int) -> int:
        """How many tokens the next turn may generate within `max_length` (all of them when unset)."""
        if self.max_length is None:
            return max_new_tokens
        return max(0, min(max_new_tokens, self.max_length - len(self.ids)))

    def add_model_turn(self, generated: list[int], hit_limit: bool, logprobs: list[float] | None = None) -> None:
        """Append one model turn (token ids as generated, with their log-probabilities if known)
        and the environment's answer to it."""
        if self.done:
            raise RuntimeError("episode already finished")
        cut = next((i for i, t in enumerate(generated) if t in self.fmt.eos_ids), None)
        if cut is not None:
            generated, hit_limit = generated[:cut + 1], False
        turn_logprobs: list[float] = []
        if logprobs is not None:
            if len(logprobs) < len(generated):
                raise ValueError("fewer logprobs than generated tokens")
            turn_logprobs = [float(x) for x in logprobs[:len(generated)]]
            self.logprobs += turn_logprobs
        self.ids += generated
        self.mask += [1] * len(generated)
        if self.split:
            self.conversation_ids += generated
            self.conversation_mask += [1] * len(generated)
        self.turns += 1
        text = self.fmt.decode(generated)
        self.model_texts.append(self.fmt.think_prefix + text)
        self.transcript.append({"role": "assistant", "content": self.fmt.think_prefix + text})
        if self.single_turn:
            if hit_limit:
                self.truncated = True
            else:
                self.final_answer = extract_final_answer(visible_text(text, starts_in_think=self.fmt.starts_in_think))
            self.done = True
            return
        action = parse_action(text, starts_in_think=self.fmt.starts_in_think)
        if self.split:  # this turn is a training sample: its prompt is exactly what it was generated from
            self.samples.append(TurnSample(list(self.ids), list(self.mask), turn_logprobs))

        if action.kind == "answer":
            if hit_limit:  # cut off by max_new_tokens: "ANSWER: 4" may be the start of "ANSWER: 42" (as single-turn)
                self.truncated = True
            else:
                self.final_answer = action.arg or None
            self.done = True
            return
        if action.kind == "none":
            if hit_limit:
                self.truncated = True
            else:  # no action line: the answer is read from its visible text (answer line, else last line)
                self.final_answer = extract_final_answer(action.arg)
            self.done = True
            return
        if self.turns >= self.max_turns:  # an action it may not follow up on
            self.truncated, self.done = True, True
            return
        role, reply = self._respond(action)
        reply_ids = self.fmt.reply_ids(reply, generated[-1] if generated else None)
        message = {"role": role, "content": reply}
        if self.split:
            prompt = self.fmt.prompt_ids(as_rendered(self.transcript + [message]))
            if self.max_length is not None and len(prompt) >= self.max_length:
                self.truncated, self.done = True, True
                return
            self.conversation_ids += reply_ids
            self.conversation_mask += [0] * len(reply_ids)
            self.ids, self.mask = prompt, [0] * len(prompt)
        else:
            if self.max_length is not None and len(self.ids) + len(reply_ids) >= self.max_length:
                self.truncated, self.done = True, True
                return
            self.ids += reply_ids
            self.mask += [0] * len(reply_ids)
        self.transcript.append(message)

    def _respond(self, action) -> tuple[str, str]:
        tools = self.item.get("tools", ["wiki", "calc"])
        if action.kind == "ask":
            self.clarifications += 1
            detail = self.item.get("hidden_detail") if self.item.get("needs_clarification") else None
            return "user", f"USER: {detail if detail else NO_CLARIFICATION_NEEDED}"
        self.tool_hops += 1
        if action.tool not in tools or action.tool not in ("wiki", "calc"):
            return "tool", f"RESULT: unknown tool {action.tool!r}; available: {', '.join(tools)}"
        if action.tool == "wiki":
            return "tool", f"RESULT (wiki): {wiki_search(self.item.get('corpus', []), action.arg)}"
        return "tool", f"RESULT (calc): {run_calc(action.arg)}"

    def to_episode(self) -> Episode:
        return Episode(
            item_id=str(self.item.get("id", "")), task=str(self.item.get("task", "")),
            final_answer=self.final_answer, turns=self.turns, tool_hops=self.tool_hops,
            clarifications=self.clarifications, truncated=self.truncated,
            model_text="\n\n".join(self.model_texts), transcript=list(self.transcript),
            input_ids=list(self.conversation_ids if self.split else self.ids),
            action_mask=list(self.conversation_mask if self.split else self.mask), prompt_len=self.prompt_len,
            logprobs=list(self.logprobs) if len(self.logprobs) == self.turn_tokens else [],
            samples=list(self.samples))

    @property
    def turn_tokens(self) -> int:
        """Tokens the model generated in this episode so far."""
        return sum(self.conversation_mask if self.split else self.mask)
