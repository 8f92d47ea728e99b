"""`rc1 data ...`: seed pool, min files, shadow set, pool validation and difficulty.

Thin wrappers over rc1.data.pipeline; core modules are imported inside the commands.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from rc1.cli.common import command_group, print_checks, workspace
from rc1.config.names import DEFAULT_MIX
from rc1.runtime.layout import DIFFICULTY_REPORT, DIVERSITY_REPORT, SHADOW_MANIFEST, V1_POOL, metrics_path_for

# Every setting a `data` command shares with the run config defaults to None here and is read from the
# --config's section (the schema's default without one): the pipeline passes --config alone.

CONFIG_HELP = ("run config: its datasets.tasks (custom tasks) may be used; its datasets.mix is the default mix, "
               "its pool section every other default")
MIX_HELP = "task mix TASK:W,... (sums to 1); default: the custom task alone, or the --config's datasets.mix, or " + \
    ",".join(f"{t}:{w}" for t, w in DEFAULT_MIX.items())
GatesOpt = Annotated[Optional[str], typer.Option(help="gates config (default: the --config's, else configs/gates.yaml)")]
BaseOpt = Annotated[Optional[str], typer.Option(help="base model whose tokenizer measures length (default: the "
                                                    "--config's model.base, else SmolLM2's tokenizer)")]
PoolConfigOpt = Annotated[Optional[str], typer.Option("--config", "-c", help="run config: its pool section (and "
                                                                           "model.base, datasets.mix) give the defaults")]
GatedConfigOpt = Annotated[Optional[str], typer.Option("--config", "-c", help="run config: its gates config and the "
                                                                              "custom tasks that config's mixes may name")]


def _opened(config: Optional[str]):
    """(workspace, the --config run config or None, the settings the defaults come from: that config, else the
    schema's defaults)."""
    from rc1.config.load import load_train_config
    from rc1.config.schema import TrainConfig

    ws = workspace()
    cfg = load_train_config(config, ws) if config else None
    return ws, cfg, cfg if cfg is not None else TrainConfig()


def _base(cfg, base: Optional[str]) -> Optional[str]:
    return base or (cfg.model.base if cfg is not None else None)


def _or(value, default):
    """An option given on the command line (not None) overrides the config's value."""
    return default if value is None else value


def _gates(ws, path: Optional[str], cfg=None):
    from rc1.config.load import fit_to_user_tasks, load_gates_config
    from rc1.config.gates import GatesConfig

    if cfg is not None:  # the run's thresholds (fitted to its custom tasks), from --gates or its own gates file
        return fit_to_user_tasks(load_gates_config(path or cfg.gates, ws, tasks=cfg.datasets.tasks), cfg), path or cfg.gates
    if path:
        return load_gates_config(path, ws), path
    default = ws.path("configs/gates.yaml")
    if default.exists():
        return load_gates_config(default), "configs/gates.yaml"
    return GatesConfig(), "built-in production thresholds"


def _judged(gates: Optional[str], config: Optional[str]):
    """_opened's (workspace, run config or None, settings) and the gates config a validate command judges by;
    says which file that is."""
    ws, cfg, run = _opened(config)
    g, source = _gates(ws, gates, cfg)
    typer.echo(f"thresholds: {source}")
    return ws, cfg, run, g


def _custom_tasks(ws, cfg, source: Optional[list[str]], verifier: Optional[str], task: Optional[str],
                  heldout: Optional[float]) -> tuple[dict, Optional[str]]:
    """(custom task specs, the name of the one given on the command line): the run config's datasets.tasks,
    plus `--source FILE --verifier NAME [--task NAME]`."""
    import re

    from rc1.config.load import validate
    from rc1.config.names import TASK_NAME, task_name_problem
    from rc1.config.schema import TaskSection
    from rc1.data.generic import task_name_for
    from rc1.runtime.errors import ConfigError

    specs = dict(cfg.datasets.tasks) if cfg is not None else {}
    if verifier is None:
        if task is not None or heldout is not None:
            raise ConfigError("--task and --heldout describe a custom task: use them with --source FILE --verifier NAME")
        return specs, None
    if not source or len(source) != 1:
        raise ConfigError("--verifier needs exactly one --source FILE (a custom task file)")
    named, sep, path = source[0].partition("=")
    if not (sep and re.match(TASK_NAME, named)):  # NAME=FILE names the task too
        named, path = None, source[0]
    name = task or named or task_name_for(path)
    if task_name_problem(name):
        raise ConfigError(f"--task: {task_name_problem(name)}")
    body = {"path": path, "verifier": verifier, **({"heldout": heldout} if heldout is not None else {})}
    specs[name] = validate(TaskSection, body, f"--source {path} --verifier {verifier}")
    return specs, name


def _mix_and_tasks(ws, cfg, specs: dict, mix: Optional[str], single: Optional[str]):
    """(mix, custom tasks it uses loaded from their files): --mix, else the custom task of --verifier
    alone, else the run config's datasets.mix, else the built-in mix."""
    from rc1.data.generic import load_tasks
    from rc1.data.pool import parse_mix

    if mix is not None:
        chosen = parse_mix(mix, custom=specs)
    elif single is not None:
        chosen = {single: 1.0}
    elif cfg is not None:
        chosen = dict(cfg.datasets.mix)
    else:
        chosen = dict(DEFAULT_MIX)
    tasks = load_tasks(ws, specs, names=[t for t, w in chosen.items() if t in specs and w > 0])
    if cfg is not None:  # the run's eval must find its held-out items
        from rc1.data.generic import check_heldout_sizes

        check_heldout_sizes(tasks, chosen, cfg.eval.n_shadow)
    return chosen, tasks


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
    data = command_group(app, "data", "Task data: seed pool, shadow set, validation, difficulty.")
    diff = command_group(data, "difficulty", "Difficulty metrics, buckets and the difficulty report.")

    @data.command("build-pool")
    def build_pool(
        n: Annotated[Optional[int], typer.Option("--n", help="number of items (default 30000; a mix of custom tasks "
                                                           "only: all their training items)")] = None,
        mix: Annotated[Optional[str], typer.Option(help=MIX_HELP)] = None,
        max_turns: Annotated[Optional[int], typer.Option("--max-turns", "--max_turns", help="turn budget per episode "
                                                                                            "(default pool.max_turns)")] = None,
        clarify_rate: Annotated[Optional[float], typer.Option("--clarify-rate", "--clarify_rate",
                                                              help="share of clarify items (default pool.clarify_rate)")] = None,
        tools: Annotated[Optional[str], typer.Option(help="tools the model may call (default pool.tools)")] = None,
        templates_dir: Annotated[Optional[str], typer.Option("--templates-dir", "--templates_dir",
                                                             help="template pack (default pool.templates_dir)")] = None,
        seed: Annotated[Optional[int], typer.Option(help="seed (same seed -> byte-identical file; default "
                                                         "pool.seed)")] = None,
        out: Annotated[Optional[str], typer.Option(help="output JSONL (workspace-relative; default pool.out; with "
                                                       "--version v1: pool.v1_pool, else data/rollouts/rc1_v1.jsonl)")] = None,
        version: Annotated[str, typer.Option(help="v2 (current) or v1 (the previous, simpler generator)")] = "v2",
        source: Annotated[Optional[list[str]], typer.Option(help="TASK=FILE|HUB_NAME[:CONFIG]: real records of a built-in "
                                                                 "task instead of generated ones; with --verifier: a "
                                                                 "custom task file (JSONL)")] = None,
        verifier: Annotated[Optional[str], typer.Option(help="the custom task's verifier: numeric, exact, f1, yes_no, "
                                                             "choice or python:MODULE:FUNCTION")] = None,
        task: Annotated[Optional[str], typer.Option(help="the custom task's name (default: from the file name)")] = None,
        heldout: Annotated[Optional[float], typer.Option(help="share of the task file held out for the shadow set "
                                                              "(default 0.2); never in the pool")] = None,
        config: Annotated[Optional[str], typer.Option("--config", "-c", help=CONFIG_HELP)] = None,
        shadow: Annotated[Optional[str], typer.Option(help="held-out set the pool must not share an item with (default: "
                                                           "data.shadow_path)")] = None,
    ) -> None:
        """Build the seed pool (deterministic per seed): generated items of the built-in tasks, and/or the
        training items of custom tasks (--source FILE --verifier NAME, or --config)."""
        from rc1.data.pipeline import build_pool_file
        from rc1.data.pool import BuildParams
        from rc1.data.sources import load_source
        from rc1.runtime.errors import ConfigError

        ws, cfg, run = _opened(config)
        specs, single = _custom_tasks(ws, cfg, source, verifier, task, heldout)
        mix_d, tasks = _mix_and_tasks(ws, cfg, specs, mix, single)
        if n is None and "n" in run.pool.model_fields_set:  # set in the config: it must fit the task files
            from rc1.data.generic import check_set_sizes

            check_set_sizes(tasks, mix_d, "pool.n", run.pool.n)
        if n is None and "n" not in run.pool.model_fields_set:  # unset: a custom-only mix takes all its items
            generated = any(t not in tasks and w > 0 for t, w in mix_d.items())
            n = run.pool.n if generated else int(min(len(tasks[t].train) / w for t, w in mix_d.items() if w > 0) + 1e-9)
        sources = None
        if source and verifier is None:
            sources = {}
            for spec in source:
                name, sep, where = spec.partition("=")
                if not sep or name not in ("gsm8k", "hotpotqa", "strategyqa"):
                    raise ConfigError(f"--source {spec!r}: expected TASK=FILE with TASK in gsm8k, hotpotqa, strategyqa "
                                      "(a custom task file goes with --verifier NAME)")
                path = ws.path(where)
                sources[name] = load_source(name, str(path) if path.exists() else where)
        pool = run.pool
        params = BuildParams(n=_or(n, pool.n), mix=mix_d, max_turns=_or(max_turns, pool.max_turns),
                             clarify_rate=_or(clarify_rate, pool.clarify_rate), tools=_or(tools, pool.tools),
                             templates_dir=ws.path(_or(templates_dir, pool.templates_dir)), seed=_or(seed, pool.seed),
                             sources=sources, levels=dict(pool.levels) or None)
        out = out or ((pool.v1_pool or V1_POOL) if version == "v1" else pool.out)
        info = build_pool_file(ws, params, out, version=version, tasks=tasks, heldout=shadow or run.data.shadow_path)
        typer.echo(f"wrote {info['path']} ({info['n']} items, {info['version']}, {info['seconds']} s, "
                   f"{info['workers']} worker(s)) sha256 {info['sha256']}")

    @data.command("make-min")
    def make_min(
        templates_dir: Annotated[Optional[str], typer.Option("--templates-dir", help="template pack (default "
                                                                                    "pool.templates_dir)")] = None,
        seed: Annotated[int, typer.Option(help="seed")] = 20250823,
        n_train: Annotated[int, typer.Option(help="train items (>= 100)", min=100)] = 120,
        n_eval: Annotated[int, typer.Option(help="eval items (>= 30)", min=30)] = 40,
        config: Annotated[Optional[str], typer.Option("--config", "-c", help="run config: when its datasets.mix "
                                                                             "holds custom tasks only, the dev split "
                                                                             "(data.eval_path) is drawn from their "
                                                                             "training items instead")] = None,
    ) -> None:
        """data/train_min.jsonl and data/eval_min.jsonl from the pool builder; with --config of a run on custom
        tasks, that run's dev split from its own items."""
        from rc1.data.pipeline import make_min as make_min_files

        ws, cfg, run = _opened(config)
        if cfg is not None and all(t in cfg.datasets.tasks for t, w in cfg.datasets.mix.items() if w > 0):
            from rc1.data.generic import dev_split
            from rc1.data.io import write_jsonl
            from rc1.runtime.fingerprint import register_artifact

            _, tasks = _mix_and_tasks(ws, cfg, dict(cfg.datasets.tasks), None, None)
            items = dev_split(tasks, cfg.datasets.mix, n_eval, seed)
            write_jsonl(ws.path(cfg.data.eval_path), items)
            ev = register_artifact(ws, cfg.data.eval_path, "pool", role="dev", n=len(items), seed=seed,
                                   tasks=sorted(tasks))
            typer.echo(f"wrote {ev.path} ({len(items)} items: the dev split, from the training items of "
                       f"{', '.join(sorted(tasks))}) sha256 {ev.sha256}")
            return
        info = make_min_files(ws, templates_dir or run.pool.templates_dir, seed, n_train, n_eval)
        for v in info.values():
            typer.echo(f"wrote {v['path']} ({v['n']} items) sha256 {v['sha256']}")

    @data.command("fit")
    def fit(
        config: Annotated[str, typer.Option("--config", "-c", help="run config (its difficulty_fit section)")],
    ) -> None:
        """Fit the work to the model: the base policy's pass rate per task x ladder level, the levels inside
        difficulty_fit.band, and the training / dev / held-out items built from them (reports/difficulty_fit.json)."""
        from rc1.config.load import load_train_config
        from rc1.training.fit import REPORT, measure, table_text

        ws = workspace()
        cfg = load_train_config(config, ws)
        rep = measure(ws, cfg, progress=lambda m: typer.echo(m, err=True))
        typer.echo(table_text(rep))
        typer.echo(f"{rep['episodes']} episodes, {rep['completion_tokens']} completion tokens, {rep['seconds']:.0f} s; "
                   f"wrote {REPORT}" + "".join(f", {k} ({v['n']} items)" for k, v in rep["files"].items()
                                                if isinstance(v, dict)))
        if not rep["kept"]:
            typer.echo("no task has a level in the band: round 2 will refuse this run (widen difficulty_fit.band, "
                       "lower difficulty_fit.levels, or use a stronger base model)", err=True)

    @data.command("fit-verdict")
    def fit_verdict(
        config: Annotated[str, typer.Option("--config", "-c", help="run config (its difficulty_fit section)")],
    ) -> None:
        """Round 2's difficulty-fit check on the fit just measured, before the stages that need its items: exit 3
        (saved as round 2's report) when it refuses, e.g. no task has a level in the band; 0 when it passes."""
        from rc1.cli.common import print_checks
        from rc1.machine.service import judge_early
        from rc1.runtime.errors import EXIT_GATE

        ws = workspace()
        result = judge_early(ws, "round2", "difficulty_fit", config)
        print_checks([result])
        if result.passed:
            typer.echo("difficulty fit: round 2's check passes (the gate judges it again with the others)")
            return
        for c in result.failing:
            typer.echo(f"REFUSED: gate round2 (judged at the fit): {c.name}: {c.measured} (threshold {c.threshold}) "
                       f"{c.detail}".rstrip(), err=True)
        typer.echo("saved: reports/gates/round2.json; a FAIL pack: rc1 failpack", err=True)
        raise typer.Exit(EXIT_GATE)

    @data.command("shadow-set")
    def shadow_set(
        n: Annotated[Optional[int], typer.Option("--n", help="items (default 245; a mix of custom tasks only: all "
                                                           "their held-out items)")] = None,
        seed: Annotated[Optional[int], typer.Option(help="seed (default pool.shadow_seed)")] = None,
        stratify: Annotated[bool, typer.Option("--stratify/--no-stratify", help="stratify by task x difficulty")] = True,
        out: Annotated[Optional[str], typer.Option(help="output JSONL (default data.shadow_path)")] = None,
        manifest: Annotated[str, typer.Option(help="manifest JSON")] = SHADOW_MANIFEST,
        templates_dir: Annotated[Optional[str], typer.Option("--templates-dir", help="template pack (default "
                                                                                    "pool.templates_dir)")] = None,
        base: BaseOpt = None,
        mix: Annotated[Optional[str], typer.Option(help=MIX_HELP)] = None,
        source: Annotated[Optional[list[str]], typer.Option(help="with --verifier: a custom task file; its held-out "
                                                                 "items make the set")] = None,
        verifier: Annotated[Optional[str], typer.Option(help="the custom task's verifier")] = None,
        task: Annotated[Optional[str], typer.Option(help="the custom task's name (default: from the file name)")] = None,
        heldout: Annotated[Optional[float], typer.Option(help="share of the task file held out (default 0.2)")] = None,
        config: Annotated[Optional[str], typer.Option("--config", "-c", help=CONFIG_HELP)] = None,
        pool: Annotated[Optional[str], typer.Option(help="training pool the set must not share an item with (default: "
                                                         "pool.out)")] = None,
    ) -> None:
        """Materialise the shadow eval set with a manifest and sha256 (custom tasks: their held-out items)."""
        from rc1.data.pipeline import make_shadow_set
        from rc1.runtime.errors import ConfigError

        if source and verifier is None:
            raise ConfigError("--source FILE goes with --verifier NAME (a custom task file)")
        ws, cfg, run = _opened(config)
        specs, single = _custom_tasks(ws, cfg, source, verifier, task, heldout)
        mix_d, tasks = _mix_and_tasks(ws, cfg, specs, mix, single)
        if n is None and "shadow_n" in run.pool.model_fields_set:  # unset: the set's own default (all held-out items)
            from rc1.data.generic import check_set_sizes

            check_set_sizes(tasks, mix_d, "pool.shadow_n", run.pool.shadow_n)
            n = run.pool.shadow_n
        out = out or run.data.shadow_path
        info = make_shadow_set(ws, n=n, seed=_or(seed, run.pool.shadow_seed), stratify=stratify, out=out,
                               manifest=manifest, templates_dir=_or(templates_dir, run.pool.templates_dir),
                               base=_base(cfg, base), mix=mix_d, tasks=tasks, pool=pool or run.pool.out)
        typer.echo(f"wrote {info['path']} ({info['n']} items) sha256 {info['sha256']}; manifest {manifest}")
        for task, cells in sorted(info["strata"].items()):
            typer.echo(f"  {task}: " + ", ".join(f"{b} {c}" for b, c in sorted(cells.items())))

    @data.command("validate-pool")
    def validate_pool(
        pool: Annotated[Optional[str], typer.Argument(help="pool JSONL (default pool.out)")] = None,
        shadow: Annotated[Optional[str], typer.Option(help="shadow eval set (leak check; default data.shadow_path)")] = None,
        v1: Annotated[Optional[str], typer.Option("--v1", help="previous (v1) pool for the 3-gram KL check (default "
                                                               "pool.v1_pool, else data/rollouts/rc1_v1.jsonl)")] = None,
        report: Annotated[str, typer.Option(help="report JSON")] = DIVERSITY_REPORT,
        gates: GatesOpt = None,
        base: BaseOpt = None,
        config: GatedConfigOpt = None,
    ) -> None:
        """Diversity, duplicates, length, mix and leak checks; exit 3 if any fails."""
        from rc1.data.pipeline import validate_pool_file

        ws, cfg, run, g = _judged(gates, config)
        rep = validate_pool_file(ws, pool or run.pool.out, shadow=shadow or run.data.shadow_path,
                                 v1=v1 or run.pool.v1_pool or V1_POOL, report=report, th=g.pool, base=_base(cfg, base))
        _finish(rep, "pool", report)

    @diff.command("metrics")
    def metrics(
        in_: Annotated[Optional[str], typer.Option("--in", help="pool JSONL (default pool.out)")] = None,
        out: Annotated[Optional[str], typer.Option(help="metrics JSONL (default: beside the pool, "
                                                       "<pool>.metrics.jsonl)")] = None,
        base: BaseOpt = None,
        config: PoolConfigOpt = None,
    ) -> None:
        """Per-item difficulty metrics and bucket."""
        from rc1.data.pipeline import difficulty_metrics_file

        ws, cfg, run = _opened(config)
        pool = in_ or run.pool.out
        info = difficulty_metrics_file(ws, pool, out or metrics_path_for(pool), base=_base(cfg, base))
        typer.echo(f"wrote {info['path']} ({info['n']} items; tokenizer {info['tokenizer']}) sha256 {info['sha256']}")

    @diff.command("bucketize")
    def bucketize(
        metrics_path: Annotated[Optional[str], typer.Option("--metrics", help="metrics JSONL (default: beside "
                                                                              "pool.out)")] = None,
        target: Annotated[Optional[str], typer.Option(help="bucket shares per task (default "
                                                          "pool.difficulty_target)")] = None,
        seed: Annotated[Optional[int], typer.Option(help="resampling seed (default pool.seed)")] = None,
        out: Annotated[Optional[str], typer.Option(help="balanced pool JSONL (default seed_pool)")] = None,
        mix: Annotated[Optional[str], typer.Option(help="task shares the balanced pool keeps, e.g. "
                                                        "'hotpotqa:0.45,strategyqa:0.30,gsm8k:0.25' (default: the "
                                                        "--config's datasets.mix, else none)")] = None,
        config: PoolConfigOpt = None,
    ) -> None:
        """Balanced resampling per task to the target bucket shares (and, with --mix, to the task shares)."""
        from rc1.data.pipeline import bucketize_file

        ws, cfg, run = _opened(config)
        info = bucketize_file(ws, metrics_path or metrics_path_for(run.pool.out), out or run.seed_pool,
                              target=_or(target, run.pool.difficulty_target), seed=_or(seed, run.pool.seed),
                              mix=mix or (dict(cfg.datasets.mix) if cfg is not None else None))
        typer.echo(f"wrote {info['path']} ({info['n']} items) sha256 {info['sha256']}")
        for task, s in info["balance"].items():
            typer.echo(f"  {task}: kept {s['kept']} of {s['available']}")

    @diff.command("validate")
    def validate(
        metrics_path: Annotated[Optional[str], typer.Option("--metrics", help="metrics JSONL (default: beside "
                                                                              "pool.out)")] = None,
        balanced: Annotated[Optional[str], typer.Option(help="balanced pool JSONL (default seed_pool)")] = None,
        report: Annotated[str, typer.Option("--out", "--report", help="report JSON")] = DIFFICULTY_REPORT,
        gates: GatesOpt = None,
        config: GatedConfigOpt = None,
    ) -> None:
        """Difficulty shares and bounds of the round 1 table; exit 3 if any fails."""
        from rc1.data.pipeline import validate_difficulty_file

        ws, cfg, run, g = _judged(gates, config)
        rep = validate_difficulty_file(ws, metrics_path or metrics_path_for(run.pool.out), balanced or run.seed_pool,
                                       report=report, th=g.difficulty)
        _finish(rep, "difficulty", report)
