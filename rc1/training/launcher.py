"""Start the ranks of a distributed run through `accelerate launch`, and say how they ended.

`rc1 train --nproc N` (or `--accelerate-config FILE` for a user's own, e.g. multi-node, accelerate config)
runs here after the trainer process (rc1.trainer) has passed the gates and written the pid file:

1. `plan(...)` checks what this machine can run (rc1.runtime.distributed.machine_errors), the port, and the
   accelerate config when given; every problem is one dotted-path line (exit 2). `--dry-run` stops here.
2. `launch(...)` runs Accelerate's launcher in this process: its torchrun agent starts the ranks (each one
   `rc1 train` with WORLD_SIZE/RANK set), forwards SIGTERM/SIGINT to them (they finish the step, rank 0
   checkpoints, they exit 0) and, when a rank fails, stops the others (SIGTERM, then SIGKILL after
   distributed.stop_timeout_s).
3. A failed run: the rank that failed first (a killed rank before the ranks that lost it in a collective)
   and every failed rank's exit code and traceback go into ONE reports/ERROR_<ts>.json, written here (the
   ranks do not write it). A rank's config or gate error (exit 2 / 3) is re-raised as that error.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rc1.runtime.errors import ConfigError, GateRefused, Rc1Error
from rc1.runtime import distributed as D

log = logging.getLogger("rc1.launch")

# A rank that failed only because another one died or hung fails in a collective with one of these.
COLLECTIVE_FAILURE = ("Connection closed by peer", "Connection reset by peer", "DistBackendError", "Broken pipe",
                      "NCCL", "Timed out", "timed out", "ProcessGroup", "gloo")
ACCELERATE_TYPES = {"none": ("MULTI_GPU", "NO"), "fsdp2": ("FSDP",), "deepspeed_zero2": ("DEEPSPEED",),
                    "deepspeed_zero3": ("DEEPSPEED",)}


@dataclass
class LaunchPlan:
    world_size: int                  # ranks on all machines
    processes: int                   # ranks on this machine
    num_machines: int
    machine_rank: int
    main_address: str
    main_port: int
    device: str
    backend: str
    sharding: str
    accumulation: int                # micro-steps each rank accumulates per optimizer step
    accelerate_config: str | None    # the user's file, or None: rc1 writes one for this launch
    notes: list[str] = field(default_factory=list)

    @property
    def starts_rank0(self) -> bool:
        return self.machine_rank == 0

    def lines(self) -> list[str]:
        out = [f"world size {self.world_size}: {self.num_machines} machine(s) x {self.processes} process(es); this "
               f"machine is machine_rank {self.machine_rank} (ranks {self.machine_rank * self.processes}.."
               f"{(self.machine_rank + 1) * self.processes - 1})",
               f"device {self.device}, backend {self.backend}, sharding {self.sharding}",
               f"each rank accumulates {self.accumulation} micro-step(s) per optimizer step "
               f"({self.accumulation * self.world_size} in all = run.gradient_accumulation)",
               f"rendezvous {self.main_address}:{self.main_port or '<a free port>'}",
               f"launch: accelerate launch --config_file {self.accelerate_config or '<written by rc1>'} "
               "-m rc1.cli.main train ..."]
        return out + self.notes


def plan(cfg, *, processes: int | None = None, accelerate_config: str | Path | None = None,
         label: str = "--nproc", shown_as: str | None = None) -> LaunchPlan:
    """What `rc1 train` would launch, checked against this machine; ConfigError listing every problem.
    `shown_as`: how messages name the accelerate config file (the path the user typed)."""
    d = cfg.distributed
    kind = D.device_kind(cfg)
    errors: list[str] = []
    notes: list[str] = []
    if accelerate_config is None:
        n = processes or d.processes
        machines, machine_rank, address, port, world = 1, 0, "127.0.0.1", d.main_port, n
        errors += D.machine_errors(cfg, n, label=label if processes else "distributed.processes")
    else:
        shown = shown_as or str(accelerate_config)
        acc, errs = _read_accelerate_config(Path(accelerate_config))
        if acc is None:
            raise ConfigError(f"{shown}: {errs[0]}")
        errors += errs
        machines, machine_rank = int(acc.num_machines or 1), int(acc.machine_rank or 0)
        world = int(acc.num_processes) if acc.num_processes and acc.num_processes > 0 else 0
        address, port = acc.main_process_ip or "127.0.0.1", int(acc.main_process_port or 0)
        if processes and processes != world:
            errors.append(f"--nproc {processes} disagrees with num_processes {world} of {shown}; "
                          "give one of them")
        if world < 1:
            errors.append(f"num_processes: {shown} must give the total number of processes (>= 1)")
            world = 1
        if machine_rank >= machines or machine_rank < 0:
            errors.append(f"machine_rank: {machine_rank} is not below num_machines ({machines})")
        if world % machines:
            errors.append(f"num_processes: {world} processes do not split over {machines} machines")
        n = max(1, world // machines)
        if machines > 1:
            if not acc.main_process_ip:
                errors.append("main_process_ip: a multi-node run needs the address of machine_rank 0")
            else:
                with contextlib.suppress(OSError):
                    socket.getaddrinfo(acc.main_process_ip, None)
                    address = acc.main_process_ip
                if address != acc.main_process_ip:
                    errors.append(f"main_process_ip: {acc.main_process_ip} does not resolve from this machine")
            if not acc.main_process_port:
                errors.append("main_process_port: a multi-node run needs a fixed port on machine_rank 0")
        allowed, acc_type = ACCELERATE_TYPES[d.sharding], str(acc.distributed_type).split(".")[-1]
        if acc_type not in allowed:
            errors.append(f"distributed_type: {acc_type} in {shown} disagrees with distributed.sharding "
                          f"{d.sharding} of the rc1 config (expected {' or '.join(allowed)})")
        if acc.use_cpu:
            errors.append("use_cpu: accelerate launches multi-CPU runs through mpirun; rc1 runs CPU ranks with "
                          "distributed_type: MULTI_GPU and run.device_pref: [cpu]")
        errors += cfg.distributed_errors(world, "num_processes")
        errors += [e for e in D.machine_errors(cfg, n, label="num_processes / num_machines")
                   if not e.startswith(("distributed.processes:", "run.max_steps"))]
        notes.append(f"from {shown}: {acc_type}, mixed_precision {acc.mixed_precision} (rc1 runs its engine in "
                     f"{cfg.train_precision})")
    if machine_rank == 0 and world > 1:
        why = D.port_error(port)
        if why:
            errors.append(why if accelerate_config is None else why.replace("distributed.main_port", "main_process_port"))
    if errors:
        raise ConfigError(f"cannot launch {world} process(es) on this machine", lines=list(dict.fromkeys(errors)))
    return LaunchPlan(world_size=world, processes=n, num_machines=machines, machine_rank=machine_rank,
                      main_address=address, main_port=port, device=kind, backend=D.resolve_backend(d.backend, kind),
                      sharding=d.sharding, accumulation=cfg.run.gradient_accumulation // world,
                      accelerate_config=str(accelerate_config) if accelerate_config else None, notes=notes)


def _read_accelerate_config(path: Path):
    """(accelerate's ClusterConfig, problems) or (None, [why it cannot be read])."""
    from accelerate.commands.config.config_args import load_config_from_file

    if not path.is_file():
        return None, ["accelerate config file not found"]
    try:
        return load_config_from_file(str(path)), []
    except Exception as exc:  # noqa: BLE001 - accelerate raises plain errors on a bad file
        return None, [f"not a valid accelerate config ({exc.__class__.__name__}: {exc})"]


def own_accelerate_config(p: LaunchPlan) -> dict:
    """The accelerate config rc1 launches `--nproc N` with: torchrun's launcher on one machine. (The ranks build
    the DDP / FSDP2 / DeepSpeed plugin from the rc1 config themselves.)"""
    return {"compute_environment": "LOCAL_MACHINE", "distributed_type": "MULTI_GPU", "num_processes": p.world_size,
            "num_machines": 1, "machine_rank": 0, "main_process_ip": "127.0.0.1", "main_process_port": p.main_port,
            "mixed_precision": "no", "use_cpu": False, "gpu_ids": "all", "rdzv_backend": "static",
            "same_network": True, "downcast_bf16": "no", "tpu_use_cluster": False, "tpu_use_sudo": False}


def launch(ws, cfg, p: LaunchPlan, worker_args: list[str], *, seed_index: int = 0,
           module: str = "rc1.cli.main") -> int:
    """Run the ranks (`python -m <module> --workdir <ws> <worker_args>`) through accelerate's launcher; 0 when
    they all finished (or stopped on a signal and checkpointed); raises the ranks' config/gate error; 1 after
    writing the ERROR report of a failed rank."""
    import yaml
    from accelerate.commands.launch import launch_command, launch_command_parser
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    started = time.time()
    with contextlib.ExitStack() as stack:
        config_file = p.accelerate_config
        if config_file is None:
            if p.main_port == 0:
                p.main_port = D.free_port()
            tmp = stack.enter_context(tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="rc1-accelerate-"))
            yaml.safe_dump(own_accelerate_config(p), tmp)
            tmp.flush()
            config_file = tmp.name
        argv = ["--config_file", config_file, "--monitor_interval", "0.5", "--max_restarts", "0",
                "-m", module, "--workdir", str(ws.root), *worker_args]
        env = {D.LAUNCHER_ENV: str(os.getpid()), "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": str(int(cfg.distributed.stop_timeout_s)),
               "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(cfg.run.threads or 1))}
        stack.enter_context(_environment(env))
        log.info("launching %d rank(s) on this machine (world size %d): accelerate launch %s", p.processes,
                 p.world_size, " ".join(argv))
        try:
            launch_command(launch_command_parser().parse_args(argv))
            return 0
        except ChildFailedError as exc:
            return _report_failure(ws, exc)
        except SignalException as exc:
            return _after_signal(ws, cfg, seed_index, exc.sigval, started)


@contextlib.contextmanager
def _environment(values: dict[str, str]):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _after_signal(ws, cfg, seed_index: int, sigval, started: float) -> int:
    """The operator's SIGTERM/SIGINT reached the launcher; the agent passed it on and waited for the ranks."""
    from rc1.training.base import read_training_end

    end = read_training_end(ws, cfg, seed_index)
    name = getattr(sigval, "name", str(sigval))  # torch's elastic agent passes a signal.Signals or a number
    if end is not None and _iso_to_epoch(end.get("time")) >= started - 1:
        print(f"training stopped on {name} at step {end.get('step')} ({end.get('reason')}); latest checkpoint "
              f"{end.get('checkpoint')}", file=sys.stderr)
        return 0
    raise Rc1Error(f"the ranks did not finish their step and checkpoint within distributed.stop_timeout_s "
                   f"({cfg.distributed.stop_timeout_s:g}s) after {name}; the last checkpoint is still valid")


def _iso_to_epoch(text: str | None) -> float:
    import calendar

    if not text:
        return 0.0
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))


def _failure_doc(rank: int, f) -> dict:
    data = f.error_file_data if isinstance(f.error_file_data, dict) else {}
    message = data.get("message")
    traceback = ""
    if isinstance(message, dict):
        traceback = (message.get("extraInfo") or {}).get("py_callstack", "")
        message = message.get("message", "")
    signal_name = f.signal_name() if f.exitcode < 0 else None
    if signal_name and not traceback:
        message = f"killed by {signal_name} (pid {f.pid}); a killed process leaves no traceback"
    return {"rank": rank, "pid": f.pid, "exitcode": f.exitcode, "signal": signal_name, "message": message or "",
            "traceback": traceback, "time": f.timestamp}


SHUTDOWN_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")  # how the agent (or the operator) ends the other ranks


def root_cause(failures: list[dict]) -> dict:
    """The failure that caused the others: a rank killed from outside (SIGKILL, SIGSEGV, ...) first, then a
    rank's refusal (exit 2 or 3: a config or gate error, which every rank meets alike; the agent's shutdown can
    reach another refusing rank mid-exit and turn its exit code into a crash's), then the earliest traceback
    that is not a lost collective (the ranks that lost a peer fail with that), then any traceback, then the rest
    (ranks the agent's shutdown ended)."""
    def tier(f: dict) -> int:
        if f["signal"] and not f["traceback"] and f["signal"] not in SHUTDOWN_SIGNALS:
            return 0
        if f["exitcode"] in (2, 3):
            return 1
        if f["traceback"]:
            lost = any(m in f["message"] + f["traceback"][-2000:] for m in COLLECTIVE_FAILURE)
            return 3 if lost else 2
        return 4
    return min(failures, key=lambda f: (tier(f), f["time"], f["rank"]))


def _report_failure(ws, exc) -> int:
    from rc1.runtime.atomic import atomic_write_json
    from rc1.runtime.fatal import utc_stamp
    from rc1.runtime.logs import tail_lines
    from rc1.runtime.metrics import last_metrics
    from rc1.runtime.secrets import redact

    failures = [_failure_doc(rank, f) for rank, f in sorted(exc.failures.items())]
    root = root_cause(failures)
    if root["exitcode"] in (2, 3):
        message = root["message"].split(": ", 1)[-1] if root["message"] else "a rank refused to start"
        raise (GateRefused if root["exitcode"] == 3 else ConfigError)(f"rank {root['rank']}: {message}")
    last = last_metrics(ws.metrics_path, 1)
    traceback = root["traceback"] or next((f["traceback"] for f in failures if f["traceback"]), "")
    killed = root["signal"] and not root["traceback"]
    what = f"rank {root['rank']} {root['message'] if killed else 'failed: ' + root['message']}"
    report = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "error": redact(what),
        "traceback": redact(traceback or "no rank left a traceback"),
        "traceback_of_rank": root["rank"] if root["traceback"] else next(
            (f["rank"] for f in failures if f["traceback"]), None),
        "step": last[-1].get("step") if last else None,
        "ranks": [{**f, "message": redact(f["message"]), "traceback": redact(f["traceback"])} for f in failures],
        "argv": [redact(a) for a in sys.argv],
        "log_tail": [redact(line) for line in tail_lines(ws.train_log, 200)],
    }
    path = atomic_write_json(ws.reports / f"ERROR_{utc_stamp()}.json", report)
    print(f"FATAL: {redact(what)}", file=sys.stderr)
    print(f"error report: {ws.rel(path)}", file=sys.stderr)
    return 1
