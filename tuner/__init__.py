"""swtune's domain layer: workloads, targets, Sunway schedule spaces, measurement and search."""

from tuner.errors import InvalidConfigError, InvalidWorkloadError, SwtuneError, UnknownTargetError
from tuner.targets import Target, get_target
from tuner.workloads import Workload, workload_from_json

__all__ = [
    "InvalidConfigError",
    "InvalidWorkloadError",
    "SwtuneError",
    "Target",
    "UnknownTargetError",
    "Workload",
    "get_target",
    "workload_from_json",
]
