"""`python -m rc1.judge.llama_launch <llama_cpp.server args>`: llama.cpp's OpenAI server, safely.

It runs `llama_cpp.server`'s own main() unchanged, except that llama.cpp's extra CPU buffer
types (AMX / repacked weight layouts) are turned off unless `--rc1-extra-bufts` is given: with
llama-cpp-python 0.3.36 on CPUs that report AMX, any multi-token batch through those kernels
crashes the server with a segmentation fault (reproduced with the SmolLM2 GGUF: a 1-token prompt
works, a 10-token prompt dies in llama_decode). Without them the same model runs correctly.

And log-probabilities come back as Python floats instead of numpy float32 scalars. For every generated token
of a request that asks for logprobs (the reference_match judge does), llama-cpp-python sorts the whole
vocabulary in Python (`sorted(zip(row, range(len(row))))`, 49,152 pairs for SmolLM2); comparing numpy scalars
made that most of a request's time. `_ListRows` hands it each row as a list (`ndarray.tolist()`, the same
values, converted only for the rows it reads): a probe request took 0.65 s against 0.84-1.27 s, with the same
tokens and log-probs.
"""

from __future__ import annotations

import sys


class _ListRows:
    """A 2-D log-prob array whose rows read as Python lists (see the module's docstring)."""

    def __init__(self, array):
        self.array = array

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, key):
        return _ListRows(self.array[key]) if isinstance(key, slice) else self.array[key].tolist()

    def __iter__(self):
        return (row.tolist() for row in self.array)

    def tolist(self) -> list:
        return self.array.tolist()


def rows_as_lists(logits_to_logprobs):
    """`Llama.logits_to_logprobs` with its 2-D results wrapped in `_ListRows` (1-D results unchanged)."""

    def wrapped(logits, axis: int = -1):
        out = logits_to_logprobs(logits, axis)
        return _ListRows(out) if getattr(out, "ndim", 0) == 2 else out
    return wrapped


def without_extra_bufts(default_params):
    """`llama_model_default_params` with llama.cpp's extra CPU buffer types off (see the module's docstring)."""

    def model_params_without_extra_bufts():
        params = default_params()
        params.use_extra_bufts = False
        return params
    return model_params_without_extra_bufts


def main() -> None:
    import llama_cpp.llama as llama_module

    llama_module.Llama.logits_to_logprobs = staticmethod(rows_as_lists(llama_module.Llama.logits_to_logprobs))

    if "--rc1-extra-bufts" in sys.argv:
        sys.argv.remove("--rc1-extra-bufts")
    else:
        llama_module.llama_cpp.llama_model_default_params = without_extra_bufts(
            llama_module.llama_cpp.llama_model_default_params)
    from llama_cpp.server.__main__ import main as server_main

    server_main()


if __name__ == "__main__":
    main()
