"""The Sunway-node measurement backend of the worker: codegen -> compile -> run -> parse the time.

Compile and run commands are templates (sw5cc on SW26010, swgcc on SW26010-Pro, bsub to reach a
core group) so a site can adapt them. Until the codegen issue lands there is no athread C to build:
every result then says so ("codegen not available yet") with ``details.infrastructure = True``, and
the worker hands such jobs back instead of recording them as bad configs. Results of this backend
carry source "hardware"; nothing here ever returns a modelled time.
"""

from __future__ import annotations

import importlib
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from tuner.measure.base import MeasureResult
from tuner.targets import Target, get_target
from tuner.workloads import Workload

DEFAULT_COMPILE = {
    "sw26010": ("sw5cc -host -O3 -c {host_c} -o {workdir}/host.o && "
                "sw5cc -slave -O3 -msimd -c {slave_c} -o {workdir}/slave.o && "
                "sw5cc -hybrid {workdir}/host.o {workdir}/slave.o -o {exe}"),
    "sw26010-pro": ("swgcc -mhost -O3 -c {host_c} -o {workdir}/host.o && "
                    "swgcc -mslave -O3 -msimd -c {slave_c} -o {workdir}/slave.o && "
                    "swgcc -mhybrid {workdir}/host.o {workdir}/slave.o -o {exe}"),
}
DEFAULT_RUN = "bsub -I -b -q {queue} -n 1 -cgsp 64 {exe}"
DEFAULT_TIME_PATTERN = r"kernel_time_s\s*[=:]\s*([0-9.]+(?:[eE][-+]?[0-9]+)?)"


class BackendUnavailable(RuntimeError):
    """The backend cannot measure anything on this machine (no codegen, no compiler)."""


def _emitter() -> Callable[..., tuple[str, str]]:
    """tuner.codegen's athread C emitter, looked up at run time (it is another issue's work)."""
    try:
        codegen = importlib.import_module("tuner.codegen")
        return getattr(codegen, "emit_athread_c")
    except (ImportError, AttributeError):
        raise BackendUnavailable("codegen not available yet: tuner.codegen has no athread C emitter "
                                 "(emit_athread_c); the sunway backend cannot build kernels") from None


@dataclass
class SunwayBackend:
    target: str
    compile_cmd: str = ""
    run_cmd: str = DEFAULT_RUN
    queue: str = "q_sw_expr"
    time_pattern: str = DEFAULT_TIME_PATTERN
    compile_timeout: float = 300.0
    run_timeout: float = 600.0
    workdir: str = ""
    source: str = "hardware"
    chunk: int = 1  # one config at a time: each is a compile + a batch job
    _tgt: Target = field(init=False)

    def __post_init__(self) -> None:
        self._tgt = get_target(self.target)
        self.compile_cmd = self.compile_cmd or DEFAULT_COMPILE[self._tgt.name]

    def preflight(self) -> None:
        """Raise BackendUnavailable with the reason if nothing could be measured."""
        _emitter()
        for cmd in (self.compile_cmd, self.run_cmd):
            tool = shlex.split(cmd)[0]
            if shutil.which(tool) is None:
                raise BackendUnavailable(f"{tool!r} not found on PATH (needed by {cmd!r})")

    def measure(self, workload: Workload, target: Target | str, configs: Sequence[dict[str, Any]]
                ) -> list[MeasureResult]:
        return [self._one(workload, dict(c)) for c in configs]

    def _fail(self, config: dict[str, Any], status: str, error: str, **details: Any) -> MeasureResult:
        return MeasureResult(config=config, status=status, error=error[-4000:], source=self.source,
                             details={"backend": "sunway", **details})

    def _one(self, workload: Workload, config: dict[str, Any]) -> MeasureResult:
        try:
            emit = _emitter()
        except BackendUnavailable as exc:
            return self._fail(config, "compile_error", str(exc), stage="codegen", infrastructure=True)
        with tempfile.TemporaryDirectory(prefix="swtune-", dir=self.workdir or None) as tmp:
            work = Path(tmp)
            try:
                host_src, slave_src = emit(workload, self._tgt, config)
            except Exception as exc:  # noqa: BLE001 - a config codegen rejects is a compile error of that config
                return self._fail(config, "compile_error", f"codegen failed: {exc}", stage="codegen")
            (work / "host.c").write_text(host_src)
            (work / "slave.c").write_text(slave_src)
            fields = {"host_c": work / "host.c", "slave_c": work / "slave.c", "exe": work / "kernel",
                      "workdir": work, "queue": self.queue}
            ok, out = self._run(self.compile_cmd.format(**fields), self.compile_timeout)
            if not ok:
                return self._fail(config, "timeout" if out == "timeout" else "compile_error", out, stage="compile")
            ok, out = self._run(self.run_cmd.format(**fields), self.run_timeout)
            if not ok:
                return self._fail(config, "timeout" if out == "timeout" else "runtime_error", out, stage="run")
        times = [float(t) for t in re.findall(self.time_pattern, out)]
        if not times or any(t <= 0 for t in times):
            return self._fail(config, "runtime_error", f"no kernel time in the program output: {out[-500:]}",
                              stage="parse")
        if "CHECK FAILED" in out:
            return self._fail(config, "wrong_result", out[-2000:], stage="check")
        return MeasureResult(config=config, status="ok", times=tuple(times), source=self.source,
                             details={"backend": "sunway"})

    @staticmethod
    def _run(cmd: str, timeout: float) -> tuple[bool, str]:
        try:
            proc = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False, "timeout"
        return proc.returncode == 0, proc.stdout + proc.stderr
