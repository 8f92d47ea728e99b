"""plotext 6 line plots as ANSI text, sized to the widget that shows them.

plotext keeps one global figure, so only one thread may call `render_plot` (the console's
live-data worker). textual-plotext is not used: it pins plotext < 6.
"""

from __future__ import annotations

# 256-colour indices, also used by the caption so names match their lines.
PALETTE = (12, 9, 10, 11, 13, 14, 208, 7)


def color_of(index: int) -> int:
    return PALETTE[index % len(PALETTE)]


def render_plot(series: list[tuple[str, list[float], list[float]]], width: int, height: int) -> str:
    """One plot of every (name, xs, ys) series; '' when the size is too small to draw."""
    import plotext as plt

    if width < 12 or height < 4:
        return ""
    fig = plt.figure
    fig.clear()
    fig.theme("colorless")
    fig.plot_size(width, height)
    for i, (_name, xs, ys) in enumerate(series):
        if not xs:
            continue
        sig = fig.signal(xs, ys, marker=plt.marker("hd", pixel=color_of(i)))
        if len(xs) > 1:
            sig.lines()
        fig.draw(sig)
    return str(fig.build())
