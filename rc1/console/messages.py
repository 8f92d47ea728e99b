"""Small dataclass messages that workers post back to the App (`post_message` is thread-safe;
Textual's Message initialises itself in `__post_init__`, so dataclasses work as they are). Their shapes repeat
on purpose: Textual dispatches a message on its class, so each kind is its own small class."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

from rc1.console.metrics_feed import MetricsSnapshot



@dataclass
class MetricsUpdated(Message):
    snapshot: MetricsSnapshot
    plots: dict[str, str]  # plot title -> ANSI text sized for its widget


@dataclass
class LogLines(Message):
    lines: list[str]
    reset: bool = False
    source: str = "train"  # "train": logs/train.log; "pipeline": logs/pipeline.log


@dataclass
class TrainerUpdated(Message):
    status: Any | None       # rc1.runtime.trainer_proc.TrainerStatus, or None when not available
    unavailable: str | None = None
    error_report: dict | None = None   # parsed ERROR report of a trainer that died
    max_steps: int | None = None


@dataclass
class WorkspaceLoaded(Message):
    view: Any  # rc1.console.view.WorkspaceView


@dataclass
class GateProgress(Message):
    text: str


@dataclass
class ActionFinished(Message):
    """An action worker finished; `lines` are shown to the operator (e.g. the path written)."""

    action: str
    title: str
    lines: list[str] = field(default_factory=list)
    ok: bool = True
    outcome: Any | None = None  # AdvanceOutcome for `advance`


@dataclass
class ReportOpened(Message):
    rel: str
    doc: Any
    error: str | None = None


@dataclass
class PipelineProgress(Message):
    progress: Any  # rc1.console.pipeline_run.StageProgress


@dataclass
class PipelineFinished(Message):
    outcome: Any  # rc1.console.pipeline_run.RunOutcome


@dataclass
class PipelineStages(Message):
    stages: list[tuple[str, bool]] | None  # (stage, done); None when they cannot be listed
    error: str | None = None
