"""The one packed function a compiled program runs: the ranks' mean of a tensor, an ``allreduce`` node.

A data-parallel training step (tuner.ir.training) averages its gradients over the MPI ranks by calling
``tuner.ir.graph.ALLREDUCE_MEAN`` through ``call_dps_packed``; tuner.aot.mpe prints the node as
``MPI_Allreduce``. Any other extern function is refused, naming it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuner.ir.graph import ALLREDUCE_MEAN, AotError, Tensor
from tuner.ir.passes.lowering_pass import LoweringPass, Value

if TYPE_CHECKING:
    from tuner.ir.relax_reader import RelaxReader


def call_packed(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    """The allreduce node of a ``call_dps_packed`` of the mean over ranks."""
    fn = str(getattr(call.args[0], "global_symbol", call.args[0]))
    if fn != ALLREDUCE_MEAN:
        raise AotError(f"operator relax.{op} (binding {name}) has no AOT implementation: {fn} is an extern "
                       f"function, and the only one a compiled program runs is {ALLREDUCE_MEAN}")
    args = r.expr(call.args[1], name)
    x = args[0] if isinstance(args, tuple) else args
    if not isinstance(x, Tensor):
        raise AotError(f"{name} ({op}): {fn} takes one tensor")
    return r.node("allreduce", [x], x.shape, name, "allreduce (MPI)")


PASS = LoweringPass("allreduce", rules={"call_dps_packed": call_packed})
