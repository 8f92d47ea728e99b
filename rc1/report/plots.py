"""The RC1 report's plots (matplotlib, Agg backend), drawn beside the markdown in reports/rc1/plots/:
  training_curves.png   loss, reward and KL per step (reports/metrics.jsonl)
  bucket_success.png    held-out success by bucket/task, base vs trained, 95 % CI error bars
  reward_dims.png       reward/<dimension> per step
  difficulty_fit.png    the fit's task x level base pass rates with CIs, the chosen levels and the band
  curriculum.png        the curriculum's level weights (and running pass rates) per step
  gain.png              held-out gain overall and per task with paired CIs, one bar per seed

Each `plot_*` returns False (and draws nothing) when its inputs hold nothing to plot.
"""

from __future__ import annotations

from pathlib import Path

from rc1.config.names import BUCKETS, REWARD_DIMENSIONS
from rc1.runtime.fingerprint import register_artifact
from rc1.runtime.layout import RC1_PLOTS, RC1_REPORT
from rc1.runtime.workspace import Workspace


def draw_plots(ws: Workspace, rows: list[dict], view: dict, rep: dict, held_name: str,
               fit: dict | None) -> dict[str, str]:
    """Every plot with something to show, registered as an artifact: {name: its path relative to the report}.
    `rows`: reports/metrics.jsonl; `view`: the first run's held-out view (rc1.eval.harness.run_view); `rep`:
    the eval report; `fit`: the difficulty-fit report (None when the run has no fit)."""
    plots_dir = ws.path(RC1_PLOTS)
    plots_dir.mkdir(parents=True, exist_ok=True)
    plots = {}
    for name, draw in (("training_curves", lambda o: plot_training_curves(rows, o)),
                       ("bucket_success", lambda o: plot_bucket_success(view, o)),
                       ("reward_dims", lambda o: plot_reward_dims(rows, o)),
                       ("difficulty_fit", lambda o: plot_difficulty_fit(fit, o)),
                       ("curriculum", lambda o: plot_curriculum(rows, o)),
                       ("gain", lambda o: plot_gain(rep, held_name, o))):
        out = plots_dir / f"{name}.png"
        if draw(out):
            register_artifact(ws, out, "rc1_report_plot")
            plots[name] = out.relative_to(ws.path(RC1_REPORT).parent).as_posix()
    return plots


def _by_seed(rows: list[dict]) -> dict[int, list[dict]]:
    """reports/metrics.jsonl rows per training run: by seed_index where a row has it, else a new run where
    the steps start again at 1 (one run per seed, trained one after the other; a resume repeats later steps)."""
    out: dict[int, list[dict]] = {}
    run, prev = 0, None
    for r in rows:
        if "seed_index" in r:
            run = int(r["seed_index"])
        elif prev is not None and r["step"] <= 1 < prev:
            run += 1
        prev = r["step"]
        out.setdefault(run, []).append(r)
    return dict(sorted(out.items()))


def _series(rows: list[dict], key: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for r in rows:
        v = r.get(key)
        if isinstance(v, (int, float)) and v == v:
            xs.append(r["step"])
            ys.append(float(v))
    return xs, ys


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_training_curves(rows: list[dict], out: Path) -> bool:
    keys = [k for k in ("loss", "reward", "kl") if _series(rows, k)[0]]
    if not keys:
        return False
    plt = _plt()
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.2), squeeze=False)
    runs = _by_seed(rows)
    for ax, k in zip(axes[0], keys):
        for i, run in runs.items():
            xs, ys = _series(run, k)
            ax.plot(xs, ys, lw=1.2, label=f"seed {i}" if len(runs) > 1 else None)
        if len(runs) > 1:
            ax.legend(fontsize=7)
        ax.set_title(k)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return True


def plot_reward_dims(rows: list[dict], out: Path) -> bool:
    dims = [d for d in REWARD_DIMENSIONS if _series(rows, f"reward/{d}")[0]]
    if not dims:
        return False
    plt = _plt()
    runs = _by_seed(rows)
    first, rows = next(iter(runs.items()))  # several seeds: the first run's (its lines would overlap the others')
    fig, ax = plt.subplots(figsize=(7, 3.6))
    if len(runs) > 1:
        ax.set_title(f"seed {first} of {len(runs)}", fontsize=9)
    for d in dims:
        xs, ys = _series(rows, f"reward/{d}")
        ax.plot(xs, ys, lw=1.2, label=d)
    ax.set_xlabel("step")
    ax.set_ylabel("mean dimension score")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return True


def _groups(summary: dict) -> list[tuple[str, dict]]:
    out = [("overall", summary["success"])]
    out += [(b, summary["by_bucket"][b]) for b in BUCKETS if b in summary["by_bucket"]]
    out += list(summary["by_task"].items())  # built-in tasks first, then custom ones (rc1.config.names.task_order)
    out += [("hard hq+sq", summary["hard_hq_sq"]), ("needs clar.", summary["needs_clar_success"])]
    return out


def plot_bucket_success(held: dict, out: Path) -> bool:
    plt = _plt()
    import numpy as np

    base = _groups(held["base"])
    trained = _groups(held["trained"]) if held.get("trained") else None
    labels = [g for g, _ in base]
    x = np.arange(len(labels))
    width = 0.38 if trained else 0.6
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(labels)), 3.8))
    series = [("base", base, -width / 2 if trained else 0)]
    if trained:
        series.append(("trained", trained, width / 2))
    for name, groups, off in series:
        vals = [100 * (p["rate"] or 0) if p["n"] else 0 for _, p in groups]
        err = [[max(0.0, 100 * ((p["rate"] or 0) - p["ci95"][0])) if p["ci95"] else 0 for _, p in groups],
               [max(0.0, 100 * (p["ci95"][1] - (p["rate"] or 0))) if p["ci95"] else 0 for _, p in groups]]
        ax.bar(x + off, vals, width, yerr=err, capsize=3, label=name)
    ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("success % (95% CI)")
    ax.set_title("held-out success, base vs trained")
    ax.set_ylim(0, 100)
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return True


def plot_difficulty_fit(fit: dict | None, out: Path) -> bool:
    """reports/difficulty_fit.json: each task x level's base pass rate with its 95 % CI, chosen levels filled,
    the band shaded (the band is on skill beyond the majority-class baseline, drawn as a dashed mark)."""
    if not fit or not fit.get("tasks"):
        return False
    plt = _plt()
    lo, hi = fit["band"]
    tasks = list(fit["tasks"].items())
    fig, axes = plt.subplots(1, len(tasks), figsize=(3.4 * len(tasks) + 0.6, 3.4), squeeze=False, sharey=True)
    for ax, (task, t) in zip(axes[0], tasks):
        rows = [r for r in t["levels"] if r.get("pass_rate") is not None]
        xs = [r["level"] for r in rows]
        ys = [100 * r["pass_rate"] for r in rows]
        err = [[100 * (r["pass_rate"] - r["ci"][0]) for r in rows], [100 * (r["ci"][1] - r["pass_rate"]) for r in rows]]
        ax.axhspan(100 * lo, 100 * hi, color="tab:green", alpha=0.08, label="band")
        for x, y, r in zip(xs, ys, rows):
            ax.bar(x, y, 0.6, color="tab:blue" if r.get("chosen") else "lightgray",
                   edgecolor="tab:blue", label=None)
            ax.plot([x - 0.3, x + 0.3], [100 * r["majority_rate"]] * 2, "k--", lw=1)
        ax.errorbar(xs, ys, yerr=err, fmt="none", ecolor="black", capsize=3, lw=1)
        for r in t["levels"]:
            if r.get("pass_rate") is None:
                ax.text(r["level"], 2, "not\nmeasured", ha="center", fontsize=6, color="gray")
        ax.set_title(f"{task}" + ("" if t["chosen"] else " (dropped)"), fontsize=9)
        ax.set_xlabel("level")
        ax.set_xticks([r["level"] for r in t["levels"]])
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("base pass@1 % (95% CI)")
    axes[0][0].set_ylim(0, 100)
    fig.suptitle("difficulty fit: blue = chosen; dashed = majority-class baseline; green = band", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return True


def plot_curriculum(rows: list[dict], out: Path) -> bool:
    """The curriculum's level weights per step (curriculum/<task>/L<n>/weight in reports/metrics.jsonl), one
    panel per task, the running pass rate of each level dashed."""
    keys = sorted({k for r in rows for k in r if k.startswith("curriculum/") and k.endswith("/weight")})
    if not keys:
        return False
    plt = _plt()
    tasks = list(dict.fromkeys(k.split("/")[1] for k in keys))
    runs = _by_seed(rows)
    fig, axes = plt.subplots(len(runs), len(tasks), figsize=(4.4 * len(tasks), 3.2 * len(runs)), squeeze=False)
    for row_axes, (seed, run) in zip(axes, runs.items()):
        for ax, task in zip(row_axes, tasks):
            for k in (k for k in keys if k.split("/")[1] == task):
                level = k.split("/")[2]
                xs, ys = _series(run, k)
                line, = ax.plot(xs, ys, lw=1.4, label=f"{level} weight")
                xs, ys = _series(run, k.replace("/weight", "/pass_rate"))
                if xs:
                    ax.plot(xs, ys, lw=0.9, ls="--", color=line.get_color(), label=f"{level} pass rate")
            ax.set_title(f"curriculum: {task}" + (f", seed {seed}" if len(runs) > 1 else ""), fontsize=9)
            ax.set_xlabel("step")
            ax.set_ylim(0, max(1.05, ax.get_ylim()[1]))
            ax.legend(fontsize=7)
            ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return True


def plot_gain(rep: dict, set_name: str, out: Path) -> bool:
    """Held-out gain (trained - base, pp) overall and per task with its paired 95 % CI, one bar per seed."""
    runs = [r for r in rep.get("runs") or [] if set_name in r.get("results", {})]
    if not runs:
        return False
    plt = _plt()
    import numpy as np

    first = runs[0]["results"][set_name]["delta"]
    labels = ["overall", *first["by_task"]]
    x = np.arange(len(labels))
    width = 0.8 / len(runs)
    fig, ax = plt.subplots(figsize=(max(5, 1.3 * len(labels) + 1), 3.6))
    for i, run in enumerate(runs):
        d = run["results"][set_name]["delta"]
        parts = [d["success"], *(d["by_task"][t] for t in labels[1:])]
        ys = [p["delta_pp"] or 0 for p in parts]
        err = [[(p["delta_pp"] - p["ci95_pp"][0]) if p.get("ci95_pp") else 0 for p in parts],
               [(p["ci95_pp"][1] - p["delta_pp"]) if p.get("ci95_pp") else 0 for p in parts]]
        label = f"seed {run['seed_index']} ({run['seed']})" if len(runs) > 1 else "trained - base"
        ax.bar(x + (i - (len(runs) - 1) / 2) * width, ys, width, yerr=err, capsize=3, label=label)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel("gain, pp (paired 95% CI)")
    ax.set_title(f"held-out gain on the {set_name} set", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return True
