"""What the lowering passes share: a Relax type's static shape, and a step added as TVM lowers an operator.

A step the compiler writes itself (a conv input's padding, a group norm's parts, a folded batch norm's
scale and shift) is a Relax operator legalized on its own: a generic node running its PrimFunc (printed
once per function, tuner.ir.cprint.prim_func), which slices into CPE blocks like any legalized operator, and
carries the expression operator task extraction tunes for that PrimFunc where it is one.
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod
from typing import TYPE_CHECKING, Any

from tuner.errors import InvalidWorkloadError
from tuner.ir.graph import AotError, Node, Tensor, Where
from tuner.ir.passes.lowering_pass import Shape, Value
from tuner.ir.relax_ops import Routing, expression_workload

if TYPE_CHECKING:
    from tuner.ir.relax_reader import RelaxReader


def ints(xs: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in xs)


def tensor_type(ty: Any, what: str) -> tuple[Shape, str]:
    """(shape, dtype) of a Relax tensor type; an AotError when the shape is unknown or dynamic."""
    shape = getattr(ty, "shape", None)
    if shape is None:
        raise AotError(f"{what}: shape unknown ({ty}); the AOT compiler needs static shapes")
    try:
        return ints(shape), str(ty.dtype)
    except (TypeError, ValueError):
        raise AotError(f"{what}: dynamic shape {shape} is not supported") from None


def out_shape(call: Any, name: str) -> Shape:
    """The static shape of a Relax call's result."""
    return tensor_type(call.ty, name)[0]


def flatten(v: Value) -> list[Tensor]:
    """The tensors of a value, nested tuples flattened in order."""
    if isinstance(v, Tensor):
        return [v]
    if isinstance(v, tuple):
        return [t for x in v for t in flatten(x)]
    return []


def expression_of(r: RelaxReader, func: Any, fname: str, op_name: str = "") -> Any:
    """The expression operator task extraction tunes for this PrimFunc (tuner.bridge.extract: GEMM-like
    stages and memory-bound single-stage operators), or None. ``op_name`` is the PrimFunc's name as
    LegalizeOps gives it (part of the workload's key), when ``fname`` is not that name."""
    if fname not in r.expressions:
        try:
            r.expressions[fname] = expression_workload(func, op_name or fname, Routing.MEMORY_BOUND)
        except InvalidWorkloadError:
            r.expressions[fname] = None
    return r.expressions[fname]


def generic_node(r: RelaxReader, func: Any, args: list[Tensor], outs: list[tuple[Shape, str]],
                 name: str, relax_op: str, relax_call: Any, fname: str) -> Value:
    """A node running a legalized PrimFunc (printed once per function name), or a view when the
    function only copies its operand (e.g. a broadcast_to that does not broadcast)."""
    from tuner.ir.cprint.dtypes import ctype
    from tuner.ir.cprint.epilogue import scalar_epilogue
    from tuner.ir.cprint.prim_func import print_prim_func

    if len(args) == 1 and len(outs) == 1 and outs[0][1] == args[0].dtype and prod(outs[0][0]) == args[0].size:
        copy = scalar_epilogue(func, fname, ctype(r.dtype))
        if copy is not None and copy[0] == [f"const {ctype(r.dtype)} _e0 = v;"]:
            r.note(name, relax_op, Where.VIEW, f"a copy: {list(args[0].shape)} -> {list(outs[0][0])}")
            return r.view(args[0], outs[0][0], name)
    if fname not in r.functions:
        try:
            r.functions[fname] = print_prim_func(func, fname, ctype(r.dtype))
        except AotError as exc:
            raise AotError(f"operator {relax_op} (binding {name}): {exc}") from None
    results = [r.new_tensor(shape, dtype, "temp", name if i == 0 else f"{name}.{i}")
               for i, (shape, dtype) in enumerate(outs)]
    r.steps.append(Node("tir", list(args), results[0], {"function": fname, "extra_outputs": results[1:],
                                                        "prim_func": func, "relax_call": relax_call},
                        relax_op, name))
    return results[0] if len(results) == 1 else tuple(results)


def legalized(r: RelaxReader, args: list[Tensor], make_call: Callable[[list[Any]], Any], name: str,
              relax_op: str, expression: bool = True) -> Value:
    """A Relax operator on ``args`` legalized on its own, as TVM lowers it: a generic node, carrying
    the expression operator task extraction tunes for its PrimFunc when ``expression`` and it is one."""
    import tvm_ffi
    from tvm import relax

    from tuner.ir.legalizations import legalize

    vs = [relax.Var(f"x{i}", relax.TensorType(t.shape, t.dtype)) for i, t in enumerate(args)]
    call = make_call(vs)
    bb = relax.BlockBuilder()
    with bb.function("main", vs):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(call))
        bb.emit_func_output(out)
    mod = legalize(bb.get(), skip=())
    (ct,) = [b.value for blk in mod["main"].body.blocks for b in blk.bindings
             if isinstance(b.value, relax.Call) and getattr(b.value.op, "name", "") == "relax.call_tir"]
    func = mod[ct.args[0]]
    info = ct.ty_args[0]
    fname = f"tir_{ct.args[0].name_hint}_{tvm_ffi.structural_hash(func) & 0xffffffff:08x}"
    result = generic_node(r, func, args, [tensor_type(info, name)], name, relax_op, call, fname)
    step = r.steps[-1]
    if expression and isinstance(step, Node) and step.op == "tir" and step.output is result:
        wl = expression_of(r, func, fname, str(ct.args[0].name_hint))
        if wl is not None:
            step.attrs["expr_workload"] = wl
    return result


def synthetic(r: RelaxReader, x: Tensor, make_call: Callable[[Any], Any], name: str, relax_op: str) -> Value:
    """A step the compiler adds itself (e.g. zero-padding a conv input), as a Relax operator on one
    operand legalized like any other: plain C on the MPE or a CPE kernel (tuner.aot.cpe_ops)."""
    return legalized(r, [x], lambda vs: make_call(vs[0]), name, relax_op, expression=False)


def step(r: RelaxReader, args: list[Tensor], make: Callable[[list[Any]], Any], name: str, op: str) -> Tensor:
    """One step of an operator a pass writes as several (``legalized``, never an expression task)."""
    t = legalized(r, args, make, name, op, expression=False)
    assert isinstance(t, Tensor)
    return t


def scale_shift(r: RelaxReader, y: Tensor, scale: Tensor | None, shift: Tensor | None, name: str,
                op: str) -> Tensor:
    """``y * scale + shift`` as two broadcast operators (each slices into CPE blocks; None: left out),
    ``scale`` and ``shift`` already shaped to broadcast along the channel axis."""
    from tvm import relax

    if scale is not None:
        y = legalized(r, [y, scale], lambda vs: relax.op.multiply(vs[0], vs[1]), name, op, expression=False)
    if shift is not None:
        y = legalized(r, [y, shift], lambda vs: relax.op.add(vs[0], vs[1]), name, op, expression=False)
    return y
