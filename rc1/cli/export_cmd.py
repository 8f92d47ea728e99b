"""`rc1 export gguf`: a trained checkpoint as a GGUF file for llama.cpp, checked against transformers."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from rc1.cli.common import command_group, workspace
from rc1.runtime.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from rc1.config.schema import TrainConfig
    from rc1.runtime.workspace import Workspace

BEST = "best"


def resolve_export_checkpoint(ws: "Workspace", cfg: "TrainConfig", spec: str) -> Path:
    """'best' (the newest copy in <run>/best/ for cfg.eval.metric), 'latest', a run or a step directory; verified."""
    from rc1.eval.best import best_index
    from rc1.eval.loading import resolve_checkpoint

    if spec == BEST:
        entries = [e for e in best_index(ws, cfg.checkpoint_dir) if e.get("metric") == cfg.eval.metric]
        if not entries:
            raise ConfigError(f"{cfg.checkpoint_dir}/{BEST}: no best checkpoint for eval.metric "
                              f"{cfg.eval.metric!r} yet (`rc1 eval` picks it)")
        spec = entries[-1]["path"]  # append-only and strictly improving: the last line is the best
    return resolve_checkpoint(ws, cfg, spec)


def register(app: typer.Typer) -> None:
    export = command_group(app, "export", "Export a trained model.")

    @export.command("gguf")
    def gguf_cmd(
        config: Annotated[str, typer.Option("--config", "-c", help="run config (relative to the workspace): base model and run directory")],
        out: Annotated[str, typer.Option("--out", "-o", help="GGUF file to write (relative to the workspace)")],
        checkpoint: Annotated[str, typer.Option(help="'best', 'latest', a run directory or a step directory")] = "latest",
        dtype: Annotated[str, typer.Option(help="tensor type of the matrices: f32, f16, bf16 or q8_0")] = "f16",
    ) -> None:
        """Merge the checkpoint (full weights, or LoRA over model.base) into a GGUF file; written only when
        llama.cpp generates the same tokens as transformers on the check prompts (exit 3 otherwise)."""
        from rc1.config.load import load_train_config
        from rc1.models.export import OUTTYPES

        if dtype not in OUTTYPES:  # before any model is loaded
            raise ConfigError(f"--dtype {dtype!r}: not a GGUF export type; use one of {', '.join(OUTTYPES)}")
        ws = workspace()
        cfg = load_train_config(config, ws)
        ckpt = resolve_export_checkpoint(ws, cfg, checkpoint)

        import torch

        from rc1.eval.loading import load_checkpoint_model
        from rc1.models.export import export_gguf

        typer.echo(f"loading {ws.rel(ckpt)} (base {cfg.model.base})")
        model, tok = load_checkpoint_model(cfg, ckpt, torch.device("cpu"), torch.float32)
        res = export_gguf(model, tok, ws.path(out), outtype=dtype)
        typer.echo(f"wrote {ws.rel(res.path)} ({res.outtype}, {res.size_bytes / 2**20:.1f} MiB): llama.cpp and transformers "
                   f"generate the same tokens on {res.prompts_checked} check prompts")
