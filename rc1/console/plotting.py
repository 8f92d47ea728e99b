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
    ticks = y_ticks([y for _name, _xs, ys in series for y in ys], 5 if height >= 12 else 3)
    if ticks is not None:
        ruler = fig.ruler("y")
        ruler.lim(ticks[0], ticks[-1])
        ruler.ticks(ticks, [format(t, ".2g") for t in ticks])
    return str(fig.build())


def y_ticks(ys: list[float], n: int) -> list[float] | None:
    """Tick positions where plotext's own labels would mislead, else None: a constant series (plotext centres
    it in [-1, 1], so an lr of 1e-05 reads 0.0) and values below 0.01 (its one-decimal labels read 0.0)."""
    if not ys:
        return None
    lo, hi = min(ys), max(ys)
    if hi - lo <= 1e-12 * max(1.0, abs(hi)):
        pad = abs(hi) / 2 or 1.0
        return [lo - pad, hi, hi + pad]
    if max(abs(lo), abs(hi)) >= 0.01:
        return None
    return [lo + (hi - lo) * k / (n - 1) for k in range(n)]
