"""The RC1 report: `reports/rc1/rc1_report.md` with PNG plots and a reproducibility manifest.

It sits beside rc1.pipeline, above eval, gates and machine: it runs the RC1 gate on the eval report
and lists every gate's last result, so it cannot live inside rc1.eval (which the gates import).

Every number in the markdown is read from a JSON report (the newest verified eval report,
reports/metrics.jsonl, reports/scale/*.json, the pipeline timings) and formatted here, never
retyped. Its plots (rc1.report.plots) go beside the markdown in reports/rc1/plots/. The manifest table
lists the sha256 of the data files, weights file, configs, base model, checkpoint, eval report and the
code commit (rc1.runtime.provenance).

Besides the deltas it states what makes them honest to read: the eval and training dtypes, each
task's majority-class baseline on the same items, success among non-truncated answers, the held-out
n with the smallest effect it can detect, how each training run ended (early stops marked), the
spread across seeds, and every gate check's status (not measurable / not applicable included; the
laptop profile's let-through warnings are said to be warnings).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rc1.config.names import BUCKETS
from rc1.runtime.atomic import atomic_write_text
from rc1.runtime.errors import ConfigError
from rc1.runtime.fingerprint import read_sidecar, register_artifact, sha256_file, sha256_tree
from rc1.runtime.fmt import fmt_num, fmt_pct, fmt_pp, fmt_pp_ci, fmt_rate_ci, measured
from rc1.runtime.layout import DIFFICULTY_REPORT, EVAL_REPORTS, SCALE_REPORTS, SHADOW_MANIFEST
from rc1.runtime.layout import PIPELINE_TIMINGS as TIMINGS
from rc1.runtime.layout import RC1_REPORT as REPORT_MD
from rc1.report.plots import draw_plots
from rc1.runtime.workspace import Workspace

if TYPE_CHECKING:  # pragma: no cover
    from rc1.config.schema import TrainConfig

log = logging.getLogger("rc1.eval")

# ----------------------------------------------------------------------------- inputs
def load_eval_report(ws: Workspace) -> tuple[Path, dict]:
    """The newest eval report whose sha256 sidecar verifies (a tampered one is refused)."""
    from rc1.eval.harness import latest_report

    path = latest_report(ws)
    if path is None:
        raise ConfigError(f"no {EVAL_REPORTS}: run `rc1 eval --config ...` before `rc1 report`")
    side = read_sidecar(path)
    if side is None or side != sha256_file(path):
        raise ConfigError(f"{ws.rel(path)}: sha256 sidecar missing or not matching; refusing to report from it")
    doc = json.loads(path.read_text())
    if "runs" not in doc:
        raise ConfigError(f"{ws.rel(path)}: written by an older rc1 (no per-run results); run `rc1 eval` again")
    return path, doc


def _read_metrics(ws: Workspace) -> list[dict]:
    from rc1.runtime.metrics import read_metrics

    if not ws.metrics_path.exists():
        return []
    rows, _bad = read_metrics(ws.metrics_path)
    return [r for r in rows if isinstance(r.get("step"), (int, float))]


# ----------------------------------------------------------------------------- manifest
def _sha_row(ws: Workspace, kind: str, rel: str | None) -> tuple[str, str, str] | None:
    if not rel:
        return None
    p = ws.path(rel)
    if not p.exists():
        return (kind, ws.rel(p), "missing")
    return (kind, ws.rel(p), sha256_tree(p) if p.is_dir() else sha256_file(p))


def manifest_rows(ws: Workspace, cfg: "TrainConfig", config_path: str | None, eval_path: Path, rep: dict) -> list[tuple[str, str, str]]:
    from rc1.runtime.provenance import git_commit, git_root

    rows: list[tuple[str, str, str] | None] = []
    seen: set[str] = set()
    for kind, rel in (("data: shadow eval set", cfg.data.shadow_path), ("data: eval_min", cfg.data.eval_path),
                      ("data: train_min", cfg.data.train_path), ("data: seed pool (balanced)", cfg.seed_pool),
                      ("data: seed pool (raw)", cfg.pool.out), ("data: sample manifest", SHADOW_MANIFEST),
                      ("report: difficulty", DIFFICULTY_REPORT),
                      ("weights", cfg.reward.weights), ("config: run", config_path), ("config: gates", cfg.gates)):
        if rel and rel not in seen and ws.path(rel).exists():
            seen.add(rel)
            rows.append(_sha_row(ws, kind, rel))
    for p in sorted(ws.path("data/rollouts").glob("rc1_scale_*.jsonl")) if ws.path("data/rollouts").exists() else []:
        rows.append(_sha_row(ws, f"data: expansion {p.stem}", ws.rel(p)))
    try:
        from rc1.models.loader import resolve_base

        base_dir = resolve_base(cfg.model.base, cfg.model.revision)
        rows.append((f"model: base {cfg.model.base}", str(base_dir.name), sha256_tree(base_dir)))
    except Exception as exc:  # noqa: BLE001 - the report still builds; the row says why
        rows.append((f"model: base {cfg.model.base}", "-", f"unavailable ({exc.__class__.__name__})"))
    from rc1.eval.best import best_index

    for run in rep.get("runs", []):
        ck = run["checkpoint"]
        seed = f", seed {run['seed_index']}" if len(rep["runs"]) > 1 else ""
        rows.append((f"checkpoint (manifest.json{seed})", f"{ck['path']}/manifest.json", ck["manifest_sha256"]))
        bests = best_index(ws, run["run_dir"])
        if bests:
            b = bests[-1]
            rows.append((f"best checkpoint (dev {b.get('metric')} {fmt_num(b.get('value'), 4)}{seed})",
                         f"{b['path']}/manifest.json", b.get("manifest_sha256", "")))
        end = run.get("training") or {}
        if end.get("sha256"):
            rows.append((f"training end record{seed}", end["end_file"], end["sha256"]))
    rows.append(("eval report", ws.rel(eval_path), sha256_file(eval_path)))
    root = git_root(ws.root)
    rows.append(("code commit", "git HEAD", git_commit(root) if root else git_commit()))
    return [r for r in rows if r]


# ----------------------------------------------------------------------------- markdown
def _success_table(held: dict) -> list[str]:
    base, trained, delta = held["base"], held.get("trained"), held.get("delta")
    lines = ["| group | n | base success [95% CI] | trained success [95% CI] | delta | delta 95% CI (paired bootstrap) |",
             "|---|---|---|---|---|---|"]

    def row(label: str, b: dict, t: dict | None, d: dict | None) -> str:
        return (f"| {label} | {b['n']} | {fmt_rate_ci(b)} | {fmt_rate_ci(t) if t else 'n/a'} | "
                f"{fmt_pp(d['delta_pp']) if d else 'n/a'} | {fmt_pp_ci(d['ci95_pp']) if d else 'n/a'} |")

    lines.append(row("overall", base["success"], trained and trained["success"], delta and delta["success"]))
    for b in BUCKETS:
        if b in base["by_bucket"]:
            lines.append(row(f"bucket {b}", base["by_bucket"][b], trained and trained["by_bucket"].get(b),
                             delta and delta["by_bucket"].get(b)))
    for t, part in base["by_task"].items():
        lines.append(row(f"task {t}", part, trained and trained["by_task"].get(t), delta and delta["by_task"].get(t)))
    lines.append(row("hard bucket, hotpotqa+strategyqa", base["hard_hq_sq"], trained and trained["hard_hq_sq"],
                     delta and delta["hard_hq_sq"]))
    lines.append(row("needs clarification", base["needs_clar_success"], trained and trained["needs_clar_success"],
                     delta and delta["needs_clar_success"]))
    return lines


def _ended_text(run: dict) -> str:
    end = run.get("training") or {}
    if not end.get("exists"):
        return f"unknown (no training end record{' ' + end['end_file'] if end.get('end_file') else ''})"
    at = f"step {end.get('step')}/{end.get('max_steps')}"
    return (f"**stopped early** ({end.get('reason')} at {at}; the RC1 gate needs the operator's audited acceptance)"
            if end.get("stopped_early") else f"{end.get('reason')} ({at})")


def _drift_lines(ws: Workspace, runs: list[dict]) -> list[str]:
    """Each evaluated run's drift from the reference (rc1 drift: exact per-token KL on fixed prompts, with its CI)
    when it was measured on the checkpoint the eval judged."""
    from rc1.eval.drift import drift_report_path

    lines = []
    for run in runs:
        path = ws.path(drift_report_path(run.get("seed_index") or 0))
        if not path.exists():
            continue
        d = json.loads(path.read_text())
        if d["checkpoint"].get("manifest_sha256") != (run.get("checkpoint") or {}).get("manifest_sha256"):
            continue
        tok, ci = d["per_token"], d["per_token"].get("ci") or [float("nan")] * 2
        lines.append(f"- Drift of `{d['checkpoint']['path']}` from the reference (`rc1 drift`, {d['prompts']['n']} "
                     f"prompts x {d['samples_per_prompt']} answers at T={d['temperature']}): per-token KL "
                     f"{tok['mean']:.4f} nats, 95% CI [{ci[0]:.4f}, {ci[1]:.4f}]; per sequence "
                     f"{d['per_sequence']['mean']:.3f} nats; bound {fmt_num(d.get('bound'), 4)}.")
    return lines + [""] if lines else []


def _judge_lines(runs: list[dict]) -> list[str]:
    """The live judge's bill: per run (from its training end record) and summed over the runs."""
    judged = [(r, r["training"].get("judge")) for r in runs if r.get("training", {}).get("judge")]
    if not judged:
        return ["- Reward dimensions: rules only (reward.source rules): no judge calls in training."]
    lines = []
    for run, j in judged:
        lines.append(f"- Judge in the reward loop, `{run['run_dir']}`: {j['provider']} ({j['model']}) grading "
                     f"{', '.join(j['dimensions'])}: {j['calls']} calls (live {j['live']}, cache {j['cache']}), "
                     f"{j['billable_tokens']} billable tokens, cost {j['cost']:.4f}, {j['unstable']} unstable grades, "
                     f"{j['seconds']:.0f} s." + (f" Note: {j['note']}." if j.get("note") else ""))
    if len(judged) > 1:
        lines.append(f"- Judge total over {len(judged)} runs: {sum(j['calls'] for _, j in judged)} calls, "
                     f"{sum(j['billable_tokens'] for _, j in judged)} billable tokens, cost "
                     f"{sum(j['cost'] for _, j in judged):.4f}.")
    return lines


def _setup_lines(rep: dict) -> list[str]:
    """Dtypes, how each run ended, and the held-out n with the smallest effect it can detect."""
    from rc1.eval.harness import HELDOUT

    dt = rep["dtype"]
    native = {True: "yes", False: "no", None: "n/a"}[dt.get("cpu_native_bf16")]
    lines = [f"- Eval dtype: **{dt['eval']}** (eval.dtype `{dt['requested']}`, device {dt['device']}, CPU with native "
             f"bf16: {native}). Training dtype: **{', '.join(dt.get('train') or ['n/a (base only)'])}** "
             "(from each run's training end record; `unknown` when the record does not say)."]
    for run in rep["runs"]:
        seed = f"seed {run['seed_index']} (seed value {run['seed']}), " if len(rep["runs"]) > 1 else ""
        lines.append(f"- Training run {seed}`{run['run_dir']}`: ended {_ended_text(run)}; training dtype "
                     f"{run['training']['train_dtype']}.")
    lines += _judge_lines(rep["runs"])
    mde = rep["results"][HELDOUT]["mde"]
    o = mde["overall"]
    if o["mde"] is not None:
        lines.append(f"- Held-out n = {o['n']}: the smallest success increase over the base rate "
                     f"({fmt_pct(o['base_rate'])}) a paired test detects is **{100 * o['mde']:.1f} pp** (per task below). "
                     f"Assumption: {mde['assumption']}.")
    return lines


def _rate_n(part: dict | None) -> str:
    return f"{fmt_rate_ci(part)} (n={part['n']})" if part else "n/a"


def _baseline_table(view: dict) -> list[str]:
    """Per task: the majority-class baseline, base/trained success (all and non-truncated), the trained model's
    paired delta to the baseline, truncation, n and the minimum detectable effect."""
    base, trained, maj = view["base"], view.get("trained"), view["majority"]
    vs, mde = view.get("vs_majority") or {}, view["mde"]
    lines = ["| task | n | majority answer | majority baseline | base success | trained success | "
             "trained - majority [95% CI] | base success, non-truncated | trained success, non-truncated | "
             "truncated base / trained | MDE (80% power) |", "|---|---|---|---|---|---|---|---|---|---|---|"]

    def row(label, n, answer, m, b, t, v, bn, tn, tb, tt, e):
        lines.append(f"| {label} | {n} | {answer} | {fmt_pct(m['rate'])} | {fmt_rate_ci(b)} | "
                     f"{fmt_rate_ci(t) if t else 'n/a'} | "
                     f"{(fmt_pp(v['delta_pp']) + ' ' + fmt_pp_ci(v['ci95_pp'])) if v else 'n/a'} | "
                     f"{_rate_n(bn)} | {_rate_n(tn)} | "
                     f"{fmt_pct(tb['rate'])} / {fmt_pct(tt['rate']) if tt else 'n/a'} | "
                     f"{'n/a' if e['mde'] is None else format(100 * e['mde'], '.1f') + ' pp'} |")

    for task, m in maj["by_task"].items():
        row(task, m["n"], f"`{m['answer']}`", m, base["by_task"][task], trained and trained["by_task"].get(task),
            (vs.get("by_task") or {}).get(task), base["non_truncated"]["by_task"][task],
            trained and trained["non_truncated"]["by_task"].get(task), base["non_truncated"]["truncated_by_task"][task],
            trained and trained["non_truncated"]["truncated_by_task"].get(task), mde["by_task"][task])
    row("all tasks", base["n"], "per task", maj["overall"], base["success"], trained and trained["success"],
        vs.get("success"), base["non_truncated"]["success"], trained and trained["non_truncated"]["success"],
        base["truncated"], trained and trained["truncated"], mde["overall"])
    return lines


def _spread_table(rep: dict, set_name: str) -> list[str]:
    sp = rep["spread"][set_name]
    lines = ["| seed | trained success | delta vs base | delta 95% CI |", "|---|---|---|---|"]
    for p in sp["per_seed"]:
        lines.append(f"| {p['seed_index']} ({p['seed']}) | {fmt_pct(p['trained_success'])} | {fmt_pp(p['delta_pp'])} | "
                     f"{fmt_pp_ci(p['ci95_pp'])} |")
    d, t = sp["delta_pp"], sp["trained_success"]
    lines.append(f"| min / mean / max | {fmt_pct(t['min'])} / {fmt_pct(t['mean'])} / {fmt_pct(t['max'])} | "
                 f"{fmt_pp(d['min'])} / {fmt_pp(d['mean'])} / {fmt_pp(d['max'])} | sd {fmt_num(d['sd'], 2)} pp |")
    return lines


def _behaviour_table(held: dict) -> list[str]:
    base, trained = held["base"], held.get("trained")
    delta = held.get("delta") or {}
    lines = ["| metric | base | trained | change |", "|---|---|---|---|"]
    oc = delta.get("overclar") or {}
    rel = oc.get("rel_reduction")
    lines.append(f"| over-clarification rate [95% CI] | {fmt_rate_ci(base['overclar'])} | "
                 f"{fmt_rate_ci(trained['overclar']) if trained else 'n/a'} | "
                 f"{'n/a' if rel is None else format(100 * rel, '.1f') + '% relative reduction'} |")
    for key, label in (("avg_turns", "average turns"), ("avg_tool_hops", "average tool hops")):
        change = (delta.get(key) or {}).get("delta")
        change_txt = "n/a" if change is None else f"{change:+.3f}"
        lines.append(f"| {label} | {fmt_num(base[key]['mean'])} | {fmt_num(trained[key]['mean']) if trained else 'n/a'} | "
                     f"{change_txt} |")
    lines.append(f"| truncated episodes | {fmt_rate_ci(base['truncated'])} | "
                 f"{fmt_rate_ci(trained['truncated']) if trained else 'n/a'} | |")
    return lines


def _split_table(held: dict) -> list[str]:
    """Seed 003 §4.3: success, delta, over-clarification and turns per difficulty bucket."""
    base, trained, delta = held["base"], held.get("trained"), held.get("delta") or {}
    lines = ["| bucket | success base | success trained | delta | over-clar. base | over-clar. trained | "
             "avg turns base | avg turns trained |", "|---|---|---|---|---|---|---|---|"]
    for b in BUCKETS:
        if b not in base.get("by_bucket_behaviour", {}):
            continue
        bb, tb = base["by_bucket_behaviour"][b], (trained or {}).get("by_bucket_behaviour", {}).get(b)
        d = (delta.get("by_bucket") or {}).get(b)
        lines.append(f"| {b} | {fmt_pct(base['by_bucket'][b]['rate'])} | "
                     f"{fmt_pct(trained['by_bucket'][b]['rate']) if trained else 'n/a'} | "
                     f"{fmt_pp(d['delta_pp']) if d else 'n/a'} | {fmt_pct(bb['overclar']['rate'])} | "
                     f"{fmt_pct(tb['overclar']['rate']) if tb else 'n/a'} | {fmt_num(bb['avg_turns']['mean'])} | "
                     f"{fmt_num(tb['avg_turns']['mean']) if tb else 'n/a'} |")
    return lines


# A check's status as the report states it: a not-measurable check says whether it blocked.
STATUS_TEXT = {"pass": "pass", "fail": "FAIL", "blocked": "NOT MEASURABLE (blocks)",
               "warned": "not measurable (warning only: this profile lets it through)", "not_applicable": "not applicable"}


def status_text(res, c) -> str:
    return STATUS_TEXT[res.outcome(c)]


def _checks_table(res) -> list[str]:
    lines = ["| check | measured | threshold | result | detail |", "|---|---|---|---|---|"]
    for c in res.checks:
        lines.append(f"| {c.name} | {measured(c.measured)} | {c.threshold} | {status_text(res, c)} | {c.detail.replace('|', '/')} |")
    return lines


def _warnings_text(res, profile: str) -> list[str]:
    if not res.warnings:
        return []
    return [f"> {len(res.warnings)} check(s) could not be measured and were let through as warnings by the "
            f"`{profile}` profile (`not_measurable: warn`); they are not passes, and the production profile blocks on "
            "them: " + "; ".join(c.name for c in res.warnings) + ".", ""]


def _gate_section(ws: Workspace, cfg: "TrainConfig") -> list[str]:
    """The RC1 gate's checks on this same eval report (the gate is pure: it only reads files)."""
    from rc1.config.load import load_run_gates
    from rc1.gates.base import GateContext
    from rc1.gates.registry import run_area

    try:
        gates = load_run_gates(cfg, ws)
    except ConfigError as exc:
        return [f"RC1 gate not evaluated: {exc.message}"]
    res = run_area("rc1_eval", GateContext(ws=ws, gates=gates, round="rc1_eval", config=cfg))
    lines = [f"Gates profile `{gates.profile}` (`{cfg.gates}`, not measurable: {gates.not_measurable}): "
             f"**{'PASS' if res.passed else 'FAIL'}**. Each threshold is judged on the end of the paired-bootstrap "
             "95% CI least favourable to the model; the detail gives the point estimate.", ""]
    lines += _warnings_text(res, gates.profile)
    lines += _checks_table(res)
    if res.notes:
        lines += [""] + [f"- {n}" for n in res.notes]
    return lines


def _gates_so_far(ws: Workspace) -> list[str]:
    """Every gate's last run (reports/gates/*.json): status counts and each check that was not a plain pass/fail."""
    from rc1.gates.base import FAIL, NOT_APPLICABLE, NOT_MEASURABLE, PASS, GateResult
    from rc1.machine.service import last_gate_reports

    docs = last_gate_reports(ws)
    if not docs:
        return ["No gate has run in this workspace yet (reports/gates/)."]
    lines = ["| gate | time | result | pass | fail | not measurable | not applicable |", "|---|---|---|---|---|---|---|"]
    special: list[str] = []
    for gate, doc in docs.items():
        results = [GateResult.from_dict(r) for r in doc.get("results", [])]
        checks = [(r, c) for r in results for c in r.checks]
        count = {st: sum(c.status == st for _, c in checks) for st in (PASS, FAIL, NOT_MEASURABLE, NOT_APPLICABLE)}
        lines.append(f"| {gate} | {doc.get('time')} | {'PASS' if doc.get('passed') else 'FAIL'} | {count[PASS]} | "
                     f"{count[FAIL]} | {count[NOT_MEASURABLE]} | {count[NOT_APPLICABLE]} |")
        special += [f"- {gate} / {r.gate} / {c.name}: **{status_text(r, c)}** - {c.detail}" for r, c in checks
                    if c.status in (NOT_MEASURABLE, NOT_APPLICABLE)]
    return lines + ([""] + special if special else [])


def _clarification_table(held: dict) -> list[str]:
    lines = ["| task | model | asked | needed | precision [95% CI] | recall [95% CI] |", "|---|---|---|---|---|---|"]
    for who in ("base", "trained"):
        s = held.get(who)
        if not s:
            continue
        for task, c in s["clarification"].items():
            lines.append(f"| {task} | {who} | {c['asked']} | {c['needed']} | {fmt_rate_ci(c['precision'])} | "
                         f"{fmt_rate_ci(c['recall'])} |")
    return lines


def _scale_section(ws: Workspace) -> list[str]:
    d = ws.path(SCALE_REPORTS)
    files = sorted(d.glob("*_after.json")) + sorted(d.glob("*_before.json")) if d.exists() else []
    if not files:
        return ["No scale-up stage has run yet (`rc1 scale run --stage scale_1000`)."]
    lines = ["| report | stage | phase | passed | checks measured | first failing check |", "|---|---|---|---|---|---|"]
    for p in sorted(files):
        try:
            doc = json.loads(p.read_text())
        except json.JSONDecodeError:
            continue
        checks = doc.get("checks", [])
        failing = next((c for c in checks if c.get("status") == "fail"), None)
        ran = sum(c.get("status") in ("pass", "fail") for c in checks)
        other = [c.get("status") for c in checks if c.get("status") not in ("pass", "fail")]
        extra = "".join(f", {other.count(st)} {st}" for st in sorted(set(other)))
        lines.append(f"| {ws.rel(p)} | {doc.get('stage')} | {doc.get('phase')} | {doc.get('passed')} | "
                     f"{ran}/{len(checks)}{extra} | "
                     f"{failing['name'] + ': ' + str(failing.get('detail', '')) if failing else '-'} |")
    return lines


def _timings_section(ws: Workspace) -> list[str]:
    p = ws.path(TIMINGS)
    if not p.exists():
        return []
    try:
        doc = json.loads(p.read_text())
    except json.JSONDecodeError:
        return []
    stages = doc.get("stages", doc) if isinstance(doc, dict) else {}
    rows = [(k, v) for k, v in stages.items() if isinstance(v, (int, float))]
    if not rows:
        return []
    return ["## Pipeline wall time", "", "| stage | seconds |", "|---|---|",
            *[f"| {k} | {v:.1f} |" for k, v in rows], ""]


def _run_title(rep: dict, run: dict | None) -> str:
    if run is None:
        return "base model only"
    ck = run["checkpoint"]
    seed = f"seed {run['seed_index']} (seed value {run['seed']}): " if len(rep["runs"]) > 1 else ""
    return f"{seed}checkpoint `{ck['path']}` (step {ck.get('step')})"


def _fit_lines(ws: Workspace, rep: dict) -> list[str]:
    """The difficulty fit in one sentence, and the full-difficulty shadow set beside the fitted one."""
    from rc1.eval.splits import FITTED, HELDOUT
    from rc1.training.fit import read_report

    if rep.get("heldout_set") != FITTED:
        return []
    fit = read_report(ws) or {}
    out = ["## Difficulty fit", "",
           f"{fit.get('summary', 'the difficulty fit report is missing')}: the base policy's pass rate per task x "
           f"ladder level inside the band {fit.get('band')} chose these levels (`reports/difficulty_fit.json`). The "
           "RC1 gate judges the held-out items of these levels; the full-difficulty shadow set is reported beside "
           "them and never hidden.", ""]
    for run in rep["runs"]:
        d = (((run.get("results") or {}).get(HELDOUT) or {}).get("delta") or {}).get("success")
        if d and d.get("n"):
            label = f"seed {run.get('seed_index')}: " if len(rep["runs"]) > 1 else ""
            out.append(f"- {label}full-difficulty shadow set (n={d['n']}): base {fmt_pct(d['base'])} -> trained "
                       f"{fmt_pct(d['trained'])}, delta {fmt_pp(d['delta_pp'])} (95% CI {fmt_pp_ci(d['ci95_pp'])})")
    return out + [""]


def build_report(ws: Workspace, cfg: "TrainConfig | None" = None, *, config_path: str | None = None) -> Path:
    """Write reports/rc1/rc1_report.md (+ plots) from the JSON reports; returns its path."""
    from rc1.config.load import load_train_config
    from rc1.config.schema import TrainConfig
    from rc1.eval.harness import DEV, HELDOUT, run_view

    eval_path, rep = load_eval_report(ws)
    if cfg is None:
        config_path = config_path or (rep.get("config") or {}).get("path")
        cfg = load_train_config(config_path, ws) if config_path and ws.path(config_path).exists() else TrainConfig()
    held_name = rep.get("heldout_set", HELDOUT)
    runs: list[dict | None] = list(rep["runs"]) or [None]
    multi = len(rep["runs"]) > 1
    views = [run_view(rep, r, held_name) for r in runs]
    from rc1.training.fit import read_report as read_fit

    rows = _read_metrics(ws)
    plots = draw_plots(ws, rows, views[0], rep, held_name, read_fit(ws) if cfg.difficulty_fit.enable else None)

    held_set = rep["sets"][held_name]
    lines = ["# RC1 report", "",
             f"Generated {time.strftime('%Y-%m-%d %H:%M:%SZ', time.gmtime())} from `{ws.rel(eval_path)}` "
             f"(sha256 `{sha256_file(eval_path)[:16]}`), profile **{rep.get('profile')}**. "
             "Every number below is read from the JSON reports named here.", ""]
    if rep.get("profile") != "production":
        lines += [f"> Profile `{rep.get('profile')}`: counts and steps are scaled down so the pipeline runs on a "
                  "laptop CPU; the checks and their code are the production ones.", ""]
    lines += ["## Setup", "",
              f"Held-out set `{held_set['path']}` (n={held_set['n']}"
              + (f" of {held_set['n_file']}, stratified by task and bucket" if held_set['n'] < held_set['n_file'] else "")
              + f"; sha256 "
              f"`{held_set['sha256'][:16]}`): judged here and by the RC1 gate, never used to choose a model. "
              + (f"Model selection (best/, the training-time dev eval, early stop) uses the dev split "
                 f"`{rep['sets'][DEV]['path']}` (n={rep['sets'][DEV]['n']})." if rep.get("dev_set") else
                 "No dev split was evaluated: best/ was not updated.")
              + f" Base model `{rep['model']['base']}`; greedy decoding, max_new_tokens "
              f"{rep['generation']['max_new_tokens']}.", ""] + _setup_lines(rep) + [""]
    lines += _fit_lines(ws, rep)
    if "difficulty_fit" in plots:
        lines += [f"![difficulty fit]({plots['difficulty_fit']})", ""]
    lines += ["## Held-out success: trained vs base", ""]
    if "gain" in plots:
        lines += [f"![held-out gain per task]({plots['gain']})", ""]
    if multi:
        from rc1.eval.harness import HELDOUT

        for name in dict.fromkeys((rep.get("heldout_set") or HELDOUT, HELDOUT)):
            if name in rep["spread"]:
                lines += [f"### Spread across seeds on the {name} set (one training run per seed)", ""]
                lines += _spread_table(rep, name) + [""]
    for run, view in zip(runs, views):
        if multi:
            lines += [f"### {_run_title(rep, run)}", ""]
        elif run is not None:
            lines += [f"Evaluated: {_run_title(rep, run)}.", ""]
        s = (view.get("delta") or {}).get("success")
        if s:
            v = view["vs_majority"]["success"]
            lines += [f"**Held-out success: base {fmt_rate_ci(view['base']['success'])} -> trained "
                      f"{fmt_rate_ci(view['trained']['success'])}, delta {fmt_pp(s['delta_pp'])} "
                      f"(95% CI {fmt_pp_ci(s['ci95_pp'])}); majority-class baseline {fmt_pct(v['base'])}, trained - "
                      f"baseline {fmt_pp(v['delta_pp'])} (95% CI {fmt_pp_ci(v['ci95_pp'])}).**", ""]
        lines += _success_table(view) + [""]
        if run is runs[0] and "bucket_success" in plots:
            lines += [f"![success by bucket and task]({plots['bucket_success']})", ""]
        lines += ["#### Baselines, truncation and power, per task", "",
                  "The majority-class baseline answers every item of a task with that task's most common gold answer "
                  "(counted by the task's verifier); it is computed on the evaluated items themselves, so it peeks at "
                  "their labels. Success among non-truncated answers leaves out episodes cut off by max_new_tokens or "
                  "the turn limit (a truncated episode always fails). MDE: the smallest success increase over the "
                  "base rate a paired test detects at this n (80% power, alpha 0.05; assumption under Setup).", ""]
        lines += _baseline_table(view) + [""]
        lines += ["#### By difficulty bucket", ""] + _split_table(view) + [""]
    lines += ["## RC1 gate (eval -> scale_1000) on this report", ""] + _gate_section(ws, cfg) + [""]
    lines += ["## Gate checks on the way here (reports/gates)", ""] + _gates_so_far(ws) + [""]
    for run, view in zip(runs, views):
        lines += [f"## Clarification behaviour and turns{' - ' + _run_title(rep, run) if multi else ''}", ""]
        lines += _behaviour_table(view) + [""]
        lines += ["### Clarification policy precision / recall", ""] + _clarification_table(view) + [""]
    if rep.get("dev_set"):
        lines += [f"## Dev split (model selection): `{rep['sets'][DEV]['path']}`", ""]
        for run in runs:
            dv = run_view(rep, run, DEV)
            if multi:
                lines += [f"### {_run_title(rep, run)}", ""]
            lines += _success_table(dv) + [""]
    for run in rep["runs"]:
        best = run.get("best") or {}
        lines += [f"best/ of `{run['run_dir']}` (dev {best.get('metric')}): "
                  + (f"updated to `{best['path']}`" if best.get("updated") else f"unchanged ({best.get('reason')})"), ""]
    lines += ["## Training", ""]
    if rows:
        last = rows[-1]
        lines += [f"{len(rows)} metric lines in `reports/metrics.jsonl`; last step {last.get('step')}: "
                  f"loss {fmt_num(last.get('loss'), 4)}, reward {fmt_num(last.get('reward'), 4)}, kl {fmt_num(last.get('kl'), 4)}.", ""]
    else:
        lines += ["No `reports/metrics.jsonl` in this workspace (no training run recorded).", ""]
    lines += _drift_lines(ws, rep["runs"])
    if "training_curves" in plots:
        lines += [f"![training curves]({plots['training_curves']})", ""]
    if "reward_dims" in plots:
        lines += [f"![reward dimensions]({plots['reward_dims']})", ""]
    if "curriculum" in plots:
        lines += [f"![curriculum level weights]({plots['curriculum']})", ""]
    thr = rep.get("throughput") or {}
    lines += ["## Eval throughput", "", f"Eval dtype {rep['dtype']['eval']} on {rep['dtype']['device']}.", "",
              "| model | episodes | seconds | episodes/s | cached |", "|---|---|---|---|---|"]
    b = thr.get("base") or {}
    gen = b.get("generated")
    lines.append(f"| base | {b.get('episodes')} | {fmt_num(gen['seconds'], 1) if gen else '-'} | "
                 f"{fmt_num(gen['episodes_per_s'], 2) if gen else '-'} | {', '.join(b.get('cached_sets') or []) or 'no'} |")
    for run, t in zip(rep["runs"], thr.get("runs") or []):
        lines.append(f"| `{run['checkpoint']['path']}` | {t['episodes']} | {fmt_num(t.get('seconds'), 1)} | "
                     f"{fmt_num(t.get('episodes_per_s'), 2)} | no |")
    lines += ["", "## Scale-up stages", ""] + _scale_section(ws) + [""]
    lines += _timings_section(ws)
    lines += ["## Reproducibility manifest", "", "| what | path | sha256 |", "|---|---|---|"]
    lines += [f"| {k} | `{p}` | `{h}` |" for k, p, h in manifest_rows(ws, cfg, config_path, eval_path, rep)]
    from rc1.runtime.provenance import versions

    v = versions()
    lines += ["", "Versions: " + ", ".join(f"{k} {v[k]}" for k in ("python", "torch", "transformers", "trl", "peft")
                                            if k in v), ""]
    out = ws.path(REPORT_MD)
    atomic_write_text(out, "\n".join(lines) + "\n")
    register_artifact(ws, out, "rc1_report", eval_report=ws.rel(eval_path))
    return out
