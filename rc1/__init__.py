"""rc1: local-first, gated RL post-training for reasoning models."""

__version__ = "0.1.0"
