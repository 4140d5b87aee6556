"""How a memory-bound operator is cut into blocks the CPEs take: every cut (plan) of a node, checked
to keep the operator's meaning.

A generic operator (a ``tir`` node: element-wise, broadcast, normalisation, softmax, pooling,
reduction over trailing axes, ...) whose operands can be cut into independent blocks along one
output axis becomes a CPE kernel. A block fixes the indices before axis ``a`` and takes ``b``
consecutive indices along it (``b`` divides the extent), so every sliced operand's block is one
contiguous range of memory; operands that do not vary along the leading axes (gamma/beta of a
layer_norm) are fetched whole once per CPE; a broadcast operand that varies along the cut (a per-channel
scale [C, 1, 1] of a [1, C, H, W] output, a constant as large as the output) is sliced as its
rank-aligned view; one of extent 1 along the axis that varies with the leading indices (a row's mean
[N, G, 1] of an [N, G, L] output cut along L) is fetched per block as its leading index's elements.
A 2-D pool may also be cut along its output rows: a
block of ``b`` output rows of one plane reads its input rows with the window's halo (rows outside
the plane are filled in LDM with the pool's padding value), so a plane too large for LDM (ResNet's
first max pool, 112x112) still runs on the CPEs. The block's computation is the same Relax operator
legalized again by TVM on the sliced shapes and printed as C (tuner.ir.cprint.legalized) with its scratch in LDM.

Whether slicing preserves the operator's meaning is not assumed from its name: the full and the
sliced PrimFunc are run with TVM's llvm build on random data and a few blocks compared. Each cut is a
KernelPlan (tuner.space.cpe.plan); the compiler (tuner.aot.cpe_ops) runs one of them.
"""

from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from tuner.ir import content_cache, llvm
from tuner.ir.cprint.legalized import CFunction
from tuner.ir.cprint.prim_func import print_prim_func
from tuner.ir.graph import Node
from tuner.space.cpe.plan import CpeOp, KernelPlan, ParamSlice
from tuner.space.cpe.schedule import Window, dma_counts
from tuner.targets import Target

MAX_PARAMS = 16  # pointers in swtune_args.p
MAX_POSITIONS = 32  # positions along the cut a cut check compares (each one llvm run of a block)
# operators whose shape argument is their output's shape: a block's is the block's output shape
VERDICTS = "cut-checks"  # the content cache's entries of same_meaning: b"1" or b"0"
SHAPE_ARG_OPS = ("relax.broadcast_to", "relax.collapse_sum_to")

def _aligned(shape: tuple[int, ...], rank: int) -> tuple[int, ...]:
    """A broadcast operand's shape with leading 1s up to the output's rank (numpy's alignment)."""
    return (1,) * (rank - len(shape)) + tuple(shape)


def _sliced_shape(shape: tuple[int, ...], axis: int, b: int) -> tuple[int, ...]:
    return (1,) * axis + (b,) + tuple(shape[axis + 1:])


def _legalize_sliced(call: Any, shapes: list[tuple[int, ...] | None], dtype: str,
                     out_shape: tuple[int, ...] | None = None, shape_args: frozenset[int] = frozenset()
                     ) -> tuple[Any, list[int]] | None:
    """(PrimFunc of ``call`` on operands of ``shapes`` (None: keep the argument), and for each
    call_tir argument the index of the Relax argument it is) or None when it does not legalize so.
    The arguments ``shape_args`` (a ``broadcast_to``'s or ``collapse_sum_to``'s target shape) become
    ``out_shape``."""
    from tvm import relax

    from tuner.ir.legalizations import legalize

    bb = relax.BlockBuilder()
    params, args, owners = [], [], {}
    for i, (arg, shape) in enumerate(zip(call.args, shapes)):
        if i in shape_args:
            args.append(relax.ShapeExpr(list(out_shape or ())))
            continue
        if shape is None:
            args.append(arg)
            continue
        v = relax.Var(f"p{i}", relax.TensorType(shape, str(getattr(arg.ty, "dtype", dtype))))
        params.append(v)
        args.append(v)
        owners[i] = v
    try:
        with bb.function("main", params):
            with bb.dataflow():
                y = bb.emit(relax.Call(call.op, args, call.attrs))
                out = bb.emit_output(y)
            bb.emit_func_output(out)
        mod = legalize(bb.get(), ())  # every operator: the reader's own ones too (a group_norm's steps)
    except (RuntimeError, ValueError, TypeError, AttributeError):  # TVM's errors are RuntimeErrors
        return None
    bindings = [b for blk in mod["main"].body.blocks for b in blk.bindings]
    calls = [b.value for b in bindings if isinstance(b.value, relax.Call) and getattr(b.value.op, "name", "")
             == "relax.call_tir"]
    if len(calls) != 1:
        return None
    ct = calls[0]
    order = []
    for a in ct.args[1].fields:
        src = next((i for i, arg in enumerate(args) if a.same_as(arg)), None)
        if src is None:
            return None
        order.append(src)
    return mod[ct.args[0]], order


def _run_llvm(func: Any, arrays: list[np.ndarray], outs: list[tuple[int, ...]], dtype: str | list[str]
             ) -> list[np.ndarray]:
    """Run ``func`` with TVM's llvm build (tuner.ir.llvm); ``dtype``: the outputs' (one for all, or one each).
    Unoptimised: a cut check runs each build once, on a few blocks."""
    dtypes = [dtype] * len(outs) if isinstance(dtype, str) else dtype
    return llvm.run(func, arrays, list(zip(outs, dtypes)), opt_level=0)


def _random(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Random data of a tensor's own dtype (a bool mask: both values; integers: small ones)."""
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if np.issubdtype(np.dtype(dtype), np.integer):
        return rng.integers(0, 4, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _block(x: np.ndarray, axis: int, b: int, blk: int, nj: int) -> np.ndarray:
    lead_i, j = divmod(blk, nj)
    v = x.reshape(-1, x.shape[axis], int(prod(x.shape[axis + 1:])))
    return v[lead_i, j * b:(j + 1) * b].reshape(_sliced_shape(x.shape, axis, b))


def checked_blocks(lead: int, nj: int) -> list[int]:
    """The blocks a cut check compares: every position along the cut of the first and of the last leading
    index (at most ``MAX_POSITIONS`` of them, evenly spaced, both ends kept), and the middle block. An
    operator that writes one position of the cut axis (a slice_scatter's extent-1 source) is wrong only
    in the blocks that do not hold it, so the ends and the middle alone can miss it."""
    positions = sorted({0, nj - 1, *np.linspace(0, nj - 1, min(nj, MAX_POSITIONS)).round().astype(int).tolist()})
    return sorted({(lead * nj) // 2, *positions, *((lead - 1) * nj + j for j in positions)})


def _same_meaning(full: Any, sliced: Any, n: Node, plan: list[ParamSlice], axis: int, b: int, nj: int,
                  dtype: str) -> bool:
    """The sliced PrimFunc on ``checked_blocks`` equals the full PrimFunc's result there (llvm, random data)."""
    rng = np.random.default_rng(0)
    ins = [_random(rng, t.shape, t.dtype) for t in n.inputs]

    def _in_rank(x: np.ndarray) -> np.ndarray:
        return x.reshape(_aligned(x.shape, len(n.output.shape)))

    outs = [t.shape for t in n.outputs]
    out_dtypes = [t.dtype for t in n.outputs]
    ref = _run_llvm(full, ins, outs, out_dtypes)
    lead = prod(n.output.shape[:axis])
    for blk in checked_blocks(lead, nj):
        args = [x if not p.sliced else _block(_in_rank(x), axis, 1, blk // nj, 1) if not p.along
                else _block(_in_rank(x), axis, b, blk if p.per_lead else blk % nj, nj) for x, p in zip(ins, plan)]
        got = _run_llvm(sliced, args, [_sliced_shape(s, axis, b) for s in outs], out_dtypes)
        for g, r in zip(got, ref):
            if not np.allclose(g, _block(r, axis, b, blk, nj), rtol=1e-5, atol=1e-6, equal_nan=True):
                return False
    return True


def dma_plan(op: CpeOp, item: int) -> dict[str, int]:
    """DMA requests and bytes of one run of the kernel (what the emulator counts), from the schedule
    analysis (tuner.space.cpe.schedule.dma_counts)."""
    got = dma_counts(op.lead, op.nj * op.block, op.operands(), item, np.array([op.block]), np.array([op.active]))
    return {k: int(v[0]) for k, v in got.items()}


def plans_for(n: Node, target: Target, dtype: str) -> list[KernelPlan]:
    """Every way the node cuts into blocks (one output axis each, and a pool's output rows), fastest
    (by its best configuration) first; empty when it does not slice at all."""
    from tvm import ir, relax

    call = n.attrs.get("relax_call")
    params = [*n.inputs, *n.outputs]
    # a tensor of another dtype (a bool mask, an index) is stored in the model's dtype like every
    # tensor the program keeps (tuner.ir.cprint.legalized: exact for bool and small integers), so the body reads
    # and writes it as such
    if len(params) > MAX_PARAMS:
        return []
    if call is None or getattr(call.op, "name", "") == "relax.call_tir":  # no Relax operator to slice
        plan = _plan_elementwise(n, dtype)
        return [plan] if plan is not None else []
    arg_shapes: list[tuple[int, ...] | None] = []
    shape_args = set()  # a target shape that is the output's (SHAPE_ARG_OPS): the block's output shape
    for i, arg in enumerate(call.args):
        if type(arg).__name__ == "PrimValue" or (isinstance(arg, ir.Constant)
                                                  and getattr(arg.ty, "shape", None) is None):
            arg_shapes.append(None)  # a scalar (PrimValue, IntImm/FloatImm bound): kept as it is
        elif (isinstance(arg, relax.ShapeExpr) and getattr(call.op, "name", "") in SHAPE_ARG_OPS
              and tuple(int(v) for v in arg.values) == tuple(n.output.shape)):
            arg_shapes.append(None)
            shape_args.add(i)
        elif isinstance(arg, (relax.Var, ir.Constant)) and getattr(arg.ty, "shape", None) is not None:
            arg_shapes.append(tuple(int(d) for d in arg.ty.shape))
        else:
            return []  # tuples, shape arguments: not sliced here
    out = n.output.shape
    item = np.dtype(dtype).itemsize
    candidates: list[KernelPlan] = []
    for axis in range(len(out)):
        if out[axis] == 1 or any(o.shape[:axis + 1] != out[:axis + 1] or len(o.shape) != len(out)
                                 for o in n.outputs):
            continue
        sliced_arg: list[bool | None] = []
        lead_args: set[int] = set()
        for i, shape in enumerate(arg_shapes):
            if shape is None:
                sliced_arg.append(None)
            elif len(shape) == len(out) and shape[:axis + 1] == out[:axis + 1]:
                sliced_arg.append(True)
            elif all(d == 1 for d in shape[:max(0, axis + 1 - (len(out) - len(shape)))]):
                sliced_arg.append(False)  # does not vary along the leading axes: fetched whole
            elif (aligned := _aligned(shape, len(out)))[:axis + 1] == out[:axis + 1] \
                    or (aligned[axis] == out[axis] and all(d == 1 for d in aligned[:axis])):
                # a broadcast operand that varies along the cut (a per-channel scale [C, 1, 1] of an
                # [N, C, H, W] output): sliced as its rank-aligned view [1, C, 1, 1], the same block
                # for every leading index when it does not vary along the leading axes
                sliced_arg.append(True)
            elif (aligned := _aligned(shape, len(out)))[:axis] == out[:axis] and aligned[axis] == 1:
                # varies with the leading indices only (a per-row mean [N, G, 1] of an [N, G, L] output
                # cut along L): each leading index's elements, the same for every block along the axis
                sliced_arg.append(True)
                lead_args.add(i)
            else:
                break
        else:
            got = _plan_axis(n, call, dtype, item, axis, arg_shapes, sliced_arg, frozenset(shape_args),
                             frozenset(lead_args))
            if got is not None:
                candidates.append(got)
    if n.relax_op in POOLS:
        rows = _plan_pool_rows(n, call, dtype, item)
        if rows is not None:
            candidates.append(rows)
    timed = [(op.seconds, k, p) for k, p in enumerate(candidates) if (op := p.best(target)) is not None]
    return [p for _, _, p in sorted(timed, key=lambda t: (t[0], t[1]))]


def same_meaning(n: Node, plan: KernelPlan, op: CpeOp, dtype: str) -> bool:
    """Slicing keeps the operator's meaning at the op's block size (TVM llvm on random data)."""
    sliced = plan.sliced_funcs.get(op.block)
    if sliced is None:  # a PrimFunc given as is (_plan_elementwise): element-wise on its TIR
        return True
    full = n.attrs["prim_func"]
    # the verdict depends on the two functions, the shapes and dtypes they run on (the data is random at
    # a fixed seed) and the slicing; a compile of the same model in another process reads it back
    key = content_cache.key_of([
        "same_meaning/2", str(llvm.fingerprint(full)), str(llvm.fingerprint(sliced)), dtype,
        repr([(t.shape, t.dtype) for t in n.inputs]), repr([(t.shape, t.dtype) for t in n.outputs]),
        repr((op.params, op.axis, op.block, op.nj, op.blocks, op.window))])
    known = content_cache.read(VERDICTS, key)
    if known is not None:
        return known == b"1"
    if op.window is not None:
        same = _same_meaning_window(full, sliced, n, op, dtype)
    else:
        same = _same_meaning(full, sliced, n, op.params, op.axis, op.block, op.nj, dtype)
    content_cache.write(VERDICTS, key, b"1" if same else b"0")
    return same


def _print_body(func: Any, lanes: int) -> CFunction | None:
    """A block's PrimFunc as a CPE body; None at ``lanes`` > 1 when no loop of it vectorises (the
    scalar body is that configuration already)."""
    if lanes == 1:
        return print_prim_func(func, "body", "SWTUNE_T", ldm_prefix="g")
    got = print_prim_func(func, "body", "SWTUNE_T", ldm_prefix="g", lanes=lanes)
    return got if got.vector_loops > 0 else None


def _plan_elementwise(n: Node, dtype: str) -> KernelPlan | None:
    """A PrimFunc given as is (e.g. the ONNX importer's call_tir for Clip) that is element-wise on one
    operand (0-d constants aside, checked on its TIR): blocks of consecutive elements."""
    from tuner.ir.cprint.dtypes import ctype_of
    from tuner.ir.cprint.epilogue import scalar_epilogue
    from tuner.ir.cprint.legalized import Work

    if len(n.outputs) != 1:
        return None
    scalars = {i: float(t.data.reshape(-1)[0]) for i, t in enumerate(n.inputs)
               if t.kind == "const" and t.data is not None and t.size == 1}
    operand = [i for i in range(len(n.inputs)) if i not in scalars]
    if len(operand) != 1 or n.inputs[operand[0]].size != n.output.size:
        return None
    ty = ctype_of(dtype)
    got = scalar_epilogue(n.attrs["prim_func"], n.attrs["function"], ty, "v", "_e", operand[0], scalars)
    if got is None:
        return None
    stmts, result, w = got
    size = n.output.size
    k, o = operand[0], len(n.inputs)
    args = ", ".join(f"SWTUNE_T *restrict q{i}" for i in range(len(n.inputs) + 1))

    def body_at(b: int, lanes: int) -> CFunction | None:
        if lanes != 1:
            return None  # the statements are scalar C (tuner.ir.cprint.epilogue.scalar_epilogue)
        code = (f"static void body({args}) {{\n  for (long i = 0; i < {b}L; i++) {{ const SWTUNE_T v = q{k}[i]; "
                f"{' '.join(stmts)} q{o}[i] = {result}; }}\n}}").replace(ty + " _e", "SWTUNE_T _e")
        work = Work(b, b * w.loads, b * w.arith, b * w.transcendental)
        return CFunction("body", code, [dtype] * (o + 1), [(b,)] * (o + 1), work, [], 0)

    plan = [ParamSlice(True, size, 1, 1) if i == k else ParamSlice(False, 0, 1, 1) for i in range(o)]
    plan.append(ParamSlice(True, size, 1, 1))
    return KernelPlan(0, 1, size, plan, o, np.dtype(dtype).itemsize, body_at)


def _plan_axis(n: Node, call: Any, dtype: str, item: int, axis: int, arg_shapes: list[tuple[int, ...] | None],
               sliced_arg: list[bool | None], shape_args: frozenset[int] = frozenset(),
               lead_args: frozenset[int] = frozenset()) -> KernelPlan | None:
    """The node cut along ``axis``; None when the operator does not slice there. ``lead_args``: sliced
    arguments of extent 1 along the axis (one block per leading index, broadcast over the axis)."""
    from tvm import ir

    out = n.output.shape
    lead = prod(out[:axis])
    # constants fetched whole stay constants of the block's PrimFunc; sliced ones become its parameters
    const = [isinstance(a, ir.Constant) and arg_shapes[i] is not None and not sliced_arg[i]
             for i, a in enumerate(call.args)]
    rank = len(out)
    legal: dict[int, tuple[Any, list[int]] | None] = {}

    def legalized(b: int) -> tuple[Any, list[int]] | None:
        if b not in legal:
            shapes = [None if s is None or not sl
                      else _sliced_shape(_aligned(s, rank), axis, 1 if i in lead_args else b)
                      for i, (s, sl) in enumerate(zip(arg_shapes, sliced_arg))]
            shapes = [s if s is not None or arg_shapes[i] is None else arg_shapes[i]  # whole operands keep their shape
                      for i, s in enumerate(shapes)]
            shapes = [None if const[i] or arg_shapes[i] is None else s for i, s in enumerate(shapes)]
            legal[b] = _legalize_sliced(call, shapes, dtype, _sliced_shape(out, axis, b), shape_args)
        return legal[b]

    # the parameter plan (which node input is which Relax argument) from one legalization
    first = legalized(1)
    if first is None:
        return None
    _, order = first
    if len(order) != len(n.inputs):
        return None
    params = []
    for t, src in zip(n.inputs, order):
        shape_of_arg = arg_shapes[src]
        if shape_of_arg is None or (tuple(t.shape) != shape_of_arg and not (t.size == 1 == prod(shape_of_arg))):
            return None  # (a scalar may be 0-d in Relax and [1] in the graph: the same one element)
        sl = bool(sliced_arg[src])
        shape = _aligned(t.shape, rank)
        inner = prod(shape[axis + 1:]) if sl else t.size
        if src in lead_args:
            params.append(ParamSlice(True, 1, inner, inner, along=False))
            continue
        params.append(ParamSlice(sl, shape[axis] if sl else 0, inner, 1 if sl else t.size,
                                 per_lead=not sl or prod(shape[:axis]) == lead))
    for t in n.outputs:
        params.append(ParamSlice(True, t.shape[axis], prod(t.shape[axis + 1:]), 1))
    funcs: dict[int, Any] = {}

    def body_at(b: int, lanes: int) -> CFunction | None:
        got = legalized(b)
        if got is None or got[1] != order:
            return None
        funcs[b] = got[0]
        return _print_body(got[0], lanes)

    return KernelPlan(axis, lead, out[axis], params, len(n.inputs), item, body_at, sliced_funcs=funcs)


POOLS = ("nn.max_pool2d", "nn.avg_pool2d")


def _plan_pool_rows(n: Node, call: Any, dtype: str, item: int) -> KernelPlan | None:
    """A 2-D NCHW pool cut along its output rows: each block reads its rows' input window (the halo
    included), rows outside the plane filled with the padding value in LDM (the lowest finite value
    for max, as TVM's legalized pool pads; 0 for avg counting the padding). None for forms where a
    filled row would not mean the same: ceil mode, avg not counting padding rows."""
    from tvm import relax

    at = call.attrs
    if n.relax_op not in POOLS or len(n.inputs) != 1 or len(n.outputs) != 1 or str(at.layout) != "NCHW" \
            or str(at.out_layout) != "NCHW" or bool(at.ceil_mode):
        return None
    kh, _ = (int(v) for v in at.pool_size)
    sh, _ = (int(v) for v in at.strides)
    dh, _ = (int(v) for v in at.dilation)
    pt, pl, pb, pr = (int(v) for v in at.padding)
    is_max = n.relax_op == "nn.max_pool2d"
    if not is_max and not bool(at.count_include_pad) and (pt or pb):
        return None
    x, y = n.inputs[0], n.output
    nb, c, h, w = x.shape
    oh, ow = y.shape[2], y.shape[3]
    window = Window(sh, (kh - 1) * dh + 1, pt, h)
    fill = float(np.finfo(dtype).min) if is_max else 0.0
    make = relax.op.nn.max_pool2d if is_max else relax.op.nn.avg_pool2d
    funcs: dict[int, Any] = {}

    def body_at(b: int, lanes: int) -> CFunction | None:
        from tuner.ir.legalizations import legalize
        from tuner.ir.relax_reader import KEPT_OPS

        if b not in funcs:
            rows = int(window.rows(np.asarray(b)))
            bb = relax.BlockBuilder()
            v = relax.Var("x", relax.TensorType((1, 1, rows, w), dtype))
            with bb.function("main", [v]):
                with bb.dataflow():
                    z = bb.emit(make(v, at.pool_size, at.strides, (0, pl, 0, pr), at.dilation, False,
                                     bool(at.count_include_pad), "NCHW", "NCHW"))
                    o = bb.emit_output(z)
                bb.emit_func_output(o)
            mod = legalize(bb.get(), KEPT_OPS)
            calls = [bd.value for blk in mod["main"].body.blocks for bd in blk.bindings
                     if isinstance(bd.value, relax.Call) and getattr(bd.value.op, "name", "") == "relax.call_tir"]
            if len(calls) != 1 or tuple(int(d) for d in calls[0].ty.shape) != (1, 1, b, ow):
                return None
            funcs[b] = mod[calls[0].args[0]]
        return _print_body(funcs[b], lanes)

    params = [ParamSlice(True, h, w, 1), ParamSlice(True, oh, ow, 1)]
    return KernelPlan(2, nb * c, oh, params, 1, item, body_at, window, fill, sliced_funcs=funcs)


def _window_block(x: np.ndarray, op: CpeOp, blk: int) -> np.ndarray:
    """Block ``blk``'s input window of an NCHW tensor, rows outside it filled (as the kernel does)."""
    assert op.window is not None
    lead_i, j = divmod(blk, op.nj)
    plane = x.reshape(-1, x.shape[2], x.shape[3])[lead_i]
    rows = int(op.window.rows(np.asarray(op.block)))
    r0 = j * op.block * op.window.stride - op.window.pad
    got = np.full((rows, x.shape[3]), op.fill, dtype=x.dtype)
    lo, hi = max(r0, 0), min(r0 + rows, x.shape[2])
    got[lo - r0:hi - r0] = plane[lo:hi]
    return got.reshape(1, 1, rows, x.shape[3])


def _same_meaning_window(full: Any, sliced: Any, n: Node, op: CpeOp, dtype: str) -> bool:
    """The row-sliced pool on its filled windows equals the full pool there (llvm, random data)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n.inputs[0].shape).astype(dtype)
    (ref,) = _run_llvm(full, [x], [n.output.shape], dtype)
    for blk in sorted({0, op.nj - 1, op.blocks - 1, op.blocks // 2}):
        (got,) = _run_llvm(sliced, [_window_block(x, op, blk)], [(1, 1, op.block, n.output.shape[3])], dtype)
        if not np.allclose(got, _block(ref, 2, op.block, blk, op.nj), rtol=1e-5, atol=1e-6, equal_nan=True):
            return False
    return True
