"""Test workspaces for the training tests: the tiny Qwen3 model, arithmetic items, a workspace with data,
weights and a run config, and a machine moved to round2_pass (a plain module: tests import it; the
training conftest's fixtures use it)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.configs import gates_yaml
from tests.helpers.items import arithmetic_items

WEIGHTS = {"correctness": 0.45, "reasoning": 0.12, "grounding": 0.12, "clarity": 0.07, "conciseness": 0.06,
           "format": 0.08, "clarification": 0.10}


def build_tiny_model_dir(out: Path) -> None:
    """A 2-layer Qwen3 with a byte-level BPE tokenizer trained on a few strings, and a Qwen3-style template."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    from rc1.envs.actions import system_prompt
    from rc1.models.tiny import QWEN3_STYLE_TEMPLATE

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [system_prompt(), "ANSWER: 42", "TOOL: calc 3+4", "What is 7 + 8? The answer is 15."] + [
        f"What is {a} + {b}? {a + b}" for a in range(12) for b in range(14)]
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   padding_side="left")
    fast.chat_template = QWEN3_STYLE_TEMPLATE
    fast.save_pretrained(out)
    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=1024,
                      eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, tie_word_embeddings=True)
    Qwen3ForCausalLM(cfg).save_pretrained(out)


def make_workspace(root: Path, model_dir: Path, *, engine: str = "pure_pt", strategy: str = "grpo",
                   max_steps: int = 4, save_steps: int = 2, grad_accum: int = 1, method: str = "full",
                   extra: dict | None = None, n_items: int = 12) -> Path:
    """A workspace with data, weights and configs/run.yaml; returns the config path (workspace-relative)."""
    import yaml

    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "configs").mkdir(parents=True, exist_ok=True)
    with open(root / "data/train_min.jsonl", "w") as fh:
        for it in arithmetic_items(n_items):
            fh.write(json.dumps(it) + "\n")
    with open(root / "data/eval_min.jsonl", "w") as fh:
        for it in arithmetic_items(4, start=100, prefix="e"):
            fh.write(json.dumps(it) + "\n")
    (root / "configs/weights.json").write_text(json.dumps({"version": "t", "weights": WEIGHTS}))
    # a few-step test run cannot meet the laptop profile's count of informative groups over the run
    (root / "configs/gates.yaml").write_text(gates_yaml({"run_config": {"min_steps": 1},
                                                         "learning_signal": {"informative_groups_min": 1}}))
    cfg = {
        "profile": "laptop",
        "run": {"name": "t", "seed": 7, "max_steps": max_steps, "save_steps": save_steps, "eval_steps": 1000,
                "keep_last": 10, "gradient_accumulation": grad_accum, "device_pref": ["cpu"], "threads": 1},
        "model": {"base": str(model_dir), "max_new_tokens": 8, "gradient_checkpointing": False,
                  "lora": {"enable": method != "full", "r": 4, "alpha": 8, "dropout": 0.0}},
        "finetune": {"method": method},
        "engine": {"name": engine, "lr": 1e-3, "lr_schedule": "linear", "warmup_steps": 1},
        "strategy": {"name": strategy, "num_generations": 3, "prompts_per_step": 2},
        "data": {"max_length": 256},
        "callbacks": ["logging", "checkpoint"],
        "seed_pool": "data/rollouts/none.jsonl",
        "target_kl": 0.03,
        # the random tiny model never solves an item: with the default (shaping only where correctness varies)
        # its GRPO / RLOO / DPO steps would carry no signal at all, and the training tests need moving weights
        "reward": {"shaping_groups": "all"},
    }
    if engine == "pure_pt":  # the same numerics in every process of a test (auto's bf16 copy: tests/conftest.py)
        cfg["generation"] = {"rollout_dtype": "policy"}
    if engine == "trl":  # TRL keeps beta fixed inside its trainer: target_kl is held by stopping
        cfg["monitor"] = {"kl_control": "early_stop"}
    for dotted, value in (extra or {}).items():
        d = cfg
        keys = dotted.split(".")
        for k in keys[:-1]:
            d = d.setdefault(k, {})
        d[keys[-1]] = value
    (root / "configs/run.yaml").write_text(yaml.safe_dump(cfg))
    return Path("configs/run.yaml")


def to_round2_pass(ws, config) -> None:
    """Move the machine to round2_pass with gates that pass (what `rc1 advance --to round2` would do)."""
    from rc1.gates.base import Check, GateResult
    from rc1.machine.service import current_state, open_machine

    m = open_machine(ws, str(config), gate_runner=lambda gate: [GateResult(gate, [Check("t", 1, ">= 1", True)])])
    assert m.fire("pass_round1") and m.fire("pass_round2")
    assert current_state(ws) == "round2_pass"
