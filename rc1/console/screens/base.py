"""The workspace screens' frame: header, the screen's body, activity bar and footer.

The App pushes a new WorkspaceView to every screen that is `ready` (mounted with its children); a screen
shows it in `show_view`, and again each time it comes back to the front.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from rc1.console.widgets.activity import ActivityBar


def key_hints(disabled: list[tuple[str, str, str]]) -> Text:
    """One line: each disabled key, what it would do and why the machine would refuse it now."""
    out = Text(no_wrap=True, overflow="ellipsis")
    for i, (key, label, reason) in enumerate(disabled):
        if i:
            out.append("  · ", style="dim")
        out.append(key, style="bold dim")
        out.append(f" {label}: {reason}", style="dim")
    return out


class WorkspaceScreen(Screen):
    SUBTITLE = ""                          # set on mount (a screen whose subtitle follows the view sets it there)
    BORDER_TITLES: dict[str, str] = {}     # selector -> border title, set on mount

    ready = False  # set once mounted with its children; the App updates only ready screens

    def compose(self) -> ComposeResult:
        yield Header()
        yield from self.body()
        yield Static(id="key-hints")
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
        self.show_key_hints()

    def on_screen_resume(self) -> None:
        self.refresh_view()
        self.show_key_hints()

    def show_key_hints(self) -> None:
        self.query_one("#key-hints", Static).update(key_hints(self.app.disabled_actions()))

    @property
    def active_bindings(self):
        """The footer's bindings; a disabled one's tooltip says why it is disabled."""
        bindings = super().active_bindings
        out = {}
        for key, ab in bindings.items():
            reason = None if ab.enabled else self.app.disabled_reason(ab.binding.action)
            out[key] = ab._replace(tooltip=f"{ab.binding.description}: {reason}") if reason else ab
        return out

    def prepare(self) -> None:
        """Once, after mounting and before the first view (table columns and the like)."""

    def refresh_view(self) -> None:
        """Show the App's current view (`show_view`, which the App also calls on every new view)."""
        self.show_view(self.app.view)
