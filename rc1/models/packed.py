"""A bf16 sampling copy's linear layers on oneDNN's packed weight layout (CPU).

Decoding a rollout multiplies a handful of rows by every weight matrix once per token. torch's plain bf16
`linear` streamed SmolLM2-135M's 210 decoder matrices at ~7 GB/s on the 2-core AVX512-BF16 dev machine; the
same matrices reordered once into oneDNN's blocked layout for that batch size
(`torch.ops.mkldnn._reorder_linear_weight`, what inductor's freezing pass does) and multiplied with
`torch.ops.mkldnn._linear_pointwise` took 15.2 ms per sweep against 23.2 ms, and a whole 8-row rollout of 48
tokens 1.32x less time, with the same sampled tokens. Reordering all 135M weights costs ~0.15 s, paid once
per rollout after the copy is refreshed from the trained weights.

Only for bf16 weights on a CPU whose torch has oneDNN (mkldnn) and native bf16: elsewhere `PackedLinears`
is not made (`available()` says why not) and the copy runs on plain `linear`.
"""

from __future__ import annotations

import types


def available() -> str | None:
    """None when bf16 linear layers can run on packed weights here, else why not."""
    import torch

    from rc1.runtime.device import cpu_bf16_supported

    if not torch.backends.mkldnn.is_available():
        return "this torch has no oneDNN (mkldnn)"
    if not cpu_bf16_supported():
        return "this CPU has no native bf16 (AVX512-BF16 or AMX)"
    if not hasattr(torch.ops.mkldnn, "_reorder_linear_weight") or not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return "this torch lacks torch.ops.mkldnn._reorder_linear_weight / _linear_pointwise"
    return None


def _packed_forward(self, x):
    import torch

    shape = x.shape
    y = torch.ops.mkldnn._linear_pointwise(x.reshape(-1, shape[-1]), self.rc1_packed, self.bias, "none", [], "")
    return y.reshape(*shape[:-1], y.shape[-1])


class PackedLinears:
    """Every bf16 `nn.Linear` of `model` (a CPU sampling copy, no gradients) computing from a packed copy of its
    weight, reordered for `rows` rows (the rollout batch; any number of rows works). Call `refresh()` after the
    weights change: the packed copies are what the forward reads."""

    def __init__(self, model, rows: int):
        import torch

        self.rows = max(1, int(rows))
        self.modules = [m for m in model.modules()
                        if isinstance(m, torch.nn.Linear) and m.weight.dtype == torch.bfloat16
                        and m.weight.device.type == "cpu"]
        for m in self.modules:
            m.forward = types.MethodType(_packed_forward, m)
        self.refresh()

    def refresh(self) -> None:
        import torch

        with torch.no_grad():
            for m in self.modules:
                m.rc1_packed = torch.ops.mkldnn._reorder_linear_weight(m.weight.detach(), self.rows)
