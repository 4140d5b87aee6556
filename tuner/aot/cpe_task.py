"""A memory-bound operator of a model as a tuning task: the node <-> its workload, and its plans.

A generic node (softmax, layer_norm, a padded pool, gelu, mean, ...) that tuner.aot.cpe_ops can cut
into blocks becomes a ``CpeKernelWorkload`` (tuner.cpe.workload): its identity is the TVMScript of a
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
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from tuner.aot.cpe_ops import plans_for, same_meaning
from tuner.aot.cpe_plan import CpeOp, KernelPlan
from tuner.aot.graph import Node
from tuner.aot.tir_c import Work
from tuner.cpe.workload import CpeKernelWorkload
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


def module_text(mod: Any) -> str:
    """A module's TVMScript without comment lines: the canonical text of a workload."""
    text = mod.script(show_meta=False)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")).strip() + "\n"


def _parse(script: str) -> Any:
    import tvm

    from tuner.errors import InvalidWorkloadError

    try:
        return tvm.script.from_source(script)
    except Exception as exc:  # noqa: BLE001 - TVM's parser raises many kinds
        raise InvalidWorkloadError(f"the kernel's script does not parse: {str(exc).splitlines()[0][:200]}") from None


def canonical_script(script: str) -> str:
    """The text a submitted script prints back as (whitespace and spelling normalised), so the same
    module gets the same key however it was written."""
    return module_text(_parse(script))


def random_module(wl: CpeKernelWorkload, rng: np.random.Generator | None = None) -> Any:
    """The workload's one-operator Relax module, its ``const_*`` parameters bound to constants (zeros,
    or uniform in [-1, 1) from ``rng``): what the model's node is, up to the constants' values."""
    import tvm
    from tvm import relax

    from tuner.errors import InvalidWorkloadError

    mod = _parse(wl.script)
    if "main" not in [str(g.name_hint) for g in mod.get_global_vars()]:
        raise InvalidWorkloadError("the kernel's script has no main function")
    binds = {}
    for p in mod["main"].params:
        if str(p.name).startswith("const_"):
            shape, dtype = [int(d) for d in p.ty.shape], str(p.ty.dtype)
            data = np.zeros(shape, dtype) if rng is None else rng.uniform(-1, 1, shape).astype(dtype)
            binds[str(p.name)] = tvm.runtime.tensor(data)
    return relax.transform.BindParams("main", binds)(mod) if binds else mod


class Rebuilt(NamedTuple):
    node: Node  # the workload's operator as a graph node (constants bound to zeros)
    dtype: str  # the graph's dtype
    work: Work  # what the whole operator does (its legalized C's counts)


@lru_cache(maxsize=256)
def rebuilt(wl: CpeKernelWorkload) -> Rebuilt:
    """The workload's operator rebuilt from its script alone (what a worker does)."""
    from tuner.aot.graph import AotError
    from tuner.aot.relax_reader import read_relax
    from tuner.errors import InvalidWorkloadError

    mod = random_module(wl)
    try:
        graph = read_relax(mod)
    except AotError as exc:
        raise InvalidWorkloadError(f"the kernel's operator does not compile: {exc}") from None
    nodes = [n for n in graph.nodes if n.op == "tir"]
    if len(nodes) != 1:
        raise InvalidWorkloadError(f"a CPE kernel is one operator; its script has {len(nodes)} generic steps")
    return Rebuilt(nodes[0], graph.dtype, graph.functions[nodes[0].attrs["function"]].work)


_PLANS: dict[tuple[str, str], dict[str, KernelPlan]] = {}


def workload_plans(wl: CpeKernelWorkload, target: Target | str) -> dict[str, KernelPlan]:
    """The workload's plans by cut name, fastest first (cached per process)."""
    tgt = get_target(target)
    key = (wl.key, tgt.name)
    if key not in _PLANS:
        node, dtype, _ = rebuilt(wl)
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
    """The node's kernel at a tuned config (tuner.cpe.space knobs), or None when the config does not
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
