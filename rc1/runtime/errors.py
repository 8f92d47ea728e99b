"""One error type for everything the operator should see as a one-line message.

The CLI maps `Rc1Error.exit_code` to the process exit status: 2 config / bad input,
3 a gate refused, 1 a crash. Anything that is not an `Rc1Error` is a crash.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_CRASH = 1
EXIT_CONFIG = 2
EXIT_GATE = 3


class Rc1Error(Exception):
    """An expected failure with a clear message and an exit code."""

    exit_code = EXIT_CRASH

    def __init__(self, message: str, *, lines: list[str] | None = None):
        super().__init__(message)
        self.message = message
        # Extra lines printed after the message (e.g. every config error as a dotted path).
        self.lines = list(lines or [])


class ConfigError(Rc1Error):
    """Bad configuration or bad input: unknown key, wrong type, missing file, malformed line."""

    exit_code = EXIT_CONFIG


class GateRefused(Rc1Error):
    """A gate (or a ticket/evidence check) refused to let the pipeline go on."""

    exit_code = EXIT_GATE


class TamperError(GateRefused):
    """A ticket or a piece of evidence changed after the gate passed."""
