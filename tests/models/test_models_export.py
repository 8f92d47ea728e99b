"""GGUF export: merged LoRA -> HF dir -> GGUF, checked against llama.cpp; `rc1 export gguf` on a trained checkpoint."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from tests.helpers.workspace import make_workspace

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

    from rc1.models.export import convert_hf_to_gguf
    from rc1.runtime.errors import ConfigError

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ConfigError, match="architecture 'gpt2' is not supported"):
        convert_hf_to_gguf(tmp_path, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists()


def test_export_gguf_writes_nothing_when_llama_cpp_disagrees(tmp_path, tiny_cfg):
    from rc1.models.export import export_gguf
    from rc1.models.loader import load_model
    from rc1.runtime.errors import GateRefused

    model, tok = load_model(tiny_cfg(), device=CPU, for_training=False)
    out = tmp_path / "m.gguf"
    out.write_bytes(b"an earlier export")
    # A wrong llama.cpp pre-tokenizer for this tokenizer: llama.cpp splits the text differently.
    with pytest.raises(GateRefused, match="disagree on 1 of 1 check prompts; nothing written") as exc:
        export_gguf(model, tok, out, outtype="f16", pre="deepseek-llm", prompts=("Don't stop: 1234+5678=?  ok\n\n  yes!!",))
    assert "llama.cpp tokenizes differently" in exc.value.lines[0]
    assert out.read_bytes() == b"an earlier export" and [p.name for p in tmp_path.iterdir()] == ["m.gguf"]


# ----------------------------------------------------------------------------- rc1 export gguf
STEP = "checkpoints/t/step_00002"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A workspace whose run trained random:qwen3-tiny with LoRA for 2 SFT steps; step 2 is also best/. (SFT: the
    adapter must really move, and GRPO on a random model that never succeeds gets all-zero advantages, since
    shaping counts only in groups whose correctness varies.)"""
    from rc1.config.load import load_train_config
    from rc1.training.base import make_recipe
    from rc1.eval.best import update_best
    from rc1.runtime.workspace import Workspace

    root = tmp_path_factory.mktemp("export_ws")
    ws = Workspace(root)
    conf = make_workspace(root, "random:qwen3-tiny", strategy="sft", max_steps=2, save_steps=2, method="lora")
    cfg = load_train_config(conf, ws)
    recipe = make_recipe(ws, cfg, config_path=str(conf))
    recipe.setup()
    assert recipe.train() == "completed"
    recipe.cleanup()
    update_best(ws, cfg.checkpoint_dir, ws.path(STEP), cfg.eval.metric, 0.25, "reports/eval_test.json",
                {"split": "dev", "path": "data/eval_min.jsonl", "n": 4, "key": "dev-items"})  # best/ is chosen on dev
    return ws, str(conf), cfg


def export(ws, *args):
    from rc1.cli.main import app

    return CliRunner().invoke(app, ["--workdir", str(ws.root), "export", "gguf", *args])


def merged_down_proj(ws, cfg) -> tuple[np.ndarray, np.ndarray]:
    """Layer 0's mlp.down_proj: (base, base + alpha/r * B @ A) from the files, independently of peft."""
    from safetensors.numpy import load_file

    from rc1.models.loader import resolve_base

    base = load_file(str(resolve_base(cfg.model.base) / "model.safetensors"))["model.layers.0.mlp.down_proj.weight"]
    adapter = load_file(str(ws.path(STEP) / "adapter_model.safetensors"))
    (a,) = [v for k, v in adapter.items() if "layers.0.mlp.down_proj.lora_A" in k]
    (b,) = [v for k, v in adapter.items() if "layers.0.mlp.down_proj.lora_B" in k]
    return base, base + (cfg.model.lora.alpha / cfg.model.lora.r) * (b @ a)


@pytest.mark.parametrize("dtype,checkpoint,matrix_type,tol", [
    ("f32", STEP, "F32", 1e-6),
    ("f16", "latest", "F16", 2e-3),
    ("bf16", "latest", "BF16", 8e-3),
    ("q8_0", "best", "Q8_0", 2e-2),
])
def test_export_gguf_merges_the_trained_adapter_and_passes_the_llama_cpp_check(trained, dtype, checkpoint,
                                                                              matrix_type, tol):
    import gguf

    ws, conf, cfg = trained
    res = export(ws, "--config", conf, "--checkpoint", checkpoint, "--out", f"export/{dtype}/model.gguf",
                 "--dtype", dtype)
    assert res.exit_code == 0, res.output
    assert "llama.cpp and transformers generate the same tokens on 2 check prompts" in res.output
    out_dir = ws.path(f"export/{dtype}")
    assert [p.name for p in out_dir.iterdir()] == ["model.gguf"]  # the merged HF dir and staged file are gone
    reader = gguf.GGUFReader(str(out_dir / "model.gguf"))
    tensors = {t.name: t for t in reader.tensors}
    assert tensors["blk.0.attn_norm.weight"].tensor_type.name == "F32"  # norms stay f32
    down = tensors["blk.0.ffn_down.weight"]
    assert down.tensor_type.name == matrix_type
    assert tensors["token_embd.weight"].tensor_type.name == matrix_type
    base, merged = merged_down_proj(ws, cfg)
    written = gguf.quants.dequantize(down.data, down.tensor_type).reshape(merged.shape)
    assert np.abs(written - merged).max() <= tol * np.abs(merged).max()
    if dtype == "f32":  # exact: the adapter (a ~1e-3 change after 2 steps) really was merged in
        assert np.abs(merged - base).max() > 1e-5
        assert np.abs(written - base).max() > 1e-5


@pytest.mark.parametrize("args,message", [
    (["--checkpoint", "checkpoints/t/step_09999"], "checkpoint checkpoints/t/step_09999: no such checkpoint directory"),
    (["--checkpoint", "latest"], "no `latest` checkpoint"),
    (["--checkpoint", "best"], "no best checkpoint for eval.metric 'success'"),
    (["--dtype", "q4_k"], "--dtype 'q4_k': not a GGUF export type; use one of f32, f16, bf16, q8_0"),
])
def test_export_gguf_bad_checkpoint_or_dtype_is_one_line_and_exit_2(tmp_path, args, message):
    from rc1.runtime.workspace import Workspace

    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, "random:qwen3-tiny")  # nothing trained: no checkpoint, no best/
    res = export(ws, "--config", str(conf), "--out", "m.gguf", *args)
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], res.output
    assert not ws.path("m.gguf").exists()


def test_export_gguf_needs_a_config(tmp_path):
    from rc1.runtime.workspace import Workspace

    res = export(Workspace(tmp_path), "--config", "configs/missing.yaml", "--out", "m.gguf")
    assert res.exit_code == 2 and "configs/missing.yaml" in res.output, res.output
