"""FAIL pack: reports/FAIL_<ts>.tgz of logs/, reports/, configs/ with secrets redacted."""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
from pathlib import Path

from rc1.runtime.fatal import utc_stamp
from rc1.runtime.secrets import redact_bytes
from rc1.runtime.workspace import Workspace

INCLUDE = ("logs", "reports", "configs")
# Large binaries or earlier packs never go in a pack.
SKIP_SUFFIXES = (".tgz", ".safetensors", ".bin", ".pt", ".gguf", ".sqlite", ".sqlite-wal", ".sqlite-shm", ".tmp")
MAX_FILE_BYTES = 20 * 2**20


def make_failpack(ws: Workspace, extra: list[str] | None = None) -> Path:
    out = ws.reports / f"FAIL_{utc_stamp()}.tgz"
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".FAIL_", suffix=".tmp", dir=out.parent)
    os.close(fd)
    skipped: list[str] = []
    try:
        with tarfile.open(tmp, "w:gz") as tar:
            roots = [ws.path(d) for d in (*INCLUDE, *(extra or []))]
            for root in roots:
                if not root.exists():
                    continue
                files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
                for p in files:
                    rel = ws.rel(p)
                    if p.name.endswith(SKIP_SUFFIXES) or p.stat().st_size > MAX_FILE_BYTES:
                        skipped.append(rel)
                        continue
                    data = redact_bytes(p.read_bytes())
                    info = tarfile.TarInfo(rel)
                    info.size = len(data)
                    info.mtime = int(p.stat().st_mtime)
                    tar.addfile(info, io.BytesIO(data))
            listing = ("files left out (binary, too large, or an earlier pack):\n" + "\n".join(skipped) + "\n").encode()
            info = tarfile.TarInfo("FAILPACK_SKIPPED.txt")
            info.size = len(listing)
            tar.addfile(info, io.BytesIO(listing))
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
