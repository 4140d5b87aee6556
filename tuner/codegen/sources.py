"""(workload, target, config) -> the files of one Sunway kernel: slave.c, host.c, headers, Makefile."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tuner.codegen.host import SLAVE_API, header, host_file, makefile
from tuner.codegen.printer import SlavePrinter
from tuner.codegen.schedule import Scheduled, build_schedule
from tuner.space.space import Config
from tuner.targets import Target
from tuner.workloads import Workload


@dataclass
class KernelSources:
    scheduled: Scheduled
    files: dict[str, str]

    def write(self, directory: str | Path) -> Path:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        for name, text in self.files.items():
            (d / name).write_text(text)
        return d


def generate(workload: Workload, target: Target | str, config: Config) -> KernelSources:
    s = build_schedule(workload, target, config)
    slave = SlavePrinter(s).render()
    files = {"slave.c": slave, "host.c": host_file(s), "swtune_kernel.h": header(s),
             "swtune_slave_api.h": SLAVE_API, "Makefile": makefile(s)}
    return KernelSources(s, files)
