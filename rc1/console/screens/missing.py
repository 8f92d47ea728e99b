"""Shown instead of the dashboard when the workspace does not exist or is not an rc1 workspace."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

HOW_TO = """\
Press c to create it here: logs/, reports/, checkpoints/, data/, and the shipped configs/ and templates/
when rc1 runs from its checkout. Then 5 (Pipeline) and P run every stage of the embedded default.

Or from a shell:

  make run                             set up .venv and run the embedded default pipeline
  rc1 --workdir DIR console            open an existing workspace (or set RC1_WORKDIR)

Press g to check again, q to quit."""


class MissingWorkspaceScreen(Screen):
    BINDINGS = [Binding("c", "app.create_workspace", "Create it here"), Binding("g", "app.recheck_workspace", "Check again"),
                Binding("q", "app.quit", "Quit")]

    def __init__(self, problem: str, root_name: str) -> None:
        super().__init__()
        self.problem, self.root_name = problem, root_name

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="missing"):
            yield Static(Text(f"No rc1 workspace here: {self.problem}.", style="bold yellow"), id="missing-problem")
            yield Static(HOW_TO, id="missing-howto")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.sub_title = f"workspace {self.root_name}: not found"
