"""A plotext plot inside a Static: the live-data worker renders ANSI text at this widget's size."""

from __future__ import annotations

from rich.text import Text
from textual.events import Resize
from textual.widgets import Static

from rc1.console.plotting import color_of


# Short names for the per-dimension reward plot (its caption has one row for seven names).
ABBREV = {"correctness": "cor", "reasoning": "rea", "grounding": "grd", "clarity": "cty",
          "conciseness": "cnc", "format": "fmt", "clarification": "clr"}


def short_name(series: str) -> str:
    """reward/clarity -> clarity; curriculum/gsm8k/L1/weight -> gsm8k L1."""
    if series.startswith("reward/"):
        return series.split("/", 1)[1]
    parts = series.split("/")
    if series.startswith("curriculum/") and len(parts) == 4:
        return f"{parts[1]} {parts[2]}"
    return series


class PlotPanel(Static):
    """Shows one plot; its size is published to the App so the worker draws to fit."""

    def __init__(self, title: str, **kw):
        super().__init__(**kw)
        self.plot_title = title
        self.border_title = title

    def on_resize(self, event: Resize) -> None:
        size = self.content_region.size
        self.app.set_plot_size(self.plot_title, size.width, size.height - 1)  # one row for the caption

    def on_mount(self) -> None:
        self.update(Text("no data yet", style="dim"))

    def show(self, ansi: str, names: list[str], last: dict) -> None:
        if not names:
            self.update(Text("no data yet", style="dim"))
            return
        caption = Text(no_wrap=True, overflow="ellipsis")
        for i, n in enumerate(names):
            if i:
                caption.append(" ")
            short = short_name(n)
            value = last.get(n)
            if len(names) > 2:  # many series: short names in their line's colour
                caption.append(ABBREV.get(short, short[:3] + "".join(short.split(" ")[1:])),
                               style=f"bold color({color_of(i)})")
            else:
                caption.append("━", style=f"color({color_of(i)})")
                caption.append(f"{short}={value:.4g}" if isinstance(value, (int, float)) else short)
        shown = Text("\n").join([Text.from_ansi(ansi.rstrip("\n")), caption]) if ansi else caption
        shown.no_wrap, shown.overflow = True, "ellipsis"  # a wrapped caption would fall below the panel
        self.update(shown)
