"""`rc1 data ...`: seed pool, min files, shadow set, pool validation and difficulty.

Thin wrappers over rc1.data.pipeline; core modules are imported inside the commands.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from rc1.cli.common import print_checks, workspace

DEFAULT_MIX = "hotpotqa:0.45,strategyqa:0.30,gsm8k:0.25"


def _gates(ws, path: Optional[str]):
    from rc1.config.load import load_gates_config
    from rc1.config.schema import GatesConfig

    if path:
        return load_gates_config(path, ws), path
    default = ws.path("configs/gates.yaml")
    if default.exists():
        return load_gates_config(default), "configs/gates.yaml"
    return GatesConfig(), "built-in production thresholds"


def _finish(report: dict, name: str, report_path: Optional[str]) -> None:
    from rc1.gates.base import Check, GateResult
    from rc1.runtime.errors import GateRefused

    res = GateResult(name, [Check.from_dict(c) for c in report["checks"]])
    print_checks([res])
    typer.echo(f"tokenizer: {report.get('tokenizer')}")
    if report_path:
        typer.echo(f"report: {report_path}")
    if not res.passed:
        raise GateRefused(f"{name}: {len(res.failing)} check(s) failed",
                          lines=[f"{c.name}: {c.measured} (threshold {c.threshold}) {c.detail}".rstrip()
                                 for c in res.failing])


def register(app: typer.Typer) -> None:
    data = typer.Typer(help="Task data: seed pool, shadow set, validation, difficulty.", no_args_is_help=True)
    app.add_typer(data, name="data")
    diff = typer.Typer(help="Difficulty metrics, buckets and the difficulty report.", no_args_is_help=True)
    data.add_typer(diff, name="difficulty")

    @data.command("build-pool")
    def build_pool(
        n: Annotated[int, typer.Option("--n", help="number of items")] = 30000,
        mix: Annotated[str, typer.Option(help="task mix TASK:W,... (sums to 1)")] = DEFAULT_MIX,
        max_turns: Annotated[int, typer.Option("--max-turns", "--max_turns", help="turn budget per episode")] = 6,
        clarify_rate: Annotated[float, typer.Option("--clarify-rate", "--clarify_rate", help="share of clarify items")] = 0.30,
        tools: Annotated[str, typer.Option(help="tools the model may call")] = "wiki,calc",
        templates_dir: Annotated[str, typer.Option("--templates-dir", "--templates_dir", help="template pack")] = "templates/pack_v2",
        seed: Annotated[int, typer.Option(help="seed (same seed -> byte-identical file)")] = 20250821,
        out: Annotated[str, typer.Option(help="output JSONL (workspace-relative)")] = "data/rollouts/rc1_seed.jsonl",
        version: Annotated[str, typer.Option(help="v2 (current) or v1 (the previous, simpler generator)")] = "v2",
        source: Annotated[Optional[list[str]], typer.Option(help="TASK=FILE|HUB_NAME[:CONFIG]: real records instead of generated ones")] = None,
    ) -> None:
        """Build the seed pool (deterministic per seed)."""
        from rc1.data.pipeline import build_pool_file
        from rc1.data.pool import BuildParams, parse_mix
        from rc1.data.sources import load_source
        from rc1.runtime.errors import ConfigError

        ws = workspace()
        sources = None
        if source:
            sources = {}
            for spec in source:
                task, sep, where = spec.partition("=")
                if not sep or task not in ("gsm8k", "hotpotqa", "strategyqa"):
                    raise ConfigError(f"--source {spec!r}: expected TASK=FILE with TASK in gsm8k, hotpotqa, strategyqa")
                path = ws.path(where)
                sources[task] = load_source(task, str(path) if path.exists() else where)
        params = BuildParams(n=n, mix=parse_mix(mix), max_turns=max_turns, clarify_rate=clarify_rate, tools=tools,
                             templates_dir=ws.path(templates_dir), seed=seed, sources=sources)
        info = build_pool_file(ws, params, out, version=version)
        typer.echo(f"wrote {info['path']} ({info['n']} items, {info['version']}, {info['seconds']} s, "
                   f"{info['workers']} worker(s)) sha256 {info['sha256']}")

    @data.command("make-min")
    def make_min(
        templates_dir: Annotated[str, typer.Option("--templates-dir", help="template pack")] = "templates/pack_v2",
        seed: Annotated[int, typer.Option(help="seed")] = 20250823,
        n_train: Annotated[int, typer.Option(help="train items (>= 100)", min=100)] = 120,
        n_eval: Annotated[int, typer.Option(help="eval items (>= 30)", min=30)] = 40,
    ) -> None:
        """data/train_min.jsonl and data/eval_min.jsonl from the pool builder."""
        from rc1.data.pipeline import make_min as run

        info = run(workspace(), templates_dir, seed, n_train, n_eval)
        for v in info.values():
            typer.echo(f"wrote {v['path']} ({v['n']} items) sha256 {v['sha256']}")

    @data.command("shadow-set")
    def shadow_set(
        n: Annotated[int, typer.Option("--n", help="items")] = 245,
        seed: Annotated[int, typer.Option(help="seed")] = 20250820,
        stratify: Annotated[bool, typer.Option("--stratify/--no-stratify", help="stratify by task x difficulty")] = True,
        out: Annotated[str, typer.Option(help="output JSONL")] = "data/shadow_eval_245.jsonl",
        manifest: Annotated[str, typer.Option(help="manifest JSON")] = "reports/rc1/sample_manifest.json",
        templates_dir: Annotated[str, typer.Option("--templates-dir", help="template pack")] = "templates/pack_v2",
        base: Annotated[Optional[str], typer.Option(help="base model whose tokenizer measures length")] = None,
    ) -> None:
        """Materialise the shadow eval set with a manifest and sha256."""
        from rc1.data.pipeline import make_shadow_set

        info = make_shadow_set(workspace(), n=n, seed=seed, stratify=stratify, out=out, manifest=manifest,
                               templates_dir=templates_dir, base=base)
        typer.echo(f"wrote {info['path']} ({info['n']} items) sha256 {info['sha256']}; manifest {manifest}")
        for task, cells in sorted(info["strata"].items()):
            typer.echo(f"  {task}: " + ", ".join(f"{b} {c}" for b, c in sorted(cells.items())))

    @data.command("validate-pool")
    def validate_pool(
        pool: Annotated[str, typer.Argument(help="pool JSONL")],
        shadow: Annotated[str, typer.Option(help="shadow eval set (leak check)")] = "data/shadow_eval_245.jsonl",
        v1: Annotated[str, typer.Option("--v1", help="previous (v1) pool for the 3-gram KL check")] = "data/rollouts/rc1_v1.jsonl",
        report: Annotated[str, typer.Option(help="report JSON")] = "reports/diversity_report.json",
        gates: Annotated[Optional[str], typer.Option(help="gates config (default configs/gates.yaml)")] = None,
        base: Annotated[Optional[str], typer.Option(help="base model whose tokenizer measures length")] = None,
    ) -> None:
        """Diversity, duplicates, length, mix and leak checks; exit 3 if any fails."""
        from rc1.data.pipeline import validate_pool_file

        ws = workspace()
        g, source = _gates(ws, gates)
        typer.echo(f"thresholds: {source}")
        rep = validate_pool_file(ws, pool, shadow=shadow, v1=v1, report=report, th=g.pool, base=base)
        _finish(rep, "pool", report)

    @diff.command("metrics")
    def metrics(
        in_: Annotated[str, typer.Option("--in", help="pool JSONL")] = "data/rollouts/rc1_seed.jsonl",
        out: Annotated[str, typer.Option(help="metrics JSONL")] = "data/rollouts/rc1_seed.metrics.jsonl",
        base: Annotated[Optional[str], typer.Option(help="base model whose tokenizer measures length")] = None,
    ) -> None:
        """Per-item difficulty metrics and bucket."""
        from rc1.data.pipeline import difficulty_metrics_file

        info = difficulty_metrics_file(workspace(), in_, out, base=base)
        typer.echo(f"wrote {info['path']} ({info['n']} items; tokenizer {info['tokenizer']}) sha256 {info['sha256']}")

    @diff.command("bucketize")
    def bucketize(
        metrics_path: Annotated[str, typer.Option("--metrics", help="metrics JSONL")] = "data/rollouts/rc1_seed.metrics.jsonl",
        target: Annotated[str, typer.Option(help="bucket shares per task")] = "easy:0.25,medium:0.45,hard:0.30",
        seed: Annotated[int, typer.Option(help="resampling seed")] = 20250821,
        out: Annotated[str, typer.Option(help="balanced pool JSONL")] = "data/rollouts/rc1_seed.balanced.jsonl",
        mix: Annotated[Optional[str], typer.Option(help="task shares the balanced pool keeps, e.g. "
                                                        "'hotpotqa:0.45,strategyqa:0.30,gsm8k:0.25' (default: none)")] = None,
    ) -> None:
        """Balanced resampling per task to the target bucket shares (and, with --mix, to the task shares)."""
        from rc1.data.pipeline import bucketize_file

        info = bucketize_file(workspace(), metrics_path, out, target=target, seed=seed, mix=mix)
        typer.echo(f"wrote {info['path']} ({info['n']} items) sha256 {info['sha256']}")
        for task, s in info["balance"].items():
            typer.echo(f"  {task}: kept {s['kept']} of {s['available']}")

    @diff.command("validate")
    def validate(
        metrics_path: Annotated[str, typer.Option("--metrics", help="metrics JSONL")] = "data/rollouts/rc1_seed.metrics.jsonl",
        balanced: Annotated[str, typer.Option(help="balanced pool JSONL")] = "data/rollouts/rc1_seed.balanced.jsonl",
        report: Annotated[str, typer.Option("--out", "--report", help="report JSON")] = "reports/rc1/difficulty_report.json",
        gates: Annotated[Optional[str], typer.Option(help="gates config (default configs/gates.yaml)")] = None,
    ) -> None:
        """Difficulty shares and bounds of the round 1 table; exit 3 if any fails."""
        from rc1.data.pipeline import validate_difficulty_file

        ws = workspace()
        g, source = _gates(ws, gates)
        typer.echo(f"thresholds: {source}")
        rep = validate_difficulty_file(ws, metrics_path, balanced, report=report, th=g.difficulty)
        _finish(rep, "difficulty", report)
