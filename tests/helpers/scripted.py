"""TEST DOUBLE of a causal LM that writes a fixed script per assistant turn, through the real KV-cache
interface of rc1.envs.rollout, and records every prompt it was prefilled with (what it was conditioned on).

Turn index = how many assistant headers (`<|im_start|>assistant\\n`) its context holds; the position in the
turn = tokens after the last header and the generation prompt's `tail` (Qwen3-Thinking's `<think>\\n`).
The token history of each row rides in the cache as fake keys, so batch shrinking is exercised for real.
"""

from __future__ import annotations

import torch


class ScriptedLM(torch.nn.Module):
    def __init__(self, tok, turns: list[str], *, tail: str = ""):
        super().__init__()
        from transformers import Qwen3Config

        self.config = Qwen3Config(num_hidden_layers=1, vocab_size=len(tok), hidden_size=8, num_attention_heads=1,
                                  num_key_value_heads=1, head_dim=8, intermediate_size=8)
        self.generation_config = type("G", (), {"eos_token_id": tok.eos_token_id})()
        self.anchor = torch.nn.Parameter(torch.zeros(1))
        enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
        self.header, self.tail = enc("<|im_start|>assistant\n"), enc(tail) if tail else []
        self.turns = [enc(t) + [tok.eos_token_id] for t in turns]
        self.vocab = len(tok)
        self.prompts: list[list[int]] = []   # every prefilled prompt, padding removed

    def forward(self, input_ids, attention_mask=None, position_ids=None, cache=None, use_cache=True,
                logits_to_keep=0, past_key_values=None):
        # the KV cache by either name: rc1 passes the installed transformers' (hf_compat)
        cache = cache if cache is not None else past_key_values
        fake = input_ids[:, None, :, None].float()
        history = cache.update(fake, fake, 0)[0][:, 0, :, 0].long()
        if input_ids.shape[1] > 1 and attention_mask is not None:
            # prefill: record what each row is conditioned on (the mask covers the cached tokens too: a prefix
            # all rows share is prefilled first, then each row's rest)
            for row, m in zip(history.tolist(), attention_mask.tolist()):
                self.prompts.append([t for t, keep in zip(row, m) if keep])
        logits = torch.full((input_ids.shape[0], 1, self.vocab), -30.0)
        h = len(self.header)
        for r, row in enumerate(history.tolist()):
            starts = [i + h for i in range(len(row) - h + 1) if row[i:i + h] == self.header]
            if not starts:  # a prefix shared by the batch's prompts: its logits are not used
                continue
            script = self.turns[min(len(starts), len(self.turns)) - 1]
            k = len(row) - starts[-1] - len(self.tail)
            logits[r, 0, script[min(k, len(script) - 1)]] = 30.0
        return type("Out", (), {"logits": logits})()
