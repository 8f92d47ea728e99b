"""What the console calls: a thin wrapper over the same core functions the CLI uses.

The App receives a backend in its constructor (`make_app(backend=...)`); tests pass a subclass
that records the action calls. Nothing here renders anything, and nothing here decides anything
the CLI would not: gates run through `rc1.machine.service.advance`, packs through
`rc1.runtime.failpack`, trainer control through `rc1.runtime.trainer_proc`.

Trainer control and checkpoint listing are optional at import time (they may not be installed
in every build); when missing, the calls raise `Unavailable`, and the screens say so.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rc1.runtime import layout
from rc1.runtime.errors import Rc1Error
from rc1.runtime.workspace import Workspace


DEFAULT_CONFIG = "configs/local.yaml"  # the embedded default `make run` runs


class Unavailable(Rc1Error):
    """A core module the console needs is not part of this build."""


# Reports the Reports screen shows: (tab title, path or glob; a glob picks the newest match).
REPORTS: tuple[tuple[str, str], ...] = (
    ("diversity", layout.DIVERSITY_REPORT),
    ("difficulty", layout.DIFFICULTY_REPORT),
    ("calibration", "reports/calibration_report_*.json"),
    ("shadow run", "reports/shadow_run_*.json"),
    ("over-clar ablation", "reports/overclar_ablation_*.json"),
    ("difficulty fit", layout.DIFFICULTY_FIT_REPORT),
    ("eval", layout.EVAL_REPORTS),
    ("RC1 report", layout.RC1_REPORT),
)


@dataclass(frozen=True)
class ReportFile:
    title: str
    pattern: str
    path: Path | None  # None: not produced yet


def _import(module: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):  # the module itself, not one of its imports
            raise Unavailable(f"{module} is not available in this build") from None
        raise


def _advance_in_child(root: str, target: str, config_path: str | None, progress: Callable[[str], None]):
    from rc1.machine.service import advance

    def on_gate(gate: str, results: list) -> None:
        ok = bool(results) and all(r.passed for r in results)
        progress(f"gate {gate}: {'passed' if ok else 'refused'}")

    return advance(Workspace(Path(root)), target, config_path, progress=progress, on_gate=on_gate)


class ConsoleBackend:
    """Core calls for one workspace. Read calls are cheap; action calls may block (run them in workers)."""

    def __init__(self, ws: Workspace, config_path: str | None = None):
        self.ws = ws
        self.config_path = config_path

    # -- workspace ---------------------------------------------------------------------------
    def workspace_problem(self) -> str | None:
        """None if this looks like an rc1 workspace, else why not."""
        root = self.ws.root
        if not root.is_dir():
            return f"the workspace directory {root.name or root} does not exist"
        if not any((root / d).is_dir() for d in ("configs", "data", "reports")):
            return "this directory has no configs/, data/ or reports/: it is not an rc1 workspace yet"
        return None

    def create_workspace(self) -> list[str]:
        """Make this directory an rc1 workspace: its folders, and the shipped configs/ and templates/ copied
        from the rc1 checkout the package runs from (an editable install) when the workspace has none.
        Returns what was created, workspace-relative."""
        import shutil

        import rc1

        made = [d for d in ("logs", "reports", "checkpoints", "data") if not (self.ws.root / d).is_dir()]
        self.ws.ensure()
        source = Path(rc1.__file__).resolve().parent.parent
        for folder in ("configs", "templates"):
            src, dst = source / folder, self.ws.root / folder
            if src.is_dir() and not dst.exists() and src.resolve() != dst.resolve():
                shutil.copytree(src, dst)
                made.append(folder)
        return made

    @property
    def pipeline_log_path(self) -> Path:
        return self.ws.logs / "pipeline.log"

    @property
    def metrics_path(self) -> Path:
        return self.ws.metrics_path

    @property
    def log_path(self) -> Path:
        return self.ws.train_log

    # -- machine -----------------------------------------------------------------------------
    def current_state(self) -> str:
        from rc1.machine.service import current_state

        return current_state(self.ws)

    def gate_reports(self) -> dict[str, dict]:
        from rc1.machine.service import last_gate_reports

        return last_gate_reports(self.ws)

    def audit(self, last: int = 8) -> list[dict]:
        from rc1.state.store import read_audit

        return read_audit(self.ws, last=last)

    def status(self) -> dict:
        """`rc1 status` as data (ops figures, checkpoints, fingerprint coverage)."""
        from rc1.machine.status import collect_status

        return collect_status(self.ws, n_metrics=1)

    def advance(self, target: str, progress: Callable[[str], None] | None = None,
                on_gate: Callable[[str, list], None] | None = None):
        """`rc1 advance --to target`, run in a child process (gates are CPU-bound Python)."""
        from rc1.console.procs import call_in_process

        return call_in_process(_advance_in_child, (str(self.ws.root), target, self.config_path), progress)

    # -- operations ----------------------------------------------------------------------------
    def failpack(self) -> Path:
        from rc1.runtime.failpack import make_failpack

        return make_failpack(self.ws)

    def sync_export(self, round_n: int | None = None) -> Path:
        sync = _import("rc1.machine.sync")
        return sync.export_sync(self.ws, round_n)

    def write_error_report(self, exc: BaseException) -> Path:
        from rc1.runtime.fatal import write_error_report

        return write_error_report(self.ws, exc)

    # -- trainer -------------------------------------------------------------------------------
    def run_config_path(self) -> str | None:
        """--config, else the config the machine last ran its gates with, else the embedded default
        (configs/local.yaml, what `make run` runs) when the workspace has it."""
        if self.config_path:
            return self.config_path
        from rc1.state.store import load_record

        recorded = load_record(self.ws).config_path
        if recorded:
            return recorded
        return DEFAULT_CONFIG if self.ws.path(DEFAULT_CONFIG).is_file() else None

    # -- pipeline ------------------------------------------------------------------------------
    def pipeline(self):
        """The `rc1 pipeline` run for the run config (rc1.pipeline.Pipeline.prepare), ready to run stages."""
        from rc1.pipeline import Pipeline

        return Pipeline.prepare(self.ws, self._require_config(), echo=lambda _msg: None)

    def stop_judge(self) -> None:
        """Stop the local judge server a pipeline run started (as `rc1 pipeline` does when it ends)."""
        from rc1.config.load import load_train_config
        from rc1.pipeline import Pipeline

        config = self._require_config()
        Pipeline(self.ws, config, load_train_config(config, self.ws), echo=lambda _msg: None).stop_judge()

    def pipeline_stages(self) -> list[tuple[str, bool]]:
        """(stage, done) of every pipeline stage for the run config, without writing anything."""
        from rc1.config.load import load_train_config
        from rc1.pipeline import Pipeline

        config = self._require_config()
        pipe = Pipeline(self.ws, config, load_train_config(config, self.ws), echo=lambda _msg: None)
        return [(stage.name, stage.done()) for stage in pipe.stages()]

    def _require_config(self) -> str:
        from rc1.runtime.errors import ConfigError

        config = self.run_config_path()
        if not config:
            raise ConfigError(f"no run config: start the console with --config PATH (or add {DEFAULT_CONFIG})")
        return config

    def start_trainer(self, resume: str | None = None) -> int:
        proc = _import("rc1.runtime.trainer_proc")
        return proc.start_trainer(self.ws, self._require_config(), resume=resume)

    def stop_trainer(self) -> bool:
        proc = _import("rc1.runtime.trainer_proc")
        return proc.stop_trainer(self.ws)

    def trainer_status(self) -> Any:
        proc = _import("rc1.runtime.trainer_proc")
        return proc.trainer_status(self.ws)

    def max_steps(self) -> int | None:
        """Steps the run trains for (run.max_steps of the run config), for the ETA."""
        config = self.run_config_path()
        if not config:
            return None
        from rc1.config.load import load_train_config

        try:
            return load_train_config(config, self.ws).run.max_steps
        except Rc1Error:
            return None

    def checkpoints(self) -> list[dict]:
        """Every checkpoint of every run under checkpoints/ (same listing as `rc1 status`)."""
        _import("rc1.runtime.checkpoint")
        return self.status()["checkpoints"]

    # -- reports -------------------------------------------------------------------------------
    def report_files(self) -> list[ReportFile]:
        out = []
        for title, pattern in REPORTS:
            if "*" in pattern:
                matches = [p for p in self.ws.root.glob(pattern) if p.is_file()]
                path = max(matches, key=lambda p: (p.stat().st_mtime, p.name)) if matches else None
            else:
                p = self.ws.path(pattern)
                path = p if p.is_file() else None
            out.append(ReportFile(title, pattern, path))
        return out

    def all_reports(self) -> list[Path]:
        """Every JSON/Markdown report under reports/ (for `open a report`), newest first."""
        root = self.ws.reports
        if not root.exists():
            return []
        skip = {"state", "bench"}
        files = [p for p in root.rglob("*") if p.is_file() and p.suffix in (".json", ".md")
                 and not (set(p.relative_to(root).parts[:-1]) & skip)]
        return sorted(files, key=lambda p: (-p.stat().st_mtime, str(p)))

    def read_report(self, path: Path) -> Any:
        """Parsed JSON (or Markdown text) of a report; raises Rc1Error with the path if unreadable."""
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".md":
            return text
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise Rc1Error(f"{self.ws.rel(path)}: not valid JSON ({exc.msg} at line {exc.lineno})") from None

    def watched_mtimes(self) -> tuple:
        """Cheap signature of every file the Overview/Reports/Checkpoints screens read."""
        sig = []
        for rel in ("reports", "reports/gates", "reports/state", "reports/rc1", "checkpoints"):
            d = self.ws.path(rel)
            try:
                with os.scandir(d) as it:
                    for e in it:
                        try:
                            st = e.stat()
                        except OSError:
                            continue
                        sig.append((rel, e.name, st.st_mtime_ns, st.st_size))
            except OSError:
                sig.append((rel, None))
        if self.ws.checkpoints.is_dir():
            for run in self.ws.checkpoints.iterdir():
                try:
                    st = run.stat()
                    sig.append(("ckpt", run.name, st.st_mtime_ns))
                except OSError:
                    continue
        return tuple(sorted(sig, key=repr))
