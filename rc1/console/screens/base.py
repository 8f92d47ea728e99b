"""The workspace screens' frame: header, the screen's body, activity bar and footer.

The App pushes a new WorkspaceView to every screen that is `ready` (mounted with its children); a screen
shows it in `show_view`, and again each time it comes back to the front.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Header

from rc1.console.widgets.activity import ActivityBar


class WorkspaceScreen(Screen):
    SUBTITLE = ""                          # set on mount (a screen whose subtitle follows the view sets it there)
    BORDER_TITLES: dict[str, str] = {}     # selector -> border title, set on mount

    ready = False  # set once mounted with its children; the App updates only ready screens

    def compose(self) -> ComposeResult:
        yield Header()
        yield from self.body()
        yield ActivityBar(id="activity")
        yield Footer(compact=True)

    def body(self) -> ComposeResult:
        """The screen's own widgets, between the header and the activity bar (every screen defines it)."""
        raise NotImplementedError

    def on_mount(self) -> None:
        self.ready = True
        if self.SUBTITLE:
            self.sub_title = self.SUBTITLE
        for selector, title in self.BORDER_TITLES.items():
            self.query_one(selector).border_title = title
        self.prepare()
        self.refresh_view()

    def on_screen_resume(self) -> None:
        self.refresh_view()

    def prepare(self) -> None:
        """Once, after mounting and before the first view (table columns and the like)."""

    def refresh_view(self) -> None:
        """Show the App's current view (`show_view`, which the App also calls on every new view)."""
        self.show_view(self.app.view)
