"""rc1.generation: llama.cpp samples what torch samples, a GGUF that disagrees is not trusted, the vLLM backend
keeps rc1's turn rule and token bookkeeping (fake engine on a CPU), and the config refuses what cannot run."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pytest
import torch

from rc1.config.schema import TrainConfig
from rc1.envs.env import ChatFormat
from rc1.envs.rollout import eos_ids
from rc1.generation import SamplingParams, base_ref, choose_backend, open_sampler, sample_episodes
from rc1.generation.serve import ModelRef
from rc1.generation.torch_backend import TorchSampler
from rc1.generation.vllm_backend import VllmSampler
from rc1.runtime.fingerprint import sha256_json

TINY = "random:qwen3-tiny"
ITEMS = [{"id": f"q{i}", "task": "gsm8k", "question": q, "answer": "4", "tools": ["calc"], "corpus": []}
         for i, q in enumerate(["What is 2+2?", "How many legs do 7 spiders have?", "Is a tomato a fruit?"])]


def _cfg(backend: str = "auto", **model) -> TrainConfig:
    return TrainConfig(model={"base": TINY, "max_new_tokens": 12, **model}, generation={"backend": backend},
                       run={"threads": 1, "device_pref": ["cpu"]})


def _same_form(a, b) -> None:
    assert [e.input_ids for e in a] == [e.input_ids for e in b]
    assert [e.action_mask for e in a] == [e.action_mask for e in b]
    assert [e.transcript for e in a] == [e.transcript for e in b]


def test_llamacpp_gives_torchs_greedy_episodes_and_logprobs():
    cfg = _cfg("llamacpp")
    ll = sample_episodes(cfg, base_ref(cfg), ITEMS, greedy=True, max_turns=2, dtype=torch.float32)
    to = sample_episodes(_cfg("torch"), base_ref(cfg), ITEMS, greedy=True, max_turns=2, dtype=torch.float32)
    assert (ll.backend, to.backend) == ("llamacpp", "torch")
    assert {e.backend for e in ll.episodes} == {"llamacpp"} and {e.backend for e in to.episodes} == {"torch"}
    assert ll.check["ok"] and ll.check["max_logprob_diff"] <= ll.check["tolerance"]
    _same_form(ll.episodes, to.episodes)
    diffs = [abs(x - y) for a, b in zip(ll.episodes, to.episodes) for x, y in zip(a.logprobs, b.logprobs)]
    assert diffs and max(diffs) < 0.05


def test_llamacpp_samples_reproducibly_and_records_the_sampling_distributions_logprobs():
    """Temperature means the same: each token's recorded log-prob is torch's log-prob of it under
    softmax(logits / temperature), recomputed by a forward pass over the episode (a group's copies
    share their prompt in the batch). The same seed gives the same episodes, another seed others."""
    from rc1.envs.sampling import sampling_logprobs

    cfg = _cfg("llamacpp", temperature=0.8)
    kw = dict(greedy=False, n_per_item=3, seed=7, max_turns=1, dtype=torch.float32)
    ll = sample_episodes(cfg, base_ref(cfg), ITEMS, **kw)
    assert ll.backend == "llamacpp"
    model, _ = base_ref(cfg).load(torch.device("cpu"), torch.float32)
    for ep in ll.episodes:
        ids = torch.tensor([ep.input_ids])
        with torch.no_grad():
            logp = sampling_logprobs(model(input_ids=ids).logits[0, :-1].float(), 0.8, 1.0)
        mask = torch.tensor(ep.action_mask[1:], dtype=torch.bool)
        ref = logp[mask].gather(-1, ids[0, 1:][mask][:, None]).squeeze(-1)
        assert torch.allclose(ref, torch.tensor(ep.logprobs), atol=0.05)
    again = sample_episodes(cfg, base_ref(cfg), ITEMS, **kw)
    assert [e.input_ids for e in again.episodes] == [e.input_ids for e in ll.episodes]
    other = sample_episodes(cfg, base_ref(cfg), ITEMS, **{**kw, "seed": 8})
    assert [e.input_ids for e in other.episodes] != [e.input_ids for e in ll.episodes]


def _perturbed_copy(src, dst):
    """The tiny model's directory with one weight matrix scrambled (a GGUF made from it is wrong)."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("rc1_manifest.json"))
    (weights,) = list(dst.glob("*.safetensors"))
    tensors = load_file(str(weights))
    name = next(k for k in tensors if k.endswith("mlp.down_proj.weight"))
    tensors[name] = torch.randn_like(tensors[name]) * 4
    save_file(tensors, str(weights))
    return dst


def test_a_gguf_that_disagrees_with_torch_falls_back_to_torch_with_one_line(tmp_path, tiny_dir, caplog):
    cfg = _cfg("llamacpp")
    real = base_ref(cfg)
    wrong = _perturbed_copy(tiny_dir, tmp_path / "wrong")
    ref = ModelRef(name="tiny with a wrong GGUF", identity=sha256_json("tiny, scrambled down_proj"), load=real.load, hf_dir=wrong,
                   architecture=real.architecture)
    with caplog.at_level("WARNING", logger="rc1.generation"):
        gen = sample_episodes(cfg, ref, ITEMS[:1], greedy=True, max_turns=1, dtype=torch.float32)
    assert gen.backend == "torch" and {e.backend for e in gen.episodes} == {"torch"}
    assert "llama.cpp disagrees with torch" in gen.note and not gen.check["ok"]
    lines = [r.getMessage() for r in caplog.records if "disagrees" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0]


def test_auto_picks_vllm_on_cuda_llamacpp_for_exportable_models_else_torch(monkeypatch):
    import rc1.generation as G

    monkeypatch.setattr(G, "installed", lambda b: True)
    assert choose_backend("auto", "cuda", "llama") == "vllm"
    assert choose_backend("auto", "cpu", "qwen3") == "llamacpp"
    assert choose_backend("auto", "mps", "llama") == "llamacpp"
    assert choose_backend("auto", "cpu", "gpt2") == "torch"       # no GGUF export for it
    assert choose_backend("torch", "cuda", "llama") == "torch"
    monkeypatch.setattr(G, "installed", lambda b: b == "torch")
    assert choose_backend("auto", "cuda", "llama") == "torch"


@pytest.mark.parametrize("backend, words", [("vllm", "vllm"), ("tensorrt", "auto")])
def test_the_config_refuses_a_backend_this_machine_cannot_run(backend, words):
    from pydantic import ValidationError

    from rc1.config.load import format_validation_error

    if backend == "vllm" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")  # pragma: no cover
    with pytest.raises(ValidationError) as err:
        TrainConfig(generation={"backend": backend})
    (line,) = format_validation_error(err.value)
    assert line.startswith("generation.backend: ") and words in line


def test_rc1_config_verify_exits_2_naming_the_key(ws):
    from typer.testing import CliRunner

    from rc1.cli.main import app

    ws.path("configs/gen.yaml").write_text("generation:\n  backend: vllm\n")
    result = CliRunner().invoke(app, ["config", "verify", "--config", "configs/gen.yaml"],
                                env={"RC1_WORKDIR": str(ws.root)})
    assert result.exit_code == 2
    assert "generation.backend" in result.output


# ----------------------------------------------------------------------------- vLLM, with a fake engine
class FakeLLM:
    """vLLM's LLM.generate as rc1 calls it: token ids in, token ids + the sampled tokens' log-probs out.
    It answers every prompt with a scripted text (a tool call with more text after it, or an answer)."""

    def __init__(self, tok, script):
        self.tok, self.script, self.calls = tok, list(script), []

    def generate(self, requests, params, use_tqdm=False):
        outs = []
        for req, p in zip(requests, params):
            self.calls.append((len(req["prompt_token_ids"]), p))
            ids = self.tok(self.script.pop(0), add_special_tokens=False)["input_ids"][:p.max_tokens]
            logprobs = [{t: SimpleNamespace(logprob=-0.5)} for t in ids]
            outs.append(SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids, logprobs=logprobs)]))
        return outs


def test_vllm_backend_keeps_rc1s_turn_rule_and_token_bookkeeping(tiny_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_dir))
    engine = FakeLLM(tok, ["TOOL: calc 2+2\nand then I keep talking", "ANSWER: 4\n"])
    sampler = VllmSampler(engine, tok, [tok.eos_token_id], params_cls=lambda **kw: SimpleNamespace(**kw))
    (ep,) = sampler.episodes(ITEMS[:1], num_generations=1,
                             params=SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=40, seed=3))
    assert ep.backend == "vllm" and ep.final_answer == "4" and ep.tool_hops == 1 and ep.turns == 2
    first = ep.transcript[2]["content"]
    assert first.startswith("TOOL: calc 2+2") and "keep talking" not in first   # cut at the action line's newline
    assert "RESULT (calc): 4" in ep.transcript[3]["content"]
    assert len(ep.logprobs) == sum(ep.action_mask) and set(ep.logprobs) == {-0.5}
    (_, p1), (_, p2) = engine.calls
    assert (p1.temperature, p1.top_p, p1.max_tokens, p1.logprobs) == (0.7, 0.9, 40, 0)
    assert p1.seed is not None and p1.seed != p2.seed and p1.stop_token_ids == [tok.eos_token_id]


def test_a_sampler_satisfies_the_protocol(tiny_dir):
    from rc1.generation import Sampler

    cfg = _cfg("torch")
    sampler, note, _ = open_sampler(cfg, base_ref(cfg), dtype=torch.float32)
    assert isinstance(sampler, TorchSampler) and isinstance(sampler, Sampler) and note == ""
    fmt = ChatFormat(sampler.tokenizer, eos_ids(sampler.model, sampler.tokenizer))
    assert fmt.eos_ids
    sampler.close()


def test_the_check_outcome_is_kept_beside_the_gguf():
    from rc1.generation.serve import served_gguf
    from rc1.generation.verify import check_record_path

    cfg = _cfg("llamacpp")
    sample_episodes(cfg, base_ref(cfg), ITEMS[:1], greedy=True, max_turns=1, dtype=torch.float32)
    record = json.loads(check_record_path(served_gguf(base_ref(cfg), "f32")).read_text())
    assert record["result"]["ok"] and record["result"]["tokens_compared"] > 0


def test_the_shared_prefix_leaves_every_prompt_its_last_token():
    from rc1.envs.rollout import common_prefix

    assert common_prefix([(1, 2, 3, 4), (1, 2, 3, 9), (1, 2, 7)]) == 2
    assert common_prefix([(1, 2, 3), (1, 2, 3, 4)]) == 2        # the shorter one keeps its last token
    assert common_prefix([(5, 2), (6, 2)]) == 0



def _covers_each_prompt_once(prompts, plan) -> None:
    """Every prompt's tokens are prefilled or copied exactly once, a copy only of tokens that earlier waves made."""
    made: dict[int, list[tuple[int, int]]] = {}  # row -> (prefilled up to, wave) of each of its segments
    for seg in plan:
        have = made.get(seg.row, [])
        if seg.source != seg.row:
            assert not have, "a copy lands in a sequence that already holds tokens"
            assert max((end for end, wave in made[seg.source] if wave < seg.wave), default=0) >= seg.start
            assert tuple(prompts[seg.source][:seg.start]) == tuple(prompts[seg.row][:seg.start])
        else:
            assert (have[-1][0] if have else 0) == seg.start
        made[seg.row] = have + [(seg.end, seg.wave)]
    assert {r: ends[-1][0] for r, ends in made.items()} == {r: len(p) for r, p in enumerate(prompts)}


def test_the_prefix_tree_prefills_each_shared_span_once_and_every_prompt_exactly():
    from rc1.envs.rollout import prefix_tree

    header, sys_a, sys_b = list(range(100, 120)), list(range(200, 240)), list(range(300, 330))
    prompts = [header + sys_a + [1, 2, 3], header + sys_b + [4, 5], header + sys_a + [6, 7, 8, 9],
               header + sys_b + [4, 6], [7] * 30]
    plan = prefix_tree(prompts)
    _covers_each_prompt_once(prompts, plan)
    prefilled = sum(s.end - s.start for s in plan)
    # one header, each system prompt once (b's prompts also share their first question token), each
    # question's own tokens, the unrelated prompt whole (261 tokens in all)
    assert prefilled == 20 + 40 + 31 + (3 + 4) + (1 + 1) + 30
    # a span under min_shared is not prefilled apart: a's prompts share 60 tokens, b's 51
    plan = prefix_tree(prompts, min_shared=55)
    _covers_each_prompt_once(prompts, plan)
    assert sum(s.end - s.start for s in plan) == 60 + (3 + 4) + 2 * 52 + 30
    # a prompt that is a prefix of another, identical leading tokens, one prompt, none
    for case in ([[1] * 20, [1] * 25], [[5] * 18 + [1], [5] * 18 + [2]], [[3, 4]], []):
        _covers_each_prompt_once(case, prefix_tree(case))


def test_llamacpp_shares_each_roles_system_prompt_and_still_decodes_what_torch_does():
    """Items under two system prompts in one batch: the llama.cpp prefix tree prefills each once, and the
    greedy episodes are torch's (same tokens, log-probs within the check's tolerance)."""
    systems = ["You are a patient maths tutor. Reason step by step and give the final answer as 'Answer: ...'.",
               "You are a terse assistant for a quiz show. Reply with the answer only, as 'Answer: ...'."]
    items = [{**it, "id": f"{it['id']}-{k}",
              "messages": [{"role": "system", "content": systems[k]}, {"role": "user", "content": it["question"]}]}
             for k in range(2) for it in ITEMS]
    cfg = _cfg("llamacpp")
    ll = sample_episodes(cfg, base_ref(cfg), items, greedy=True, max_turns=1, dtype=torch.float32)
    to = sample_episodes(_cfg("torch"), base_ref(cfg), items, greedy=True, max_turns=1, dtype=torch.float32)
    assert ll.backend == "llamacpp" and ll.check["ok"]
    _same_form(ll.episodes, to.episodes)
    diffs = [abs(x - y) for a, b in zip(ll.episodes, to.episodes) for x, y in zip(a.logprobs, b.logprobs)]
    assert diffs and max(diffs) < 0.05

def test_a_bf16_gguf_is_served_only_after_its_check_against_torch():
    import gguf

    from rc1.generation.serve import served_gguf

    cfg = TrainConfig(model={"base": TINY, "max_new_tokens": 12}, run={"threads": 1, "device_pref": ["cpu"]},
                      generation={"backend": "llamacpp", "gguf_dtype": "bf16"})
    gen = sample_episodes(cfg, base_ref(cfg), ITEMS, greedy=True, max_turns=1, dtype=torch.float32)
    path = served_gguf(base_ref(cfg), "bf16")
    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(path)).tensors}
    assert types["blk.0.ffn_down.weight"] == "BF16" and types["blk.0.attn_norm.weight"] == "F32"
    assert gen.check["gguf_dtype"] == "bf16" and gen.check["gguf"] == path.name
    # bf16 rounding is measured, not assumed away: here within the tolerance, so llama.cpp samples
    assert gen.check["ok"] and 0 < gen.check["max_logprob_diff"] <= gen.check["tolerance"]
    assert gen.backend == "llamacpp" and {e.backend for e in gen.episodes} == {"llamacpp"}


def test_one_table_names_the_backends_and_one_params_object_carries_every_stages_sampling():
    """generation.backend's choices are the registry table's names; training rollouts, the drift stage and the
    fixed-weight stages build their SamplingParams from the config in one place."""
    import typing

    from rc1.config.schema import GenerationSection
    from rc1.generation import BACKENDS, SamplingParams

    choices = typing.get_args(GenerationSection.model_fields["backend"].annotation)
    assert choices == ("auto", *BACKENDS)
    cfg = _cfg("torch")
    p = SamplingParams.from_config(cfg, greedy=False, seed=3, max_turns=2, max_length=100, batch_size=6)
    assert (p.temperature, p.top_p, p.max_new_tokens) == (cfg.model.temperature, cfg.model.top_p,
                                                          cfg.model.max_new_tokens)
    assert (p.seed, p.max_turns, p.max_length, p.batch_size, p.greedy) == (3, 2, 100, 6, False)
    assert SamplingParams.from_config(cfg, greedy=True, max_new_tokens=5).max_new_tokens == 5
    # the training rollout's settings, which the fit and the learning signal sample with too
    cfg.strategy.max_turns, cfg.data.max_length, cfg.strategy.multi_turn = 3, 200, "split_turns"
    t = SamplingParams.training(cfg, seed=7, rows=0)
    assert (t.max_turns, t.max_length, t.multi_turn, t.seed, t.batch_size, t.greedy) == (3, 200, "split_turns", 7, 1, False)
    assert (t.temperature, t.max_new_tokens) == (cfg.model.temperature, cfg.model.max_new_tokens)
