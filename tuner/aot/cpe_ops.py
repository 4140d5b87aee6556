"""Memory-bound operators on the CPEs: a legalized operator run block by block on the 64 CPEs.

A generic operator (a ``tir`` node: element-wise, broadcast, normalisation, softmax, pooling,
reduction over trailing axes, ...) whose operands can be cut into independent blocks along one
output axis becomes a CPE kernel. A block fixes the indices before axis ``a`` and takes ``b``
consecutive indices along it (``b`` divides the extent), so every sliced operand's block is one
contiguous range of memory; operands that do not vary along the leading axes (gamma/beta, a per-
channel bias) are fetched whole once per CPE. The block's computation is the same Relax operator
legalized again by TVM on the sliced shapes and printed as C (tuner.aot.tir_c) with its scratch in
LDM. Each CPE takes blocks round-robin: DMA get of its operand blocks, compute, DMA put.

Whether slicing preserves the operator's meaning is not assumed from its name: the full and the
sliced PrimFunc are run with TVM's llvm build on random data and a few blocks compared, at compile
time. The schedule is chosen, not tuned: the largest ``b`` that fits the LDM budget with at least 64
blocks (when there are that many rows). A kernel replaces the MPE step only when its simulated time
(spawn/join, DMA of the busiest CPE from the fitted DMA model, scalar compute) is lower.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum
from math import prod
from typing import Any

import numpy as np

from tuner.aot.cpe_layout import PadOp, RowCopyOp, TransposeOp, plan_pad, plan_rowcopy, plan_transpose
from tuner.aot.graph import Graph, Node, slave_symbol
from tuner.aot.tir_c import CFunction, print_prim_func
from tuner.targets import Target

log = logging.getLogger("tuner.aot")

MAX_PARAMS = 16  # pointers in swtune_args.p
CPES = 64


class CpeMode(str, Enum):
    """Which memory-bound operators become CPE kernels."""

    FASTER = "faster"  # those whose simulated kernel time beats the MPE's
    ALL = "all"  # every one that slices (tests: exercise the kernels on small tensors)
    NONE = "none"  # none: everything generic stays plain C on the MPE


@dataclass
class ParamSlice:
    sliced: bool
    ext: int  # extent along the block axis (sliced operands)
    inner: int  # elements after the block axis
    elems: int  # elements held in LDM


@dataclass
class CpeOp:
    body: CFunction  # the computation of one block
    axis: int
    block: int
    lead: int  # product of the output extents before the axis
    nj: int  # blocks along the axis
    params: list[ParamSlice]  # inputs, then outputs (the node's order)
    n_inputs: int
    ldm_bytes: int
    seconds: float  # simulated time of the kernel
    index: int = -1  # kernel number in slave.c (set when emitted)

    @property
    def blocks(self) -> int:
        return self.lead * self.nj

    @property
    def name(self) -> str:
        return slave_symbol(self.index)


def _sliced_shape(shape: tuple[int, ...], axis: int, b: int) -> tuple[int, ...]:
    return (1,) * axis + (b,) + tuple(shape[axis + 1:])


def _legalize_sliced(call: Any, shapes: list[tuple[int, ...] | None], dtype: str) -> tuple[Any, list[int]] | None:
    """(PrimFunc of ``call`` on operands of ``shapes`` (None: keep the argument), and for each
    call_tir argument the index of the Relax argument it is) or None when it does not legalize so."""
    import tvm
    from tvm import relax

    from tuner.aot.relax_reader import legalize

    bb = relax.BlockBuilder()
    params, args, owners = [], [], {}
    for i, (arg, shape) in enumerate(zip(call.args, shapes)):
        if shape is None:
            args.append(arg)
            continue
        v = relax.Var(f"p{i}", relax.TensorType(shape, dtype))
        params.append(v)
        args.append(v)
        owners[i] = v
    try:
        with bb.function("main", params):
            with bb.dataflow():
                y = bb.emit(relax.Call(call.op, args, call.attrs))
                out = bb.emit_output(y)
            bb.emit_func_output(out)
        mod = legalize(bb.get())
    except (tvm.TVMError, ValueError, TypeError, AttributeError):
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


def _run(func: Any, arrays: list[np.ndarray], outs: list[tuple[int, ...]], dtype: str) -> list[np.ndarray]:
    import tvm

    exe = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target="llvm")
    res = [tvm.runtime.tensor(np.zeros(s, dtype=dtype)) for s in outs]
    exe["main"](*[tvm.runtime.tensor(np.ascontiguousarray(a)) for a in arrays], *res)
    return [r.numpy() for r in res]


def _block(x: np.ndarray, axis: int, b: int, blk: int, nj: int) -> np.ndarray:
    lead_i, j = divmod(blk, nj)
    v = x.reshape(-1, x.shape[axis], int(prod(x.shape[axis + 1:])))
    return v[lead_i, j * b:(j + 1) * b].reshape(_sliced_shape(x.shape, axis, b))


def _same_meaning(full: Any, sliced: Any, n: Node, plan: list[ParamSlice], axis: int, b: int, nj: int,
                  dtype: str) -> bool:
    """The sliced PrimFunc on a few blocks equals the full PrimFunc's result there (llvm, random data)."""
    rng = np.random.default_rng(0)
    ins = [rng.standard_normal(t.shape).astype(dtype) for t in n.inputs]
    outs = [t.shape for t in n.outputs]
    ref = _run(full, ins, outs, dtype)
    lead = prod(n.output.shape[:axis])
    for blk in sorted({0, lead * nj - 1, (lead * nj) // 2}):
        args = [_block(x, axis, b, blk, nj) if p.sliced else x for x, p in zip(ins, plan)]
        got = _run(sliced, args, [_sliced_shape(s, axis, b) for s in outs], dtype)
        for g, r in zip(got, ref):
            if not np.allclose(g, _block(r, axis, b, blk, nj), rtol=1e-5, atol=1e-6, equal_nan=True):
                return False
    return True


def dma_plan(op: CpeOp, item: int) -> dict[str, int]:
    """DMA requests and bytes of one run of the kernel (what the emulator counts): each active CPE
    fetches the whole operands once, then every block gets its sliced inputs and puts its outputs."""
    active = min(CPES, op.blocks)
    whole = [p for p in op.params[:op.n_inputs] if not p.sliced]
    sliced_in = [p for p in op.params[:op.n_inputs] if p.sliced]
    outs = op.params[op.n_inputs:]
    return {"get_reqs": active * len(whole) + op.blocks * len(sliced_in),
            "get_bytes": item * (active * sum(p.elems for p in whole) + op.blocks * sum(p.elems for p in sliced_in)),
            "put_reqs": op.blocks * len(outs), "put_bytes": item * op.blocks * sum(p.elems for p in outs)}


def _kernel_seconds(target: Target, op: CpeOp, item: int) -> float:
    from tuner.measure.simulator import dma_time

    active = min(CPES, op.blocks)
    per_cpe = -(-op.blocks // CPES)
    t = target.spawn_join_s
    for p in op.params[:op.n_inputs]:
        if not p.sliced:
            t += dma_time(target, "get", p.elems * item, active_cpes=active)
    step = 0.0
    for k, p in enumerate(op.params):
        if p.sliced:
            step += dma_time(target, "get" if k < op.n_inputs else "put", p.elems * item, active_cpes=active)
    w = op.body.work
    cycles = w.arith + w.loads + w.stores + target.cpe_transcendental_cycles * w.transcendental
    step += cycles / target.clock_hz
    return t + per_cpe * step


def _divisors(n: int) -> list[int]:
    return sorted({d for i in range(1, int(n ** 0.5) + 1) if n % i == 0 for d in (i, n // i)}, reverse=True)


def plan_node(n: Node, target: Target, dtype: str) -> CpeOp | None:
    """A CPE kernel for a generic node, or None (it stays on the MPE)."""
    from tvm import ir, relax

    call = n.attrs.get("relax_call")
    params = [*n.inputs, *n.outputs]
    if len(params) > MAX_PARAMS or any(t.dtype != dtype for t in params):
        return None
    if call is None or getattr(call.op, "name", "") == "relax.call_tir":  # no Relax operator to slice
        return _plan_elementwise(n, target, dtype)
    arg_shapes: list[tuple[int, ...] | None] = []
    for arg in call.args:
        if type(arg).__name__ == "PrimValue" or (isinstance(arg, ir.Constant)
                                                  and getattr(arg.ty, "shape", None) is None):
            arg_shapes.append(None)  # a scalar (PrimValue, IntImm/FloatImm bound): kept as it is
        elif isinstance(arg, (relax.Var, ir.Constant)) and getattr(arg.ty, "shape", None) is not None:
            arg_shapes.append(tuple(int(d) for d in arg.ty.shape))
        else:
            return None  # tuples, shape arguments: not sliced here
    out = n.output.shape
    item = np.dtype(dtype).itemsize
    candidates: list[tuple[CpeOp, Any]] = []
    for axis in range(len(out)):
        if out[axis] == 1 or any(o.shape[:axis + 1] != out[:axis + 1] or len(o.shape) != len(out)
                                 for o in n.outputs):
            continue
        sliced_arg: list[bool | None] = []
        for shape in arg_shapes:
            if shape is None:
                sliced_arg.append(None)
            elif len(shape) == len(out) and shape[:axis + 1] == out[:axis + 1]:
                sliced_arg.append(True)
            elif all(d == 1 for d in shape[:max(0, axis + 1 - (len(out) - len(shape)))]):
                sliced_arg.append(False)  # does not vary along the leading axes: fetched whole
            else:
                break
        else:
            got = _plan_axis(n, call, target, dtype, item, axis, arg_shapes, sliced_arg)
            if got is not None:
                candidates.append(got)
    for op, sliced_func in sorted(candidates, key=lambda c: c[0].seconds):  # fastest whose meaning holds
        if _same_meaning(n.attrs["prim_func"], sliced_func, n, op.params, op.axis, op.block, op.nj, dtype):
            return op
        log.info("%s (%s): slicing along axis %d changes its result", n.source, n.relax_op, op.axis)
    return None


def _plan_elementwise(n: Node, target: Target, dtype: str) -> CpeOp | None:
    """A PrimFunc given as is (e.g. the ONNX importer's call_tir for Clip) that is element-wise on one
    operand (0-d constants aside, checked on its TIR): blocks of consecutive elements."""
    from tuner.aot.tir_c import Work, ctype_of, scalar_epilogue

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
    size, item = n.output.size, np.dtype(dtype).itemsize
    fits = [d for d in _divisors(size) if 2 * d * item <= target.ldm_budget_bytes]
    busy = [d for d in fits if size // d >= CPES]
    if not fits:
        return None
    b = busy[0] if busy else fits[-1]
    k, o = operand[0], len(n.inputs)
    args = ", ".join(f"SWTUNE_T *restrict q{i}" for i in range(len(n.inputs) + 1))
    code = (f"static void body({args}) {{\n  for (long i = 0; i < {b}L; i++) {{ const SWTUNE_T v = q{k}[i]; "
            f"{' '.join(stmts)} q{o}[i] = {result}; }}\n}}").replace(ty + " _e", "SWTUNE_T _e")
    work = Work(b, b * w.loads, b * w.arith, b * w.transcendental)
    body = CFunction("body", code, [dtype] * (o + 1), [(b,)] * (o + 1), work, [], 0)
    plan = [ParamSlice(True, size, 1, b) if i == k else ParamSlice(False, 0, 1, 1) for i in range(o)]
    plan.append(ParamSlice(True, size, 1, b))
    op = CpeOp(body, 0, b, 1, size // b, plan, o, (2 * b + len(scalars)) * item, 0.0)
    op.seconds = _kernel_seconds(target, op, item)
    return op


def _plan_axis(n: Node, call: Any, target: Target, dtype: str, item: int, axis: int,
               arg_shapes: list[tuple[int, ...] | None], sliced_arg: list[bool | None]) -> tuple[CpeOp, Any] | None:
    """The largest block along ``axis`` that fits the LDM budget (keeping all CPEs busy when the axis
    has enough rows), with its sliced PrimFunc; None when the operator does not slice there."""
    from tvm import ir

    out = n.output.shape
    lead = prod(out[:axis])
    tries = 0
    # which node inputs are sliced (an input matching the output's leading dims; others are whole)
    sliced_by_input = [len(t.shape) == len(out) and tuple(t.shape[:axis + 1]) == out[:axis + 1] for t in n.inputs]
    for b in _divisors(out[axis]):
        nj = out[axis] // b
        if lead * nj < CPES and b > 1 and lead * out[axis] >= CPES:
            continue  # keep every CPE busy when there are enough rows
        operands = [t for t, sl in zip(n.inputs, sliced_by_input) if sl] + list(n.outputs)
        whole = sum(t.size for t, sl in zip(n.inputs, sliced_by_input) if not sl)
        if (sum(b * prod(t.shape[axis + 1:]) for t in operands) + whole) * item > target.ldm_budget_bytes:
            continue  # cannot fit before any scratch: no need to legalize
        shapes = [None if s is None or not sl else _sliced_shape(s, axis, b) for s, sl in zip(arg_shapes, sliced_arg)]
        shapes = [s if s is not None or arg_shapes[i] is None else arg_shapes[i]  # whole operands keep their shape
                  for i, s in enumerate(shapes)]
        const = [isinstance(a, ir.Constant) and arg_shapes[i] is not None for i, a in enumerate(call.args)]
        shapes = [None if const[i] or arg_shapes[i] is None else s for i, s in enumerate(shapes)]
        if any(const[i] and sliced_arg[i] for i in range(len(shapes))):
            return None  # a constant as large as the output: not handled
        got = _legalize_sliced(call, shapes, dtype)
        if got is None:
            return None
        sliced_func, order = got
        if len(order) != len(n.inputs):
            return None
        plan = []
        for t, src in zip(n.inputs, order):
            if arg_shapes[src] is None or tuple(t.shape) != arg_shapes[src]:
                return None
            sl = bool(sliced_arg[src])
            inner = prod(t.shape[axis + 1:]) if sl else t.size
            plan.append(ParamSlice(sl, t.shape[axis] if sl else 0, inner, b * inner if sl else t.size))
        for t in n.outputs:
            inner = prod(t.shape[axis + 1:])
            plan.append(ParamSlice(True, t.shape[axis], inner, b * inner))
        body = print_prim_func(sliced_func, "body", "SWTUNE_T", ldm_prefix="g")
        ldm = sum(p.elems for p in plan) * item + body.scratch_bytes
        if ldm > target.ldm_budget_bytes:
            tries += 1
            if tries > 6:
                return None
            continue
        op = CpeOp(body, axis, b, lead, nj, plan, len(n.inputs), ldm, 0.0)
        op.seconds = _kernel_seconds(target, op, item)
        return op, sliced_func
    return None


def slave_text(op: CpeOp | PadOp | RowCopyOp | TransposeOp, ty: str) -> str:
    """The CPE kernel in the form of a generated slave file (merged by tuner.aot.kernels)."""
    if isinstance(op, (PadOp, RowCopyOp, TransposeOp)):
        return op.slave_text(ty)
    lines = [f"#define SWTUNE_T {ty}"]
    for k, p in enumerate(op.params):
        lines.append(f"__thread_local {ty} P{k}_ldm[{max(1, p.elems)}];")
    lines.append("__thread_local volatile SW_REPLY_T g_reply[1];")
    lines += op.body.ldm_decls
    body = op.body.code.replace("static void body(", f"static void {op.name}_body(", 1)
    lines.append(body)
    item = f"sizeof({ty})"
    ldm_args = ", ".join(f"P{k}_ldm" for k in range(len(op.params)))
    lines += ["void swtune_kernel(swtune_args *_arg) {",
              "  int n_rep = 0;",
              f"  if (_MYID >= {op.blocks}) return;  /* fewer blocks than CPEs */",
              "  g_reply[0] = 0;"]
    for k, p in enumerate(op.params[:op.n_inputs]):
        if not p.sliced:
            lines.append(f"  SW_GET(_arg->p[{k}], P{k}_ldm, {p.elems} * {item}, 0, 0, &g_reply[0]); n_rep++;")
    lines += ["  SW_WAIT(&g_reply[0], n_rep);",
              f"  for (long blk = _MYID; blk < {op.blocks}L; blk += {CPES}) {{",
              f"    const long lead = blk / {op.nj}L, j = blk % {op.nj}L;"]

    def off(p: ParamSlice) -> str:
        return f"(lead * {p.ext}L + j * {op.block}L) * {p.inner}L"

    for k, p in enumerate(op.params[:op.n_inputs]):
        if p.sliced:
            lines.append(f"    SW_GET(_arg->p[{k}] + {off(p)}, P{k}_ldm, {p.elems} * {item}, 0, 0, &g_reply[0]); "
                         "n_rep++;")
    lines += ["    SW_WAIT(&g_reply[0], n_rep);", f"    {op.name}_body({ldm_args});"]
    for k, p in enumerate(op.params[op.n_inputs:], start=op.n_inputs):
        lines.append(f"    SW_PUT(P{k}_ldm, _arg->p[{k}] + {off(p)}, {p.elems} * {item}, 0, 0, &g_reply[0]); n_rep++;")
    lines += ["    SW_WAIT(&g_reply[0], n_rep);", "  }", "}", "#undef SWTUNE_T"]
    return "\n".join(lines) + "\n"


def offload(graph: Graph, target: Target, mode: CpeMode = CpeMode.FASTER) -> int:
    """Turn generic nodes into ``cpe`` nodes as ``mode`` says; returns how many."""
    if mode == CpeMode.NONE:
        return 0
    from tuner.aot.launch_groups import phase_seconds
    from tuner.aot.timing import mpe_seconds

    item = np.dtype(graph.dtype).itemsize
    cache: dict[str, CpeOp | None] = {}
    pads: dict[tuple[tuple[int, ...], int, int], PadOp | None] = {}
    count = 0
    for n in graph.nodes:
        if n.op in ("unpitch", "transpose"):  # layout copies: kernels of their own (tuner.aot.cpe_layout)
            a = n.attrs
            alt = mpe_seconds(n, graph, target, item)
            rc = (plan_rowcopy(a["rows"], a["cols"], a["pitch"], target, item) if n.op == "unpitch"
                  else plan_transpose(n.inputs[0].shape, a["axes"], target, item))
            if rc is not None and (mode == CpeMode.ALL or rc.seconds + phase_seconds(target) < alt):
                n.attrs.update(cpe=rc, mpe_alt_s=alt, mpe_op=n.op)
                n.op = "cpe"
                count += 1
            continue
        if n.op != "tir":
            continue
        # the same PrimFunc may read a constant in one place and an activation in another
        key = n.attrs["function"] + ":" + "".join("c" if t.kind == "const" else "t" for t in n.inputs)
        if key not in cache:
            try:
                cache[key] = plan_node(n, target, graph.dtype)
            except Exception as exc:  # noqa: BLE001 - a failed plan keeps the operator on the MPE
                log.info("%s (%s): no CPE kernel (%s: %s)", n.source, n.relax_op, type(exc).__name__, exc)
                cache[key] = None
        op: CpeOp | PadOp | None = cache[key]
        if "pad_h" in n.attrs:  # a conv input's padding: on the MPE it would be row copies
            n.op = "pad_nchw"
            alt = mpe_seconds(n, graph, target, item)
            n.op = "tir"
            pkey = (n.inputs[0].shape, n.attrs["pad_h"], n.attrs["pad_w"])
            if pkey not in pads and len(n.inputs) == 1:
                pads[pkey] = plan_pad(n.inputs[0].shape, n.attrs["pad_h"], n.attrs["pad_w"], target, item)
            pad = pads.get(pkey)  # the row-block padding kernel, when faster than the legalized nn.pad sliced
            if pad is not None and (op is None or pad.seconds < op.seconds):
                op = pad
        else:
            alt = mpe_seconds(n, graph, target, item)
        # it will share a spawn with a neighbouring CPE step (tuner.aot.launch_groups; a lone one
        # that turns out slower than the MPE goes back there in tuner.aot.compiler.assign_cpe_kernels)
        if op is None or (mode == CpeMode.FASTER and op.seconds + phase_seconds(target) >= alt):
            if "pad_h" in n.attrs and mode != CpeMode.ALL:
                n.op = "pad_nchw"  # the MPE's row-copy form of a conv input's padding
            continue
        n.attrs.update(cpe=op, mpe_alt_s=alt, mpe_op="pad_nchw" if "pad_h" in n.attrs else "tir")
        n.op = "cpe"
        count += 1
    return count
