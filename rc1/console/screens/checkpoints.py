"""Checkpoints: step, size, manifest verified, latest, best (rc1.runtime.checkpoint.list_checkpoints)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from rc1.console.screens.base import WorkspaceScreen
from rc1.console.view import WorkspaceView


def human_size(n: int | None) -> str:
    if n is None:
        return "—"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def _mark(flag: bool, yes: str = "✔", style: str = "green") -> Text:
    return Text(yes, style=style) if flag else Text("·", style="dim")


class CheckpointsScreen(WorkspaceScreen):
    SUBTITLE = "checkpoints"

    def body(self) -> ComposeResult:
        yield Static(id="ckpt-note")
        yield DataTable(id="ckpt-table", cursor_type="row", zebra_stripes=True)

    def prepare(self) -> None:
        self.query_one(DataTable).add_columns("run", "step", "size", "verified", "latest", "best", "path")

    def show_view(self, view: WorkspaceView | None) -> None:
        if view is None:
            return
        note = self.query_one("#ckpt-note", Static)
        table = self.query_one(DataTable)
        table.clear()
        if view.checkpoints_unavailable:
            note.update(Text(f"checkpoint listing: {view.checkpoints_unavailable}", style="yellow"))
            return
        rows = view.checkpoints or []
        if not rows:
            note.update(Text("no checkpoints written yet (checkpoints/<run>/step_NNNNN/)", style="dim"))
            return
        verified = sum(1 for c in rows if c.get("verified"))
        note.update(Text(f"{len(rows)} checkpoint(s), {verified} with a verified manifest",
                         style="" if verified == len(rows) else "yellow"))
        for c in sorted(rows, key=lambda c: (c.get("run", ""), c.get("step") or 0)):
            table.add_row(c.get("run", ""), str(c.get("step")), human_size(c.get("size_bytes")),
                          Text("✔ verified", style="green") if c.get("verified") else Text("✘ NOT verified", style="bold red"),
                          _mark(c.get("latest"), "latest", "bold cyan"), _mark(c.get("best"), "best", "bold magenta"),
                          c.get("path", ""))
