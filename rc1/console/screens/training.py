"""Training: live plotext plots of metrics.jsonl, the train.log tail, and the trainer's status."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.widgets import Log, Static

from rc1.console.messages import TrainerUpdated
from rc1.console.metrics_feed import (
    PLOTS,
    MetricsSnapshot,
    eta_seconds,
    format_duration,
)
from rc1.console.screens.base import WorkspaceScreen
from rc1.console.widgets.plot import PlotPanel


def trainer_text(msg: TrainerUpdated | None, snapshot: MetricsSnapshot | None, train_blocked: str | None = None,
                 resume_blocked: str | None = None) -> Text:
    """The trainer's line; `train_blocked` / `resume_blocked`: why t / r would be refused now (None: they run)."""
    if msg is None:
        return Text("trainer: checking…", style="dim")
    if msg.unavailable:
        return Text(f"trainer control: {msg.unavailable}", style="yellow")
    st = msg.status
    step = (snapshot.last.get("step") if snapshot and snapshot.last else None)
    step = getattr(st, "step", None) if getattr(st, "step", None) is not None else step
    if st is None or getattr(st, "pid", None) is None:
        if train_blocked:
            return Text(f"trainer: not running — training cannot start: {train_blocked}", style="yellow")
        return Text("trainer: not running — press t to start" + (
            "" if resume_blocked else ", r to resume from the latest checkpoint"), style="dim")
    out = Text()
    alive = getattr(st, "alive", False)
    out.append("● running" if alive else "✘ not running", style="bold green" if alive else "bold red")
    out.append(f"  pid {st.pid}")
    if step is not None:
        out.append(f"  step {step}" + (f"/{msg.max_steps}" if msg.max_steps else ""))
    age = getattr(st, "heartbeat_age_s", None)
    if age is not None:
        out.append(f"  heartbeat {format_duration(age)} ago", style="yellow" if age > 120 else "")
    if alive:
        sps = snapshot.sec_per_step if snapshot else None
        out.append(f"  ETA {format_duration(eta_seconds(step, msg.max_steps, sps))}")
    if getattr(st, "ranks", None):
        out.append("\n").append_text(ranks_text(st.ranks))
    if not alive:
        report = getattr(st, "last_error_report", None)
        if msg.error_report is not None or report:
            err = (msg.error_report or {}).get("error", "")
            out.append(f"\ndied: {err}", style="red")
            if (msg.error_report or {}).get("step") is not None:
                out.append(f" (at step {msg.error_report['step']})", style="red")
            out.append(f"\nERROR report: {report}", style="bold")
        out.append("\npress f for a failpack" + ("" if resume_blocked else ", r to resume from the latest checkpoint"),
                   style="yellow")
    return out


def ranks_text(ranks) -> Text:
    """One line for a distributed run: each rank's pid, whether it runs, its last heartbeat."""
    out = Text(f"{len(ranks)} ranks:")
    for r in ranks:
        mark, style = {True: ("●", "green"), False: ("✘", "bold red"), None: ("?", "dim")}[r.alive]
        out.append(f"  {r.rank} ")
        out.append(mark, style=style)
        out.append(f" pid {r.pid}" + (f"@{r.host}" if r.alive is None else ""))
        if r.heartbeat_age_s is not None:
            out.append(f" {format_duration(r.heartbeat_age_s)} ago", style="yellow" if r.heartbeat_age_s > 120 else "")
    return out


def metrics_text(snap: MetricsSnapshot | None) -> Text:
    if snap is None:
        return Text("reading reports/metrics.jsonl…", style="dim")
    if not snap.file_exists:
        return Text("reports/metrics.jsonl: not produced yet", style="dim")
    out = Text()
    if snap.exact:
        out.append(f"{snap.records} records")
    else:
        out.append(f"preview from {snap.records} sampled records; full scan running", style="yellow")
    out.append("  corrupt/partial lines skipped: ")
    out.append(str(snap.bad_lines), style="bold red" if snap.bad_lines else "")
    if isinstance(snap.last.get("seed_index"), int):
        out.append(f"\nplots: the run of seed index {snap.last['seed_index']} (each seed's run: the RC1 report)")
    keys = ("step", "loss", "kl", "reward", "success", "entropy", "completion_len", "clip_frac")
    shown = [f"{k}={snap.last[k]:.4g}" if isinstance(snap.last.get(k), float) else f"{k}={snap.last[k]}"
             for k in keys if k in snap.last]
    if shown:
        out.append("\nlast: " + "  ".join(shown))
    judge = judge_text(snap.last)
    if judge is not None:
        out.append("\n").append_text(judge)
    for step, message in snap.alerts:
        out.append(f"\n⚠ ALERT at step {step}: ", style="bold red")
        out.append(message, style="red")
    return out


def judge_text(last: dict) -> Text | None:
    """The live judge of the latest step (metrics.jsonl judge/* fields), or None when the judge does not score."""
    if "judge/calls" not in last:
        return None
    def num(key, fmt):
        v = last.get(key)
        return format(v, fmt) if isinstance(v, (int, float)) else "-"
    out = Text("judge: ")
    out.append(f"calls {num('judge/calls', 'd')} (live {num('judge/live', 'd')}, cache {num('judge/cache', 'd')})")
    out.append(f"  latency p50 {num('judge/latency_p50_s', '.2f')}s p95 {num('judge/latency_p95_s', '.2f')}s")
    out.append(f"  {num('judge/seconds', '.1f')}s of the step")
    out.append(f"  cost so far {num('judge/cost_total', '.4f')} ({num('judge/billable_tokens_total', 'd')} tokens)")
    n429, unstable = last.get("judge/n429") or 0, last.get("judge/unstable_total") or 0
    out.append(f"  429s {n429}", style="yellow" if n429 else "")
    out.append(f"  unstable samples {unstable}", style="yellow" if unstable else "")
    return out


class TrainingScreen(WorkspaceScreen):
    SUBTITLE = "training"
    BORDER_TITLES = {"#train-log": "logs/train.log", "#metrics-info": "reports/metrics.jsonl"}

    AUTO_FOCUS = None  # a focused log would scroll a short terminal past the plots

    def body(self) -> ComposeResult:
        yield Static(id="trainer-status")
        # In a short terminal the plots keep a readable height (axes included) and the screen scrolls.
        with VerticalScroll(id="training-scroll"):
            with Grid(id="plots"):
                for title, _ in PLOTS:
                    yield PlotPanel(title, classes="plot")
            with Horizontal(id="training-bottom"):
                yield Log(id="train-log", max_lines=2000)
                yield Static(id="metrics-info")

    def refresh_view(self) -> None:
        self.app.set_plots_visible(True)
        self.refresh_all()

    def on_screen_suspend(self) -> None:
        self.app.set_plots_visible(False)

    def refresh_all(self) -> None:
        app = self.app
        self.show_trainer(app.trainer)
        if app.metrics is not None:
            self.show_metrics(*app.metrics)
        else:
            self.query_one("#metrics-info", Static).update(metrics_text(None))
        log = self.query_one(Log)
        log.clear()
        log.write_lines(list(app.log_lines))

    def show_trainer(self, msg: TrainerUpdated | None) -> None:
        snap = self.app.metrics[0] if self.app.metrics else None
        app = self.app
        self.query_one("#trainer-status", Static).update(
            trainer_text(msg, snap, app.disabled_reason("train"), app.disabled_reason("resume")))

    def show_metrics(self, snap: MetricsSnapshot, plots: dict[str, str]) -> None:
        for panel in self.query(PlotPanel):
            series = snap.series.get(panel.plot_title, [])
            panel.show(plots.get(panel.plot_title, ""), [name for name, _, _ in series], snap.last)
        self.query_one("#metrics-info", Static).update(metrics_text(snap))
        self.show_trainer(self.app.trainer)

    def add_log_lines(self, lines: list[str], reset: bool) -> None:
        log = self.query_one(Log)
        if reset:
            log.clear()
        log.write_lines(lines)


