"""GGUF export: merged LoRA -> HF dir -> GGUF, checked against llama.cpp."""

from __future__ import annotations

import torch

CPU = torch.device("cpu")
PROMPTS = ["What is 2+3?", "Name a river in France."]


def test_lora_model_exports_to_gguf_that_llama_cpp_runs_identically(tmp_path, tiny_cfg):
    from safetensors.torch import load_file

    from rc1.models.export import GgufChecker, convert_hf_to_gguf, export_model
    from rc1.models.loader import load_model, resolve_base

    model, tok = load_model(tiny_cfg(model={"lora": {"r": 4, "target_modules": ["q_proj", "v_proj", "down_proj"]}}),
                            device=CPU, for_training=True)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # a "trained" adapter: LoRA B is zero at init, which would merge to the base
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    out = export_model(model, tok, tmp_path / "export")
    assert hasattr(model, "peft_config")  # merged on a copy: the training model keeps its adapters
    merged = load_file(str(out["hf_dir"] / "model.safetensors"))
    base = load_file(str(resolve_base("random:qwen3-tiny") / "model.safetensors"))
    assert not any("lora" in k for k in merged)
    assert not torch.equal(merged["model.layers.0.self_attn.q_proj.weight"], base["model.layers.0.self_attn.q_proj.weight"])
    assert out["gguf"].stat().st_size > 1_000_000
    checker = GgufChecker(out["hf_dir"])
    assert checker.check(out["gguf"], PROMPTS, new_tokens=5) == []
    # The check can fail: llama.cpp running the base model's GGUF disagrees with the trained model.
    other = convert_hf_to_gguf(resolve_base("random:qwen3-tiny"), tmp_path / "base.gguf")
    problems = checker.check(other, PROMPTS[:1], new_tokens=3)
    assert problems and "llama.cpp" in problems[0]


def test_unsupported_architecture_is_a_clear_error(tmp_path):
    import json

    import pytest

    from rc1.models.export import convert_hf_to_gguf
    from rc1.runtime.errors import ConfigError

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ConfigError, match="architecture 'gpt2' is not supported"):
        convert_hf_to_gguf(tmp_path, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists()
