"""Sunway schedule spaces and their analysis: what a config of a workload does on a target.

Owns: knobs and their choices (knobs, choices), the GEMM-like space (space, factory's ``space_for``
for any kind), the operator geometry (ops, the built-in specs gemm and conv2d, expr_geometry and
expr_opgeometry for expressions, expr_space), the vectorised analysis (analysis, compute: the CPE's
pipelines, epilogue) and the memory-bound CPE kernel model (cpe/), which imports tvm through the
front end.
"""

from tuner.space.analysis import REASONS, Analysis
from tuner.space.factory import space_for
from tuner.space.knobs import Knob
from tuner.space.space import Config, ScheduleSpace, config_hash

__all__ = ["REASONS", "Analysis", "Config", "Knob", "ScheduleSpace", "config_hash", "space_for"]
