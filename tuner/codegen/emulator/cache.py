"""A cache of emulated programs keyed on their content: a second build of the same program is a copy.

A build's key is a SHA-256 over everything that decides the executable: what is built (the make target,
or the compiler and its flags), the program's C sources, headers and Makefile, and the athread
emulator's own sources. Nothing else enters it -- not a file's path or time -- so the same program
generated into two directories is one entry, and a changed byte anywhere rebuilds.

The cache is off unless ``SWTUNE_BUILD_CACHE`` names a directory (tuner.ir.content_cache; the test suite sets
one per run).
Entries are written under a private name and renamed into place, so concurrent builders (pytest-xdist
workers, parallel measurements) share one directory and never read a half-written executable.

    from tuner.codegen.emulator.cache import make_emulated
    make_emulated(out_dir)            # `make -s emu` in out_dir, or the cached model_emu copied there
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from tuner.codegen.emulator.build import EMU_DIR
from tuner.ir.content_cache import cache_dir

# the executable each make target of a compiled program's Makefile (tuner/aot/makefile.py) builds
MAKE_PROGRAMS = {"emu": "model_emu", "emu-mpi": "model_emu_mpi"}


def emulator_sources() -> list[Path]:
    """The athread emulator's sources: every emulated program is compiled and linked against them."""
    return sorted([*EMU_DIR.glob("*.c"), *EMU_DIR.glob("*.h")])


def program_sources(directory: Path) -> list[Path]:
    """What a program directory's build reads: its C files, headers and Makefile."""
    return sorted(p for p in directory.iterdir() if p.suffix in (".c", ".h") or p.name == "Makefile")


def content_key(recipe: Iterable[str], files: Iterable[Path]) -> str:
    """SHA-256 over ``recipe`` (what is built and how) and the bytes of ``files`` (named by base name, as
    the build sees them through its include path)."""
    h = hashlib.sha256()
    for part in recipe:
        h.update(f"{len(part)}:{part}".encode())
    for f in sorted(files, key=lambda p: (p.name, str(p))):
        data = f.read_bytes()
        h.update(f"{f.name}:{len(data)}:".encode())
        h.update(data)
    return h.hexdigest()


def cached_build(key: str, output: Path, build: Callable[[], bool]) -> bool:
    """Put the executable of ``key`` at ``output``: a copy from the cache, or ``build()`` (which writes
    ``output`` and says whether it succeeded) and then stored. Returns True on a cache hit.
    A failed build is never stored; caching off, this is ``build()``."""
    root = cache_dir()
    entry = root / key[:2] / key if root else None
    if entry is not None and entry.is_file():
        _copy_into_place(entry, output)
        return True
    if build() and entry is not None and output.is_file():
        _copy_into_place(output, entry)
    return False


def _copy_into_place(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst`` through a private temporary name, then rename (atomic on one file system)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", dir=dst.parent)
    os.close(fd)
    try:
        shutil.copy2(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def make_emulated(directory: Path, target: str = "emu", timeout: float = 600.0) -> subprocess.CompletedProcess:
    """``make -s target`` in a compiled program's ``directory`` (``emu``: model_emu; ``emu-mpi``:
    model_emu_mpi), or the cached executable of the same sources copied there. The result is make's
    (a hit reads as a make that succeeded silently). Raises OSError / TimeoutExpired as subprocess does."""
    directory = Path(directory)
    compilers = [shutil.which("gcc") or "", *([shutil.which("mpicc") or ""] if target == "emu-mpi" else [])]
    key = content_key(["make", target, *compilers], [*program_sources(directory), *emulator_sources()])
    result = subprocess.CompletedProcess(["make", "-s", target], 0, "", "")

    def build() -> bool:
        nonlocal result
        result = subprocess.run(["make", "-s", target], cwd=directory, capture_output=True, text=True,
                                timeout=timeout)
        return result.returncode == 0

    cached_build(key, directory / MAKE_PROGRAMS[target], build)
    return result
