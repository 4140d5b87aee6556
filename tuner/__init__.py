"""swtune's tuner: workloads and targets, the kinds of task, Sunway schedule spaces, measurement,
search, codegen, the whole-model compiler and the TVM bridge.

Its subpackages stack in layers, a layer importing only the ones below it. The stack is written once,
as the import-linter contracts in pyproject.toml (``[tool.importlinter]``, checked in CI);
docs/architecture.md shows it (``python scripts/architecture_docs.py --layers`` prints it). This module
re-exports the domain values only.
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
