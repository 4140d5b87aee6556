"""The cache of emulator builds (tuner/codegen/emulator/cache.py) is keyed on content: an unchanged
program is a copy (make does not run), a changed source rebuilds, a failed build is never stored."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tuner.codegen.emulator import cache
from tuner.ir import content_cache

pytestmark = pytest.mark.needs("gcc", "make")

# every real build appends a line to builds.log beside the program's directory: the test counts makes
MAKEFILE = """emu: model_emu
model_emu: host.c
\tgcc -O0 host.c -o model_emu
\techo built >> ../builds.log
"""


def _program(directory: Path, value: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "Makefile").write_text(MAKEFILE)
    (directory / "host.c").write_text(f"int main(void) {{ return {value}; }}\n")
    return directory


def _builds(root: Path) -> int:
    log = root / "builds.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def _exit_code(directory: Path) -> int:
    return subprocess.run([str(directory / "model_emu")]).returncode


def test_an_unchanged_program_is_copied_and_a_changed_one_rebuilt(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(content_cache.ENV, str(tmp_path / "cache"))
    first = _program(tmp_path / "a", 3)
    assert cache.make_emulated(first).returncode == 0
    assert _builds(tmp_path) == 1 and _exit_code(first) == 3

    # the same sources in another directory: a copy of the stored executable, make never runs
    twin = _program(tmp_path / "b", 3)
    assert cache.make_emulated(twin).returncode == 0
    assert _builds(tmp_path) == 1 and _exit_code(twin) == 3

    # one changed byte: built again, and the new program is the one that runs
    changed = _program(tmp_path / "c", 4)
    assert cache.make_emulated(changed).returncode == 0
    assert _builds(tmp_path) == 2 and _exit_code(changed) == 4

    # a changed Makefile (another recipe) is another key too
    (twin / "Makefile").write_text(MAKEFILE.replace("-O0", "-O1"))
    (twin / "model_emu").unlink()
    cache.make_emulated(twin)
    assert _builds(tmp_path) == 3 and _exit_code(twin) == 3


def test_a_failed_build_is_not_stored(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(content_cache.ENV, str(tmp_path / "cache"))
    broken = _program(tmp_path / "a", 0)
    (broken / "host.c").write_text("int main(void) { return }\n")
    assert cache.make_emulated(broken).returncode != 0
    assert cache.make_emulated(broken).returncode != 0  # tried again, not served a stale success
    assert not any(p.is_file() for p in (tmp_path / "cache").rglob("*"))


def test_the_key_covers_the_emulator_sources_and_the_recipe(tmp_path: Path) -> None:
    header = tmp_path / "athread.h"
    header.write_text("#define X 1\n")
    key = cache.content_key(["make", "emu"], [header])
    assert cache.content_key(["make", "emu"], [header]) == key
    assert cache.content_key(["make", "emu-mpi"], [header]) != key
    header.write_text("#define X 2\n")
    assert cache.content_key(["make", "emu"], [header]) != key
    assert set(cache.emulator_sources()) >= {cache.EMU_DIR / "athread_emu.c", cache.EMU_DIR / "athread.h"}


def test_without_the_variable_every_make_runs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(content_cache.ENV, raising=False)
    for name in ("a", "b"):
        cache.make_emulated(_program(tmp_path / name, 1))
    assert _builds(tmp_path) == 2
