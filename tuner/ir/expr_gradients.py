"""An expression operator inside a Relax model, with its gradient derived from the expression.

A user's operator (a function returning te tensors, inputs first) joins a Relax function as
``call_tir_with_grad`` (the PrimFunc form of ``call_te_with_grad``): the forward is the operator's own
PrimFunc, and its ``te_grad_name`` names a hook that ``relax.transform.Gradient`` calls for the
backward: it emits the gradient program derived by tuner/expr/autodiff.py (every
input's gradient) as one ``call_tir`` per stage: each derived operator a one-stage function of its own
(a tuning task, as the compiler reads expressions), each memory pass (padding, compact copy,
assembly) too; the pass hands each input its gradient.

TVM 0.27 never lowers ``call_tir_with_grad`` itself (the forward function keeps it and the VM cannot
emit it): :func:`strip_with_grad` rewrites each one into the plain ``call_tir`` it stands for, once
the gradient has been taken.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tvm
import tvm_ffi
from tvm import relax, te

from tuner.expr.autodiff import differentiate, program_stages
from tuner.expr.workload import script_hash

HOOK_PREFIX = "tvm.relax.te_grad._register."


def _tensor_type(t: Any) -> Any:
    return relax.TensorType([int(s) for s in t.shape], str(t.dtype))


def emit_expression(bb: Any, tensors: Sequence[Any], args: Sequence[Any], name: str | None = None) -> Any:
    """Emit the operator ``tensors`` (inputs, then output) applied to the Relax values ``args`` into the
    function ``bb`` is building; its gradient is the derived one. Returns the output's Relax value."""
    tensors = list(tensors)
    name = name or str(tensors[-1].op.name)
    forward = te.create_prim_func(tensors).with_attr("global_symbol", name)
    gradient = differentiate(tensors, name)
    stages = program_stages(list(gradient.outputs.values()))
    names: list[str] = []
    for t, _, _ in stages:  # unique function names (each residue operator has its own weight copy)
        base = str(t.op.name) if str(t.op.name).startswith(name) else f"{name}_{t.op.name}"
        names.append(base if base not in names else f"{base}_{sum(n.startswith(base) for n in names)}")
    functions = [te.create_prim_func(standalone).with_attr("global_symbol", n)
                 for n, (_, _, standalone) in zip(names, stages)]
    grad_name = f"swtune_{name}_{script_hash(forward.script())}"

    def hook(orig_var: Any, call: Any, output_grad: Any, ctx: Any) -> Any:
        # one call_tir per stage of the gradient program: each derived operator its own function
        # (a tuning task as the compiler reads it), each memory pass too
        values = {x.op: arg for x, arg in zip(gradient.inputs, call.args[1])}
        values[gradient.head.op] = output_grad
        for (t, inputs, _), func, func_name in zip(stages, functions, names):
            gv = ctx.add_func(func, func_name)
            values[t.op] = ctx.emit(relax.call_tir(gv, [values[x.op] for x in inputs], _tensor_type(t)))
        return ctx.emit(relax.Tuple([values[t.op] for t in gradient.outputs.values()]))

    tvm_ffi.register_global_func(HOOK_PREFIX + grad_name, hook, override=True)
    gv = bb.add_func(forward, name)
    return bb.emit(relax.op.call_tir_with_grad(gv, list(args), _tensor_type(tensors[-1]), te_grad_name=grad_name))


@relax.expr_functor.mutator
class _StripWithGrad(relax.PyExprMutator):
    def visit_call_(self, call: Any) -> Any:  # noqa: N802 -- the mutator's visitor name
        call = self.visit_expr_post_order(call)
        if isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.call_tir_with_grad":
            return relax.call_tir(call.args[0], call.args[1], call.ty_args[0])
        return call


def strip_with_grad(mod: Any) -> Any:
    """``mod`` with every ``call_tir_with_grad`` a plain ``call_tir`` (what 0.27 cannot lower)."""
    mutator = _StripWithGrad()
    for gv, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            mod[gv] = mutator.visit_expr(func)
    return mod
