"""Framework-style execution: a model run the way a framework on a Sunway operator library runs it.

This is the reference swtune's own programs are measured against (``swtune compile --framework-style``,
``swtune train --framework-style``, benchmarks/novel_networks.py). A framework (the PyTorch port on
SWDNNv2) calls one library kernel per primitive operator, each with its own athread spawn and join and
its own pass over memory; nothing is fused across operators. swtune's program instead fuses epilogues
into GEMMs, fuses runs of element-wise kernels and lets consecutive kernels share one spawn.

The reference is made strong on purpose, doing what the framework's library does within one call:

* one library call may take several steps of the compiled graph: a linear layer is one GEMM call with
  its operand's transpose and its bias (``addmm``); a primitive's backward (``tanh_backward``,
  ``log_softmax_backward``) is one call however many element-wise steps the gradient writes; an
  optimizer's update is one multi-tensor call (torch's ``foreach`` kernels). Steps of one call may be
  fused into one CPE kernel and share one spawn; steps of two calls never are, never do;
* every GEMM-like kernel runs at the best schedule the tuning log holds for its plain workload (a
  library as good as swtune's tuner), every memory-bound one at its tuned CPE kernel, or on the MPE
  where that is faster than a kernel with its own spawn.

:class:`LibraryCalls` says which call each step belongs to; :func:`calls_per_binding` gives the forward
(inference) form of a Relax function, and tuner.train.framework_style the training step's.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from tuner.ir.graph import Node


@dataclass(frozen=True)
class LibraryCalls:
    """Which library call runs each step, by the Relax binding the step came from (``Node.source``); a
    step of a binding not listed (a step the compiler made) is a call of its own."""

    of_binding: Mapping[str, int]

    def call(self, n: Node) -> Hashable:
        return self.of_binding.get(n.source, ("own", n.source, id(n)))

    def same_call(self, a: Node, b: Node) -> bool:
        """Whether ``a`` and ``b`` run in one library call (may fuse, may share a spawn)."""
        return self.call(a) == self.call(b)


def _name(v: Any) -> str:
    return str(getattr(v, "name_hint", "") or getattr(v, "name", ""))


# operators a framework runs as views (no kernel of their own: the next kernel reads the strided view)
VIEW_OPS = frozenset({"relax.split", "relax.strided_slice", "relax.permute_dims", "relax.reshape", "relax.squeeze",
                      "relax.expand_dims", "relax.flatten"})


def forward_calls(bindings: list[Any], first: int = 0) -> dict[str, int]:
    """A call per Relax binding, numbered from ``first`` in program order, except where a framework's
    one call runs several: a view (a chunk's slices, a transpose, a reshape) is read by the call that
    first reads it, and a linear layer is one GEMM call with its bias add (``addmm``)."""
    op_of: dict[str, str] = {}
    readers: dict[str, list[str]] = {}
    for b in bindings:
        name = _name(b.var)
        op_of[name] = str(getattr(getattr(b.value, "op", None), "name", type(b.value).__name__))
        for a in [*getattr(b.value, "args", []), getattr(b.value, "tuple_value", None)]:
            if a is not None:
                readers.setdefault(_name(a), []).append(name)
    joins: dict[str, str] = {}  # a binding -> the binding whose call runs it
    for b in bindings:
        name, args = _name(b.var), [_name(a) for a in getattr(b.value, "args", [])]
        products = [a for a in args if op_of.get(a) == "relax.matmul" and readers[a] == [name]]
        if op_of[name] == "relax.add" and products:
            joins[name] = products[0]
        elif (op_of[name] in VIEW_OPS or op_of[name] == "TupleGetItem") and readers.get(name):
            joins[name] = readers[name][0]

    def root(name: str) -> str:
        seen = set()
        while name in joins and name not in seen:
            seen.add(name)
            name = joins[name]
        return name

    calls: dict[str, int] = {}
    numbers: dict[str, int] = {}
    for b in bindings:
        name = _name(b.var)
        calls[name] = numbers.setdefault(root(name), first + len(numbers))
    return calls


def bindings_of(fn: Any) -> list[Any]:
    """The bindings of a Relax function's body, in order."""
    return [b for block in fn.body.blocks for b in block.bindings]


def calls_per_binding(mod: Any) -> LibraryCalls:
    """The framework-style calls of a Relax module's main function (an inference model)."""
    return LibraryCalls(forward_calls(bindings_of(mod["main"])))
