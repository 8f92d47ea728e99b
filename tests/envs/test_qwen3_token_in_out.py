"""Token-in/token-out with the REAL Qwen3 tokenizer and Qwen3-4B-Thinking-2507 chat template (offline:
tests/helpers/qwen3.py) on random:qwen3-tiny's architecture.

Qwen3's template opens a think block in the generation prompt and drops the <think> blocks of assistant
turns before the last user message. Re-templating a multi-turn episode would therefore change the tokens
the policy produced; rc1 never re-templates. With concatenated turns the trained tokens are the generated
ones in the very context they were generated in; with split turns (the default for this template) each
model turn is its own sample whose prompt is exactly what the model was conditioned on: the template's
rendering, as at inference."""

from __future__ import annotations

import unicodedata
from types import SimpleNamespace

import pytest
import torch

from rc1.envs.env import ChatFormat, EpisodeState, as_rendered, resolve_multi_turn
from rc1.envs.rollout import generate_episodes
from rc1.strategies.common import collate
from tests.helpers.items import make_item
from tests.helpers.qwen3 import QWEN3_ADDED, QWEN3_REGULAR_TOKENS, QWEN_PATTERN, qwen3_tiny_dir, qwen_tiktoken_path
from tests.helpers.scripted import ScriptedLM

REASONING_1 = "The capital of France is Paris; which river?"
SCRIPT = [f"{REASONING_1}\n</think>\n\nTOOL: wiki river Paris\n",
          "The wiki names the Seine. A quick check.\n</think>\n\nTOOL: calc 6*7\n",
          "Both checked.\n</think>\n\nANSWER: Seine"]


@pytest.fixture(scope="module")
def qwen3():
    from rc1.config.schema import TrainConfig
    from rc1.models.loader import load_model

    torch.set_num_threads(1)
    return load_model(TrainConfig(model={"base": str(qwen3_tiny_dir())}), device=torch.device("cpu"))


@pytest.fixture(scope="module")
def tok(qwen3):
    return qwen3[1]


class CPUPolicy(SimpleNamespace):
    def to_device(self, obj):
        return obj


def test_the_offline_tokenizer_is_qwen3s(tok):
    """Same BPE as tiktoken over the same ranks (Qwen's own encoder), Qwen3's added tokens at their ids."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    ref = tiktoken.Encoding("qwen", pat_str=QWEN_PATTERN, mergeable_ranks=load_tiktoken_bpe(str(qwen_tiktoken_path())),
                            special_tokens={})
    texts = ["Hello world", "Hello, world", "Which river flows through the capital of France?",
             "TOOL: calc 12*(3+4) ** 2 // 5\nRESULT (calc): 470", "巴黎是法国的首都，塞纳河流经巴黎。",
             "def f(x):\n    return x**2  # 注释\n\n\n   tabs\tand  spaces ", "émigré café naïve Ünïcödé 12,345.67",
             "emoji 🙂🚀 and symbols ≤ ≥ ∑ → «quotes»", "I'd've thought they'll say 'yes' — or no..."]
    for text in texts:
        assert tok(text, add_special_tokens=False)["input_ids"] == ref.encode_ordinary(
            unicodedata.normalize("NFC", text)), text
    assert tok("Hello world", add_special_tokens=False)["input_ids"] == [9707, 1879]  # Qwen2/Qwen3's ids
    assert len(tok) == QWEN3_REGULAR_TOKENS + len(QWEN3_ADDED) == 151669
    assert tok.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]) == [
        151643, 151644, 151645, 151667, 151668]
    ids = tok("<think>\nwhy</think>\n\nANSWER: 4<|im_end|>", add_special_tokens=False)["input_ids"]
    assert 151667 in ids and 151668 in ids and ids[-1] == 151645
    assert tok.decode(ids, skip_special_tokens=True) == "<think>\nwhy</think>\n\nANSWER: 4"  # think tags kept


def test_the_qwen3_thinking_template_is_measured_not_guessed(tok):
    fmt = ChatFormat(tok)
    assert fmt.starts_in_think and fmt.think_prefix == "<think>\n"
    assert fmt.rewrites_history and resolve_multi_turn("auto", fmt) == "split_turns"
    assert fmt.reply_prefix == "<|im_end|>\n<|im_start|>user\n"
    assert fmt.reply_suffix == "<|im_end|>\n<|im_start|>assistant\n<think>\n"
    keeps = SimpleNamespace(**{k: getattr(tok, k) for k in ("eos_token_id", "pad_token_id")})
    keeps.apply_chat_template = lambda msgs, tokenize, add_generation_prompt: "".join(
        f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs) + (
        "<|im_start|>assistant\n" if add_generation_prompt else "")
    keeps.decode = tok.decode
    assert resolve_multi_turn("auto", ChatFormat(keeps)) == "concat"  # a template that keeps history


def _rollout(tok, multi_turn):
    model = ScriptedLM(tok, SCRIPT, tail="<think>\n")
    ep = generate_episodes(model, tok, [make_item()], greedy=True, max_new_tokens=64, multi_turn=multi_turn)[0]
    return model, ep


def _generated_turns(tok):
    """The tokens the scripted policy writes in each turn (it stops after the action line's newline)."""
    enc = [tok(t, add_special_tokens=False)["input_ids"] for t in SCRIPT]
    return enc[:2] + [enc[2] + [tok.eos_token_id]]


def test_concat_turns_train_exactly_the_generated_tokens(tok):
    model, ep = _rollout(tok, "concat")
    gen = _generated_turns(tok)
    assert (ep.turns, ep.tool_hops, ep.final_answer, ep.truncated) == (3, 2, "Seine", False)
    assert ep.samples == [] and len(ep.training_samples()) == 1
    # the training row's action positions hold the generated ids, in order; nothing else is an action
    t = collate(CPUPolicy(tokenizer=tok), [ep])
    row, act = t.input_ids[0, 1:], t.action_mask[0] > 0
    assert row[act].tolist() == gen[0] + gen[1] + gen[2]
    # tool results and the user/assistant scaffolding the environment inserted are masked out
    env_text = tok.decode(row[~act][ep.prompt_len - 1:].tolist(), skip_special_tokens=False)
    assert "RESULT (wiki): Paris:" in env_text and "RESULT (calc): 42" in env_text
    assert "<|im_start|>user" in env_text and "RESULT" not in tok.decode(row[act].tolist())
    # every turn was generated from the conversation as the row holds it: reasoning of turn 1 included
    assert len(model.prompts) == 3 and len(model.prompts[0]) == ep.prompt_len
    for prompt in model.prompts:
        assert ep.input_ids[:len(prompt)] == prompt
    assert REASONING_1 in tok.decode(model.prompts[2])
    # re-templating the same conversation (what a trainer must NOT do) drops the earlier reasoning and
    # changes the tokens: that is why rc1 concatenates tokens
    retemplated = ChatFormat(tok).render(as_rendered(ep.transcript), add_generation_prompt=False)
    assert REASONING_1 not in retemplated
    assert tok(retemplated, add_special_tokens=False)["input_ids"] != ep.input_ids


def test_split_turns_train_each_turn_on_the_exact_prompt_it_was_generated_from(tok):
    model, ep = _rollout(tok, "auto")  # auto: this template rewrites history -> split
    gen = _generated_turns(tok)
    fmt = ChatFormat(tok)
    assert (ep.turns, ep.tool_hops, ep.final_answer, ep.truncated) == (3, 2, "Seine", False)
    assert len(ep.samples) == 3 and len(model.prompts) == 3
    for k, (sample, prompt) in enumerate(zip(ep.samples, model.prompts)):
        n = sample.prompt_len
        assert sample.input_ids[:n] == prompt                      # exactly what the model was conditioned on
        assert sample.input_ids[n:] == gen[k] and sample.action_mask == [0] * n + [1] * len(gen[k])
        assert len(sample.logprobs) == len(gen[k])
    # each later prompt is the template's rendering of the conversation so far (what Qwen3 sees at
    # inference): the earlier turns' reasoning is gone, their actions and the tool results are there
    transcript = ep.transcript
    assert model.prompts[1] == fmt.prompt_ids(as_rendered(transcript[:4]))
    assert model.prompts[2] == fmt.prompt_ids(as_rendered(transcript[:6]))
    later = tok.decode(model.prompts[2])
    assert REASONING_1 not in later and "TOOL: wiki river Paris" in later and "RESULT (calc): 42" in later
    # the training rows are the samples, each mapped to its episode; actions = the generated ids
    t = collate(CPUPolicy(tokenizer=tok), [ep, ep])
    assert t.episode.tolist() == [0, 0, 0, 1, 1, 1]
    for r in range(3):
        assert t.input_ids[r, 1:][t.action_mask[r] > 0].tolist() == gen[r]
    # the conversation record still lists every generated token once, in order
    assert [x for x, m in zip(ep.input_ids, ep.action_mask) if m] == gen[0] + gen[1] + gen[2]
    assert ep.model_text.startswith("<think>\n" + REASONING_1)  # the think block the template opened


def test_split_turns_respect_max_length_per_sample(tok):
    model = ScriptedLM(tok, SCRIPT, tail="<think>\n")
    first = generate_episodes(model, tok, [make_item()], greedy=True, max_new_tokens=64, multi_turn="split_turns")[0]
    second_prompt = first.samples[1].prompt_len
    cut = generate_episodes(ScriptedLM(tok, SCRIPT, tail="<think>\n"), tok, [make_item()], greedy=True,
                            max_new_tokens=64, multi_turn="split_turns", max_length=second_prompt)[0]
    assert cut.truncated and cut.turns == 1 and len(cut.samples) == 1 and cut.final_answer is None


def test_unclosed_think_block_is_no_answer_and_no_success(tok):
    """Qwen3-Thinking: the template opened <think>; a turn that never closes it has no answer."""
    from rc1.envs.verifiers import verify_episode

    fmt = ChatFormat(tok)
    item = make_item(task="gsm8k", answer="5")
    s = EpisodeState.start(item, fmt)
    s.add_model_turn(fmt.encode("2+3 is 5, so ANSWER: 5 I think") + [tok.eos_token_id], hit_limit=False)
    ep = s.to_episode()
    assert ep.final_answer is None and not verify_episode(item, ep).success
    assert ep.model_text.startswith("<think>\n")
    s = EpisodeState.start(item, fmt)
    s.add_model_turn(fmt.encode("2+3 is 5\n</think>\n\nANSWER: 5") + [tok.eos_token_id], hit_limit=False)
    ep = s.to_episode()
    assert ep.final_answer == "5" and verify_episode(item, ep).success
