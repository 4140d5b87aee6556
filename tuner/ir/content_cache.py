"""A directory of results keyed by their content, shared by the processes of one machine.

Off unless ``SWTUNE_BUILD_CACHE`` names a directory (the test suite sets one per run; a user may set one
for repeated compiles). Its users: the emulator's builds (tuner.codegen.emulator.cache: a second build of
the same program is a copy) and the CPE cut checks (tuner.space.cpe.cuts: a slicing already checked on
the same functions, shapes and blocks is not built and run again). An entry is written under a private
name and renamed into place, so concurrent writers (pytest-xdist workers) never leave a half-written one.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

ENV = "SWTUNE_BUILD_CACHE"


def cache_dir() -> Path | None:
    """The cache's directory, or None when caching is off."""
    root = os.environ.get(ENV)
    return Path(root) if root else None


def key_of(parts: Iterable[str]) -> str:
    """SHA-256 over ``parts``, each length-prefixed (so no two lists of parts share a key)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(f"{len(part)}:{part}".encode())
    return h.hexdigest()


def read(kind: str, key: str) -> bytes | None:
    """The entry ``key`` of ``kind`` (a subdirectory: what the entries are), or None."""
    root = cache_dir()
    if root is None:
        return None
    try:
        return (root / kind / key).read_bytes()
    except OSError:
        return None


def write(kind: str, key: str, data: bytes) -> None:
    """Store ``data`` as the entry ``key`` of ``kind`` (nothing when caching is off)."""
    root = cache_dir()
    if root is None:
        return
    folder = root / kind
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, folder / key)
