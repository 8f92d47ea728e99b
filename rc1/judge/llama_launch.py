"""`python -m rc1.judge.llama_launch <llama_cpp.server args>`: llama.cpp's OpenAI server, safely.

It runs `llama_cpp.server`'s own main() unchanged, except that llama.cpp's extra CPU buffer
types (AMX / repacked weight layouts) are turned off unless `--rc1-extra-bufts` is given: with
llama-cpp-python 0.3.36 on CPUs that report AMX, any multi-token batch through those kernels
crashes the server with a segmentation fault (reproduced with the SmolLM2 GGUF: a 1-token prompt
works, a 10-token prompt dies in llama_decode). Without them the same model runs correctly.
"""

from __future__ import annotations

import sys


def main() -> None:
    import llama_cpp.llama as llama_module

    if "--rc1-extra-bufts" in sys.argv:
        sys.argv.remove("--rc1-extra-bufts")
    else:
        default_params = llama_module.llama_cpp.llama_model_default_params

        def model_params_without_extra_bufts():
            params = default_params()
            params.use_extra_bufts = False
            return params

        llama_module.llama_cpp.llama_model_default_params = model_params_without_extra_bufts
    from llama_cpp.server.__main__ import main as server_main

    server_main()


if __name__ == "__main__":
    main()
