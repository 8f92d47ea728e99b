"""The rc1 operator console (Textual): `rc1 console [--config P]`, built by `rc1.console.app.make_app`.

- app.py: the App (modes = screens, key bindings + command palette, workers, one error handler)
- backend.py: `ConsoleBackend`, the core calls the console makes (the same the CLI makes)
- view.py / metrics_feed.py / procs.py: what the workers read and compute, off the UI thread
- screens/: one file per screen; widgets/: reusable widgets; console.tcss: the one stylesheet
- its benchmark (`rc1 bench console`) is rc1.bench.console
"""
