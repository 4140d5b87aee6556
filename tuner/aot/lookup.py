"""What a compile asks the tuning log: the tuned config of a workload, or None (untuned)."""

from __future__ import annotations

from collections.abc import Callable

from tuner.space.space import Config
from tuner.workloads import Workload

Lookup = Callable[[Workload], "Config | None"]
