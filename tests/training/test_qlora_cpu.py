"""QLoRA on a CPU: a rollout (eval mode) must not change the gradients of the next training step.
bitsandbytes repacks 4-bit weights for AVX512-BF16 inference in eval mode and its repacked matmul has no
backward; the loader keeps training models in the plain layout (on CPUs without AVX512-BF16 nothing is
repacked and the two gradients agree trivially)."""

from __future__ import annotations

import torch

from rc1.config.schema import TrainConfig
from rc1.models.loader import load_model

CFG = TrainConfig(model={"base": "random:qwen3-tiny", "gradient_checkpointing": False,
                         "lora": {"r": 4, "dropout": 0.0}}, finetune={"method": "qlora"})


def _first_layer_grads(after_rollout: bool) -> torch.Tensor:
    torch.manual_seed(0)  # LoRA A's initialisation
    model, _ = load_model(CFG, device=torch.device("cpu"), for_training=True)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.linspace(-0.02, 0.02, p.numel()).view_as(p))
    if after_rollout:  # what PurePTEngine.rollout does: eval mode, no-grad forwards, then back to train mode
        model.eval()
        with torch.no_grad():
            model(input_ids=torch.tensor([[1, 2, 3]]))
        model.train()
    model(input_ids=torch.tensor([[5, 6, 7, 8, 9, 10]])).logits.float().logsumexp(-1).sum().backward()
    return next(p.grad for n, p in model.named_parameters() if "layers.0.self_attn.q_proj.lora_A" in n)


def test_a_rollout_does_not_cut_the_backward_through_4bit_layers():
    torch.testing.assert_close(_first_layer_grads(True), _first_layer_grads(False))
