"""swtune's Python API: the workflows the ``swtune`` command line runs, each a function that returns a
result object.

    import swtune

    tuned = swtune.tune_model("resnet18", trials=16, db="swtune.db")
    program = swtune.compile_model("resnet18", "out", db="swtune.db")
    print(program.timing.summary())

Modules: ``tuning`` (``tune_model``; ``tune_layers`` and ``tune_on_server`` for any tasks), ``compiling``
(``compile_model``), ``training`` (``train``, ``tune_step``), ``calibration`` (``calibrate``), ``checking``
(``check_op``), ``tuning_log`` (where schedules and profiles are read: ``open_log``), ``results`` (the
result dataclasses), ``progress`` (the hooks a caller overrides to watch a workflow run) and ``errors``
(``ArgumentError``). Each function's docstring is its contract.

Sits between the command line and the service: imports the service, db and tuner; of the packages, only cli
imports it (the benchmarks and the README call it too).
"""

from swtune.calibration import Source, calibrate
from swtune.checking import check_op
from swtune.compiling import compile_model
from swtune.errors import ArgumentError
from swtune.progress import Progress
from swtune.results import (
    Calibration,
    Compiled,
    CompiledStep,
    LayerResult,
    ModelTuning,
    OpCheck,
    ScalingPoint,
    ServiceTuning,
    StepInfo,
    Training,
    TuningPlan,
)
from swtune.training import train, tune_step
from swtune.tuning import load_model, trials_per_round, tune_layers, tune_model, tune_on_server
from swtune.tuning_log import database_url, db_lookup, open_log

compile = compile_model  # swtune.compile reads as the command does: `swtune compile`

__all__ = [
    "ArgumentError",
    "Calibration",
    "Compiled",
    "CompiledStep",
    "LayerResult",
    "ModelTuning",
    "OpCheck",
    "Progress",
    "ScalingPoint",
    "ServiceTuning",
    "Source",
    "StepInfo",
    "Training",
    "TuningPlan",
    "calibrate",
    "check_op",
    "compile",
    "compile_model",
    "database_url",
    "db_lookup",
    "load_model",
    "open_log",
    "train",
    "trials_per_round",
    "tune_layers",
    "tune_model",
    "tune_on_server",
    "tune_step",
]
