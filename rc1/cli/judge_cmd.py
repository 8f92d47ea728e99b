"""`rc1 judge serve|stop|status`: the local OpenAI-compatible judge (llama.cpp server on 127.0.0.1)."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from rc1.cli.common import command_group, workspace


def register(app: typer.Typer) -> None:
    judge = command_group(app, "judge", "Local llama.cpp judge server (OpenAI-compatible, 127.0.0.1).")

    @judge.command("serve")
    def serve(
        gguf: Annotated[Optional[str], typer.Option(help="GGUF to serve (default: scorer.judge_gguf, else SmolLM2's)")] = None,
        port: Annotated[Optional[int], typer.Option(help="port on 127.0.0.1 (default: a free one)")] = None,
        model_alias: Annotated[str, typer.Option(help="model name the server answers to")] = "smollm2-135m-instruct",
        n_ctx: Annotated[int, typer.Option(help="context length")] = 2048,
        threads: Annotated[Optional[int], typer.Option(help="CPU threads for llama.cpp (default: the config's "
                                                            "run.threads, else llama.cpp's: half the cores)")] = None,
        startup_timeout: Annotated[float, typer.Option(help="seconds to wait for GET /v1/models")] = 180.0,
        config: Annotated[Optional[str], typer.Option("--config", "-c", help="run config (scorer.judge_gguf)")] = None,
    ) -> None:
        """Start the judge server (or report the one already running)."""
        from rc1.judge.server import start_judge

        ws = workspace()
        if config is not None:
            from rc1.config.load import load_train_config

            cfg = load_train_config(config, ws)
            gguf = gguf if gguf is not None else cfg.scorer.judge_gguf
            # the run's thread count: llama_cpp.server would otherwise decode on half the cores (one, on 2)
            threads = threads if threads is not None else cfg.run.threads
        info = start_judge(ws, gguf, port=port, model_alias=model_alias, n_ctx=n_ctx, n_threads=threads,
                           startup_timeout=startup_timeout)
        typer.echo(f"judge running: pid {info['pid']} at {info['base_url']} model {info['model']} "
                   f"(pid file reports/state/judge.json, log {info['log']})")

    @judge.command("stop")
    def stop() -> None:
        """Stop the judge server named by reports/state/judge.json."""
        from rc1.judge.server import stop_judge

        typer.echo("judge stopped" if stop_judge(workspace()) else "no judge was running")

    @judge.command("status")
    def status() -> None:
        """Print the running judge's pid file, or exit 1 when none runs."""
        from rc1.judge.server import healthy, running_judge

        info = running_judge(workspace())
        if info is None:
            typer.echo("no judge running")
            raise typer.Exit(1)
        typer.echo(json.dumps({**info, "healthy": healthy(info["base_url"])}, indent=2))
