"""Reports: diversity, difficulty, calibration, shadow run, over-clar ablation, eval, RC1 report."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Markdown, Static, TabbedContent, TabPane

from rc1.console.backend import REPORTS
from rc1.console.screens.base import WorkspaceScreen
from rc1.console.view import LoadedReport, WorkspaceView
from rc1.console.widgets.json_report import render_doc


def tab_id(title: str) -> str:
    return "rep-" + "".join(c if c.isalnum() else "-" for c in title.lower())


def report_header(rep: LoadedReport) -> Text:
    if rep.path is None:
        return Text(f"not produced yet ({rep.pattern})", style="yellow")
    return Text.assemble((rep.path, "bold"), (f"  sha256 {rep.sha256[:12]}" if rep.sha256 else "", "dim"))


def report_body(rep: LoadedReport):
    if rep.path is None:
        return Text("")
    if rep.error:
        return Text(rep.error, style="red")
    return Group(*render_doc(rep.doc))


def _fit_chart(doc):
    from rc1.console.widgets.charts import difficulty_fit_chart

    return difficulty_fit_chart(doc)


def _gain_chart(doc):
    from rc1.console.widgets.charts import heldout_gain_chart

    return heldout_gain_chart(doc) or Text("no trained run in this report: no held-out gain to plot", style="dim")


# Reports drawn as a chart above their fields: tab title -> chart of the parsed report.
CHARTS = {"difficulty fit": _fit_chart, "eval": _gain_chart}


def report_chart(rep: LoadedReport):
    if rep.path is None or rep.error or not isinstance(rep.doc, dict):
        return Text("")
    return CHARTS[rep.title](rep.doc)


class ReportsScreen(WorkspaceScreen):
    SUBTITLE = "reports"

    def __init__(self) -> None:
        super().__init__()
        self._shown: dict[str, tuple] = {}

    def body(self) -> ComposeResult:
        with TabbedContent(id="report-tabs"):
            for title, _ in REPORTS:
                with TabPane(title, id=tab_id(title)):
                    yield Static(classes="report-head")
                    with VerticalScroll(classes="report-scroll"):
                        if title == "RC1 report":
                            yield Markdown(classes="report-md")
                        else:
                            if title in CHARTS:
                                yield Static(classes="report-chart")
                            yield Static(classes="report-body")

    def show_view(self, view: WorkspaceView | None) -> None:
        if view is None:
            return
        for rep in view.reports:
            key = (rep.path, rep.sha256, rep.error)
            if self._shown.get(rep.title) == key:
                continue  # unchanged: keep scroll position, skip re-render
            self._shown[rep.title] = key
            pane = self.query_one(f"#{tab_id(rep.title)}", TabPane)
            pane.query_one(".report-head", Static).update(report_header(rep))
            if rep.title == "RC1 report":
                md = pane.query_one(Markdown)
                md.update(rep.doc if isinstance(rep.doc, str) and not rep.error else (rep.error or ""))
            else:
                if rep.title in CHARTS:
                    pane.query_one(".report-chart", Static).update(report_chart(rep))
                pane.query_one(".report-body", Static).update(report_body(rep))
