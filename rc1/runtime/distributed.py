"""Data-parallel training through Accelerate: the same config on 1 process, N processes, or N GPUs and nodes.

    rc1 train --nproc N     the launcher (rc1.training.launcher): gates, pid file, `accelerate launch` of N
          │                 ranks; the process `rc1 stop` signals; writes the one ERROR report of a failed run
          ▼
    rank r = `rc1 train` under WORLD_SIZE/RANK (also what a user's own `accelerate launch` starts)

What a rank sees of the run is a context: `SingleProcess` (no torch.distributed) or `DataParallel` (Accelerate's
PartialState: the process group, with a timeout, and this rank's device).

The RL step under data parallelism. N ranks; run.gradient_accumulation G counts the micro-batches of one optimizer
step over ALL ranks, each rank accumulating A = G / N of them:

- Micro-step s is one batch of strategy.prompts_per_step prompt groups, rolled out and back-propagated on one
  rank: iteration i runs s = i*N + r on rank r. A whole group stays on one rank, so group-relative advantages
  are exact.
- Every rank runs the same priority sampler and draws the prompts of all N micro-steps of an iteration in
  order, keeping its own, so the prompt sequence is the one a single process draws. Sampler feedback
  (per-item success) is gathered and applied at the end of each optimizer step in micro-step order, on every
  rank; redraws of zero-signal groups come from a generator seeded by (run seed, s, attempt).
- Rollout seeds are rollout_seed(run seed, s, attempt): the micro-step's, never the rank's.
- Each rank back-propagates loss / A, under `no_sync` until its last micro-step of the window; DDP averages the
  gradients over the N ranks, so the optimizer step sees sum(loss_s) / G over the window's G micro-batches:
  what one process with accumulation G computes. KL control adapts once per optimizer step, on the window's
  KLs in micro-step order.
- Each iteration's records are gathered; rank 0 writes ONE metrics line with global figures (`merge_records`).
- A stop (SIGTERM, `rc1 stop`, early stop) is agreed on at the end of an iteration, so every rank stops at the
  same step; it finishes the open accumulation window first, because a distributed checkpoint is taken only
  at an optimizer step: it then holds no per-rank gradient and does not depend on the world size. Rank 0
  writes it, with every rank's RNG state. Resuming on N' processes is the same computation when N' divides G.

Where it is exact: with dropout off (every RL strategy turns it off) the N-process run equals the 1-process
run with accumulation G up to the order of floating-point sums in the gradient all-reduce (`rc1 bench
distributed` measures it). SFT keeps dropout: each rank draws its dropout masks from its own RNG.

Failure: a rank that dies makes the others fail at their next collective (at once on gloo; after
distributed.timeout_s at most on NCCL); the launcher's torchrun agent then stops the rest and the launcher
writes reports/ERROR_<ts>.json naming the rank that failed first, with its traceback. Checkpoints are atomic
(rc1.runtime.checkpoint), so the last one stays valid and `rc1 resume` continues from it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from typing import Any

log = logging.getLogger("rc1.distributed")

LAUNCHER_ENV = "RC1_LAUNCHER_PID"       # set by rc1's launcher in every rank it starts
RANK_ENVS = ("LOCAL_RANK", "RANK")      # set by torchrun / accelerate launch in every rank
DEEPSPEED_STAGES = {"deepspeed_zero2": 2, "deepspeed_zero3": 3}
# How one iteration's per-rank figures become the global one (when the ranks disagree; agreed values pass as is).
SUM_KEYS = frozenset({"completion_tokens", "sampler/redraws", "sampler/no_signal_groups_drawn",
                      # the live judge (rc1.judge.live): each rank grades its own rollouts
                      "judge/calls", "judge/live", "judge/cache", "judge/failed", "judge/errors", "judge/n429",
                      "judge/billable_tokens", "judge/cost", "judge/unstable", "judge/billable_tokens_total",
                      "judge/cost_total", "judge/calls_total", "judge/unstable_total"})
MAX_KEYS = frozenset({"sec_per_step", "time/rollout_s", "mem_used_mb", "judge/seconds", "judge/latency_p50_s",
                      "judge/latency_p95_s"})


def launched_as_rank() -> bool:
    """True in a process started by torchrun / `accelerate launch` (rc1's launcher included)."""
    return any(k in os.environ for k in RANK_ENVS) and "WORLD_SIZE" in os.environ


def device_kind(cfg) -> str:
    """The device type the run trains on: the first available of run.device_pref (as rc1.runtime.device picks)."""
    from rc1.runtime.device import _available

    return next((name for name in cfg.run.device_pref if _available(name)), "cpu")


def resolve_backend(backend: str, kind: str) -> str:
    return ("nccl" if kind == "cuda" else "gloo") if backend == "auto" else backend


class SingleProcess:
    """One process, no torch.distributed: every collective is the identity."""

    distributed = False
    world_size = 1
    rank = 0
    local_rank = 0
    is_main = True
    device = None  # the engine picks it from run.device_pref
    sharding = "none"

    def barrier(self) -> None:
        pass

    def all_gather(self, obj: Any) -> list:
        return [obj]

    def broadcast(self, obj: Any) -> Any:
        return obj

    def close(self) -> None:
        pass


class DataParallel:
    """One rank of a torch.distributed run, on Accelerate's PartialState (process group + device).

    The Accelerator itself (`accelerator()`) is built lazily by the engine that needs it (pure_pt: DDP, FSDP2,
    DeepSpeed plugins); the TRL engine builds its own on the same state."""

    distributed = True

    def __init__(self, cfg):
        from datetime import timedelta

        import torch
        from accelerate import PartialState
        from accelerate.utils import InitProcessGroupKwargs

        self.cfg = cfg
        d = cfg.distributed
        self.kind = device_kind(cfg)
        self.backend = resolve_backend(d.backend, self.kind)
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        gpus = torch.cuda.device_count() if self.kind == "cuda" else 0
        if self.backend == "gloo" and 0 < gpus < int(os.environ.get("LOCAL_WORLD_SIZE", "1")):
            # gloo lets ranks share GPUs (a smoke test of N processes on fewer GPUs): rank r uses GPU r % gpus, and
            # DDP must not be told device_ids=[local rank] (Accelerate's default), which does not exist
            os.environ.setdefault("ACCELERATE_TORCH_DEVICE", f"cuda:{local_rank % gpus}")
            os.environ["ACCELERATE_BYPASS_DEVICE_MAP"] = "true"
        if d.sharding in DEEPSPEED_STAGES:  # Accelerate then starts the process group through deepspeed.comm
            os.environ["ACCELERATE_USE_DEEPSPEED"] = "true"
        kwargs = InitProcessGroupKwargs(backend=self.backend, timeout=timedelta(seconds=d.timeout_s)).to_kwargs()
        kwargs.setdefault("backend", self.backend)
        self.state = PartialState(cpu=self.kind == "cpu", **kwargs)
        self.world_size = self.state.num_processes
        self.rank = self.state.process_index
        self.local_rank = self.state.local_process_index
        self.is_main = self.rank == 0
        self.device = self.state.device
        self.sharding = d.sharding
        self._accelerator = None
        log.info("rank %d/%d: backend %s, device %s, sharding %s", self.rank, self.world_size, self.backend,
                 self.device, self.sharding)

    # ------------------------------------------------------------------ collectives
    def barrier(self) -> None:
        self.state.wait_for_everyone()

    def all_gather(self, obj: Any) -> list:
        """Every rank's `obj`, in rank order, on every rank (pickled: small Python objects only)."""
        from accelerate.utils import gather_object

        return gather_object([obj])

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's `obj` on every rank."""
        from accelerate.utils import broadcast_object_list

        return broadcast_object_list([obj], from_process=0)[0]

    # ------------------------------------------------------------------ the engine's side
    def accelerator(self):
        """Accelerate's Accelerator for this run: DDP (sharding none), or its FSDP2 / DeepSpeed plugin. The
        engine does its own autocast and loss scaling, so Accelerate's mixed precision stays off except where a
        sharding plugin needs it to pick its dtypes."""
        if self._accelerator is None:
            from accelerate import Accelerator
            from accelerate.utils import DistributedDataParallelKwargs

            cfg = self.cfg
            kwargs: dict[str, Any] = {
                "cpu": self.kind == "cpu", "mixed_precision": "no",  # not the launcher's: the engine autocasts
                "kwargs_handlers": [DistributedDataParallelKwargs(broadcast_buffers=False,
                                                                  find_unused_parameters=False)]}
            precision = plugin_precision(cfg.train_precision, self.kind)
            if self.sharding == "fsdp2":
                from accelerate.utils import FullyShardedDataParallelPlugin

                kwargs["fsdp_plugin"] = FullyShardedDataParallelPlugin(
                    fsdp_version=2, auto_wrap_policy="transformer_based_wrap", reshard_after_forward=True,
                    state_dict_type="FULL_STATE_DICT", cpu_ram_efficient_loading=False)
                kwargs["mixed_precision"] = precision
            elif self.sharding in DEEPSPEED_STAGES:
                from accelerate.utils import DeepSpeedPlugin

                plugin = DeepSpeedPlugin(
                    zero_stage=DEEPSPEED_STAGES[self.sharding], gradient_accumulation_steps=self.accumulation,
                    gradient_clipping=cfg.engine.max_grad_norm, zero3_save_16bit_model=False)
                # rc1 feeds its own micro-batches (no dataloader for DeepSpeed to read a batch size from)
                plugin.deepspeed_config["train_micro_batch_size_per_gpu"] = 1
                kwargs["deepspeed_plugin"] = plugin
                kwargs["mixed_precision"] = precision
            self._accelerator = Accelerator(**kwargs)
        return self._accelerator

    @property
    def accumulation(self) -> int:
        """Micro-steps each rank accumulates per optimizer step."""
        return self.cfg.run.gradient_accumulation // self.world_size

    def close(self) -> None:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            with contextlib.suppress(Exception):
                dist.destroy_process_group()


def plugin_precision(precision: str, kind: str) -> str:
    """Accelerate's name for the engine's precision ('no', 'fp16', 'bf16') on this device."""
    if precision in ("no", "fp32") or kind == "cpu":
        return "no"
    if precision == "auto":
        import torch

        return "bf16" if kind == "cuda" and torch.cuda.is_bf16_supported() else "fp16"
    return precision


def from_environment(cfg):
    """This process's context: DataParallel when started as a rank (torchrun / accelerate launch), else
    SingleProcess."""
    return DataParallel(cfg) if launched_as_rank() else SingleProcess()


def process_info(rank: int) -> dict:
    return {"rank": rank, "pid": os.getpid(), "host": socket.gethostname()}


def watch_parent(parent_pid: int, interval_s: float = 2.0) -> None:
    """Stop this rank (SIGTERM to itself: finish the step, checkpoint, exit) if its launcher dies: a rank
    must not train on as an orphan nobody can stop."""
    import signal
    import threading

    def watch():
        while os.getppid() == parent_pid:
            time.sleep(interval_s)
        log.error("the launcher (pid %d) is gone: stopping this rank", parent_pid)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="rc1-parent-watch", daemon=True).start()


# ----------------------------------------------------------------------------- records
def rank_info(record: dict) -> dict:
    """What the console shows per rank: pid, host, last heartbeat, step time, memory."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "heartbeat": round(time.time(), 3),
            "sec_per_step": record.get("sec_per_step"), "mem_used_mb": record.get("mem_used_mb")}


def merge_records(records: list[dict]) -> dict:
    """One metrics record with global figures from each rank's record of the same iteration (rank order).

    A value every rank agrees on (step, lr, grad norm after the all-reduce, sampler state) passes as is;
    otherwise counts are summed (SUM_KEYS), times and memory take the slowest / largest rank (MAX_KEYS) and
    every other number is the mean over the ranks that have it (each rank's figure is the mean over a batch
    of the same size, so this is the mean over all of them). None when no rank has the number."""
    if len(records) == 1:
        return dict(records[0])
    out: dict = {}
    keys = list(dict.fromkeys(k for r in records for k in r))
    for k in keys:
        values = [r.get(k) for r in records]
        if all(v == values[0] for v in values) and k not in SUM_KEYS:
            out[k] = values[0]
            continue
        nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(nums) != sum(v is not None for v in values):
            out[k] = values[0]  # not numbers (a checkpoint path, an alert): rank 0's
        elif not nums:
            out[k] = None
        elif k in SUM_KEYS:
            out[k] = sum(nums)
        elif k in MAX_KEYS:
            out[k] = max(nums)
        else:
            out[k] = sum(nums) / len(nums)
    return out


# ----------------------------------------------------------------------------- what the machine can run
def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS
        return os.cpu_count() or 1


def machine_errors(cfg, processes: int | None = None, *, label: str = "distributed.processes") -> list[str]:
    """Why this machine cannot run the config's distributed settings, one dotted-path line each (empty: it
    can). `processes` overrides distributed.processes (`--nproc`, shown as `label`)."""
    d = cfg.distributed
    n = processes or d.processes
    errs = list(cfg.distributed_errors(n, label)) if n != d.processes else []
    if n == 1 and d.sharding == "none":
        return errs  # one plain process: nothing distributed to run (and no torch import for `config verify`)
    import torch

    kind = device_kind(cfg)
    backend = resolve_backend(d.backend, kind)
    if d.sharding in DEEPSPEED_STAGES and not deepspeed_installed():
        errs.append(f"distributed.sharding: {d.sharding} needs DeepSpeed, which is not installed on this machine "
                    "(pip install deepspeed, on a machine with CUDA); or use sharding: none (DDP)")
    elif d.sharding != "none" and kind != "cuda":
        errs.append(f"distributed.sharding: {d.sharding} runs on CUDA only (Accelerate applies FSDP and DeepSpeed "
                    f"on accelerators; on this {kind} it would silently fall back to DDP); use sharding: none")
    if n == 1:
        return errs
    if not torch.distributed.is_available():
        errs.append("distributed: this torch build has no torch.distributed")
        return errs
    if kind == "mps":
        errs.append(f"{label}: torch.distributed cannot run on MPS; set run.device_pref: [cpu] to train {n} "
                    "processes on the CPU, or use 1 process")
    if backend == "nccl" and not (kind == "cuda" and torch.distributed.is_nccl_available()):
        errs.append(f"distributed.backend: nccl is not available here (it needs CUDA GPUs and a torch built with "
                    f"NCCL; this run would train on {kind}); use backend: gloo or auto")
    elif backend == "gloo" and not torch.distributed.is_gloo_available():
        errs.append("distributed.backend: gloo is not available in this torch build; use backend: nccl on CUDA")
    if kind == "cpu" and n > usable_cpus():
        errs.append(f"{label}: {n} processes exceed the {usable_cpus()} CPU cores this machine lets rc1 use")
    if kind == "cuda" and backend == "nccl" and n > torch.cuda.device_count():
        errs.append(f"{label}: {n} processes need {n} GPUs with nccl (one per process); this machine has "
                    f"{torch.cuda.device_count()}. Use distributed.backend: gloo to share GPUs (a smoke test only)")
    return errs


def deepspeed_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("deepspeed") is not None


def port_error(port: int, host: str = "127.0.0.1") -> str | None:
    """Why rank 0 could not listen on `port` (None when it can, or when port is 0: a free one is picked)."""
    if port == 0:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            return (f"distributed.main_port: port {port} is in use on {host} ({exc.strerror}); another run may be "
                    "using it: pick another port, or 0 for a free one")
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
