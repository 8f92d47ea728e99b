"""`rc1 bench <area>`: one command per benchmark in rc1.bench; each writes reports/bench/<area>.json."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from rc1.cli.common import workspace

bench_app = typer.Typer(help="Benchmarks of the speed and memory targets (numbers, not asserts); "
                             "each writes reports/bench/<area>.json.", no_args_is_help=True)

Quick = Annotated[bool, typer.Option(help="smaller sizes, for a smoke run")]
Threads = Annotated[Optional[int], typer.Option(help="torch threads on CPU")]


def _run(area: str, **options) -> dict:
    """Run benchmark `area`, say where its report went; its result."""
    from rc1.bench import run_area

    ws = workspace()
    out, result = run_area(ws, area, **options)
    typer.echo(f"wrote {ws.rel(out)}")
    return result


@bench_app.command("data")
def data(
    quick: Quick = False,
    n: Annotated[Optional[int], typer.Option(help="pool size (default 30000; quick 3000)")] = None,
    big: Annotated[Optional[int], typer.Option(help="pool size of the scaling check (default 10 x n; quick: none)")] = None,
    templates_dir: Annotated[Optional[str], typer.Option(help="templates (default templates/pack_v2)")] = None,
    keep: Annotated[bool, typer.Option(help="keep the scratch workspace")] = False,
) -> None:
    """Wall and CPU time of the data pipeline at production size."""
    _run("data", quick=quick, n=n, big=big, templates_dir=templates_dir, keep=keep)


@bench_app.command("reward")
def reward(
    quick: Quick = False,
    judge: Annotated[bool, typer.Option(help="also measure the local judge server")] = True,
    judge_items: Annotated[Optional[int], typer.Option(help="items the judge scores")] = None,
) -> None:
    """Judge cache lookups/s, calibration time, local judge throughput."""
    _run("reward", quick=quick, judge=judge, judge_items=judge_items)


@bench_app.command("grpo")
def grpo(
    quick: Quick = False,
    steps: Annotated[Optional[int], typer.Option(help="timed steps (default 4; quick 1)")] = None,
    warmup: Annotated[int, typer.Option(help="untimed steps first")] = 1,
    learning: Annotated[bool, typer.Option(help="also run the held-out learning check")] = False,
    budget_s: Annotated[float, typer.Option(help="seconds of training in the learning check")] = 600.0,
    threads: Threads = None,
    base: Annotated[Optional[str], typer.Option(help="model.base (default the embedded SmolLM2; "
                                                     "random:qwen3-4b for the production shape)")] = None,
    finetune: Annotated[str, typer.Option(help="finetune.method: full, lora or qlora")] = "full",
    engines: Annotated[str, typer.Option(help="comma-separated engines to time: pure_pt,trl")] = "pure_pt,trl",
    prompts: Annotated[Optional[int], typer.Option(help="prompts per step (default 8; quick 4)")] = None,
    generations: Annotated[Optional[int], typer.Option(help="completions per prompt (default 4)")] = None,
    max_new_tokens: Annotated[Optional[int], typer.Option(help="new tokens per completion (default 32; quick 16)")] = None,
    rollout_backend: Annotated[str, typer.Option(help="generation.rollout_backend of engine pure_pt: torch, "
                                                      "llamacpp (LoRA: the adapter swapped onto a loaded base each "
                                                      "step), or paged (transformers' continuous batching)")] = "torch",
) -> None:
    """Seconds per GRPO step and peak memory: pure PyTorch engine vs TRL on the same work."""
    _run("grpo", quick=quick, steps=steps, warmup=warmup, learning=learning, budget_s=budget_s, threads=threads,
         base=base, finetune=finetune, engines=[e.strip() for e in engines.split(",") if e.strip()],
         prompts=prompts, generations=generations, max_new_tokens=max_new_tokens, rollout_backend=rollout_backend)


@bench_app.command("rollout")
def rollout(
    quick: Quick = False,
    base: Annotated[str, typer.Option(help="model.base")] = "embedded:smollm2-135m-instruct",
    new_tokens: Annotated[int, typer.Option(help="tokens generated per row")] = 32,
    threads: Threads = None,
    rollout_batch: Annotated[int, typer.Option(help="rows of the rollout batch (prompts x 4 copies)")] = 32,
) -> None:
    """Completion tokens/s of each generation backend at batch 1 and the rollout batch, as ratios to llama.cpp
    single-stream and to the memory-bandwidth limit."""
    _run("rollout", quick=quick, base=base, new_tokens=new_tokens, threads=threads, rollout_batch=rollout_batch)


@bench_app.command("eval")
def eval_(
    quick: Quick = False,
    model: Annotated[str, typer.Option(help="model.base")] = "embedded:smollm2-135m-instruct",
    n: Annotated[Optional[int], typer.Option(help="items (default 16; quick 8)")] = None,
    batch_size: Annotated[Optional[list[int]], typer.Option(help="batch size; repeat to compare several")] = None,
    max_new_tokens: Annotated[int, typer.Option(help="new tokens per turn")] = 48,
    threads: Threads = None,
    dtype: Annotated[str, typer.Option(help="fp32 or bf16")] = "fp32",
    checkpoint: Annotated[Optional[str], typer.Option(
        help="time the held-out eval of this checkpoint (latest, a checkpoint dir, or base) on each --backend")] = None,
    config: Annotated[str, typer.Option("--config", "-c", help="with --checkpoint: run config (workspace-relative)")] = "configs/local.yaml",
    backend: Annotated[Optional[list[str]], typer.Option(
        help="with --checkpoint: backend[:gguf type], repeatable; the first is the reference (default torch, llamacpp:f32)")] = None,
) -> None:
    """Eval throughput: episodes/s and generated tokens/s of greedy episodes; with --checkpoint, the held-out
    eval of a checkpoint timed on each generation backend, with the items whose results differ."""
    _run("eval", quick=quick, model=model, n=n, batch_sizes=batch_size, max_new_tokens=max_new_tokens,
         threads=threads, dtype=dtype, checkpoint=checkpoint, config=config, backends=backend)


@bench_app.command("console")
def console(
    quick: Quick = False,
    lines: Annotated[Optional[int], typer.Option(help="metrics.jsonl lines (default 100000; quick 20000)")] = None,
) -> None:
    """Console ready time, training-screen render, incremental update and key-press response."""
    _run("console", quick=quick, lines=lines)


@bench_app.command("memory")
def memory(
    shape: Annotated[str, typer.Option(help="model shape: qwen3-4b (Qwen3-4B-Thinking-2507) or qwen3-tiny")] = "qwen3-4b",
    method: Annotated[str, typer.Option(help="comma-separated: qlora,lora,full")] = "qlora,lora,full",
    config: Annotated[Optional[str], typer.Option(help="run config with the production settings "
                                                       "(default configs/ppo_scale.yaml)")] = None,
    max_new_tokens: Annotated[Optional[int], typer.Option(help="generated tokens per row (default: the config's)")] = None,
    group_size: Annotated[Optional[int], typer.Option(help="completions per prompt (default: the config's)")] = None,
    prompts: Annotated[Optional[int], typer.Option(help="prompts per step (default: the config's)")] = None,
    max_length: Annotated[Optional[int], typer.Option(help="tokens per row (default: the config's data.max_length)")] = None,
    gradient_checkpointing: Annotated[Optional[bool], typer.Option(
        "--gradient-checkpointing/--no-gradient-checkpointing", help="default: the config's")] = None,
    strategy: Annotated[str, typer.Option(help="the loss measured: grpo or ppo")] = "grpo",
    budget_gb: Annotated[Optional[float], typer.Option(help="largest point to run (default: half the RAM, "
                                                             "0.85 x a GPU)")] = None,
    device: Annotated[Optional[str], typer.Option(help="cpu, cuda or mps (default: cuda, mps, cpu)")] = None,
    full_depth: Annotated[Optional[str], typer.Option(
        help="methods also measured with every layer, the batch shrunk to the budget: comma-separated or "
             "'none' (default: every method; none with --quick)")] = None,
    quick: Quick = False,
) -> None:
    """Peak memory of one GRPO step of a model shape for QLoRA, LoRA and full fine-tuning (measured or extrapolated)."""
    _run("memory", quick=quick, shape=shape, methods=[m.strip() for m in method.split(",") if m.strip()],
         config=config, max_new_tokens=max_new_tokens, group_size=group_size, prompts=prompts, max_length=max_length,
         gradient_checkpointing=gradient_checkpointing, strategy=strategy, budget_gb=budget_gb, device=device,
         full_depth=None if full_depth is None else [m.strip() for m in full_depth.split(",")
                                                     if m.strip() and m.strip() != "none"])


@bench_app.command("micro")
def micro(
    quick: Quick = False,
    micro: Annotated[str, typer.Option(help="comma-separated run.micro_batch_size values timed beside the whole "
                                            "batch")] = "8,4",
    repeats: Annotated[Optional[int], typer.Option(help="rounds, alternating order (default 3; quick 1)")] = None,
    steps: Annotated[Optional[int], typer.Option(help="timed steps per run (default 3; quick 1)")] = None,
    warmup: Annotated[int, typer.Option(help="untimed steps first")] = 1,
    threads: Threads = None,
    prompts: Annotated[Optional[int], typer.Option(help="prompts per step (default 8; quick 4)")] = None,
    generations: Annotated[Optional[int], typer.Option(help="completions per prompt (default 4)")] = None,
    max_new_tokens: Annotated[Optional[int], typer.Option(help="new tokens per completion (default 32; quick 16)")] = None,
) -> None:
    """Step time of a training micro-batch vs the whole batch at equal total rows (pure engine GRPO steps)."""
    from rc1.runtime.errors import ConfigError

    try:
        sizes = tuple(int(m) for m in micro.split(",") if m.strip())
    except ValueError:
        raise ConfigError(f"--micro {micro!r}: expected comma-separated integers, e.g. 8,4") from None
    _run("micro", quick=quick, micro=sizes, repeats=repeats, steps=steps, warmup=warmup, threads=threads,
         prompts=prompts, generations=generations, max_new_tokens=max_new_tokens)


@bench_app.command("distributed")
def distributed(
    quick: Quick = False,
    steps: Annotated[int, typer.Option(help="optimizer steps compared")] = 4,
    processes: Annotated[int, typer.Option(help="processes of the distributed run")] = 2,
    device: Annotated[str, typer.Option(help="cpu or cuda")] = "cpu",
    shape: Annotated[str, typer.Option(help="tiny, or a model shape such as qwen3-0.6b / qwen3-4b")] = "tiny",
    finetune: Annotated[str, typer.Option(help="finetune.method: full, lora or qlora")] = "full",
    backend: Annotated[str, typer.Option(help="auto, gloo or nccl")] = "auto",
    strategy: Annotated[str, typer.Option(help="grpo, rloo or ppo")] = "grpo",
    max_new_tokens: Annotated[Optional[int], typer.Option(help="new tokens per completion (default 16; quick 8)")] = None,
) -> None:
    """The same optimizer steps on 1 process (accumulation N) and on N processes: equal parameters, s/step."""
    _run("distributed", quick=quick, steps=steps, processes=processes, device=device, shape=shape,
         finetune=finetune, backend=backend, strategy=strategy, max_new_tokens=max_new_tokens)


@bench_app.command("learn")
def learn(
    budget_s: Annotated[float, typer.Option(help="seconds of training for each trainer (evaluation off the clock)")] = 900.0,
    model: Annotated[str, typer.Option(help="model.base both trainers train")] = "embedded:smollm2-135m-instruct",
    eval_items: Annotated[int, typer.Option(help="held-out items (fewer than 100 only for a smoke run)")] = 100,
    eval_every_s: Annotated[Optional[float], typer.Option(help="seconds of training between evals (default budget/15)")] = None,
    threads: Threads = None,
    seeds: Annotated[int, typer.Option(help="seeds, each training both trainers (alternating which goes first)")] = 3,
    first_seed: Annotated[int, typer.Option(min=0, help="the first seed (7, 8, ... is the measurement's sequence; a later "
                                                 "first seed continues it in another run)")] = 7,
    trl_precision: Annotated[str, typer.Option(help="TRL's precision: auto (bf16 where native), bf16 or fp32")] = "auto",
) -> None:
    """rc1's pure PyTorch engine vs TRL's GRPOTrainer on the same task and budget: accuracy against time."""
    _run("learn", budget_s=budget_s, model=model, eval_items=eval_items, eval_every_s=eval_every_s, threads=threads,
         seeds=seeds, seed=first_seed, trl_precision=trl_precision)


@bench_app.command("seeds")
def seeds(
    config: Annotated[str, typer.Option("--config", "-c", help="run config (workspace-relative)")] = "configs/local.yaml",
    n: Annotated[int, typer.Option("--seeds", min=2, help="training seeds (the config's own first)")] = 3,
) -> None:
    """The config trained at N seeds through `rc1 pipeline` (in a fresh workspace): each seed's held-out gain
    with its paired CI on the set the RC1 gate judges. Exits 1 (after writing the report, which still measures
    every seed that trained) when the pipeline did not pass: a gate refused or a stage failed."""
    result = _run("seeds", config=config, seeds=n)
    code = result.get("pipeline_exit")
    if code:
        refused = sorted(g for g, v in (result.get("gates") or {}).items() if v["failing"])
        typer.echo(f"rc1 bench seeds: the pipeline exited {code}; gate(s) refused: {', '.join(refused) or 'none'} "
                   "(reports/gates/); the report measures the seeds that trained", err=True)
        raise typer.Exit(1)


@bench_app.command("gates")
def gates(
    config: Annotated[str, typer.Option("--config", "-c", help="run config (workspace-relative)")] = "configs/local.yaml",
    case: Annotated[Optional[list[str]], typer.Option(help="broken case, repeatable: drift, no-change, no-level, hacking "
                                                           "(default: all)")] = None,
    healthy_seeds: Annotated[int, typer.Option(min=0, help="also run `bench seeds` at N seeds and count its "
                                                           "refusals as false refusals")] = 0,
    max_steps: Annotated[Optional[int], typer.Option(min=1, help="training steps of the broken runs (default: the "
                                                                 "config's; fewer can only drift less)")] = None,
) -> None:
    """Broken runs through `rc1 pipeline`, each in its own workspace: refused by the check named for them?"""
    _run("gates", config=config, cases=case, healthy_seeds=healthy_seeds, max_steps=max_steps)


@bench_app.command("adapter")
def adapter(
    shape: Annotated[str, typer.Option(help="model shape: qwen3-4b (its base synthesised), smollm2-135m-instruct "
                                            "(the embedded weights) or qwen3-tiny")] = "qwen3-4b",
    r: Annotated[int, typer.Option(help="LoRA rank, on every linear layer")] = 16,
    repeats: Annotated[int, typer.Option(help="timed writes and swaps (medians reported)")] = 5,
    base_dtype: Annotated[str, typer.Option(help="weights of the base GGUF: f32, f16 or bf16")] = "f16",
    threads: Annotated[Optional[int], typer.Option(help="llama.cpp threads for the decodes (default: all cores)")] = None,
    quick: Quick = False,
) -> None:
    """Cost of a LoRA adapter swap into llama.cpp: adapter GGUF write, llama_adapter_lora_init and
    llama_set_adapters_lora on a base of the shape already loaded, its size, the base's load time and peak RSS."""
    _run("adapter", quick=quick, shape=shape, r=r, repeats=repeats, base_dtype=base_dtype, threads=threads)


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")
