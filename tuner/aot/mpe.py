"""Plain C on the MPE for the operators that are not tuned kernels (one emitter per node op).

Each emitter gets the node, ``ref`` (tensor -> C pointer expression) and the C scalar type, and
returns statements. Shapes are static, so loop bounds and strides are literals; adjacent dimensions
that every operand walks contiguously are merged first, so an element-wise op is one flat loop.
Arithmetic follows TVM's legalized operators (float accumulation, max pooling over the valid
window, average pooling dividing by the valid or the padded count as the attribute says).
"""

from __future__ import annotations

from math import prod
from typing import Any, Callable, Sequence

from tuner.aot.graph import AotError, Node, Tensor

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


def _binary(n: Node, ref: Ref, ty: str) -> list[str]:
    a, b = n.inputs
    out = n.output.shape
    fn = n.attrs["fn"]
    ops = {"add": "{} + {}", "subtract": "{} - {}", "multiply": "{} * {}", "divide": "{} / {}",
           "maximum": "({0} > {1} ? {0} : {1})", "minimum": "({0} < {1} ? {0} : {1})",
           "power": _fn("pow", ty) + "({}, {})"}
    if fn not in ops:
        raise AotError(f"{n.source}: binary op {fn} has no MPE implementation")
    A, B, Y = ref(a), ref(b), ref(n.output)
    return _nest(out, [_strides(out), _bcast(a.shape, out), _bcast(b.shape, out)],
                 lambda i: [f"{Y}[{i[0]}] = " + ops[fn].format(f"{A}[{i[1]}]", f"{B}[{i[2]}]") + ";"])


def _unary_expr(n: Node, v: str, ty: str) -> str:
    fn = n.attrs["fn"]
    one, zero, half = lit(1, ty), lit(0, ty), lit(0.5, ty)
    table = {
        "relu": f"({v} > {zero} ? {v} : {zero})",
        "sigmoid": f"{one} / ({one} + {_fn('exp', ty)}(-{v}))",
        "tanh": f"{_fn('tanh', ty)}({v})",
        "exp": f"{_fn('exp', ty)}({v})",
        "sqrt": f"{_fn('sqrt', ty)}({v})",
        "rsqrt": f"{one} / {_fn('sqrt', ty)}({v})",
        "negative": f"-{v}",
        "abs": f"{_fn('fabs', ty)}({v})",
        "silu": f"{v} / ({one} + {_fn('exp', ty)}(-{v}))",
        "gelu": f"{half} * {v} * ({one} + {_fn('erf', ty)}({v} * {lit(0.7071067811865476, ty)}))",
    }
    if fn == "clip":
        lo, hi = lit(n.attrs["lo"], ty), lit(n.attrs["hi"], ty)
        return f"({v} < {lo} ? {lo} : ({v} > {hi} ? {hi} : {v}))"
    if fn not in table:
        raise AotError(f"{n.source}: unary op {fn} has no MPE implementation")
    return table[fn]


def _unary(n: Node, ref: Ref, ty: str) -> list[str]:
    X, Y = ref(n.inputs[0]), ref(n.output)
    return [f"  for (long i = 0; i < {n.output.size}L; i++) {{ const {ty} v = {X}[i]; "
            f"{Y}[i] = {_unary_expr(n, 'v', ty)}; }}"]


def _channel_affine(n: Node, ref: Ref, ty: str) -> list[str]:
    x, scale, shift = n.inputs
    ax = n.attrs["axis"]
    outer, c, inner = prod(x.shape[:ax]), x.shape[ax], prod(x.shape[ax + 1:])
    X, S, B, Y = ref(x), ref(scale), ref(shift), ref(n.output)
    return [f"  for (long o = 0; o < {outer}L; o++)",
            f"    for (long c = 0; c < {c}L; c++) {{",
            f"      const {ty} s = {S}[c], b = {B}[c];",
            f"      const {ty} *x = {X} + (o * {c}L + c) * {inner}L; {ty} *y = {Y} + (o * {c}L + c) * {inner}L;",
            f"      for (long i = 0; i < {inner}L; i++) y[i] = x[i] * s + b;",
            "    }"]


def _pad_nchw(n: Node, ref: Ref, ty: str) -> list[str]:
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


def _pool2d(n: Node, ref: Ref, ty: str) -> list[str]:
    x = n.inputs[0]
    nn, c, h, w = x.shape
    _, _, oh, ow = n.output.shape
    kh, kw = n.attrs["pool"]
    sh, sw = n.attrs["strides"]
    dh, dw = n.attrs["dilation"]
    pt, pl, pb, pr = n.attrs["padding"]
    is_max = n.attrs["mode"] == "max"
    X, Y = ref(x), ref(n.output)
    init = "(-INFINITY)" if is_max else lit(0, ty)
    acc = "if (v > acc) acc = v;" if is_max else "acc += v;"
    lines = [f"  for (long nc = 0; nc < {nn * c}L; nc++) {{",
             f"    const {ty} *x = {X} + nc * {h * w}L; {ty} *y = {Y} + nc * {oh * ow}L;",
             f"    for (int oy = 0; oy < {oh}; oy++)",
             f"      for (int ox = 0; ox < {ow}; ox++) {{",
             f"        {ty} acc = {init}; int cnt = 0, padded = 0;",
             f"        for (int ky = 0; ky < {kh}; ky++) {{",
             f"          const int iy = oy * {sh} - {pt} + ky * {dh};",
             f"          if (iy >= {h + pb}) break;",
             f"          for (int kx = 0; kx < {kw}; kx++) {{",
             f"            const int ix = ox * {sw} - {pl} + kx * {dw};",
             f"            if (ix >= {w + pr}) break;",
             "            padded++;",
             f"            if (iy < 0 || iy >= {h} || ix < 0 || ix >= {w}) continue;",
             f"            const {ty} v = x[iy * {w} + ix]; {acc} cnt++;",
             "          }",
             "        }"]
    if is_max:
        lines.append("        (void)cnt; (void)padded; y[oy * %d + ox] = acc;" % ow)
    else:
        div = "padded" if n.attrs["count_include_pad"] else "cnt"
        lines.append(f"        y[oy * {ow} + ox] = {div} ? acc / ({ty}){div} : {lit(0, ty)};")
    return lines + ["      }", "  }"]


def _adaptive_avg_pool2d(n: Node, ref: Ref, ty: str) -> list[str]:
    x = n.inputs[0]
    nn, c, h, w = x.shape
    _, _, oh, ow = n.output.shape
    X, Y = ref(x), ref(n.output)
    return [f"  for (long nc = 0; nc < {nn * c}L; nc++) {{",
            f"    const {ty} *x = {X} + nc * {h * w}L; {ty} *y = {Y} + nc * {oh * ow}L;",
            f"    for (int oy = 0; oy < {oh}; oy++)",
            f"      for (int ox = 0; ox < {ow}; ox++) {{",
            f"        const int y0 = oy * {h} / {oh}, y1 = ((oy + 1) * {h} + {oh - 1}) / {oh};",
            f"        const int x0 = ox * {w} / {ow}, x1 = ((ox + 1) * {w} + {ow - 1}) / {ow};",
            f"        {ty} acc = {lit(0, ty)};",
            f"        for (int iy = y0; iy < y1; iy++) for (int ix = x0; ix < x1; ix++) acc += x[iy * {w} + ix];",
            f"        y[oy * {ow} + ox] = acc / ({ty})((y1 - y0) * (x1 - x0));",
            "      }",
            "  }"]


def _reduce(n: Node, ref: Ref, ty: str) -> list[str]:
    x = n.inputs[0]
    axes = set(n.attrs["axes"])
    fn = n.attrs["fn"]
    kept = [d for d in range(len(x.shape)) if d not in axes]
    kept_strides = dict(zip(kept, _strides([x.shape[d] for d in kept])))
    out_st = [kept_strides.get(d, 0) for d in range(len(x.shape))]
    X, Y = ref(x), ref(n.output)
    init = {"sum": lit(0, ty), "mean": lit(0, ty), "max": "(-INFINITY)", "min": "INFINITY"}[fn]
    upd = {"sum": "{y} += {x};", "mean": "{y} += {x};", "max": "if ({x} > {y}) {y} = {x};",
           "min": "if ({x} < {y}) {y} = {x};"}[fn]
    lines = [f"  for (long i = 0; i < {n.output.size}L; i++) {Y}[i] = {init};"]
    lines += _nest(x.shape, [_strides(x.shape), out_st],
                   lambda i: [upd.format(y=f"{Y}[{i[1]}]", x=f"{X}[{i[0]}]")])
    if fn == "mean":
        count = prod(x.shape[d] for d in axes)
        lines.append(f"  for (long i = 0; i < {n.output.size}L; i++) {Y}[i] = {Y}[i] / {lit(count, ty)};")
    return lines


def _transpose(n: Node, ref: Ref, ty: str) -> list[str]:
    x = n.inputs[0]
    axes = n.attrs["axes"]
    xs = _strides(x.shape)
    X, Y = ref(x), ref(n.output)
    return _nest(n.output.shape, [_strides(n.output.shape), [xs[a] for a in axes]],
                 lambda i: [f"{Y}[{i[0]}] = {X}[{i[1]}];"])


def _broadcast_to(n: Node, ref: Ref, ty: str) -> list[str]:
    x, out = n.inputs[0], n.output.shape
    X, Y = ref(x), ref(n.output)
    return _nest(out, [_strides(out), _bcast(x.shape, out)], lambda i: [f"{Y}[{i[0]}] = {X}[{i[1]}];"])


def _fill(n: Node, ref: Ref, ty: str) -> list[str]:
    return [f"  for (long i = 0; i < {n.output.size}L; i++) {ref(n.output)}[i] = {lit(n.attrs['value'], ty)};"]


def _softmax(n: Node, ref: Ref, ty: str) -> list[str]:
    x = n.inputs[0]
    ax = n.attrs["axis"]
    outer, m, inner = prod(x.shape[:ax]), x.shape[ax], prod(x.shape[ax + 1:])
    X, Y = ref(x), ref(n.output)
    e = _fn("exp", ty)
    return [f"  for (long o = 0; o < {outer}L; o++)",
            f"    for (long i = 0; i < {inner}L; i++) {{",
            f"      const {ty} *x = {X} + o * {m * inner}L + i; {ty} *y = {Y} + o * {m * inner}L + i;",
            f"      {ty} mx = -INFINITY, sum = {lit(0, ty)};",
            f"      for (long j = 0; j < {m}L; j++) if (x[j * {inner}L] > mx) mx = x[j * {inner}L];",
            f"      for (long j = 0; j < {m}L; j++) {{",
            f"        y[j * {inner}L] = {e}(x[j * {inner}L] - mx); sum += y[j * {inner}L];",
            "      }",
            f"      for (long j = 0; j < {m}L; j++) y[j * {inner}L] = y[j * {inner}L] / sum;",
            "    }"]


def _concat(n: Node, ref: Ref, ty: str) -> list[str]:
    ax = n.attrs["axis"]
    out = n.output.shape
    outer, inner, total = prod(out[:ax]), prod(out[ax + 1:]), out[ax]
    lines, off = [], 0
    for t in n.inputs:
        c = t.shape[ax]
        lines.append(f"  for (long o = 0; o < {outer}L; o++) memcpy({ref(n.output)} + (o * {total}L + {off}L) * "
                     f"{inner}L, {ref(t)} + o * {c * inner}L, sizeof({ty}) * {c * inner}L);")
        off += c
    return lines


EMITTERS: dict[str, Callable[[Node, Ref, str], list[str]]] = {
    "binary": _binary, "unary": _unary, "channel_affine": _channel_affine, "pad_nchw": _pad_nchw,
    "unpitch": _unpitch, "pool2d": _pool2d, "adaptive_avg_pool2d": _adaptive_avg_pool2d, "reduce": _reduce,
    "transpose": _transpose, "broadcast_to": _broadcast_to, "fill": _fill, "softmax": _softmax, "concat": _concat,
}


def emit_mpe(n: Node, ref: Ref, ty: str) -> list[str]:
    fn = EMITTERS.get(n.op)
    if fn is None:
        raise AotError(f"{n.source} ({n.relax_op}): no MPE code for node {n.op}")
    return fn(n, ref, ty)


def describe(n: Node) -> str:
    """A short description of an MPE node for the report."""
    a: Any = n.attrs
    if n.op in ("binary", "unary", "reduce"):
        return f"{a['fn']} {list(n.output.shape)}"
    if n.op == "pad_nchw":
        return f"zero-pad conv input to {list(n.output.shape)}"
    if n.op == "unpitch":
        return f"strip line padding of the kernel output ({a['pitch']} -> {a['cols']})"
    if n.op == "channel_affine":
        return f"batch_norm folded to scale+shift per channel {list(n.output.shape)}"
    return f"{n.op} {list(n.output.shape)}"
