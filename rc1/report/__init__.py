"""The RC1 report: reports/rc1/rc1_report.md (rc1.report.build) and its plots (rc1.report.plots)."""
