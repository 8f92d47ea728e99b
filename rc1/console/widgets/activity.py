"""One line above the footer: what the console is doing now (gate progress, last action result)."""

from __future__ import annotations

from textual.widgets import Static


class ActivityBar(Static):
    """Mirrors `App.activity` on every screen."""

    def on_mount(self) -> None:
        self.watch(self.app, "activity", self._show, init=True)

    def _show(self, text) -> None:
        self.update(text)
