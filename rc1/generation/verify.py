"""The check a stage runs before it trusts llama.cpp: does the GGUF sample what the torch model samples?

On `CHECK_QUESTIONS` (rendered as episode prompts, so with the protocol system prompt), both decoders
continue greedily for `CHECK_TOKENS` tokens from the same prompt tokens through the same decoding code
path rc1 uses (rc1.envs.rollout.decode_batch for torch, LlamaCppSampler.decode_batch for llama.cpp).
They agree when the greedy continuations are the same tokens and every per-token log-probability differs
by at most `LOGPROB_TOL` nats. Measured on SmolLM2-135M (2-core CPU): f32 GGUF vs torch fp32 differ by at
most ~0.005 nats, f16 by ~0.01; 0.05 leaves room for other models while a wrong tensor layout, a wrong
rotary convention or a wrong tokenizer is off by whole nats or changes the greedy tokens.

The outcome is kept beside the GGUF in the model cache (`<gguf dir>.check.json`, keyed on the GGUF's
manifest, the torch dtype and these settings), so a later stage with the same weights does not re-run it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.fingerprint import sha256_file, sha256_json

log = logging.getLogger("rc1.generation")

CHECK_QUESTIONS = ("What is 17 times 23?", "Who wrote Hamlet?", "Is a tomato a fruit?")
CHECK_TOKENS = 16
LOGPROB_TOL = 0.05


@dataclass(frozen=True)
class Agreement:
    ok: bool
    problems: tuple[str, ...]
    max_logprob_diff: float
    tokens_compared: int

    def to_dict(self) -> dict:
        return {"ok": self.ok, "problems": list(self.problems), "max_logprob_diff": self.max_logprob_diff,
                "tokens_compared": self.tokens_compared, "tolerance": LOGPROB_TOL}


def compare_decoders(fmt, torch_model, cpp, *, questions=CHECK_QUESTIONS, new_tokens: int = CHECK_TOKENS,
                     tol: float = LOGPROB_TOL) -> Agreement:
    """Greedy continuations and per-token log-probs of the torch model and a LlamaCppSampler on the same
    prompt tokens (see the module docstring)."""
    import torch

    from rc1.envs.env import episode_messages
    from rc1.envs.rollout import StopRule, decode_batch

    prompts = [fmt.prompt_ids(episode_messages({"question": q})) for q in questions]
    limits, stops = [new_tokens] * len(prompts), [False] * len(prompts)
    with torch.inference_mode():
        ref_ids, ref_lp, _ = decode_batch(torch_model, fmt, prompts, max_new_tokens=limits, greedy=True,
                                          temperature=1.0, top_p=1.0, generator=None, stop_at_action=stops)
    got_ids, got_lp, _ = cpp.decode_batch(StopRule(fmt), prompts, limits, stops, greedy=True, temperature=1.0,
                                          top_p=1.0, generator=None)
    problems, worst, compared = [], 0.0, 0
    for q, a, b, la, lb in zip(questions, ref_ids, got_ids, ref_lp, got_lp):
        same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        diff = max((abs(x - y) for x, y in zip(la[:same], lb[:same])), default=0.0)
        worst, compared = max(worst, diff), compared + same
        if a != b:
            problems.append(f"{q!r}: greedy tokens differ from token {same} (torch {fmt.decode(a)!r}, "
                            f"llama.cpp {fmt.decode(b)!r})")
        elif diff > tol:
            problems.append(f"{q!r}: log-probs differ by {diff:.3g} nats (> {tol})")
    return Agreement(not problems, tuple(problems), worst, compared)


def check_record_path(gguf: Path) -> Path:
    return gguf.parent.with_name(gguf.parent.name + ".check.json")


def check_key(gguf: Path, torch_dtype: str) -> str:
    from rc1.models.cache import MANIFEST

    return sha256_json({"gguf": sha256_file(gguf.parent / MANIFEST), "torch_dtype": torch_dtype,
                        "questions": list(CHECK_QUESTIONS), "tokens": CHECK_TOKENS, "tol": LOGPROB_TOL})


def cached_agreement(gguf: Path, torch_dtype: str) -> Agreement | None:
    path = check_record_path(gguf)
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if doc.get("key") != check_key(gguf, torch_dtype):
        return None
    r = doc["result"]
    return Agreement(bool(r["ok"]), tuple(r["problems"]), float(r["max_logprob_diff"]), int(r["tokens_compared"]))


def record_agreement(gguf: Path, torch_dtype: str, result: Agreement) -> None:
    atomic_write_json(check_record_path(gguf), {"key": check_key(gguf, torch_dtype), "result": result.to_dict()})
