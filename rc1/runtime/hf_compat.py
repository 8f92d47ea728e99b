"""What differs between the transformers versions rc1 supports (pyproject: >= 5.2, < 6).

transformers 5.24 renamed the decoders' KV-cache keyword and output field from `past_key_values` to `cache`; the
old name warns there and goes in 5.40. rc1 passes and reads the cache by whichever name the installed version
defines, so it neither warns on new versions nor breaks on old ones.
"""

from __future__ import annotations

import functools

_RENAMED_IN = (5, 24)


@functools.cache
def cache_name() -> str:
    """The keyword a transformers model's forward takes its KV cache by, and the output field that returns it."""
    import transformers

    major, minor = (int(p) for p in transformers.__version__.split(".")[:2])
    return "cache" if (major, minor) >= _RENAMED_IN else "past_key_values"


def with_cache(cache) -> dict:
    """The forward keyword argument that passes `cache`: `model(..., **with_cache(cache))`."""
    return {cache_name(): cache}


def cache_of(output):
    """The KV cache a forward with `use_cache=True` returned."""
    return output[cache_name()]
