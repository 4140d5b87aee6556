"""The model as the AOT compiler sees it: tensors (input, constant, intermediate) and nodes in order.

A plain-Python IR read from the Relax main function (tuner.ir.relax_reader). Views (reshape,
flatten, squeeze, ...) are tensors that share their base tensor's storage; every node writes one new
tensor. Nothing here imports tvm.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from math import prod
from typing import Any

import numpy as np

from tuner.errors import SwtuneError

# the packed function a data-parallel training step calls to average a tensor over the MPI ranks
# (tuner.ir.training emits it; the reader makes it an "allreduce" node; tuner.aot.mpe prints it)
ALLREDUCE_MEAN = "swtune.allreduce_mean"


class AotError(SwtuneError):
    """A model the ahead-of-time compiler cannot compile (the message names the operator)."""



def slave_symbol(index: int) -> str:
    """The slave function of the ``index``-th distinct CPE kernel of a program (tuned, fallback and
    memory-bound kernels share one numbering)."""
    return f"swtune_kernel_{index}"

@dataclass(eq=False)
class Tensor:
    """One value of the model. ``base`` is set for a view: it lives in the base tensor's storage."""

    id: int
    shape: tuple[int, ...]
    dtype: str
    kind: str  # "input" | "const" | "temp"
    name: str
    data: np.ndarray | None = None  # constants only
    base: Tensor | None = None
    index: int = 0  # inputs: position among the function's parameters

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def root(self) -> Tensor:
        t = self
        while t.base is not None:
            t = t.base
        return t

    def __repr__(self) -> str:
        return f"Tensor({self.name}, {self.kind}, {list(self.shape)})"


@dataclass(eq=False)
class Node:
    """One step the host program runs: ``op`` reads ``inputs`` and writes ``output``.

    ``op`` is "kernel" (a tuned slave kernel: attrs carry the workload) or an MPE operator name.
    ``relax_op`` and ``source`` say which Relax call it came from (for the report and errors).
    """

    op: str
    inputs: list[Tensor]
    output: Tensor
    attrs: dict[str, Any] = field(default_factory=dict)
    relax_op: str = ""
    source: str = ""

    @property
    def outputs(self) -> list[Tensor]:
        """Every tensor the node writes (a legalized split writes several)."""
        return [self.output, *self.attrs.get("extra_outputs", [])]


class Where(StrEnum):
    """Where a Relax binding runs in the compiled program: the ``where`` column of the AOT compiler's report
    (tuner.aot.compiler.OpRow). A member equals its string, the text the report and manifest.json show."""

    TUNED_KERNEL = "tuned kernel"  # a GEMM-like kernel at a tuned config
    FALLBACK_KERNEL = "fallback kernel"  # a GEMM-like kernel at a near record or the default schedule
    CPE_MEMORY_BOUND = "CPE (memory-bound)"  # a memory-bound operator moved to the CPEs
    MPE = "MPE"  # plain C on the management core
    # the notes: a binding that became no node
    FUSED_EPILOGUE = "fused epilogue"  # applied to a kernel's output tile
    VIEW = "view (no-op)"  # shares its input's storage
    COMPILE_TIME = "compile time"  # folded when compiling
    REMOVED = "removed (unused)"  # dead code, or composed into a later step


@dataclass
class Note:
    """A Relax call that became no node: a view, a compile-time fold, a fused epilogue, or dead code."""

    source: str
    relax_op: str
    where: Where  # FUSED_EPILOGUE, VIEW, COMPILE_TIME or REMOVED
    detail: str = ""


@dataclass
class Graph:
    """Inputs, outputs and the steps in program order (nodes to run, notes for the report)."""

    inputs: list[Tensor]
    outputs: list[Tensor]
    steps: list[Node | Note]
    dtype: str
    last_id: int = 0  # tensor ids are unique within the graph
    functions: dict[str, Any] = field(default_factory=dict)  # generic operators: name -> printed C

    def new_temp(self, shape: tuple[int, ...], name: str) -> Tensor:
        self.last_id += 1
        return Tensor(self.last_id, tuple(shape), self.dtype, "temp", name)

    def new_const(self, data: np.ndarray, name: str) -> Tensor:
        self.last_id += 1
        data = np.ascontiguousarray(data)
        return Tensor(self.last_id, data.shape, str(data.dtype), "const", name, data=data)

    @property
    def nodes(self) -> list[Node]:
        return [s for s in self.steps if isinstance(s, Node)]

    def consts(self) -> list[Tensor]:
        """Constants some node reads (or the output is), each storage once, in first-use order."""
        seen: dict[int, Tensor] = {}
        for t in [t for n in self.nodes for t in n.inputs] + self.outputs:
            r = t.root
            if r.kind == "const" and r.id not in seen:
                seen[r.id] = r
        return list(seen.values())
