"""Peak memory of a training step of the pure PyTorch engine: arithmetic on the model shape and the plan.

The peak is the largest of the moments of a step, each the bytes alive then:

    resident       weights (+ the frozen reference copy with full fine-tuning) (+ a bf16 sampling copy
                   on a bf16 CPU), LoRA adapters, gradients (4 B) and AdamW state (8 B) per trainable
                   parameter, the process's own overhead
    logits         end of the forward / start of the backward: the fp32 [generated tokens x vocab]
                   logits and their log-softmax / entropy / gradient copies (the engine projects
                   only the generated positions, but all of them at once), plus every layer's
                   saved activations (without gradient checkpointing) or every layer's fp32 input
                   [tokens x hidden] (with it)
    layer backward with checkpointing: the layer inputs plus one recomputed layer and its backward
    optimizer step the resident state plus foreach temporaries on CUDA
    generation     weights, AdamW state, the KV cache [rows x tokens x layers x 2 x kv_dim], a prefill

Byte counts are exact arithmetic from the shape. What the code path keeps alive per unit (logits
copies, activation factors, the process's fixed overhead) is fitted by `rc1 bench memory` on real
steps of the engine, which reports the estimate beside every measurement. `CALIBRATION` holds the
fitted values and says where they come from.

This module is pure arithmetic (no torch): the resources gate uses it at preflight.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from rc1.models.shapes import ModelShape

if TYPE_CHECKING:  # pragma: no cover
    from rc1.config.schema import TrainConfig

GB = 1e9
# nf4 storage per parameter of a quantized linear layer: 4 bits, an 8-bit absmax per 64-block
# (double quantization) and an fp32 scale per 256 blocks of those.
NF4_BYTES_PER_PARAM = 0.5 + 1 / 64 + 4 / (64 * 256)
ROLLOUT_STRATEGIES = ("grpo", "rloo", "ppo", "dpo")
LOGITS, LAYER_BACKWARD, OPTIMIZER, GENERATION = "logits", "layer backward", "optimizer step", "generation"
# The engine projects generated tokens onto the vocabulary in chunks of at most this many logits (2^27
# fp32 values, 512 MiB per copy), each chunk under activation checkpointing (rc1.engines.forward.project).
LOGITS_CHUNK_ELEMENTS = 2 ** 27


def logits_chunk_tokens(vocab: int) -> int:
    """Tokens per vocabulary-projection chunk: 883 for Qwen3's 151,936 entries, 2730 for SmolLM2's 49,152."""
    return max(8, LOGITS_CHUNK_ELEMENTS // vocab)


@dataclass(frozen=True)
class Calibration:
    """What a code path keeps alive, in units the arithmetic cannot know (fitted by rc1 bench memory)."""

    overhead_bytes: float       # the process beside the model: interpreter, torch, tokenizer (RSS on CPU)
    layer_gc: float             # x one layer's saved activations: the recomputed layer + its backward
    layer_nogc: float           # x one layer's saved activations, per layer, without checkpointing
    logits_copies: float        # fp32 [generated tokens x vocab] copies alive at the logits moment
    embedding_grad_copies: float  # full fine-tune: fp32 [vocab x hidden] gradient temporaries in the backward
                                  # (a tied embedding gets two contributions, summed into a third tensor)
    source: str = ""


# Fitted on measured steps of rc1 bench memory (reports/bench/memory.json, `fit`): a 2-core AMD EPYC
# with AVX512-BF16 and 24 GB, fp32. A GPU run of `rc1 bench memory --device cuda` fits the CUDA entry.
CALIBRATION: dict[str, Calibration] = {
    "cpu": Calibration(overhead_bytes=0.64 * GB, layer_gc=1.63, layer_nogc=0.93, logits_copies=5.18,
                       embedding_grad_copies=1.81,
                       source="fitted by rc1 bench memory --quick on 6 one-layer steps of qwen3-4b (2-core x86 CPU, "
                              "24 GB, fp32; worst error 1.1%)"),
    # The copies are the code path's, not the device's: the CPU fit, with the allocator counting tensors only.
    "cuda": Calibration(overhead_bytes=0.0, layer_gc=1.63, layer_nogc=0.93, logits_copies=5.18,
                        embedding_grad_copies=1.81, source="the CPU fit's factors (not yet fitted on a GPU)"),
    "mps": Calibration(overhead_bytes=0.0, layer_gc=1.63, layer_nogc=0.93, logits_copies=5.18,
                       embedding_grad_copies=1.81, source="the CPU fit's factors (not yet fitted on MPS)"),
}


@dataclass(frozen=True)
class MemoryPlan:
    """One training micro-step as the engine runs it."""

    method: str                      # full | lora | qlora
    device: str = "cpu"              # cpu | cuda | mps
    precision: str = "fp32"          # compute dtype: fp32, or bf16 / fp16 autocast over fp32 master weights
    sequences: int = 16              # rows of one forward/backward (a micro-batch, run.micro_batch_size)
    batch_rows: int = 0              # rows of the step's whole training batch (0: the same as sequences)
    seq_len: int = 4096              # tokens per row (the batch is padded to its longest row)
    action_tokens: int = 1024        # generated tokens per row (the positions whose log-probs train)
    gen_rows: int = 16               # rows decoded together in the rollout
    gen_prompts: int = 4             # distinct prompts prefilled once per rollout
    gradient_checkpointing: bool = True
    lora_r: int = 16
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    reference: bool = True           # the strategy uses a reference policy (a frozen copy with full fine-tuning)
    value_head: bool = False         # PPO: a value head on the hidden states (kept for every position)
    sampling_copy: bool = False      # bf16 autocast on a CPU: a bf16 copy of the policy samples the rollouts
    temperature_copy: bool = False   # model.temperature != 1: the logits are divided (one more copy)

    def describe(self) -> str:
        rows = (f"{self.sequences} rows per micro-batch of {self.batch_rows}" if self.batch_rows > self.sequences
                else f"{self.sequences} rows")
        return (f"{self.method}, {rows} x {self.seq_len} tokens ({self.action_tokens} generated), "
                f"{self.precision} on {self.device}, gradient checkpointing {'on' if self.gradient_checkpointing else 'off'}")


@dataclass
class MemoryEstimate:
    """Bytes by term at each moment of the step (see the module docstring); the peak is the largest moment."""

    plan: MemoryPlan
    shape: ModelShape
    phases: dict[str, dict[str, float]] = field(default_factory=dict)
    calibration: str = ""

    def phase_bytes(self, name: str) -> float:
        return sum(self.phases.get(name, {}).values())

    @property
    def train_bytes(self) -> float:
        return max(self.phase_bytes(n) for n in self.phases if n != GENERATION)

    @property
    def generation_bytes(self) -> float:
        return self.phase_bytes(GENERATION)

    @property
    def peak_phase(self) -> str:
        return max(self.phases, key=self.phase_bytes)

    @property
    def peak_bytes(self) -> float:
        return self.phase_bytes(self.peak_phase)

    @property
    def peak_gb(self) -> float:
        return self.peak_bytes / GB

    def largest_terms(self, n: int = 3) -> str:
        top = sorted(self.phases[self.peak_phase].items(), key=lambda kv: -kv[1])[:n]
        return ", ".join(f"{k} {v / GB:.1f}" for k, v in top)

    def to_dict(self) -> dict:
        return {"peak_gb": round(self.peak_gb, 3), "peak_phase": self.peak_phase,
                "train_gb": round(self.train_bytes / GB, 3), "generation_gb": round(self.generation_bytes / GB, 3),
                "phases_gb": {p: {k: round(v / GB, 3) for k, v in t.items()} for p, t in self.phases.items()},
                "plan": asdict(self.plan), "shape": self.shape.to_dict(), "calibration": self.calibration}


def layer_activation_bytes(shape: ModelShape, compute_bytes: int) -> float:
    """Bytes per token that one decoder layer saves for its backward (SwiGLU MLP, GQA attention).

    fp32 residual inputs of the two norms; in the compute dtype: the normed inputs of the
    projections, q/k (before and after their norms and rotary embedding), v, the attention output,
    the MLP's gate, up, activation and product.
    """
    h, q, kv, i = shape.hidden, shape.q_dim, shape.kv_dim, shape.intermediate
    return 2 * 4 * h + compute_bytes * (2 * h + 4 * q + 3 * kv + 4 * i)


def estimate(shape: ModelShape, plan: MemoryPlan, calibration: Calibration | None = None) -> MemoryEstimate:
    """Bytes by term at each moment of one training micro-step and of the rollout before it."""
    cal = calibration or CALIBRATION.get(plan.device, CALIBRATION["cpu"])
    amp = plan.precision != "fp32"
    cb = 2 if amp else 4                                  # bytes of the compute dtype
    L, H, V = shape.layers, shape.hidden, shape.vocab
    lin = L * shape.layer_linear_params
    rest = shape.params - lin                             # embeddings, lm_head if untied, norms

    r: dict[str, float] = {}                              # alive through the whole step
    if plan.method == "qlora":
        r["weights"] = NF4_BYTES_PER_PARAM * lin + 4 * rest
        trainable = shape.lora_params(plan.lora_r, list(plan.lora_targets))
    else:
        r["weights"] = 4.0 * shape.params                 # fp32 master weights (autocast computes in bf16/fp16)
        trainable = shape.params if plan.method == "full" else shape.lora_params(plan.lora_r, list(plan.lora_targets))
    if plan.method != "full":
        r["LoRA adapters"] = 4.0 * trainable
    if plan.value_head:
        trainable += H + 1
    if plan.method == "full" and plan.reference:
        r["reference copy"] = 4.0 * shape.params
    if plan.sampling_copy and plan.method != "qlora":
        r["bf16 sampling copy"] = 2.0 * shape.params
    r["optimizer (AdamW)"] = 8.0 * trainable
    r["overhead"] = cal.overhead_bytes
    grads = {"gradients": 4.0 * trainable}

    tokens = plan.sequences * plan.seq_len
    per_layer = layer_activation_bytes(shape, cb) * tokens
    mask = {"attention mask": 1.0 * plan.sequences * plan.seq_len ** 2}
    amp_copies = {}
    if amp and plan.method != "qlora":                    # bf16/fp16 copies of the weights a matmul saves
        amp_copies["autocast weight copies"] = cb * ((shape.layer_linear_params if plan.gradient_checkpointing
                                                      else lin) + V * H)
    if plan.gradient_checkpointing:
        kept = {"checkpointed layer inputs": 4.0 * H * tokens * L}
    else:
        kept = {"layer activations": cal.layer_nogc * per_layer * L}
    projected = min(plan.sequences * plan.action_tokens, logits_chunk_tokens(V))  # one chunk alive at a time
    logits = {"logits": (cal.logits_copies + (1 if plan.temperature_copy else 0)) * 4.0 * projected * V}
    if projected < plan.sequences * plan.action_tokens:  # checkpointed chunks keep their input hidden states
        logits["projection inputs"] = cb * H * plan.sequences * plan.action_tokens
    if plan.value_head:                                   # PPO keeps the hidden states of every position
        logits["hidden states (value head)"] = (4 + cb) * H * tokens
    if plan.method == "full":
        grads["embedding gradient temporaries"] = cal.embedding_grad_copies * 4.0 * V * H
    out = MemoryEstimate(plan, shape, calibration=cal.source)
    out.phases[LOGITS] = {**r, **grads, **kept, **logits, **mask, **amp_copies}
    if plan.gradient_checkpointing:
        out.phases[LAYER_BACKWARD] = {**r, **grads, **kept, "recomputed layer": cal.layer_gc * per_layer, **mask,
                                      **amp_copies}
    out.phases[OPTIMIZER] = {**r, "gradients": grads["gradients"]}
    if plan.device == "cuda":                             # foreach AdamW: one temporary per parameter list
        out.phases[OPTIMIZER]["optimizer step temporaries"] = 4.0 * trainable
    if plan.gen_rows:
        g = {k: v for k, v in r.items() if k != "LoRA adapters"}
        kv_bytes = 2 if amp else 4
        g["KV cache"] = plan.gen_rows * plan.seq_len * L * 2 * shape.kv_dim * kv_bytes
        prompt = max(1, plan.seq_len - plan.action_tokens)
        g["prefill (one layer)"] = plan.gen_prompts * prompt * (layer_activation_bytes(shape, cb) / 2)
        g["sampling logits"] = 3 * 4.0 * plan.gen_rows * V
        out.phases[GENERATION] = g
    return out


# ----------------------------------------------------------------------------- from a run config
def episode_turns(cfg: "TrainConfig") -> int:
    return int(cfg.strategy.max_turns or cfg.pool.max_turns)


def plan_from_config(cfg: "TrainConfig", *, device: str, precision: str, multi_turn: str | None = None) -> MemoryPlan:
    """The worst micro-step `cfg` allows: every row as long as data.max_length, every episode as many turns
    as it may take. Episodes of prompts_per_step x num_generations rows are one training batch:
    - strategy.multi_turn concat: one row per episode, its turns' completions generated (model.max_new_tokens
      per turn, at most max_length - 1);
    - split_turns: one row per model turn, max_new_tokens generated in each.
    `multi_turn`: the mode `auto` resolves to for the model's chat template (the caller reads the template:
    this module stays arithmetic); unresolved `auto` is judged as split_turns, the larger of the two."""
    from rc1.runtime.device import rollouts_from_bf16_copy

    s, m = cfg.strategy, cfg.model
    episodes = s.prompts_per_step * s.num_generations
    turns = episode_turns(cfg)
    if (multi_turn or s.multi_turn) == "concat":
        per_episode, action = 1, min(m.max_new_tokens * turns, cfg.data.max_length - 1)
    else:
        per_episode, action = turns, min(m.max_new_tokens, cfg.data.max_length - 1)
    batch_rows = {"dpo": 2 * s.prompts_per_step * per_episode, "sft": s.prompts_per_step}.get(
        s.name, episodes * per_episode)
    # run.micro_batch_size rows go through forward/backward at a time (a DPO pair's rows are never cut)
    micro = cfg.run.micro_batch_size
    sequences = batch_rows if micro is None else min(batch_rows, max(micro, 2 * per_episode if s.name == "dpo" else 1))
    reference = s.name in ("ppo", "dpo") or s.kl_coef > 0 or cfg.effective_target_kl is not None
    return MemoryPlan(
        method=cfg.finetune.method, device=device, precision=precision, sequences=sequences, batch_rows=batch_rows,
        seq_len=cfg.data.max_length, action_tokens=action, gen_rows=episodes if s.name in ROLLOUT_STRATEGIES else 0,
        gen_prompts=s.prompts_per_step, gradient_checkpointing=m.gradient_checkpointing, lora_r=m.lora.r,
        lora_targets=tuple(m.lora.target_modules), reference=reference and s.name != "sft",
        value_head=s.name == "ppo",
        sampling_copy=rollouts_from_bf16_copy(cfg, device, precision == "bf16"),
        temperature_copy=m.temperature != 1.0)


@dataclass(frozen=True)
class Knob:
    setting: str          # "finetune.method: qlora"
    estimate_gb: float

    def __str__(self) -> str:
        return f"{self.setting} -> {self.estimate_gb:.1f} GB"


def knobs_that_fit(cfg: "TrainConfig", shape: ModelShape, *, device: str, precision: str, budget_bytes: float,
                   methods: tuple[str, ...] = ("lora", "qlora"), multi_turn: str | None = None) -> list[Knob]:
    """Config changes that bring the estimate within `budget_bytes`, most preferred first: a smaller
    micro-batch (the same training, less memory), LoRA/QLoRA instead of full, fewer generations, shorter completions, gradient checkpointing; for each knob
    the mildest setting that fits on its own. When no single knob fits: one combination, taking each
    knob in that order as far as needed (empty when even that does not fit)."""
    def peak(c) -> float:
        return estimate(shape, plan_from_config(c, device=device, precision=precision, multi_turn=multi_turn)).peak_bytes

    order = ("full", "lora", "qlora")
    cheaper = [x for x in order if x in methods and order.index(x) > order.index(cfg.finetune.method)]
    s, m = cfg.strategy, cfg.model
    options: list[tuple[str, list]] = [
        ("run.micro_batch_size", _micro_batches(cfg)),
        ("finetune.method", cheaper),
        ("strategy.num_generations", list(range(s.num_generations - 1, 1, -1))),
        ("strategy.prompts_per_step", list(range(s.prompts_per_step - 1, 0, -1))),
        ("model.max_new_tokens", _halvings(m.max_new_tokens, 16)),
        ("strategy.max_turns", list(range(episode_turns(cfg) - 1, 0, -1))),
        ("model.gradient_checkpointing", [True] if not m.gradient_checkpointing else []),
    ]
    found: list[Knob] = []
    for key, values in options:
        for v in values:
            c = with_setting(cfg, key, v)
            if peak(c) <= budget_bytes:
                found.append(Knob(f"{key}: {_fmt(v)}", peak(c) / GB))
                break
    if found:
        return found
    combo, changes = cfg, []
    for key, values in options:
        for v in values:
            combo = with_setting(combo, key, v)
            if peak(combo) <= budget_bytes:
                break
        if values:
            changes.append(f"{key}: {_fmt(_get(combo, key))}")
        if peak(combo) <= budget_bytes:
            return [Knob(", ".join(changes), peak(combo) / GB)]
    return []


def _micro_batches(cfg: "TrainConfig") -> list[int]:
    """run.micro_batch_size values below the current one (or the whole batch) that the config accepts, largest first."""
    top = min(cfg.run.micro_batch_size or cfg.rollout_rows + 1, cfg.rollout_rows + 1)
    return [m for m in range(top - 1, 0, -1) if with_setting(cfg, "run.micro_batch_size", m).micro_batch_error() is None]


def _fmt(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def with_setting(cfg: "TrainConfig", dotted: str, value) -> "TrainConfig":
    new = cfg.model_copy(deep=True)
    obj = new
    *path, last = dotted.split(".")
    for k in path:
        obj = getattr(obj, k)
    setattr(obj, last, value)
    return new


def _get(cfg, dotted: str):
    obj = cfg
    for k in dotted.split("."):
        obj = getattr(obj, k)
    return obj


def _halvings(x: int, floor: int) -> list[int]:
    out = []
    while x // 2 >= floor:
        x //= 2
        out.append(x)
    return out
