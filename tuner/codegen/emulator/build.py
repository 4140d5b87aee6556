"""Build Sunway athread programs (host + slave C files) for x86 with swemu, and launch them.

Two ways to build, both documented in README.md:

* ``build()`` -- the faithful two-stage build.  Host files are compiled with
  ``-D__sw_host__``, slave files with ``-D__sw_slave__``; then every global
  function *defined* in the slave objects is renamed ``f -> slave_f`` with
  ``objcopy --redefine-syms`` (what ``sw5cc -slave`` does), so the host's
  ``athread_spawn(f, arg)`` -> ``__real_athread_spawn(slave_f, arg)`` links
  exactly as on the real machine.
* ``build_single()`` -- one gcc command for everything (no renaming); the
  emulator's ``athread_spawn`` macro then falls back to the plain name.

``build_kernel()`` builds a generated kernel's directory (host.c, slave.c) the way every caller does, and
``launch()`` runs a built program in the emulator's environment (this process's, with its own ``SWEMU_``
settings dropped and the run's set): the one home of both.

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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tuner.targets import Target

EMU_DIR = Path(__file__).resolve().parent
EMU_SOURCE = EMU_DIR / "athread_emu.c"
EXAMPLES_DIR = EMU_DIR / "examples"
DEFAULT_CFLAGS: tuple[str, ...] = ("-O2", "-Wno-psabi")
LIBS: tuple[str, ...] = ("-lm",)
ERROR_EXIT_CODE = 86  # SWEMU_ERROR_EXIT in swemu_common.h

__all__ = [
    "BuildError", "EMU_DIR", "EMU_SOURCE", "EXAMPLES_DIR", "ERROR_EXIT_CODE",
    "find_cc", "compile_emulator", "rename_slave_objects", "build",
    "single_command", "build_single", "build_kernel", "make_recipe", "swemu_target", "emulator_env", "launch",
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


def build_kernel(directory: str | os.PathLike, output: str | os.PathLike, *, pro: bool = False,
                 defines: Sequence[str] = (), cflags: Sequence[str] = DEFAULT_CFLAGS,
                 emulator_object: str | os.PathLike | None = None) -> Path:
    """A generated kernel (``directory``'s host.c and slave.c, see tuner.codegen.sources) built for swemu:
    ``-DSWTUNE_EMU``, the directory on the include path, ``-DSWTUNE_PRO`` for SW26010-Pro, then
    ``defines``. Returns the executable path."""
    d = Path(directory)
    defs = ["-DSWTUNE_EMU", "-I", str(d), *(["-DSWTUNE_PRO"] if pro else []), *defines]
    return build([d / "host.c"], [d / "slave.c"], output, cflags=cflags, host_cflags=defs, slave_cflags=defs,
                 emulator_object=emulator_object)


def make_recipe(output: str, *, pro: bool, objects: str = "emu", syms: str = "slave.syms", cc: str = "gcc",
                host_defines: str = "", slave_flags: str = "") -> str:
    """The recipe of a Makefile rule (tab-led lines) that builds ``output`` from host.c and slave.c the way
    :func:`build` does (gcc, the slave objects renamed ``slave_``), against ``$(SWEMU)``: the generated
    kernel's and the compiled model's Makefiles. ``objects``: the object files' suffix (``host_<objects>.o``);
    ``cc``: the host compiler and linker (mpicc for an MPI build); ``host_defines``, ``slave_flags``: more
    flags, each with its leading space."""
    emu_def = "-DSWTUNE_EMU" + (" -DSWTUNE_PRO" if pro else "")
    inc = "-pthread -I$(SWEMU) -I."
    host, slave = f"host_{objects}.o", f"slave_{objects}.o"
    return (f"\t{cc} -O2 -Wno-psabi {inc} {emu_def}{host_defines} -D__sw_host__ -c host.c -o {host}\n"
            f"\tgcc -O2{slave_flags} -Wno-psabi {inc} {emu_def} -D__sw_slave__ -c slave.c -o {slave}\n"
            f"\tnm -P -g --defined-only {slave} | awk '$$2==\"T\"||$$2==\"W\"{{print $$1\" slave_\"$$1}}' > {syms}\n"
            f"\tobjcopy --redefine-syms={syms} {slave}\n"
            "\tgcc -O2 -pthread -I$(SWEMU) -c $(SWEMU)/athread_emu.c -o athread_emu.o\n"
            f"\t{cc} -pthread {host} {slave} athread_emu.o -lm -o {output}\n")


def swemu_target(target: Target | str) -> str:
    """``SWEMU_TARGET`` for ``target``: a Target's family, or a name given as swemu spells it."""
    if isinstance(target, str):
        return target
    return "sw26010pro" if str(target.family) == "sw26010-pro" else "sw26010"


def emulator_env(target: Target | str = "sw26010", *, timeout: float | str | None = None,
                 report: str | os.PathLike | None = None, ldm_bytes: int | None = None,
                 **settings: object) -> dict[str, str]:
    """The environment a program runs in on swemu: this process's without its ``SWEMU_`` settings, then
    the run's: the target (a Target of several core groups, ``sw26010-4cg``, runs that many: SWEMU_CGS),
    the emulator's own timeout (seconds), the JSON report's path, the LDM budget, and any other
    ``SWEMU_<NAME>`` given as ``NAME=value``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEMU_")}
    env["SWEMU_TARGET"] = swemu_target(target)
    if not isinstance(target, str) and target.cgs > 1:
        env["SWEMU_CGS"] = str(target.cgs)
    if timeout is not None:
        env["SWEMU_TIMEOUT"] = str(timeout)
    if report is not None:
        env["SWEMU_REPORT"] = str(report)
    if ldm_bytes is not None:
        env["SWEMU_LDM_BYTES"] = str(ldm_bytes)
    env.update({f"SWEMU_{k}": str(v) for k, v in settings.items()})
    return env


def launch(cmd: Sequence[str | os.PathLike], *, cwd: str | os.PathLike | None = None,
           wait_s: float | None = None, target: Target | str = "sw26010", timeout: float | str | None = None,
           report: str | os.PathLike | None = None, ldm_bytes: int | None = None,
           **settings: object) -> subprocess.CompletedProcess[str]:
    """Run a built program (``cmd``: the executable, or a launcher such as mpirun, and its arguments) in
    ``emulator_env(target, timeout=..., report=..., ldm_bytes=..., **settings)``, output captured as text;
    ``wait_s``: how long this process waits for it (subprocess.TimeoutExpired past it)."""
    return subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=wait_s,
                          env=emulator_env(target, timeout=timeout, report=report, ldm_bytes=ldm_bytes,
                                           **settings))


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
