"""Plain C on the MPE for the steps that are not tuned kernels (one emitter per node op).

Operators of the model arrive as ``tir`` nodes: a call of the C function printed from their
legalized PrimFunc (tuner.ir.cprint.legalized). The other emitters are the compiler's own layout steps around
the kernels: zero-padding a conv input that stays on the MPE, stripping the line padding of a
kernel's output, and a runtime transpose into the layout a kernel reads.
Each emitter gets the node, ``ref`` (tensor -> C pointer expression) and the C scalar type, and
returns statements; adjacent dimensions every operand walks contiguously are merged into one loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any

from tuner.ir.graph import AotError, Node, Tensor

Ref = Callable[[Tensor], str]


def _strides(shape: Sequence[int]) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def _bcast(shape: Sequence[int], out: Sequence[int]) -> list[int]:
    """Strides of ``shape`` broadcast (numpy rules) to ``out``: 0 along broadcast dimensions."""
    if len(shape) > len(out):
        raise AotError(f"cannot broadcast {list(shape)} to {list(out)}")
    full = [1] * (len(out) - len(shape)) + list(shape)
    st = [0] * (len(out) - len(shape)) + _strides(shape)
    res = []
    for d, (a, o) in enumerate(zip(full, out)):
        if a == o:
            res.append(st[d] if a != 1 else 0)
        elif a == 1:
            res.append(0)
        else:
            raise AotError(f"cannot broadcast {list(shape)} to {list(out)}")
    return res


def _collapse(extents: Sequence[int], strides: Sequence[Sequence[int]]) -> tuple[list[int], list[list[int]]]:
    """Drop extent-1 dimensions and merge neighbours every operand walks as one."""
    ext: list[int] = []
    sts: list[list[int]] = [[] for _ in strides]
    for d, e in enumerate(extents):
        if e == 1:
            continue
        if ext and all(s[-1] == st[d] * e for s, st in zip(sts, strides)):
            ext[-1] *= e
            for s, st in zip(sts, strides):
                s[-1] = st[d]
            continue
        ext.append(e)
        for s, st in zip(sts, strides):
            s.append(st[d])
    return ext, sts


def _nest(extents: Sequence[int], strides: Sequence[Sequence[int]], body: Callable[[list[str]], list[str]],
          indent: str = "  ") -> list[str]:
    """Nested loops over ``extents``; ``body`` gets one index expression per operand."""
    ext, sts = _collapse(extents, strides)
    idx = []
    for s in sts:
        terms = [f"i{d} * {v}L" if v != 1 else f"i{d}" for d, v in enumerate(s) if v != 0]
        idx.append(" + ".join(terms) or "0")
    lines = []
    for d, e in enumerate(ext):
        lines.append(indent * (d + 1) + f"for (long i{d} = 0; i{d} < {e}L; i{d}++)")
    inner = body(idx)
    pre = indent * (len(ext) + 1)
    if len(inner) == 1:
        return lines + [pre + inner[0]]
    return lines + [pre + "{"] + [pre + indent + x for x in inner] + [pre + "}"]


def lit(v: float, ty: str) -> str:
    if v == float("inf"):
        return "INFINITY"
    if v == float("-inf"):
        return "(-INFINITY)"
    return f"{float(v)!r}" + ("f" if ty == "float" else "")


def _fn(name: str, ty: str) -> str:
    return name + ("f" if ty == "float" else "")


def _pad_nchw(n: Node, ref: Ref, ty: str) -> list[str]:
    """A conv input's zero padding kept on the MPE: row copies (memset + memcpy), cheaper there than
    the legalized nn.pad's per-element select (tuner.aot.cpe_ops.offload picks this form)."""
    x = n.inputs[0]
    nn, c, h, w = x.shape
    ph, pw = n.attrs["pad_h"], n.attrs["pad_w"]
    hp, wp = h + 2 * ph, w + 2 * pw
    X, Y = ref(x), ref(n.output)
    return [f"  memset({Y}, 0, sizeof({ty}) * {n.output.size}L);",
            f"  for (long nc = 0; nc < {nn * c}L; nc++)",
            f"    for (long y = 0; y < {h}L; y++)",
            f"      memcpy({Y} + nc * {hp * wp}L + (y + {ph}) * {wp}L + {pw}, {X} + nc * {h * w}L + y * {w}L, "
            f"sizeof({ty}) * {w});"]


def _unpitch(n: Node, ref: Ref, ty: str) -> list[str]:
    rows, cols, pitch = n.attrs["rows"], n.attrs["cols"], n.attrs["pitch"]
    X, Y = ref(n.inputs[0]), ref(n.output)
    return [f"  for (long r = 0; r < {rows}L; r++)",
            f"    memcpy({Y} + r * {cols}L, {X} + r * {pitch}L, sizeof({ty}) * {cols});"]


def _transpose(n: Node, ref: Ref, ty: str) -> list[str]:
    x = n.inputs[0]
    axes = n.attrs["axes"]
    xs = _strides(x.shape)
    X, Y = ref(x), ref(n.output)
    return _nest(n.output.shape, [_strides(n.output.shape), [xs[a] for a in axes]],
                 lambda i: [f"{Y}[{i[0]}] = {X}[{i[1]}];"])


def _pack_b(n: Node, ref: Ref, ty: str) -> list[str]:
    """A non-constant b stored tile after tile for a kernel with the pack knob (tuner.aot.kernels): the
    transpose of b seen as ``shape`` (each axis split into tiles and tile) by ``axes``."""
    shape, axes = n.attrs["shape"], n.attrs["axes"]
    xs = _strides(shape)
    out = [shape[a] for a in axes]
    X, Y = ref(n.inputs[0]), ref(n.output)
    return _nest(out, [_strides(out), [xs[a] for a in axes]], lambda i: [f"{Y}[{i[0]}] = {X}[{i[1]}];"])


def _tir(n: Node, ref: Ref, ty: str) -> list[str]:
    """A legalized operator: one call of its printed PrimFunc (inputs, then outputs)."""
    args = ", ".join(ref(t) for t in [*n.inputs, *n.outputs])
    return [f"  {n.attrs['function']}({args});"]


def _allreduce(n: Node, ref: Ref, ty: str) -> list[str]:
    """The mean over the MPI ranks (a program built with -DSWTUNE_MPI); one process: a copy."""
    X, Y, size = ref(n.inputs[0]), ref(n.output), n.output.size
    mpi_type = "MPI_DOUBLE" if ty == "double" else "MPI_FLOAT"
    return ["#ifdef SWTUNE_MPI",
            "  { int ranks; MPI_Comm_size(MPI_COMM_WORLD, &ranks);",
            f"    MPI_Allreduce({X}, {Y}, {size}, {mpi_type}, MPI_SUM, MPI_COMM_WORLD);",
            f"    for (long i = 0; i < {size}L; i++) {Y}[i] /= ({ty})ranks; }}",
            "#else",
            f"  memmove({Y}, {X}, sizeof({ty}) * {size}L);",
            "#endif"]


EMITTERS: dict[str, Callable[[Node, Ref, str], list[str]]] = {
    "allreduce": _allreduce, "tir": _tir, "pad_nchw": _pad_nchw, "unpitch": _unpitch,
    "transpose": _transpose, "pack_b": _pack_b,
}


def emit_mpe(n: Node, ref: Ref, ty: str) -> list[str]:
    fn = EMITTERS.get(n.op)
    if fn is None:
        raise AotError(f"{n.source} ({n.relax_op}): no MPE code for node {n.op}")
    return fn(n, ref, ty)


class MpeReason(str, Enum):
    """Why a step of the program runs on the MPE (the report says it for each)."""

    FASTER = "faster on the MPE than as a CPE kernel with its spawn"  # tuner.aot.placement sent it back
    NO_CPE_FORM = "no CPE form of this operator"  # nothing lowers it to the CPEs
    NO_SCHEDULE = "no CPE schedule of its space can be generated"  # a GEMM-like expression (tuner.aot.kernels)


def mpe_reason(n: Node) -> str:
    """Why MPE step ``n`` runs there: a ``MpeReason`` value, with the compiler's detail where it gave one."""
    if "mpe_reason" in n.attrs:
        return str(n.attrs["mpe_reason"])
    if "mpe_alt_s" in n.attrs:  # offload gave it a CPE kernel; the least-time placement chose the MPE
        return MpeReason.FASTER.value
    return MpeReason.NO_CPE_FORM.value


def describe(n: Node) -> str:
    """A short description of an MPE node for the report."""
    a: Any = n.attrs
    if n.op == "tir":
        return f"{a['function']} (legalized TIR) {list(n.output.shape)}"
    if n.op == "unpitch":
        return f"strip line padding of the kernel output ({a['pitch']} -> {a['cols']})"
    return f"{n.op} {list(n.output.shape)}"
