"""The Sunway-node measurement backend of the worker: codegen -> build -> run -> parse the time.

For each config the kernel's sources and Makefile are generated (``tuner.codegen.sunway``), built with
a configurable command template (default ``make -C {dir} kernel``: sw5cc on SW26010, swgcc on
SW26010-Pro) and run with another (default ``bsub ... {dir}/kernel``). The host program prints one
``SWTUNE_KERNEL_SECONDS=`` line per repetition and ``CHECK FAILED`` when its result is wrong. A build
or run that fails because the toolchain or scheduler is missing is an infrastructure failure: the
worker hands such jobs back rather than recording a bad config. Results carry source "hardware"
unless the commands point at a stand-in (the athread emulator), which the ``source`` field states.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.measure.base import MeasureResult
from tuner.targets import Target, get_target
from tuner.workloads import Workload

DEFAULT_BUILD = "make -C {dir} kernel"
DEFAULT_TIME_PATTERN = r"SWTUNE_KERNEL_SECONDS=([0-9.]+(?:[eE][-+]?[0-9]+)?)"
_INFRA_ERRORS = ("command not found", "No such file or directory", "not found on PATH")


class BackendUnavailable(RuntimeError):
    """The backend cannot measure anything on this machine (no compiler, no scheduler)."""


def default_run(target: str) -> str:
    from tuner.codegen.sunway import DEFAULT_RUN

    return DEFAULT_RUN[get_target(target).name]


@dataclass
class SunwayBackend:
    target: str
    compile_cmd: str = ""  # template with {dir} and {queue}
    run_cmd: str = ""
    queue: str = "q_sw_expr"
    time_pattern: str = DEFAULT_TIME_PATTERN
    compile_timeout: float = 300.0
    run_timeout: float = 600.0
    workdir: str = ""
    source: str = "hardware"
    chunk: int = 1  # one config at a time: each is a build + a batch job
    _tgt: Target = field(init=False)

    def __post_init__(self) -> None:
        self._tgt = get_target(self.target)
        self.compile_cmd = self.compile_cmd or DEFAULT_BUILD
        self.run_cmd = self.run_cmd or default_run(self.target)

    def preflight(self) -> None:
        """Raise BackendUnavailable with the reason if nothing could be measured."""
        tools = [shlex.split(self.compile_cmd)[0], shlex.split(self.run_cmd)[0]]
        if self.compile_cmd == DEFAULT_BUILD:  # the Makefile's compiler
            tools.append("sw5cc" if self._tgt.name == "sw26010" else "swgcc")
        for tool in tools:
            if "{" not in tool and shutil.which(tool) is None:
                raise BackendUnavailable(f"{tool!r} not found on PATH")

    def measure(self, workload: Workload, target: Target | str, configs: Sequence[dict[str, Any]]
                ) -> list[MeasureResult]:
        return [self._one(workload, dict(c)) for c in configs]

    def _fail(self, config: dict[str, Any], status: str, error: str, **details: Any) -> MeasureResult:
        return MeasureResult(config=config, status=status, error=error[-4000:], source=self.source,
                             details={"backend": "sunway", **details})

    def _one(self, workload: Workload, config: dict[str, Any]) -> MeasureResult:
        from tuner.codegen.sunway import write_kernel

        with tempfile.TemporaryDirectory(prefix="swtune-", dir=self.workdir or None) as tmp:
            try:
                job = write_kernel(workload, self._tgt, config, tmp, build_template=self.compile_cmd,
                                   run_template=self.run_cmd, queue=self.queue)
            except Exception as exc:  # noqa: BLE001 - a config codegen rejects is a compile error of that config
                return self._fail(config, "compile_error", f"codegen failed: {exc}", stage="codegen")
            ok, out = self._run(job.build_command, self.compile_timeout)
            if not ok:
                return self._fail(config, "timeout" if out == "timeout" else "compile_error", out, stage="compile",
                                  infrastructure=any(e in out for e in _INFRA_ERRORS))
            ok, out = self._run(job.run_command, self.run_timeout)
            if not ok:
                status = "timeout" if out == "timeout" else "ldm_overflow" if "ldm_overflow" in out else "runtime_error"
                return self._fail(config, status, out, stage="run", infrastructure=any(e in out for e in _INFRA_ERRORS))
        times = [float(t) for t in re.findall(self.time_pattern, out)]
        if not times or any(t <= 0 for t in times):
            return self._fail(config, "runtime_error", f"no kernel time in the program output: {out[-500:]}",
                              stage="parse")
        return MeasureResult(config=config, status="ok", times=tuple(times), source=self.source,
                             details={"backend": "sunway"})

    @staticmethod
    def _run(cmd: str, timeout: float) -> tuple[bool, str]:
        try:
            proc = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False, "timeout"
        return proc.returncode == 0, proc.stdout + proc.stderr
