"""The Sunway-node measurement backend: codegen -> build -> run -> parse the time.

For each config the kernel's sources and Makefile are generated (``tuner.codegen.sunway``), built with
a configurable command template (default ``make -C {dir} kernel``: sw5cc on SW26010, swgcc on
SW26010-Pro) and run with another (default ``bsub ... {dir}/kernel``). The host program prints one
``SWTUNE_KERNEL_SECONDS=`` line per repetition; it does not check its output (the emulator backend
checks every generated kernel against numpy). A build or run that fails because the toolchain or
scheduler is missing raises InfrastructureError: no config is blamed, and a worker hands the jobs
back. Results carry source "hardware" unless the commands point at a stand-in (the athread
emulator), which the ``source`` field then states.
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

from tuner.codegen.sunway import DEFAULT_BUILD, DEFAULT_RUN
from tuner.measure.base import InfrastructureError, MeasureResult, Source, Status
from tuner.space.space import Config
from tuner.targets import Family, Target, get_target
from tuner.task_kind import kind_of
from tuner.workloads import Workload

DEFAULT_TIME_PATTERN = r"SWTUNE_KERNEL_SECONDS=([0-9.]+(?:[eE][-+]?[0-9]+)?)"
# What a shell prints when a command it was asked to run does not exist on this machine.
_INFRA_ERRORS = ("command not found", "No such file or directory", "not found on PATH")
_TIMEOUT = "timeout"


def default_run(target: str) -> str:
    """The bsub command template of ``target``."""
    return DEFAULT_RUN[get_target(target).name]


@dataclass
class SunwayBackend:
    """Builds and runs each config on a Sunway node through the command templates ({dir}, {queue})."""

    target: str
    compile_cmd: str = ""  # template with {dir} and {queue}
    run_cmd: str = ""
    queue: str = "q_sw_expr"
    time_pattern: str = DEFAULT_TIME_PATTERN
    compile_timeout: float = 300.0
    run_timeout: float = 600.0
    workdir: str = ""
    source: Source = Source.HARDWARE
    chunk: int = 1  # one config at a time: each is a build + a batch job
    _tgt: Target = field(init=False)

    def __post_init__(self) -> None:
        self._tgt = get_target(self.target)
        self.source = Source(self.source)
        self.compile_cmd = self.compile_cmd or DEFAULT_BUILD
        self.run_cmd = self.run_cmd or default_run(self.target)
        self.time_pattern = self.time_pattern or DEFAULT_TIME_PATTERN

    def preflight(self) -> None:
        """Raise InfrastructureError naming the first tool (compiler, scheduler) missing from PATH."""
        tools = [shlex.split(self.compile_cmd)[0], shlex.split(self.run_cmd)[0]]
        if self.compile_cmd == DEFAULT_BUILD:  # the Makefile's compiler
            tools.append("sw5cc" if self._tgt.family is Family.SW26010 else "swgcc")
        for tool in tools:
            if "{" not in tool and shutil.which(tool) is None:
                raise InfrastructureError(f"{tool!r} not found on PATH")

    def measure(self, workload: Workload, target: Target | str, configs: Sequence[Config]) -> list[MeasureResult]:
        results: list[MeasureResult] = []
        for c in configs:
            try:
                results.append(self._one(workload, dict(c)))
            except InfrastructureError as exc:
                raise InfrastructureError(str(exc), completed=results) from exc
        return results

    def _fail(self, config: Config, status: Status, error: str, **details: Any) -> MeasureResult:
        return MeasureResult(config=config, status=status, error=error[-4000:], source=self.source,
                             details={"backend": "sunway", **details})

    def _one(self, workload: Workload, config: Config) -> MeasureResult:
        with tempfile.TemporaryDirectory(prefix="swtune-", dir=self.workdir or None) as tmp:
            try:
                job = kind_of(workload).sunway_job(workload, self._tgt, config, tmp, self.compile_cmd, self.run_cmd,
                                                   self.queue)
            except Exception as exc:  # noqa: BLE001 - a config codegen rejects is a compile error of that config
                return self._fail(config, Status.COMPILE_ERROR, f"codegen failed: {exc}", stage="codegen")
            ok, out = self._run(job.build_command, self.compile_timeout, "compile")
            if not ok:
                status = Status.TIMEOUT if out == _TIMEOUT else Status.COMPILE_ERROR
                return self._fail(config, status, out, stage="compile")
            ok, out = self._run(job.run_command, self.run_timeout, "run")
            if not ok:
                status = (Status.TIMEOUT if out == _TIMEOUT else Status.LDM_OVERFLOW if "ldm_overflow" in out
                          else Status.RUNTIME_ERROR)
                return self._fail(config, status, out, stage="run")
        times = [float(t) for t in re.findall(self.time_pattern, out)]
        if not times or any(t <= 0 for t in times):
            return self._fail(config, Status.RUNTIME_ERROR, f"no kernel time in the program output: {out[-500:]}",
                              stage="parse")
        return MeasureResult(config=config, status=Status.OK, times=tuple(times), source=self.source,
                             details={"backend": "sunway"})

    @staticmethod
    def _run(cmd: str, timeout: float, stage: str) -> tuple[bool, str]:
        """(succeeded, output); "timeout" when it ran too long. A missing command raises InfrastructureError."""
        try:
            proc = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False, _TIMEOUT
        out = proc.stdout + proc.stderr
        if proc.returncode != 0 and any(e in out for e in _INFRA_ERRORS):
            raise InfrastructureError(f"{stage} failed on this machine, not for this config: {out[-2000:]}")
        return proc.returncode == 0, out
