"""Chat templates rc1 ships for models it targets, by model id (rc1/models/resources, see its README).

Offline code that must format conversations exactly as a target model does, without its tokenizer from
the hub (the `--smoke` check of a production config, tests), takes the template from here.
"""

from __future__ import annotations

from importlib import resources

VENDORED = {"Qwen/Qwen3-4B-Thinking-2507": "qwen3_4b_thinking_2507.jinja"}


def vendored_chat_template(model_id: str) -> str | None:
    """The chat template of `model_id` when rc1 ships it, else None."""
    name = VENDORED.get(model_id)
    if name is None:
        return None
    return (resources.files("rc1.models") / "resources" / name).read_text(encoding="utf-8")
