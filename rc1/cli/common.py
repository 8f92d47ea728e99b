"""What every command shares: the workspace, error-to-exit-code mapping, check printing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import typer
from typer._click import exceptions as _cli_exc  # typer vendors click; usage errors are these
from typer.core import TyperGroup

from rc1.runtime.errors import EXIT_CRASH, Rc1Error
from rc1.runtime.fmt import measured
from rc1.runtime.workspace import Workspace, resolve_workspace


@dataclass
class _State:
    workdir: str | None = None


STATE = _State()


def command_group(parent: typer.Typer, name: str, help: str) -> typer.Typer:
    """A sub-command group `rc1 ... NAME` (one Typer app per group, joined with add_typer)."""
    group = typer.Typer(help=help, no_args_is_help=True)
    parent.add_typer(group, name=name)
    return group


def workspace() -> Workspace:
    from rc1.envs.verifiers import use_workspace

    ws = resolve_workspace(STATE.workdir)
    use_workspace(ws.root)  # `python:` verifiers load from this workspace (or an installed package)
    return ws


def fail(exc: Rc1Error) -> "typer.Exit":
    """Print an Rc1Error as one line (plus its detail lines) and return the Exit to raise."""
    from rc1.runtime.fatal import record_for_launcher

    typer.echo(f"error: {exc.message}", err=True)
    for line in exc.lines:
        typer.echo(f"  {line}", err=True)
    record_for_launcher(exc)  # a rank's config/gate error reaches its launcher with its exit code
    return typer.Exit(exc.exit_code)


class Rc1Group(TyperGroup):
    """Root command group: turns an Rc1Error into one clear line + its exit code, and any other
    exception into FATAL + reports/ERROR_<ts>.json + exit 1, for every command (CliRunner included)."""

    def invoke(self, ctx):
        STATE.workdir = None  # set again by the root callback; never carried over from an earlier call
        try:
            return super().invoke(ctx)
        except Rc1Error as exc:
            raise fail(exc) from None
        except (_cli_exc.ClickException, typer.Exit, typer.Abort):
            raise
        except (KeyboardInterrupt, BrokenPipeError):
            raise  # interrupted, or the reader of our output went away (`rc1 status | head`; click exits 1
            # quietly on EPIPE): neither is a crash, so no FATAL and no ERROR report
        except Exception as exc:  # noqa: BLE001 - the one place crashes become FATAL + ERROR json
            from rc1.runtime.fatal import report_fatal

            report_fatal(workspace(), exc)
            raise typer.Exit(EXIT_CRASH) from None


def run_guarded(app: typer.Typer, argv: list[str] | None = None) -> int:
    """Run the Typer app; Rc1Error -> one clear line and its exit code; anything else -> FATAL."""
    from rc1.runtime.fatal import report_fatal

    try:
        rv = app(args=argv, standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except Rc1Error as exc:
        fail(exc)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        return 130
    except Exception as exc:  # noqa: BLE001 - the one place crashes are turned into FATAL + ERROR json
        if isinstance(exc, _cli_exc.ClickException):
            exc.show()
            return 2
        if isinstance(exc, typer.Abort):
            typer.echo("aborted", err=True)
            return 1
        report_fatal(workspace(), exc)
        return EXIT_CRASH


def print_checks(results: Iterable, echo: Callable[[str], None] = typer.echo) -> None:
    """Print every check of every gate result: PASS/FAIL, name, measured value, threshold."""
    for res in results:
        echo(f"[{'PASS' if res.passed else 'FAIL'}] {res.gate}")
        for c in res.checks:
            line = f"    {status_label(res, c)} {c.name}: {measured(c.measured)} (threshold {c.threshold})"
            if c.detail:
                line += f" - {c.detail}"
            echo(line)


# ok / FAIL / N/M (not measurable; WARN when the profile lets it through) / N/A (not applicable)
STATUS_LABELS = {"pass": "ok  ", "fail": "FAIL", "blocked": "N/M!", "warned": "WARN", "not_applicable": "N/A "}


def status_label(res, c) -> str:
    return STATUS_LABELS[res.outcome(c)]
