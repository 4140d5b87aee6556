"""Build Sunway athread programs (host + slave C files) for x86 with swemu.

Two ways, both documented in README.md:

* ``build()`` -- the faithful two-stage build.  Host files are compiled with
  ``-D__sw_host__``, slave files with ``-D__sw_slave__``; then every global
  function *defined* in the slave objects is renamed ``f -> slave_f`` with
  ``objcopy --redefine-syms`` (what ``sw5cc -slave`` does), so the host's
  ``athread_spawn(f, arg)`` -> ``__real_athread_spawn(slave_f, arg)`` links
  exactly as on the real machine.
* ``build_single()`` -- one gcc command for everything (no renaming); the
  emulator's ``athread_spawn`` macro then falls back to the plain name.

Command line::

    python tuner/codegen/emulator/build.py --host host.c --slave slave.c -o prog [--single]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

EMU_DIR = Path(__file__).resolve().parent
EMU_SOURCE = EMU_DIR / "athread_emu.c"
EXAMPLES_DIR = EMU_DIR / "examples"
DEFAULT_CFLAGS: tuple[str, ...] = ("-O2", "-Wno-psabi")
LIBS: tuple[str, ...] = ("-lm",)
ERROR_EXIT_CODE = 86  # SWEMU_ERROR_EXIT in swemu_common.h

__all__ = [
    "BuildError", "EMU_DIR", "EMU_SOURCE", "EXAMPLES_DIR", "ERROR_EXIT_CODE",
    "find_cc", "compile_emulator", "rename_slave_objects", "build",
    "single_command", "build_single",
]


class BuildError(RuntimeError):
    """A compiler / binutils step failed."""

    def __init__(self, cmd: Sequence[str], proc: subprocess.CompletedProcess):
        self.cmd = list(cmd)
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        super().__init__(f"command failed ({proc.returncode}): {' '.join(self.cmd)}\n{proc.stderr}")


def find_cc(cc: str | None = None) -> str | None:
    """The C compiler to use: ``cc``, ``$CC`` or ``gcc`` on PATH (None if absent)."""
    cand = cc or os.environ.get("CC") or "gcc"
    return shutil.which(cand)


def _run(cmd: Sequence[str], cwd: str | os.PathLike | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(cmd, proc)
    return proc


def _need_cc(cc: str | None) -> str:
    found = find_cc(cc)
    if not found:
        raise FileNotFoundError("no C compiler found (set CC or install gcc)")
    return found


def compile_emulator(out_dir: str | os.PathLike, *, cc: str | None = None,
                     cflags: Sequence[str] = DEFAULT_CFLAGS) -> Path:
    """Compile athread_emu.c into ``out_dir/athread_emu.o`` and return its path."""
    cc = _need_cc(cc)
    out = Path(out_dir) / "athread_emu.o"
    _run([cc, *cflags, "-pthread", "-I", str(EMU_DIR), "-c", str(EMU_SOURCE), "-o", str(out)])
    return out


def _defined_functions(obj: Path, nm: str) -> list[str]:
    proc = _run([nm, "-P", "-g", "--defined-only", str(obj)])
    names = []
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1] in ("T", "W"):
            names.append(parts[0])
    return names


def rename_slave_objects(objs: Iterable[str | os.PathLike], *, nm: str = "nm",
                         objcopy: str = "objcopy") -> dict[str, str]:
    """Rename every global function defined in the slave objects to ``slave_<name>``
    (definitions and references, in place).  Returns the mapping."""
    paths = [Path(o) for o in objs]
    mapping: dict[str, str] = {}
    for o in paths:
        for name in _defined_functions(o, nm):
            if not name.startswith("slave_"):
                mapping[name] = "slave_" + name
    if not mapping:
        return mapping
    with tempfile.NamedTemporaryFile("w", suffix=".syms", delete=False) as fh:
        fh.write("".join(f"{k} {v}\n" for k, v in sorted(mapping.items())))
        map_file = fh.name
    try:
        for o in paths:
            _run([objcopy, f"--redefine-syms={map_file}", str(o)])
    finally:
        os.unlink(map_file)
    return mapping


def build(host_sources: Sequence[str | os.PathLike], slave_sources: Sequence[str | os.PathLike],
          output: str | os.PathLike, *, workdir: str | os.PathLike | None = None,
          cc: str | None = None, cflags: Sequence[str] = DEFAULT_CFLAGS,
          host_cflags: Sequence[str] = (), slave_cflags: Sequence[str] = (),
          ldflags: Sequence[str] = (), emulator_object: str | os.PathLike | None = None) -> Path:
    """Two-stage build (faithful slave_ renaming).  Returns the executable path."""
    cc = _need_cc(cc)
    output = Path(output)
    work = Path(workdir) if workdir else output.parent / (output.name + ".objs")
    work.mkdir(parents=True, exist_ok=True)
    inc = ["-I", str(EMU_DIR)]
    host_objs, slave_objs = [], []
    for i, src in enumerate(host_sources):
        obj = work / f"host{i}_{Path(src).stem}.o"
        _run([cc, *cflags, *host_cflags, "-pthread", *inc, "-D__sw_host__", "-c", str(src), "-o", str(obj)])
        host_objs.append(obj)
    for i, src in enumerate(slave_sources):
        obj = work / f"slave{i}_{Path(src).stem}.o"
        _run([cc, *cflags, *slave_cflags, "-pthread", *inc, "-D__sw_slave__", "-c", str(src), "-o", str(obj)])
        slave_objs.append(obj)
    rename_slave_objects(slave_objs)
    emu = Path(emulator_object) if emulator_object else compile_emulator(work, cc=cc, cflags=cflags)
    _run([cc, "-pthread", *map(str, host_objs), *map(str, slave_objs), str(emu), *ldflags, *LIBS,
          "-o", str(output)])
    return output


def single_command(host_sources: Sequence[str | os.PathLike], slave_sources: Sequence[str | os.PathLike],
                   output: str | os.PathLike, *, cc: str = "gcc",
                   cflags: Sequence[str] = DEFAULT_CFLAGS) -> list[str]:
    """The one-command build line (no renaming; see README.md for its limits)."""
    return [cc, *cflags, "-pthread", "-I", str(EMU_DIR), *map(str, host_sources),
            *map(str, slave_sources), str(EMU_SOURCE), *LIBS, "-o", str(output)]


def build_single(host_sources, slave_sources, output, *, cc: str | None = None,
                 cflags: Sequence[str] = DEFAULT_CFLAGS) -> Path:
    """Run :func:`single_command`.  Returns the executable path."""
    cmd = single_command(host_sources, slave_sources, output, cc=_need_cc(cc), cflags=cflags)
    _run(cmd)
    return Path(output)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", action="append", required=True, help="host (MPE) C file; repeatable")
    ap.add_argument("--slave", action="append", required=True, help="slave (CPE) C file; repeatable")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--single", action="store_true", help="one gcc command, no slave_ renaming")
    ap.add_argument("--cc", default=None)
    ap.add_argument("--cflag", action="append", default=None, help="replace the default -O2 flags")
    args = ap.parse_args(argv)
    cflags = tuple(args.cflag) if args.cflag else DEFAULT_CFLAGS
    try:
        if args.single:
            out = build_single(args.host, args.slave, args.output, cc=args.cc, cflags=cflags)
        else:
            out = build(args.host, args.slave, args.output, cc=args.cc, cflags=cflags)
    except BuildError as exc:
        sys.stderr.write(str(exc))
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
