"""A LoRA adapter written straight from the PEFT tensors (rc1.models.export.write_lora_gguf) and put on a base
already loaded in llama.cpp (LlamaCppSampler.set_lora) samples what the PEFT model samples in torch: the step
sync of LoRA rollouts without a merge, a save or a reload of the base."""

from __future__ import annotations

import time

import pytest
import torch

from rc1.config.schema import TrainConfig
from rc1.envs.env import ChatFormat
from rc1.envs.rollout import eos_ids
from rc1.generation import base_ref
from rc1.generation.verify import compare_decoders

pytest.importorskip("llama_cpp")


def _peft(model, seed: int):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    cfg = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, init_lora_weights=False,  # B random: the adapter acts
                     target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    peft_model = get_peft_model(model, cfg).eval()
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.mul_(0.05)  # a trained adapter's size: it moves the log-probs, not the whole distribution
    return peft_model


def _check(base: str, tmp_path, seeds=(1, 2)):
    from rc1.generation.llamacpp import LlamaCppSampler
    from rc1.generation.serve import served_gguf
    from rc1.models.export import write_lora_gguf

    cfg = TrainConfig(model={"base": base}, run={"threads": 1, "device_pref": ["cpu"]})
    ref = base_ref(cfg)
    gguf = served_gguf(ref, "f32")
    model, tok = ref.load(torch.device("cpu"), torch.float32)
    fmt = ChatFormat(tok, eos_ids(model, tok))
    cpp = LlamaCppSampler(gguf, tok, fmt.eos_ids, threads=1, max_rows=8)
    try:
        assert compare_decoders(fmt, model, cpp).ok                   # the base agrees
        seconds = {}
        for seed in seeds:                                             # steps' adapters, one after the other
            peft_model = _peft(model, seed)
            t0 = time.perf_counter()
            path = write_lora_gguf(peft_model, tmp_path / f"adapter{seed}.gguf")
            t1 = time.perf_counter()
            cpp.set_lora(path)
            seconds[seed] = (t1 - t0, time.perf_counter() - t1)
            agreement = compare_decoders(fmt, peft_model, cpp)
            assert agreement.ok, agreement.problems
            with peft_model.disable_adapter():
                off = compare_decoders(fmt, peft_model, cpp)
            assert not off.ok or off.max_logprob_diff > agreement.max_logprob_diff  # the adapter is what agrees
            model = peft_model.unload()
        cpp.set_lora(None)                                             # taken off: the base again
        assert compare_decoders(fmt, model, cpp).ok
    finally:
        cpp.close()
    return seconds


def test_a_qwen3_lora_adapter_on_the_loaded_base_samples_what_peft_samples(tmp_path):
    seconds = _check("random:qwen3-tiny", tmp_path)
    assert all(w < 5 and s < 5 for w, s in seconds.values())


@pytest.mark.real_model
def test_smollm2s_llama_lora_adapter_has_the_rotary_permutation_of_its_q_and_k(tmp_path):
    """SmolLM2 is a Llama: its q/k weights are permuted for llama.cpp's rotary layout, so B's rows must be too."""
    _check("embedded:smollm2-135m-instruct", tmp_path, seeds=(1,))
