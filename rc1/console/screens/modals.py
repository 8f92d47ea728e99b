"""Modal screens: confirm a destructive/long action, show a result, pick a report."""

from __future__ import annotations

from pathlib import Path

from rich.console import RenderableType
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, OptionList, Static
from textual.widgets.option_list import Option


class ConfirmScreen(ModalScreen[bool]):
    """Yes/no question; y/enter confirms, n/escape cancels."""

    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]

    def __init__(self, question: str, detail: str = "") -> None:
        super().__init__()
        self.question, self.detail = question, detail

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.question, id="question")
            if self.detail:
                yield Static(self.detail, id="detail")
            with Horizontal(id="buttons"):
                yield Button("Yes (y)", variant="primary", id="yes")
                yield Button("No (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#yes", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class ResultScreen(ModalScreen[None]):
    """Shows an action's result (gate checks, paths written, errors); escape/enter/q closes."""

    BINDINGS = [Binding("escape,enter,q", "close", "Close")]

    def __init__(self, title: str, body: RenderableType, *, error: bool = False) -> None:
        super().__init__()
        self.title_text, self.body, self.error = title, body, error

    def compose(self) -> ComposeResult:
        with Vertical(id="result", classes="error" if self.error else ""):
            yield Label(self.title_text, id="result-title")
            with VerticalScroll(id="result-scroll"):
                yield Static(self.body, id="result-body")
            yield Button("Close (esc)", id="close")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)


class ReportPicker(ModalScreen[Path | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, reports: list[tuple[str, Path]]) -> None:
        super().__init__()
        self.reports = reports

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Label("Open a report (enter) — esc to cancel", id="picker-title")
            if self.reports:
                yield OptionList(*[Option(rel, id=str(i)) for i, (rel, _) in enumerate(self.reports)], id="picker-list")
            else:
                yield Static("no reports under reports/ yet", id="picker-empty")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.reports[int(event.option.id)][1])

    def action_cancel(self) -> None:
        self.dismiss(None)
