"""One report, full screen: Markdown for .md, the generic JSON rendering otherwise."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Markdown, Static

from rc1.console.widgets.json_report import render_doc


class ReportViewScreen(Screen):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back")]

    def __init__(self, rel: str, doc, error: str | None = None) -> None:
        super().__init__()
        self.rel, self.doc, self.error = rel, doc, error

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(Text(self.rel, style="bold"), id="report-view-head")
        with VerticalScroll(id="report-view"):
            if self.error:
                yield Static(Text(self.error, style="red"))
            elif isinstance(self.doc, str):
                yield Markdown(self.doc)
            else:
                yield Static(Group(*render_doc(self.doc)))
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.sub_title = self.rel
