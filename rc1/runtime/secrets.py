"""Redaction: API keys from the environment never appear in any file rc1 writes."""

from __future__ import annotations

import os
import re

REDACTED = "***REDACTED***"
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
# Shapes of common API keys, redacted even when they did not come from the environment.
_KEY_PATTERNS = [
    re.compile(r"sk-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"AIza[0-9A-Za-z_\-]{20,}"),
    re.compile(r"hf_[A-Za-z0-9]{20,}"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._\-]{12,}"),
]


def secret_values(environ: dict[str, str] | None = None) -> list[str]:
    env = os.environ if environ is None else environ
    vals = {v for k, v in env.items() if _SECRET_NAME.search(k) and v and len(v) >= 6}
    return sorted(vals, key=len, reverse=True)


def redact(text: str, environ: dict[str, str] | None = None) -> str:
    for value in secret_values(environ):
        text = text.replace(value, REDACTED)
    for pat in _KEY_PATTERNS:
        text = pat.sub(lambda m: (m.group(1) if m.groups() else "") + REDACTED, text)
    return text


def redact_bytes(data: bytes, environ: dict[str, str] | None = None) -> bytes:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        out = data
        for value in secret_values(environ):
            out = out.replace(value.encode(), REDACTED.encode())
        return out
    return redact(text, environ).encode("utf-8")
