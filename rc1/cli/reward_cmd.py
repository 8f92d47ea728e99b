"""`rc1 reward ...`: scorer probe and liveness, calibration, shadow run, over-clarification ablation."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from rc1.cli.common import command_group, workspace

ConfigOpt = Annotated[Optional[str], typer.Option("--config", "-c", help="run config (default: the machine's, else built-in defaults)")]
MaxTurnsOpt = Annotated[Optional[int], typer.Option(help="episode turn limit (default: each item's max_turns)")]
# The base model's answers to the dev split and the shadow set take the config's eval.shadow_run_max_turns.
ShadowTurnsOpt = Annotated[Optional[int], typer.Option(help="episode turn limit (default: eval.shadow_run_max_turns, "
                                                            "else each item's max_turns)")]
BatchSizeOpt = Annotated[int, typer.Option(help="generation batch size")]


def _config(ws, path: str | None):
    """The run config: explicit path, else the one the state machine last used, else the defaults."""
    from rc1.config.load import load_train_config
    from rc1.config.schema import TrainConfig

    if path is None:
        from rc1.state import store

        path = store.load_record(ws).config_path
    return load_train_config(path, ws) if path else TrainConfig()


def _gates(ws, cfg):
    from rc1.config.load import load_run_gates
    from rc1.config.gates import GatesConfig

    return load_run_gates(cfg, ws) if ws.path(cfg.gates).exists() else GatesConfig()


def _num(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _pct(ci: dict) -> str:
    """'median +12.0% (95% CI [-3.1, +40.2])' of a calibration improvement."""
    return (f"median {ci['median']:+.1f}% ({ci['confidence']:.0%} CI [{ci['lo']:+.1f}, {ci['hi']:+.1f}])"
            if ci.get("n") else "n/a (no resample could be scored)")


def register(app: typer.Typer) -> None:
    reward = command_group(app, "reward", "Reward and scorer: probe, assert-live, calibrate, shadow-run, ablate-overclar.")

    @reward.command("probe")
    def probe(
        n: Annotated[Optional[int], typer.Option(help="items per task to grade (each with a correct and two wrong "
                                                      "responses; default: the gates config's scorer.probe_n)")] = None,
        provider: Annotated[Optional[str], typer.Option(help="openai | deepseek | gemini | local (default: config)")] = None,
        live: Annotated[bool, typer.Option("--live/--allow-cache", help="require real calls (no cache hits)")] = True,
        seed: Annotated[Optional[int], typer.Option(help="probe prompt seed (default: fresh each run)")] = None,
        config: ConfigOpt = None,
    ) -> None:
        """Grade known-correct and known-wrong answers through the judge; writes reports/scorer_probe.json.

        Exit 3 when the judge does not discriminate (AUC CI lower bound below gates scorer.auc_min), is not
        live, or its replies hold no valid grade."""
        from rc1.judge.probe import PROBE_REPORT, run_probe
        from rc1.runtime.errors import GateRefused

        ws = workspace()
        cfg = _config(ws, config)
        g = _gates(ws, cfg).scorer
        r = run_probe(ws, cfg, provider=provider, n=g.probe_n if n is None else n, live=live, seed=seed, auc_min=g.auc_min,
                      confidence=g.auc_confidence)
        d = r["discrimination"]
        typer.echo(f"probe {r['provider']} ({r['model']} at {r['base_url']}, method {r['method']}): {r['responses']} "
                   f"responses to {r['items']} items, {r['samples']} samples: live {r['live_samples']}, cache "
                   f"{r['cache_samples']}, failed {r['failed_samples']}, errors {r['error_samples']} ({r['seconds']:.1f}s)")
        typer.echo(f"  latency p50 {r['latency_p50_s'] or 0:.3f}s p95 {r['latency_p95_s'] or 0:.3f}s, "
                   f"billable tokens {r['billable_tokens']}, 429 rate {r['rate_429']:.3f}")
        ci = d["ci"]
        typer.echo(f"  discrimination: AUC {_num(d['auc'])} ({d['confidence']:.0%} CI [{_num(ci[0])}, {_num(ci[1])}], "
                   f"threshold: lower bound >= {d['auc_min']:g}) on {d['n_correct']} correct / {d['n_wrong']} wrong: "
                   f"{d['verdict']}; per task " + ", ".join(f"{t} {_num(v['auc'])}" for t, v in r["by_task"].items()))
        a = r["agreement"]
        typer.echo(f"  agreement with the verifier (judged correct at grade >= {a['judged_correct_at']:g}): "
                   f"{_num(a['overall'])}; mean grade correct/wrong {_num(r['mean_grade_correct'])}/"
                   f"{_num(r['mean_grade_wrong'])}")
        for e in (sc for sc in r["scores"] if sc["errors"]):
            typer.echo(f"  {e['item_id']}/{e['kind']}: " + "; ".join(e["errors"]))
        typer.echo(f"wrote {PROBE_REPORT}")
        if not r["passed"]:
            raise GateRefused("scorer probe failed: " + r["problems"][0], lines=r["problems"][1:])
        typer.echo("probe passed")

    @reward.command("assert-live")
    def assert_live_cmd(
        cache_hit_lt: Annotated[float, typer.Option(help="refuse when the recent cache hit rate is >= this")] = 0.90,
        window: Annotated[Optional[int], typer.Option(help="recent scores to read (default: gates scorer.window)")] = None,
        config: ConfigOpt = None,
    ) -> None:
        """Exit 3 unless recent judge scores are live (cache hit rate below the threshold, no mock source): the
        training-time scores once the judge has graded in the training loop, the probe's before."""
        from rc1.judge.probe import assert_live

        ws = workspace()
        cfg = _config(ws, config)
        win = window or _gates(ws, cfg).scorer.window
        res = assert_live(ws, cfg.scorer.cache_path, cache_hit_lt=cache_hit_lt, window=win)
        w, last = res.window, res.last_run
        typer.echo(f"live ({res.source} scoring): last {win} scores cache hit rate {w['cache_hit_rate']:.3f}, last run "
                   f"{res.last_run_id} {last['cache_hit_rate']:.3f} (< {cache_hit_lt:g}); billable tokens "
                   f"{w['billable_tokens']}; non-live 0")

    @reward.command("calibrate")
    def calibrate_cmd(
        responses: Annotated[Optional[str], typer.Option(help="scored responses JSONL (default: the latest shadow responses)")] = None,
        target: Annotated[str, typer.Option(help="success (verifiers) | judge (judge median per response)")] = "success",
        prior_strength: Annotated[Optional[float], typer.Option(help="L2 prior weight lambda (default: chosen by CV)")] = None,
        folds: Annotated[int, typer.Option(help="cross-validation folds")] = 5,
        bootstrap: Annotated[int, typer.Option(help="bootstrap resamples")] = 200,
        seed: Annotated[int, typer.Option(help="CV/bootstrap seed")] = 20250820,
        apply: Annotated[str, typer.Option(help="when to write configs/weights.json: pass | always | never")] = "pass",
        provider: Annotated[Optional[str], typer.Option(help="judge provider for --target judge")] = None,
        items: Annotated[Optional[str], typer.Option(help="calibration split: the base model answers --n of these items (e.g. the dev split)")] = None,
        n: Annotated[int, typer.Option(help="with --items: how many items to answer (stratified)")] = 64,
        generations: Annotated[int, typer.Option(help="with --items: answers per item")] = 1,
        max_turns: Annotated[Optional[int], typer.Option(help="with --items: episode turn limit")] = None,
        on_fail: Annotated[str, typer.Option(help="acceptance failed: refuse (exit 3) | keep (the current weights "
                                                  "stay, exit 0; the report says so)")] = "refuse",
        config: ConfigOpt = None,
    ) -> None:
        """Fit weights (NNLS + L2 prior, >=0, sum 1, <=0.5) and write reports/calibration_report_<ts>.json.

        `correctness` (the verifier's score) is held at its current weight; the other dimensions are fitted.
        Exit 0 when the acceptance thresholds hold on the CI lower bounds, 3 when they do not (the report is
        written either way)."""
        from rc1.rewards.calibrate import calibrate
        from rc1.runtime.errors import ConfigError

        if on_fail not in ("refuse", "keep"):
            raise ConfigError(f"--on-fail must be refuse or keep (got {on_fail!r})")
        ws = workspace()
        cfg = _config(ws, config)
        rep = calibrate(ws, cfg, _gates(ws, cfg), responses=responses, target=target, prior_strength=prior_strength,
                        folds=folds, bootstrap=bootstrap, seed=seed, apply=apply, provider=provider, items=items, n=n,
                        max_turns=max_turns, generations=generations)
        a = rep["acceptance"]
        typer.echo(f"calibration on {rep['n']} responses to {rep['n_items']} items (target {rep['target']}, mean "
                   f"{rep['target_mean']:.3f}; features {', '.join(rep['features'])}; held: "
                   + ", ".join(f"{k} {v:.3f}" for k, v in rep["held_at_prior"].items()) + f"), lambda {rep['lambda']:g}")
        typer.echo("  weights: " + ", ".join(f"{k} {v:.3f}" for k, v in rep["weights_new"].items()))
        ri, mr = a["rank_corr_improve_pct"], a["mae_reduce_pct"]
        typer.echo(f"  out-of-bag rank-corr improvement {_pct(ri)} (lower bound >= {a['rank_corr_improve_pct_min']:g}%), "
                   f"MAE reduction {_pct(mr)} (lower bound >= {a['mae_reduce_pct_min']:g}%) over "
                   f"{a['resamples_used']} resamples: {'PASS' if a['passed'] else 'FAIL'}")
        typer.echo(f"wrote {rep['report_path']}" + (f"; new weights {rep['weights_path']} (old kept as {rep['archived']})"
                                                   if rep["applied"] else "; weights not changed"))
        if not a["passed"]:
            if on_fail == "keep":
                typer.echo("calibration acceptance failed: the current weights stay (--on-fail keep)")
                return
            from rc1.runtime.errors import GateRefused

            raise GateRefused(f"calibration acceptance failed: see {rep['report_path']}")

    @reward.command("base-answers")
    def base_answers_cmd(
        items: Annotated[Optional[str], typer.Option(help="item file (default: the dev split, data.eval_path)")] = None,
        n: Annotated[Optional[int], typer.Option(help="items to answer (stratified; default: all)")] = None,
        generations: Annotated[Optional[int], typer.Option(help="answers per item (sampled with the model's "
                                                                "temperature; default: from --answers)")] = None,
        answers: Annotated[Optional[int], typer.Option(help="total answers wanted: sets --generations to "
                                                            "ceil(answers / items) (default eval.calibration_n)")] = None,
        max_turns: ShadowTurnsOpt = None,
        seed: Annotated[int, typer.Option(help="sampling seed")] = 20250820,
        batch_size: BatchSizeOpt = 8,
        config: ConfigOpt = None,
    ) -> None:
        """The base model answers the dev split: data/responses_dev_base.jsonl (reused while it matches).

        The difficulty gate checks the buckets against these outcomes; `rc1 reward calibrate --responses`
        can fit on them."""
        from rc1.rewards.responses import DEV_BASE_TAG, load_item_file, obtain_responses, responses_path
        from rc1.envs.verifiers import verify_episode
        from rc1.envs.episode import EpisodeOutcome

        ws = workspace()
        cfg = _config(ws, config)
        items_rel = items or cfg.data.eval_path
        n_items = n or len(load_item_file(ws, items_rel, "dev split")[0])
        if answers is not None or generations is None:
            generations = max(1, -(-(cfg.eval.calibration_n if answers is None else answers) // n_items))
        chosen, rows, meta = obtain_responses(ws, cfg, n=n_items, seed=seed, stratify=True, tag=DEV_BASE_TAG,
                                              generations=generations, batch_size=batch_size, items_path=items_rel,
                                              max_turns=max_turns or cfg.eval.shadow_run_max_turns)
        by_id = {it["id"]: it for it in chosen}
        solved = sum(verify_episode(by_id[r["item_id"]], EpisodeOutcome.from_dict(r["episode"])).success for r in rows)
        typer.echo(f"{len(rows)} answers ({generations} per item) to {len(chosen)} items of {items_rel}: {solved} "
                   f"solved ({solved / max(len(rows), 1):.1%}); generated in {meta.get('generation_seconds')}s")
        typer.echo(f"wrote {responses_path(DEV_BASE_TAG, shadow=False)}")

    @reward.command("shadow-run")
    def shadow_run_cmd(
        n: Annotated[Optional[int], typer.Option(help="shadow items to score (default eval.shadow_run_n, else the "
                                                      "shadow set's pool.shadow_n)")] = None,
        seed: Annotated[int, typer.Option(help="sampling/generation seed")] = 20250820,
        stratify: Annotated[bool, typer.Option("--stratify/--no-stratify", help="sample by task x difficulty")] = True,
        tag: Annotated[Optional[str], typer.Option(help="report tag: reports/shadow_run_<tag>.json (default: the "
                                                        "gates config's shadow_run.tag, which round 2 reads)")] = None,
        regenerate: Annotated[bool, typer.Option(help="generate responses even if a matching file exists")] = False,
        max_turns: ShadowTurnsOpt = None,
        batch_size: BatchSizeOpt = 8,
        source: Annotated[Optional[str], typer.Option(help="sample: --n sampled answers; eval_base: the eval's greedy "
                                                           "base pass on eval.n_shadow items (shared with `rc1 eval`); "
                                                           "default eval.shadow_run_source")] = None,
        config: ConfigOpt = None,
    ) -> None:
        """Score base-model responses on the shadow set with the old and the new reward."""
        from rc1.rewards.shadow import shadow_run

        ws = workspace()
        cfg = _config(ws, config)
        gates = _gates(ws, cfg).shadow_run
        tag = gates.tag if tag is None else tag
        rep = shadow_run(ws, cfg, n=n, seed=seed, stratify=stratify, tag=tag, regenerate=regenerate,
                         max_turns=max_turns, batch_size=batch_size, source=source, confidence=gates.confidence)
        ci = rep["corr_improve_pct_ci"]
        bounds = f"[{ci['lo']:+.1f}, {ci['hi']:+.1f}]" if ci.get("lo") is not None else "n/a"
        typer.echo(f"shadow run {tag}: n={rep['n']} ({rep['n_success']} successes) spearman {rep['spearman']:.3f} "
                   f"kendall_tau {rep['kendall_tau']:.3f} top10 {rep['top10_overlap']:.2f} top20 {rep['top20_overlap']:.2f}")
        typer.echo(f"  beyond the verifier (dimensions other than correctness): corr to success old "
                   f"{rep['corr_to_success_old']:.3f} new {rep['corr_to_success_new']:.3f} ({rep['corr_improve_pct']:+.1f}%, "
                   f"{ci['confidence']:.0%} CI {bounds}); weights changed: {rep['weights_changed']}")
        typer.echo(f"wrote {rep['report_path']}")

    @reward.command("ablate-overclar")
    def ablate_cmd(
        n: Annotated[int, typer.Option(help="shadow items")] = 245,
        generations: Annotated[int, typer.Option(help="candidate responses per item (best-of-N)")] = 4,
        seed: Annotated[int, typer.Option(help="seed")] = 20250820,
        tag: Annotated[str, typer.Option(help="responses tag (data/shadow_responses_<tag>.jsonl)")] = "overclar_ablation",
        max_turns: MaxTurnsOpt = None,
        batch_size: BatchSizeOpt = 8,
        config: ConfigOpt = None,
    ) -> None:
        """Over-clarification rate, average turns and success with and without the penalty."""
        from rc1.rewards.ablation import ablate_overclar

        ws = workspace()
        cfg = _config(ws, config)
        rep = ablate_overclar(ws, cfg, n=n, generations=generations, seed=seed, tag=tag, max_turns=max_turns,
                              batch_size=batch_size)
        for arm in ("without_penalty", "with_penalty"):
            a = rep[arm]
            typer.echo(f"{arm:16s} overclar rate {a['overclar_rate']:.3f}  avg turns {a['avg_turns']:.2f}  "
                       f"success {a['success']:.3f}")
        typer.echo(json.dumps(rep["deltas"]))
        typer.echo(f"wrote {rep['report_path']}")
