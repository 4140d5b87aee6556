"""A memory-bound operator of a model as a tuning task: the node <-> its workload, and its plans.

A generic node (softmax, layer_norm, a padded pool, gelu, mean, ...) that tuner.aot.cpe_ops can cut
into blocks becomes a ``CpeKernelWorkload`` (tuner.space.cpe.workload): its identity is the TVMScript of a
one-operator Relax module that calls the same operator on parameters of the same shapes. Parameters
that are constants in the model are named ``const_<k>`` and bound to zeros again when the module is
rebuilt, so the rebuilt node is planned exactly as the model's is (a constant is never sliced);
0-d constants and Relax scalars stay inline (their values are part of the operator). The same text
comes out of the same operator in any model, through torch or ONNX.

A worker, a compile and the tuning log all rebuild the node from that text and cut it with the same
tuner.aot.cpe_ops planner, keyed by the cut's name (``KernelPlan.cut``: ``axis<k>`` or ``rows``), so
a tuned config names the same blocks everywhere.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import numpy as np

from tuner.ir.graph import Node
from tuner.space.cpe.cuts import plans_for, same_meaning
from tuner.space.cpe.plan import CpeOp, KernelPlan
from tuner.space.cpe.rebuild import module_text, rebuilt
from tuner.space.cpe.workload import CpeKernelWorkload
from tuner.targets import Target, get_target

log = logging.getLogger("tuner.aot")


def _short_name(n: Node) -> str:
    name = re.sub(r"[^a-z0-9_]+", "_", (n.relax_op or "op").lower().removeprefix("relax.").replace(".", "_"))
    return name.strip("_")[:40] or "op"


def has_kernel_task(n: Node) -> bool:
    """Whether a generic node is tuned as a CPE kernel task: not when it is an expression task
    (tuner.bridge.extract tunes it as that) or a conv input's padding (tuner.aot.cpe_layout's kernel)."""
    return n.op in ("tir", "cpe") and n.attrs.get("expr_workload") is None and "pad_h" not in n.attrs


def kernel_workload(n: Node, dtype: str) -> CpeKernelWorkload | None:
    """The task of a generic node (None: it has no Relax form to rebuild, or more than one output)."""
    from tvm import ir, relax

    if n.op not in ("tir", "cpe") or "prim_func" not in n.attrs or n.attrs.get("extra_outputs"):
        return None
    call = n.attrs.get("relax_call")
    params: list[Any] = []
    bb = relax.BlockBuilder()
    if call is not None and getattr(call.op, "name", "") != "relax.call_tir":
        args = []
        for i, arg in enumerate(call.args):
            shape = getattr(getattr(arg, "ty", None), "shape", None)
            if type(arg).__name__ == "PrimValue" or shape is None or (isinstance(arg, ir.Constant) and not len(shape)):
                args.append(arg)  # a scalar: part of the operator
                continue
            if not isinstance(arg, (relax.Var, ir.Constant)):
                return None
            prefix = "const" if isinstance(arg, ir.Constant) else "p"
            v = relax.Var(f"{prefix}_{i}", relax.TensorType(tuple(int(d) for d in shape), str(arg.ty.dtype)))
            params.append(v)
            args.append(v)
        made = relax.Call(call.op, args, call.attrs)
    else:  # a PrimFunc as the importer gave it (e.g. ONNX Clip): call it on parameters
        func = n.attrs["prim_func"].with_attr("global_symbol", "kernel")
        gv = bb.add_func(func, "kernel")
        args = []
        for i, t in enumerate(n.inputs):
            if t.kind == "const" and t.data is not None and t.size == 1:
                args.append(relax.const(np.asarray(t.data).reshape(t.shape), t.dtype))
                continue
            v = relax.Var(f"{'const' if t.kind == 'const' else 'p'}_{i}", relax.TensorType(t.shape, t.dtype))
            params.append(v)
            args.append(v)
        made = relax.call_tir(gv, args, relax.TensorType(n.output.shape, n.output.dtype))
    if not params:
        return None
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(made))
        bb.emit_func_output(out)
    return CpeKernelWorkload(name=_short_name(n), script=module_text(bb.get()), dtype=dtype)


_PLANS: dict[tuple[str, str], dict[str, KernelPlan]] = {}


def workload_plans(wl: CpeKernelWorkload, target: Target | str) -> dict[str, KernelPlan]:
    """The workload's plans by cut name, fastest first (cached per process)."""
    tgt = get_target(target)
    key = (wl.key, tgt.name)
    if key not in _PLANS:
        node, dtype, _ = rebuilt(wl.script)
        _PLANS[key] = {p.cut: p for p in plans_for(node, tgt, dtype) if _keeps_meaning(node, p, tgt, dtype)}
    return _PLANS[key]


def _keeps_meaning(node: Node, plan: KernelPlan, target: Target, dtype: str) -> bool:
    """Slicing keeps the operator's meaning at the cut's smallest block and at its best one. A cut
    along a reduced axis holds only with the whole axis in one block, which is the same kernel as the
    cut before it: such a cut is left out, so that no block size of the space changes the result."""
    best = plan.best(target)
    if best is None:
        return False
    for b in sorted({min(plan.sizes(target)), best.block}):
        op = plan.op(target, b, False, 1)
        if op is None or not same_meaning(node, plan, op, dtype):
            return False
    return True


def tuned_op(n: Node, plans: list[KernelPlan], target: Target, dtype: str, config: dict[str, Any]) -> CpeOp | None:
    """The node's kernel at a tuned config (tuner.space.cpe.space knobs), or None when the config does not
    apply to this node (a cut it does not have, a block that does not fit) or slicing it there would
    change the result."""
    by_cut = {p.cut: p for p in plans}
    try:
        plan = by_cut[str(config["cut"])]
        op = plan.op(target, int(config["block"]), bool(config["db"]), int(config["active"]), int(config["simd"]))
    except (KeyError, TypeError, ValueError):
        return None
    if op is None or not same_meaning(n, plan, op, dtype):
        return None
    op.tuned = True
    return op
