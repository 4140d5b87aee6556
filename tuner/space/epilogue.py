"""The cost of an epilogue that is part of the workload (``Workload.epilogue``, tuner/workloads.py).

``residual_add`` / ``residual_multiply``: the kernel adds a second operand of the output's shape to
each output tile in LDM before its put (a ResNet shortcut), or multiplies by one (a backward pass's
element-wise derivative: relu's mask, tanh's 1 - y^2). The generated code (tuner.aot.fusion.apply_epilogue)
fetches the operand's tile when the tile starts, with DMA gets that mirror the put (same lengths, block
sizes and gaps), into one more LDM buffer the size of one output tile copy; it waits for them at the
put, adds element by element, then puts. So, for either operation:

* DMA: one get per put, the same blocks and bytes as the output's plan (``BufferPlan`` of c), running
  under the tile's compute like a double-buffered fetch (tuner.measure.simulator.kernel_cycles);
* LDM: one output tile more (one copy, also with ``db_c``: the operand is used up before the put);
* compute: per output element two LDM loads and a store on P1 and an add (multiply) on P0, scalar C
  (RESIDUAL_CYCLES_PER_ELEMENT, an assumption [A]);
* rows padded to whole lines (``put_lines``) are refused: the operand is dense, the output pitched.

Unary and per-channel epilogues (bias, batch-norm, relu, ...) change neither DMA nor the workload;
tuner.aot.timing adds their per-element work to the kernel's time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tuner.space.analysis import BufferPlan

NONE, RESIDUAL_ADD, RESIDUAL_MULTIPLY = "none", "residual_add", "residual_multiply"
RESIDUAL_EPILOGUES = {"add": RESIDUAL_ADD, "multiply": RESIDUAL_MULTIPLY}  # the operation -> its epilogue
RESIDUAL_CYCLES_PER_ELEMENT = 3.0  # [A] two LDM loads and a store (P1) per element, the add beside them on P0


@dataclass
class EpiloguePlan:
    """What a workload's epilogue adds to a config (arrays over configs)."""

    get: BufferPlan  # DMA of the second operand's tiles (the busiest CPE's, and over the mesh)
    elements: np.ndarray  # output elements the busiest CPE applies it to
    ldm_bytes: np.ndarray  # LDM per CPE beyond the kernel's own buffers
    invalid: np.ndarray  # configs it cannot run with


def has_epilogue(workload: object) -> bool:
    """Whether ``workload`` fuses a residual operand (its ``epilogue`` other than none)."""
    return getattr(workload, "epilogue", NONE) in RESIDUAL_EPILOGUES.values()


def plan_epilogue(workload: object, plan_c: BufferPlan, dtype_bytes: int, put_lines: np.ndarray
                  ) -> EpiloguePlan | None:
    """The plan of ``workload``'s epilogue given the output's DMA plan; None for ``none``."""
    if not has_epilogue(workload):
        return None
    return EpiloguePlan(get=replace(plan_c), elements=plan_c.bytes / dtype_bytes,
                        ldm_bytes=np.asarray(plan_c.ldm_bytes, dtype=float), invalid=put_lines.astype(bool))
