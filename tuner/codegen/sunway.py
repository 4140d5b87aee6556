"""Sources for a real Sunway node: write the kernel's files + Makefile, build/run command templates,
and parsing of the ``SWTUNE_KERNEL_SECONDS=`` line the host program prints."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tuner.space.space import Config
from tuner.targets import Target
from tuner.workloads import Workload

TIMING_RE = re.compile(r"^SWTUNE_KERNEL_SECONDS=([0-9eE+\-.]+)\s*$", re.M)
DEFAULT_BUILD = "make -C {dir} kernel"
DEFAULT_RUN = {"sw26010": "bsub -b -I -q {queue} -n 1 -cgsp 64 -share_size 4096 -host_stack 2048 {dir}/kernel",
               "sw26010-pro": "bsub -I -b -q {queue} -N 1 -cgsp 64 -mpecg 6 -share_size 4096 {dir}/kernel"}
# a kernel split over several core groups: the chip in one process, with memory every CG reaches (the
# SW26010 all-share mode, swCaffe's scripts; the Pro cross segment, RabbitBAM's notes:
# ../shared/sunway/whole-chip-sources.md)
CHIP_RUN = {"sw26010": "bsub -b -I -q {queue} -n 1 -cgsp 64 -share_size 4096 -host_stack 2048 "
                       "-sw3run sw3run-all -cross_size 28000 {dir}/kernel",
            "sw26010-pro": "bsub -I -b -q {queue} -N 1 -cgsp 64 -mpecg 6 -share_size 4096 -cross_size 4096 "
                           "{dir}/kernel"}


def parse_timing(stdout: str) -> float | None:
    """Seconds from the last ``SWTUNE_KERNEL_SECONDS=`` line, or None."""
    found = TIMING_RE.findall(stdout)
    if not found:
        return None
    try:
        return float(found[-1])
    except ValueError:
        return None


@dataclass(frozen=True)
class NodeJob:
    directory: Path
    build_command: str
    run_command: str


def write_kernel(workload: Workload, target: Target | str, config: Config, directory: str | Path,
                 build_template: str = DEFAULT_BUILD, run_template: str | None = None,
                 queue: str = "q_sw_expr") -> NodeJob:
    """Write slave.c, host.c, headers and the Makefile to ``directory``; return the commands to run."""
    from tuner.codegen.sources import generate

    src = generate(workload, target, config)
    d = src.write(directory)
    target = src.scheduled.target
    runs = CHIP_RUN if src.scheduled.cgs > 1 else DEFAULT_RUN
    run = run_template or runs.get(target.base_name, runs["sw26010"])
    return NodeJob(d, build_template.format(dir=d, queue=queue), run.format(dir=d, queue=queue))
