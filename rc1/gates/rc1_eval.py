"""RC1 gate (eval -> scale_1000): the trained checkpoint beats the base model on the held-out set.

Reads the newest reports/ppo_eval_*.json, refuses it unless its sha256 sidecar matches and it
was computed for the run's current `latest` checkpoint (or its newest best/ copy), then checks
on the held-out (shadow) set, thresholds from `gates.eval` (SPEC §3, seeds 003/004):

  needs-clarification success     trained - base >= +needs_clar_success_pp_min pp (absolute)
  over-clarification rate         (base - trained) / base >= overclar_rel_reduction_min
  average turns                   trained - base <= avg_turns_max_increase
  hard-bucket success (hq + sq)   trained - base >= +hard_success_pp_min pp

Each check's detail carries base and trained values with 95 % CIs and the delta's paired-bootstrap CI.
"""

from __future__ import annotations

import json

from rc1.gates.base import Check, GateContext, GateResult
from rc1.runtime.fingerprint import Evidence, read_sidecar, sha256_file

GATE = "rc1_eval"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _ci_pp(ci: list | None) -> str:
    return "n/a" if not ci else f"[{ci[0]:+.1f}, {ci[1]:+.1f}] pp"


def _wilson_txt(part: dict | None) -> str:
    if not part or part.get("rate") is None:
        return "n/a"
    lo, hi = part["ci95"]
    return f"{_pct(part['rate'])} [{_pct(lo)}, {_pct(hi)}] ({part['k']}/{part['n']})"


def _checkpoint_current(ctx: GateContext, report: dict) -> tuple[bool, str, Evidence | None]:
    """Was the report computed for the run's current latest checkpoint or its newest best copy?"""
    from rc1.eval.harness import best_index
    from rc1.runtime.checkpoint import MANIFEST_FILE, read_latest

    ck = report.get("checkpoint")
    if not ck:
        return False, "the report evaluated the base model only (no checkpoint)", None
    path = ctx.ws.path(ck["path"])
    manifest = path / MANIFEST_FILE
    if not manifest.exists():
        return False, f"{ck['path']}: the evaluated checkpoint no longer exists", None
    now = sha256_file(manifest)
    ev = Evidence(ctx.ws.rel(manifest), now)
    if now != ck.get("manifest_sha256"):
        return False, f"{ck['path']}: checkpoint changed since the eval (manifest sha256 differs)", ev
    run_dir = (ctx.config.checkpoint_dir if ctx.config is not None else None) or report.get("run_dir")
    latest = read_latest(ctx.ws.path(run_dir)) if run_dir else None
    candidates = {}
    if latest is not None and (latest / MANIFEST_FILE).exists():
        candidates["latest"] = sha256_file(latest / MANIFEST_FILE)
    bests = best_index(ctx.ws, run_dir) if run_dir else []
    if bests:
        candidates["best"] = bests[-1].get("manifest_sha256")
    which = [k for k, v in candidates.items() if v == now]
    if not which:
        return False, (f"{ck['path']} is neither the current latest ({ctx.ws.rel(latest) if latest else 'none'}) "
                       "nor the newest best/ checkpoint: run `rc1 eval` again"), ev
    return True, f"{ck['path']} (step {ck.get('step')}) is the current {' and '.join(which)}", ev


def evaluate(ctx: GateContext) -> GateResult:
    from rc1.eval.harness import HELDOUT, latest_report

    g = ctx.gates.eval
    res = GateResult(GATE)
    path = latest_report(ctx.ws)
    if path is None:
        res.checks.append(Check("eval report", None, "exists", False,
                                "no reports/ppo_eval_*.json: run `rc1 eval --config ...` first"))
        return res
    rel = ctx.ws.rel(path)
    digest = sha256_file(path)
    res.evidence.append(Evidence(rel, digest))
    side = read_sidecar(path)
    ok = side is not None and side == digest
    res.checks.append(Check("eval report sha256", digest[:12], "matches its .sha256 sidecar", ok,
                            f"{rel}: " + ("verified" if ok else "no sidecar" if side is None else
                                          f"sidecar says {side[:12]}: the report was edited after it was written")))
    if not ok:
        return res
    try:
        report = json.loads(path.read_text())
        held = report["results"][report.get("heldout_set", HELDOUT)]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        res.checks.append(Check("eval report readable", None, "ppo_eval JSON", False, f"{rel}: {exc.__class__.__name__}: {exc}"))
        return res
    current, why, ev = _checkpoint_current(ctx, report)
    if ev is not None:
        res.evidence.append(ev)
    res.checks.append(Check("report is for the current checkpoint", (report.get("checkpoint") or {}).get("path"),
                            "latest or newest best", current, why))
    if not current or not held.get("delta"):
        return res
    base, trained, delta = held["base"], held["trained"], held["delta"]
    n = delta["n_paired"]
    res.notes.append(f"held-out set {report['sets'][report.get('heldout_set', HELDOUT)]['path']} "
                     f"(n={n}), profile {report.get('profile')}, report {rel}")

    d = delta["needs_clar_success"]
    res.checks.append(Check.at_least(
        "needs-clarification success delta (pp)", d["delta_pp"], g.needs_clar_success_pp_min,
        f"base {_wilson_txt(base['needs_clar_success'])} -> trained {_wilson_txt(trained['needs_clar_success'])}; "
        f"delta 95% CI {_ci_pp(d['ci95_pp'])}" + ("" if d["n"] else "; no needs-clarification items in the set")))

    oc = delta["overclar"]
    detail = (f"base {_wilson_txt(base['overclar'])} -> trained {_wilson_txt(trained['overclar'])}")
    if oc["n"] == 0:
        res.checks.append(Check("over-clarification relative reduction", None,
                                f">= {g.overclar_rel_reduction_min:g}", False,
                                "no items without clarification need in the held-out set: cannot be measured"))
    elif not oc["base"]:
        # The base model never over-clarified: the rate is already at its floor; it must stay there.
        ok = oc["trained"] == 0
        res.checks.append(Check("over-clarification relative reduction", "n/a (base rate 0)",
                                f">= {g.overclar_rel_reduction_min:g}", ok,
                                detail + ("; base and trained never over-clarify (rate at its floor)" if ok else
                                          "; the base model never over-clarified and the trained model does")))
    else:
        ci = oc["rel_reduction_ci95"]
        res.checks.append(Check.at_least(
            "over-clarification relative reduction", oc["rel_reduction"], g.overclar_rel_reduction_min,
            detail + (f"; reduction 95% CI [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")))

    t = delta["avg_turns"]
    ci = t["ci95"]
    res.checks.append(Check.at_most(
        "average turns increase", t["delta"], g.avg_turns_max_increase,
        f"base {t['base']:.3f} -> trained {t['trained']:.3f} turns; delta 95% CI "
        + (f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "n/a")))

    h = delta["hard_hq_sq"]
    res.checks.append(Check.at_least(
        "hard-bucket success delta, hotpotqa+strategyqa (pp)", h["delta_pp"], g.hard_success_pp_min,
        f"base {_wilson_txt(base['hard_hq_sq'])} -> trained {_wilson_txt(trained['hard_hq_sq'])}; "
        f"delta 95% CI {_ci_pp(h['ci95_pp'])}" + ("" if h["n"] else "; no hard hotpotqa/strategyqa items in the set")))
    return res
