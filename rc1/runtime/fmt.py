"""How rc1 writes a measured value: gate checks, the RC1 report and the CLI format numbers here, so one
value reads the same wherever it is shown."""

from __future__ import annotations

from typing import Any


def measured(v: Any) -> str:
    """A measured value: floats to 4 significant digits, anything else as str."""
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def shown(v: Any, width: int = 40) -> str:
    """A value on screen (the console's tables): measured(v), "—" for None, cut to `width` characters."""
    if v is None:
        return "—"
    s = measured(v)
    return s if len(s) <= width else s[:width - 1] + "…"


def fmt_pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def fmt_rate_ci(part: dict | None) -> str:
    if not part or part.get("rate") is None:
        return "n/a"
    lo, hi = part["ci95"]
    return f"{fmt_pct(part['rate'])} [{fmt_pct(lo)}, {fmt_pct(hi)}]"


def fmt_pp(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1f} pp"


def fmt_pp_ci(ci: list | None) -> str:
    return "n/a" if not ci else f"[{ci[0]:+.1f}, {ci[1]:+.1f}]"


def fmt_num(x: Any, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)
