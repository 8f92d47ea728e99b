"""rc1.models: base resolution, the tiny model, the verified cache, LoRA planning, QLoRA, full fine-tune."""

from __future__ import annotations

import json

import pytest
import torch

from rc1.runtime.errors import ConfigError

CPU = torch.device("cpu")


def test_tiny_is_deterministic_qwen3_with_real_tokenizer(tiny_dir):
    from safetensors.torch import load_file
    from transformers import AutoConfig

    from rc1.models.cache import verify_dir
    from rc1.models.loader import load_tokenizer
    from rc1.models.tiny import build_tiny_model

    assert verify_dir(tiny_dir, full=True) is None
    config = AutoConfig.from_pretrained(str(tiny_dir))
    assert config.model_type == "qwen3" and config.num_hidden_layers == 2 and config.hidden_size == 64
    tok = load_tokenizer(tiny_dir)
    assert config.vocab_size == len(tok)
    assert tok.padding_side == "left" and tok.pad_token_id is not None
    # A real BPE tokenizer: words are few tokens and round-trip; <think> is one token.
    ids = tok("The Seine flows through Paris.", add_special_tokens=False)["input_ids"]
    assert len(ids) <= 8 and tok.decode(ids) == "The Seine flows through Paris."
    assert len(tok("<think>", add_special_tokens=False)["input_ids"]) == 1
    # Same seed -> bit-identical weights to the cached build.
    saved = load_file(str(tiny_dir / "model.safetensors"))
    rebuilt = build_tiny_model(config).state_dict()
    for name, tensor in saved.items():
        assert torch.equal(tensor, rebuilt[name]), name


def test_tiny_chat_template_is_qwen3_style(tiny_dir):
    from rc1.models.loader import load_tokenizer

    tok = load_tokenizer(tiny_dir)
    msgs = [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "<think>old</think>\nA1"},
            {"role": "user", "content": "Q2"}, {"role": "assistant", "content": "<think>new</think>\nA2"}]
    text = tok.apply_chat_template(msgs, tokenize=False)
    assert "old" not in text and "A1" in text  # reasoning of turns before the last query is dropped
    assert "<think>new</think>\nA2<|im_end|>" in text  # the latest turn keeps it
    gen = tok.apply_chat_template(msgs[:1], tokenize=False, add_generation_prompt=True, enable_thinking=False)
    assert gen.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_cache_never_uses_a_half_written_dir(tmp_path, monkeypatch):
    from rc1.models.cache import MANIFEST, cached_dir, verify_dir

    monkeypatch.setenv("RC1_CACHE", str(tmp_path))
    calls = []

    def build(out):
        calls.append(out)
        (out / "weights.bin").write_bytes(b"x" * 1000)

    d = cached_dir("thing", build, {"v": 1})
    assert verify_dir(d, {"v": 1}, full=True) is None and len(calls) == 1
    assert cached_dir("thing", build, {"v": 1}) == d and len(calls) == 1  # reused
    (d / "weights.bin").write_bytes(b"x" * 999)  # truncated file
    assert "wrong size" in verify_dir(d, {"v": 1})
    cached_dir("thing", build, {"v": 1})
    assert len(calls) == 2 and verify_dir(d, {"v": 1}, full=True) is None
    (d / "weights.bin").write_bytes(b"y" * 1000)  # same size, other bytes
    assert "sha256" in verify_dir(d, {"v": 1}, full=True)
    assert "built with" in verify_dir(d, {"v": 2})  # another builder version -> rebuild

    def crash(out):
        (out / "weights.bin").write_bytes(b"partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cached_dir("other", crash, {"v": 1})
    assert not (tmp_path / "other").exists()
    assert not list(tmp_path.glob(".other.tmp-*"))
    (tmp_path / "manual").mkdir()
    (tmp_path / "manual" / "config.json").write_text("{}")
    assert MANIFEST in verify_dir(tmp_path / "manual")


def test_resolve_base_errors_are_one_line(tmp_path):
    from rc1.models.loader import resolve_base

    with pytest.raises(ConfigError, match="unknown embedded model"):
        resolve_base("embedded:gpt-5")
    with pytest.raises(ConfigError, match="unknown random model"):
        resolve_base("random:llama-huge")
    with pytest.raises(ConfigError, match="no config.json"):
        resolve_base(str(tmp_path))
    with pytest.raises(ConfigError, match="not a model directory"):
        resolve_base(str(tmp_path / "missing" / "dir"))
    # A hub id goes through huggingface_hub for real; HF_HUB_OFFLINE=1 (tests) -> not in the local cache.
    with pytest.raises(ConfigError, match="HF_HUB_OFFLINE"):
        resolve_base("rc1-test-org/definitely-not-cached-model")


def test_local_dir_base_loads(tiny_dir, tiny_cfg):
    from rc1.models.loader import load_model, resolve_base

    assert resolve_base(str(tiny_dir)) == tiny_dir.resolve()
    model, tok = load_model(tiny_cfg(model={"base": str(tiny_dir)}), device=CPU, for_training=False)
    assert not model.training and model.config.use_cache


def test_lora_targets_trimmed_from_the_end(tiny_cfg):
    from transformers import AutoModelForCausalLM

    from rc1.models.loader import load_model, plan_lora, resolve_base

    base = AutoModelForCausalLM.from_pretrained(str(resolve_base("random:qwen3-tiny")))
    cfg = tiny_cfg(model={"lora": {"r": 4, "target_modules": ["q_proj", "c_attn", "v_proj", "down_proj"]}})
    full = plan_lora(base, cfg.model.lora)
    assert full.targets == ["q_proj", "v_proj", "down_proj"] and full.absent == ["c_attn"] and not full.trimmed
    # q_proj: 64->64, v_proj: 64->32, down_proj: 128->64; r=4, 2 layers.
    assert full.trainable_params == 2 * 4 * ((64 + 64) + (64 + 32) + (128 + 64))
    budget = 2 * 4 * ((64 + 64) + (64 + 32))
    cfg = tiny_cfg(model={"lora": {"r": 4, "target_modules": ["q_proj", "v_proj", "down_proj"],
                                   "max_trainable_params": budget}})
    plan = plan_lora(base, cfg.model.lora)
    assert plan.targets == ["q_proj", "v_proj"] and plan.trimmed == ["down_proj"] and plan.trainable_params == budget
    model, _ = load_model(cfg, device=CPU, for_training=True)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert not any("down_proj" in n for n in trainable)
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == budget
    assert model.config.use_cache is False
    base = model.get_base_model()
    flag = "is_activation_checkpointing" if hasattr(type(base), "is_activation_checkpointing") else "is_gradient_checkpointing"
    assert getattr(base, flag)
    with pytest.raises(ConfigError, match="even the first target"):
        plan_lora(base, tiny_cfg(model={"lora": {"max_trainable_params": 10}}).model.lora)
    with pytest.raises(ConfigError, match="none is a linear layer"):
        plan_lora(base, tiny_cfg(model={"lora": {"target_modules": ["c_attn"]}}).model.lora)


def test_full_finetune_trains_every_parameter(tiny_cfg):
    from rc1.models.loader import load_model

    model, tok = load_model(tiny_cfg(finetune={"method": "full"}), device=CPU, for_training=True)
    assert all(p.requires_grad for p in model.parameters()) and model.training
    ids = torch.tensor([tok("hello there", add_special_tokens=False)["input_ids"]])
    model(input_ids=ids, labels=ids).loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_qlora_on_cpu_is_4bit_and_trains(tiny_cfg):
    import bitsandbytes as bnb

    from rc1.models.loader import check_finetune_support, load_model

    cfg = tiny_cfg(finetune={"method": "qlora"}, model={"lora": {"target_modules": ["q_proj", "v_proj"]}})
    assert check_finetune_support(cfg, CPU) == []  # bitsandbytes >= 0.48 runs nf4 on CPU
    model, tok = load_model(cfg, device=CPU, for_training=True)
    q = model.get_base_model().model.layers[0].self_attn.q_proj
    assert isinstance(q.base_layer, bnb.nn.Linear4bit)
    ids = torch.tensor([tok("two plus three is five", add_special_tokens=False)["input_ids"]])
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
    # A device bitsandbytes cannot quantize on: a clear problem naming the device, and load_model refuses.
    problems = check_finetune_support(cfg, torch.device("meta"))
    assert len(problems) == 1 and "device meta" in problems[0] and "finetune.method: lora" in problems[0]
    with pytest.raises(ConfigError, match="device meta"):
        load_model(cfg, device=torch.device("meta"), for_training=True)


def test_preflight_reports_config_problems(tiny_cfg):
    from rc1.models.loader import check_finetune_support

    assert check_finetune_support(tiny_cfg(), CPU) == []
    problems = check_finetune_support(tiny_cfg(model={"use_flash_attention_2": True, "base": "embedded:nope"}), CPU)
    assert any("flash_attention_2" in p and "CUDA" in p for p in problems)
    assert any("unknown embedded model" in p for p in problems)


@pytest.mark.real_model
def test_embedded_smollm2_converted_and_sensible():
    from rc1.config.schema import TrainConfig
    from rc1.models.cache import verify_dir
    from rc1.models.embedded import gguf_path
    from rc1.models.loader import load_model, resolve_base

    assert gguf_path().suffix == ".gguf"
    path = resolve_base("embedded:smollm2-135m-instruct")  # hashes every file once per process
    assert verify_dir(path) is None
    config = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    model, tok = load_model(TrainConfig(model={"base": "embedded:smollm2-135m-instruct"}), device=CPU,
                            for_training=False)
    assert not getattr(model, "is_quantized", False)
    prompt = tok.apply_chat_template([{"role": "user", "content": "What is 2+3? Reply with the number."}],
                                     tokenize=False, add_generation_prompt=True)
    enc = tok(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.inference_mode():
        out = model.generate(**enc, max_new_tokens=12, do_sample=False)
    answer = tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    assert "5" in answer, answer


def test_evict_drops_the_least_recently_used_evictable_entries_over_the_budget(tmp_path, monkeypatch):
    """Checkpoint GGUFs once piled up in the model cache (404 entries, 29 GB on the dev machine): the least
    recently used evictable entries go, with the files named after them; a use refreshes an entry; the `keep`
    newest stay even over budget; entries that are not evictable (the base model's) never go."""
    import os

    from rc1.models.cache import cached_dir, evict

    monkeypatch.setenv("RC1_CACHE", str(tmp_path))

    def entry(name: str, model: str, age_s: int) -> None:
        d = cached_dir(name, lambda out: (out / "model.gguf").write_bytes(b"x" * 1000), {"model": model})
        (tmp_path / f"{name}.check.json").write_text("{}")
        t = 1_700_000_000 - age_s
        os.utime(d, (t, t))

    for i in range(5):
        entry(f"gguf-ck{i}", f"checkpoint step_{i}", age_s=100 * (5 - i))   # ck4 the newest
    entry("gguf-base", "base embedded", age_s=10_000)
    ckpt = lambda meta: meta.get("model", "").startswith("checkpoint ")  # noqa: E731
    cached_dir("gguf-ck0", lambda out: None, {"model": "checkpoint step_0"})  # used now: the newest
    assert evict("gguf-", ckpt, budget_bytes=3_500) == ["gguf-ck2", "gguf-ck1"]
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert left == ["gguf-base", "gguf-base.check.json", "gguf-ck0", "gguf-ck0.check.json", "gguf-ck3",
                    "gguf-ck3.check.json", "gguf-ck4", "gguf-ck4.check.json"]
    assert not list(tmp_path.glob(".gguf-ck*.tmp-*"))
    assert evict("gguf-", ckpt, budget_bytes=0, keep=2) == ["gguf-ck3"]  # the two newest stay at any budget
    assert evict("gguf-", ckpt, budget_bytes=0, keep=2) == []


def test_a_checkpoint_gguf_past_the_budget_evicts_the_oldest_one(tmp_path, monkeypatch):
    """served_gguf of checkpoint weights keeps the checkpoint GGUFs within RC1_CHECKPOINT_GGUF_GB (the two
    most recent always); the base model's GGUF stays; a bad budget is a one-line config error."""
    from rc1.config.schema import TrainConfig
    from rc1.generation import base_ref
    from rc1.generation.serve import ModelRef, checkpoint_ref_name, served_gguf

    monkeypatch.setenv("RC1_CACHE", str(tmp_path))
    monkeypatch.setenv("RC1_CHECKPOINT_GGUF_GB", "0")
    base = base_ref(TrainConfig(model={"base": "random:qwen3-tiny"}))
    base_gguf = served_gguf(base, "f32")
    made = []
    for i in range(3):
        ref = ModelRef(name=checkpoint_ref_name(f"step_{i:05d}"), identity=str(i) * 64, load=base.load,
                       architecture=base.architecture)
        made.append(served_gguf(ref, "f32"))
    assert base_gguf.exists() and [p.exists() for p in made] == [False, True, True]
    monkeypatch.setenv("RC1_CHECKPOINT_GGUF_GB", "lots")
    ref = ModelRef(name=checkpoint_ref_name("step_00009"), identity="9" * 64, load=base.load,
                   architecture=base.architecture)
    with pytest.raises(ConfigError, match="RC1_CHECKPOINT_GGUF_GB='lots'"):
        served_gguf(ref, "f32")
    assert not list(tmp_path.glob(f"gguf-{'9' * 16}-*"))  # refused before building anything
    import torch

    from rc1.generation import open_sampler

    cfg = TrainConfig(model={"base": "random:qwen3-tiny"}, generation={"backend": "llamacpp"})
    with pytest.raises(ConfigError, match="RC1_CHECKPOINT_GGUF_GB"):  # a stage refuses; it does not fall back to torch
        open_sampler(cfg, base, device=torch.device("cpu"), dtype=torch.float32)
