"""Round 2: the work was fitted to this model (rc1 data fit, rc1.training.fit).

With `difficulty_fit.enable`, reads reports/difficulty_fit.json and refuses it unless its sha256 sidecar
verifies, its identity is the current config's (model, generation settings, fit settings, ladder, templates,
reward), and the item files it wrote are the ones on disk (sha256). It measures, on those files, how many
held-out and dev items share a fact with a training item (rc1.data.facts: operands and operations, the
deciding sentences, a custom item's normalised question): any is a leak, and refuses. Then at least one task must have a
level inside the band: otherwise the run would train on items the model never solves (or always solves),
and the refusal shows the table and the fix. Without the fit the gate is not applicable.
"""

from __future__ import annotations

from rc1.gates.base import Check, GateContext, GateResult, read_identified_report
from rc1.runtime.fingerprint import Evidence, sha256_file
from rc1.runtime.layout import DIFFICULTY_FIT_REPORT as REPORT
from rc1.runtime.layout import FIT_DEV, FIT_HELDOUT, FIT_TRAIN


def evaluate(ctx: GateContext) -> GateResult:
    res = GateResult("difficulty_fit")
    cfg = ctx.config
    if cfg is None or not cfg.difficulty_fit.enable:
        res.checks.append(Check.not_applicable("difficulty fit", "difficulty_fit.enable is off: training samples the "
                                                                 "seed pool"))
        return res
    cmd = f"rc1 data fit --config {ctx.config_path or 'P'}"
    from rc1.training.fit import fit_identity, table_text

    got = read_identified_report(ctx, res, REPORT, "difficulty-fit", cmd, fit_identity)
    if got is None:
        return res
    rep, ident, settings = got
    res.checks.append(Check("difficulty-fit report is for this config", ident[:12], f"== {ident[:12]}", True,
                            f"model {settings['model']}, band {settings['fit']['band']}, ladder {settings['ladder']}"))
    stale = []
    for rel, info in (rep.get("files") or {}).items():
        if not isinstance(info, dict):
            continue
        p = ctx.ws.path(rel)
        now = sha256_file(p) if p.exists() else None
        if now is not None:
            res.evidence.append(Evidence(rel, now))
        if now != info.get("sha256"):
            stale.append(rel)
    res.checks.append(Check("fitted item files are the report's", ", ".join(stale) or "all verify",
                            "sha256 as written", not stale,
                            f"changed or missing since the fit: {', '.join(stale)}; run `{cmd}` again" if stale else
                            ", ".join(f"{k} ({v['n']})" for k, v in rep["files"].items() if isinstance(v, dict))))
    kept = rep.get("kept") or []
    if kept:  # no task kept: no item files were written
        res.checks.append(fact_leak_check(ctx.ws, cmd))
    lo, hi = rep["band"]
    dropped = "; ".join(f"{t}: {why}" for t, why in (rep.get("dropped") or {}).items())
    res.checks.append(Check("tasks with a level in the band", len(kept), ">= 1", bool(kept),
                            (rep["summary"] if kept else
                             f"no task has a level whose pass rate lies in [{lo:g}, {hi:g}] ({dropped}); fix: "
                             "another difficulty_fit.band, lower difficulty_fit.levels, or another base model "
                             f"(model.base)") + (f"; dropped: {dropped}" if kept and dropped else "")))
    if not kept:
        res.notes.extend(table_text(rep).splitlines())
    return res


def fact_leak_check(ws, cmd: str) -> Check:
    """Held-out and dev items of the fit that share a fact with a training item (rc1.data.facts): 0 passes."""
    from rc1.data.facts import fact_leaks
    from rc1.data.io import read_jsonl

    name = "held-out and dev items sharing a fact with training"
    paths = {rel: ws.path(rel) for rel in (FIT_TRAIN, FIT_DEV, FIT_HELDOUT)}
    missing = [rel for rel, p in paths.items() if not p.exists()]
    if missing:
        return Check(name, None, "== 0", False, f"missing: {', '.join(missing)}; run `{cmd}`")
    train, dev, held = (read_jsonl(paths[rel]) for rel in (FIT_TRAIN, FIT_DEV, FIT_HELDOUT))
    leaks = fact_leaks(train, held + dev)
    shown = "; ".join(f"{x['id']} ({x['fact']})" for x in leaks[:3])
    return Check(name, len(leaks), "== 0", not leaks,
                 f"{len(leaks)} of {len(held) + len(dev)} held-out/dev items test a fact a training item teaches, "
                 f"e.g. {shown}; run `{cmd}` again" if leaks else
                 f"{len(held)} held-out and {len(dev)} dev items, none sharing a fact with the {len(train)} "
                 "training items")
