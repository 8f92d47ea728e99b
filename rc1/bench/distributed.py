"""`rc1 bench distributed`: N processes vs 1 process with the same gradient accumulation.

Work: GRPO (or `--strategy ppo|rloo|...`), full fine-tuning (or LoRA), `steps` optimizer steps of
run.gradient_accumulation = N micro-steps,
on `random:qwen3-tiny` (or a random Qwen3 of a larger shape: `--shape qwen3-0.6b|qwen3-1.7b|qwen3-4b`),
the same data, config and seeds. The 1-process run trains in a fresh process; the N-process run is launched
exactly as `rc1 train --nproc N` launches it (rc1.training.launcher, Accelerate, DDP). One thread per
process. Both runs go through the TrainingRecipe `rc1 train` uses (no gates, no checkpoints).
The bench refuses a comparison in which training moved no parameter (it would prove nothing).

Reported (reports/bench/distributed.json): `max_abs_param_diff` between the two runs' trained parameters
(and how far training moved them, for scale), seconds per optimizer step of each run (median over the steps
after the first), peak memory of every rank (CUDA allocator peak on a GPU, peak RSS on a CPU), and the
machine: CPU / GPU, cores, load average before and after.

Usage: rc1 bench distributed [--steps 4 --processes 2 --device cuda --shape qwen3-0.6b
--finetune lora]. The worker entry (`python -m rc1.bench.distributed --workdir W worker CONFIG OUT`) is
what both runs execute.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOLERANCE = 1e-5
# Random Qwen3 shapes (the real models' dimensions; the tiny model's tokenizer, so the vocabulary is small).
SHAPES = {
    "qwen3-0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128),
    "qwen3-1.7b": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128),
    "qwen3-4b": dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
                     num_key_value_heads=8, head_dim=128),
}
WEIGHTS = {"correctness": 0.45, "reasoning": 0.12, "grounding": 0.12, "clarity": 0.07, "conciseness": 0.06,
           "format": 0.08, "clarification": 0.10}


def bench_items(n: int) -> list[dict]:
    """Deterministic one-step arithmetic prompts with exact answers."""
    out = []
    for i in range(n):
        a, b = 10 + (i * 7) % 83, 3 + (i * 11) % 61
        q = f"What is {a} + {b}? Reply with the number."
        out.append({"id": f"d{i:04d}", "task": "gsm8k", "template": "bench/arith", "role": "student", "style": "plain",
                    "messages": [{"role": "user", "content": q}], "question": q, "answer": str(a + b), "aliases": [],
                    "supporting": [], "corpus": [], "needs_clarification": False, "hidden_detail": None, "tools": [],
                    "max_turns": 1, "meta": {}, "bucket": ("easy", "medium", "hard")[i % 3]})
    return out


def _random_qwen3(out: Path, shape: str) -> Path:
    """A random-weight Qwen3 of `shape` with the tiny model's tokenizer, saved to `out`."""
    from rc1.models.tiny import build_tiny_model, build_tiny_tokenizer, tiny_config

    tok = build_tiny_tokenizer()
    config = tiny_config(len(tok), tok.bos_token_id, tok.eos_token_id, tok.pad_token_id)
    for k, v in {**SHAPES[shape], "max_position_embeddings": 4096}.items():
        setattr(config, k, v)
    model = build_tiny_model(config)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))
    return out


def _workspace(root: Path, *, base: str, processes: int, steps: int, device: str, finetune: str, work: dict) -> Path:
    import yaml

    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "configs").mkdir(parents=True, exist_ok=True)
    (root / "data/train_min.jsonl").write_text("".join(json.dumps(it) + "\n" for it in bench_items(64)))
    (root / "configs/weights.json").write_text(json.dumps({"version": "bench", "weights": WEIGHTS}))
    cfg = {"profile": "laptop", "seed_pool": "data/none.jsonl", "callbacks": ["logging"],
           "run": {"name": "bench", "seed": 11, "max_steps": steps * processes, "gradient_accumulation": processes,
                   "save_steps": 100000, "eval_steps": 100000, "threads": 1, "device_pref": [device],
                   "mixed_precision": "auto"},
           "model": {"base": base, "max_new_tokens": work["max_new_tokens"], "gradient_checkpointing": False,
                     "lora": {"enable": finetune == "lora", "r": 8, "alpha": 16, "dropout": 0.0}},
           "finetune": {"method": finetune},
           "engine": {"name": "pure_pt", "lr": work["lr"]},
           "strategy": {"name": work["strategy"], "num_generations": work["completions_per_prompt"],
                        "prompts_per_step": work["prompts"], "kl_coef": 0.04},
           "distributed": {"backend": work["backend"]}}
    (root / "configs/bench.yaml").write_text(yaml.safe_dump(cfg))
    return Path("configs/bench.yaml")


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[2]),
                                                                      os.environ.get("PYTHONPATH")) if p),
            "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}


def _one_process(ws_root: Path, conf: Path, out: Path) -> None:
    cmd = [sys.executable, "-m", "rc1.bench.distributed", "--workdir", str(ws_root), "worker", str(conf), str(out)]
    res = subprocess.run(cmd, env=_env(), capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"the 1-process bench run failed:\n{res.stderr[-4000:]}")


def _n_processes(ws_root: Path, conf: Path, out: Path, processes: int) -> None:
    from rc1.config.load import load_train_config
    from rc1.runtime.workspace import Workspace
    from rc1.training import launcher

    ws = Workspace(ws_root)
    cfg = load_train_config(conf, ws)
    plan = launcher.plan(cfg, processes=processes)
    old = dict(os.environ)
    os.environ.update(_env())
    try:
        rc = launcher.launch(ws, cfg, plan, ["worker", str(conf), str(out)], module="rc1.bench.distributed")
    finally:
        os.environ.clear()
        os.environ.update(old)
    if rc != 0:
        raise RuntimeError(f"the {processes}-process bench run failed (see {ws.reports}/ERROR_*.json)")


def machine() -> dict:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    from rc1.runtime.distributed import usable_cpus

    info = {"cpu": cpu, "cpu_cores": usable_cpus(), "memory_gb": None, "torch": torch.__version__,
            "platform": platform.platform()}
    try:
        import psutil

        info["memory_gb"] = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:  # pragma: no cover
        pass
    if torch.cuda.is_available():
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return info


def run(ws, quick: bool = False, steps: int = 4, processes: int = 2, device: str = "cpu", shape: str = "tiny",
        finetune: str = "full", max_new_tokens: int | None = None, prompts: int = 2, completions: int = 4,
        lr: float = 1e-3, backend: str = "auto", strategy: str = "grpo", **_ignored) -> dict:
    """Train `steps` optimizer steps on 1 process (accumulation N) and on N processes; compare."""
    if shape != "tiny" and shape not in SHAPES:
        from rc1.runtime.errors import ConfigError

        raise ConfigError(f"--shape {shape}: known shapes: tiny, {', '.join(SHAPES)}")
    work = {"strategy": strategy, "prompts": prompts, "completions_per_prompt": completions, "lr": lr,
            "backend": backend,
            "max_new_tokens": max_new_tokens or (8 if quick else 16)}
    load_before = os.getloadavg()
    root = Path(tempfile.mkdtemp(prefix="rc1-bench-distributed-"))
    try:
        base = "random:qwen3-tiny" if shape == "tiny" else str(_random_qwen3(root / "model", shape))
        runs = {}
        for label, n in (("one_process", 1), (f"{processes}_processes", processes)):
            ws_root = root / label
            conf = _workspace(ws_root, base=base, processes=processes, steps=steps, device=device,
                              finetune=finetune, work=work)
            out = ws_root / "result"
            t0 = time.perf_counter()
            if n == 1:
                _one_process(ws_root, conf, out)
            else:
                _n_processes(ws_root, conf, out, n)
            runs[label] = {**json.loads((out / "result.json").read_text()), "wall_s": round(time.perf_counter() - t0, 2)}
        from safetensors.torch import load_file

        a = load_file(str(root / "one_process/result/weights.safetensors"))
        b = load_file(str(root / f"{processes}_processes/result/weights.safetensors"))
        init = load_file(str(root / "one_process/result/initial.safetensors"))
        diff = max(float((a[k].double() - b[k].double()).abs().max()) for k in a)
        moved = max(float((a[k].double() - init[k].double()).abs().max()) for k in a)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if moved == 0.0:
        raise RuntimeError(f"training moved no parameter in {steps} steps ({strategy} on {base}): comparing the two "
                           "runs would prove nothing; use more steps, another strategy or a higher lr")
    one, many = runs["one_process"], runs[f"{processes}_processes"]
    result = {
        "machine": {**machine(), "load_avg_before": [round(x, 2) for x in load_before],
                    "load_avg_after": [round(x, 2) for x in os.getloadavg()]},
        "work": {"model": base if shape == "tiny" else f"random Qwen3, {shape} shape", "finetune": finetune,
                 "optimizer_steps": steps, "gradient_accumulation": processes,
                 "micro_steps": steps * processes, "device": device, "threads_per_process": 1, **work,
                 "compared": f"{processes} processes x accumulation 1 each vs 1 process x accumulation {processes}"},
        "max_abs_param_diff": diff, "tolerance": TOLERANCE, "within_tolerance": diff <= TOLERANCE,
        "max_abs_param_change": moved, "params_compared": len(a),
        "one_process": one, f"{processes}_processes": many,
        "speedup_per_optimizer_step": round(one["sec_per_optimizer_step"] / many["sec_per_optimizer_step"], 3),
    }
    print(f"max_abs_param_diff {diff:.3g} (tolerance {TOLERANCE:g}; training moved parameters by up to {moved:.3g})")
    print(f"{'run':14} {'sec/opt step':>12} {'peak MB per rank':>24}")
    for label, r in (("1 process", one), (f"{processes} processes", many)):
        print(f"{label:14} {r['sec_per_optimizer_step']:12.3f} {str([round(m) for m in r['peak_memory_mb']]):>24}")
    print(f"machine: {result['machine']['cpu']}, {result['machine']['cpu_cores']} cores, load "
          f"{result['machine']['load_avg_before']} -> {result['machine']['load_avg_after']}")
    return result


# ----------------------------------------------------------------------------- the worker (both runs)
class _OptimizerStepClock:
    """Times between optimizer steps (records that carry optimizer_updates)."""

    def __init__(self):
        self.marks: list[float] = []

    def on_train_start(self, recipe):
        self.marks = [time.perf_counter()]

    def on_step_end(self, recipe, record):
        if "optimizer_updates" in record:
            self.marks.append(time.perf_counter())

    def on_train_end(self, recipe):
        pass


def worker(ws_root: str, conf: str, out: str) -> int:
    import torch
    from safetensors.torch import save_file

    from rc1.config.load import load_train_config
    from rc1.runtime.device import peak_memory_mb
    from rc1.runtime.workspace import Workspace
    from rc1.runtime import distributed
    from rc1.training.base import make_recipe

    ws = Workspace(Path(ws_root))
    cfg = load_train_config(conf, ws)
    dist = distributed.from_environment(cfg)
    try:
        recipe = make_recipe(ws, cfg, config_path=conf, checkpoints=False, dist=dist)
        recipe.setup()
        clock = _OptimizerStepClock()
        recipe.callbacks.insert(0, clock)
        device = recipe.engine.device
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        trainable = lambda: {n: p.detach().float().cpu().clone()  # noqa: E731 - a copy, not the live storage
                             for n, p in recipe.engine.model.named_parameters() if p.requires_grad}
        initial = trainable() if dist.is_main else None
        recipe.train()
        steps = [b - a for a, b in zip(clock.marks, clock.marks[1:])]
        peaks = dist.all_gather(round(peak_memory_mb(device), 1))
        if dist.is_main:
            Path(out).mkdir(parents=True, exist_ok=True)
            save_file(trainable(), str(Path(out) / "weights.safetensors"))
            save_file(initial, str(Path(out) / "initial.safetensors"))
            timed = steps[1:] or steps
            result = {"processes": dist.world_size, "device": str(device), "optimizer_steps": len(steps),
                      "sec_per_optimizer_step": statistics.median(timed), "sec_per_optimizer_step_all": steps,
                      "peak_memory_mb": peaks, "precision": recipe.precision()}
            (Path(out) / "result.json").write_text(json.dumps(result))
        return 0
    finally:
        dist.close()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 5 or argv[0] != "--workdir" or argv[2] != "worker":
        print("usage: python -m rc1.bench.distributed --workdir WS worker CONFIG OUT", file=sys.stderr)
        return 2
    return worker(argv[1], argv[3], argv[4])


if __name__ == "__main__":
    sys.exit(main())
