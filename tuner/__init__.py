"""swtune's tuner: workloads and targets, the kinds of task, Sunway schedule spaces, measurement,
search, codegen, the whole-model compiler and the TVM bridge.

Its subpackages stack (highest first; a layer imports only the ones below it, checked by
import-linter in CI, see docs/architecture.md): tune / tune_expr > kinds > bridge > aot > backends >
codegen > search > baseline > measure > space > ir > expr, models > workloads > targets > dma_model,
task_kind > errors. This module re-exports the domain values only.
"""

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
