"""Small C helpers (the allocation counter, the QEMU plugin) built once with the host's
compiler and cached by their source."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sysconfig
import tempfile
import threading
from pathlib import Path

# Builds are started from thread pools; one compile of each helper is enough, and
# sysconfig's first read is not thread-safe (a racing thread saw CC as None).
_LOCK = threading.Lock()


class BuildError(RuntimeError):
    pass


def host_cc() -> str:
    return os.environ.get("CC") or (sysconfig.get_config_var("CC") or "cc").split()[0]


def shared_library(source: Path, stem: str, *, libs: tuple[str, ...] = (),
                   cache_dir: Path | None = None) -> Path:
    """``source`` compiled to ``<stem>-<hash>.so`` in ``cache_dir`` (a temporary folder)."""
    with _LOCK:
        digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
        folder = cache_dir or Path(tempfile.gettempdir()) / f"peakwatch-{stem}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{stem}-{digest}.so"
        if path.exists():
            return path
        # Another process may build the same file: write aside, then rename atomically.
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        proc = subprocess.run(
            [host_cc(), "-O2", "-shared", "-fPIC", "-o", str(partial), str(source), *libs],
            capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0:
            raise BuildError(f"could not compile {source.name}: {proc.stderr.strip()}")
        partial.replace(path)
        return path
