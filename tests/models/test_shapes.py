"""rc1.models.shapes: shape tables that agree with the real models, offline lookup, random-weight builds."""

from __future__ import annotations

import json

import pytest
import torch

from rc1.models.shapes import (KNOWN_BASES, QWEN3_4B, QWEN3_TINY, SMOLLM2_135M, ModelShape, hf_config, layer_view,
                               shape_of, write_random_checkpoint)


def _meta_params(config) -> int:
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def test_qwen3_4b_shape_is_the_published_one_and_its_arithmetic_matches_transformers():
    # Qwen3-4B's model card: 4.0B parameters, 3.6B non-embedding; 36 layers, 32 Q / 8 KV heads.
    assert (QWEN3_4B.hidden, QWEN3_4B.layers, QWEN3_4B.heads, QWEN3_4B.kv_heads, QWEN3_4B.head_dim,
            QWEN3_4B.intermediate, QWEN3_4B.vocab, QWEN3_4B.tied) == (2560, 36, 32, 8, 128, 9728, 151936, True)
    assert round(QWEN3_4B.params / 1e9, 2) == 4.02
    assert round((QWEN3_4B.params - QWEN3_4B.embedding_params) / 1e9, 1) == 3.6
    # The shape's parameter count is what transformers builds for it (meta device: no memory).
    assert _meta_params(hf_config(QWEN3_4B, bos=1, eos=2, pad=2)) == QWEN3_4B.params
    # LoRA r=16 on all seven projections: r * (in + out) per layer and module.
    assert QWEN3_4B.lora_params(16, ["q_proj"]) == 36 * 16 * (2560 + 4096)
    assert QWEN3_4B.lora_params(16, ["q_proj", "not_a_module"]) == QWEN3_4B.lora_params(16, ["q_proj"])


def test_tiny_table_entry_matches_the_built_tiny_model(tiny_dir):
    built = shape_of(str(tiny_dir))
    assert built is not None and built.params == QWEN3_TINY.params
    assert (built.hidden, built.layers, built.vocab, built.kv_heads, built.qk_norm) == (
        QWEN3_TINY.hidden, QWEN3_TINY.layers, QWEN3_TINY.vocab, QWEN3_TINY.kv_heads, True)
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir))
    assert sum(p.numel() for p in model.parameters()) == QWEN3_TINY.params


@pytest.mark.real_model
def test_smollm2_table_entry_matches_the_converted_embedded_model():
    from rc1.models.loader import resolve_base

    built = shape_of(str(resolve_base("embedded:smollm2-135m-instruct")))
    assert built is not None
    assert {k: v for k, v in built.to_dict().items() if k not in ("name", "source")} == \
        {k: v for k, v in SMOLLM2_135M.to_dict().items() if k not in ("name", "source")}


def test_shape_of_is_offline_and_says_none_when_it_cannot_know(tmp_path):
    assert shape_of("Qwen/Qwen3-4B-Thinking-2507") == QWEN3_4B          # the user's model, from the table
    assert shape_of("random:qwen3-4b") == QWEN3_4B
    assert shape_of("embedded:smollm2-135m-instruct") == SMOLLM2_135M
    assert shape_of("someorg/some-unknown-model") is None                 # not in the HF cache, not in the table
    assert shape_of("random:nope") is None
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 4,
                                               "num_attention_heads": 8, "intermediate_size": 1024,
                                               "vocab_size": 1000, "tie_word_embeddings": False}))
    s = shape_of(str(d))
    assert (s.kv_heads, s.head_dim, s.tied, s.qk_norm) == (8, 64, False, False) and s.head_params == 512 * 1000
    (d / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 512}))  # not a decoder config
    assert shape_of(str(d)) is None
    assert set(KNOWN_BASES) >= {"Qwen/Qwen3-4B-Thinking-2507", "embedded:smollm2-135m-instruct", "random:qwen3-tiny"}


def test_random_checkpoint_is_deterministic_and_layer_view_keeps_the_first_layers(tmp_path):
    from dataclasses import replace

    from transformers import AutoModelForCausalLM

    shape = replace(QWEN3_TINY, layers=3)
    cfg = hf_config(shape, bos=1, eos=2, pad=2)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        cfg.save_pretrained(tmp_path / name)
        index = write_random_checkpoint(tmp_path / name, cfg, seed=5, shard_bytes=300_000)
    assert len(set(index["weight_map"].values())) > 1  # sharded
    full = AutoModelForCausalLM.from_pretrained(tmp_path / "a")
    again = AutoModelForCausalLM.from_pretrained(tmp_path / "b")
    assert sum(p.numel() for p in full.parameters()) == shape.params
    assert all(torch.equal(p, q) for p, q in zip(full.parameters(), again.parameters()))
    w = full.model.layers[0].mlp.up_proj.weight
    assert w.std().item() == pytest.approx(0.02, rel=0.1) and torch.all(full.model.norm.weight == 1)

    view = layer_view(tmp_path / "a", 2, tmp_path / "v")
    part = AutoModelForCausalLM.from_pretrained(view)
    assert len(part.model.layers) == 2 and sum(p.numel() for p in part.parameters()) == shape.with_layers(2).params
    assert torch.equal(part.model.layers[1].self_attn.q_proj.weight, full.model.layers[1].self_attn.q_proj.weight)
    with pytest.raises(ValueError, match="layers must be in"):
        layer_view(tmp_path / "a", 4, tmp_path / "v4")


def test_random_4b_is_a_known_random_base():
    from rc1.models.loader import KNOWN_RANDOM, resolve_base
    from rc1.runtime.errors import ConfigError

    assert "qwen3-4b" in KNOWN_RANDOM
    with pytest.raises(ConfigError, match="unknown random model"):
        resolve_base("random:qwen3-40b")
    assert isinstance(QWEN3_4B, ModelShape) and QWEN3_4B.source
