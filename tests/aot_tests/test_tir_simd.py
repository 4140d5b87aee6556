"""The SIMD knob of the generic CPE body printer (tuner.ir.cprint.legalized_simd via print_prim_func(lanes=...)):
legalized Relax operators printed with lanes = 1, 4 (and 8), compiled with gcc against the emulator's
simd.h (a misaligned simd_load/simd_store aborts the harness), run on fixed pseudo-random inputs and
checked against numpy; plus which loops vectorise and what the Work counts say.
"""

from __future__ import annotations

import hashlib
import math
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
from tvm import relax  # noqa: E402

from tuner.ir.cprint.legalized import PRELUDE, CFunction, Work  # noqa: E402
from tuner.ir.cprint.legalized_simd import affine, flat_offset, is_aligned  # noqa: E402
from tuner.ir.cprint.prim_func import print_prim_func  # noqa: E402

EMU = Path(__file__).resolve().parents[2] / "tuner" / "codegen" / "emulator"
pytestmark = pytest.mark.needs("gcc")
TOL = {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-13)}  # rtol, atol (for values near 0)


def _prim(make: Any, shapes: list[tuple[int, ...]], dtype: str) -> Any:
    """The PrimFunc TVM legalizes ``make(*params)`` to (like tuner.ir.legalizations.legalize, but
    permute_dims legalized too)."""
    bb = relax.BlockBuilder()
    params = [relax.Var(f"x{i}", relax.TensorType(s, dtype)) for i, s in enumerate(shapes)]
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(make(*params)))
        bb.emit_func_output(out)
    with tvm.transform.PassContext(opt_level=3):
        mod = relax.transform.LegalizeOps()(bb.get())
    funcs = [gv for gv in mod.functions if gv.name_hint != "main"]
    assert len(funcs) == 1
    return mod[funcs[0]]


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b


# name -> (Relax op of the params, input shapes, numpy reference, vectorised loops at 4 lanes)
CASES: dict[str, tuple[Any, list[tuple[int, ...]], Any, int]] = {
    # max, exp, sum, divide: all four loops (two reductions)
    "softmax": (lambda x: relax.op.nn.softmax(x, -1), [(2, 64)], _softmax, 4),
    # sum, mean (4 rows), var sum, normalise
    "layer_norm": (lambda x, g, b: relax.op.nn.layer_norm(x, g, b, [-1]), [(4, 32), (32,), (32,)],
                   _layer_norm, 4),
    "gelu": (lambda x: relax.op.nn.gelu(x), [(128,)], _gelu, 5),  # 5 element-wise loops, erf per lane
    "broadcast_add": (lambda x, y: relax.op.add(x, y), [(8, 16), (16,)], lambda x, y: x + y, 1),
    "mean": (lambda x: relax.op.mean(x, [-1]), [(8, 32)], lambda x: x.mean(-1), 2),  # sum, divide
    # reads x[j, i] in the inner loop over j: stride 8, stays scalar
    "transpose": (lambda x: relax.op.permute_dims(x, [1, 0]), [(8, 8)], lambda x: x.T, 0),
    # x[:, 1:9] of a (3, 10): rows start at 10 i + 1, not a multiple of 4 -> simd_loadu
    "slice": (lambda x: relax.op.strided_slice(x, axes=[1], begin=[1], end=[9]), [(3, 10)],
              lambda x: x[:, 1:9], 1),
}


def _inputs(shapes: list[tuple[int, ...]], dtype: str) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.uniform(-2.0, 2.0, s).astype(dtype) for s in shapes]


def _literal(a: np.ndarray) -> str:
    fmt = "%.9g" if a.dtype == np.float32 else "%.17g"
    return ", ".join(fmt % v for v in a.ravel())


def _run_c(cf: CFunction, args: list[np.ndarray], dtype: str, cache: Path) -> list[np.ndarray]:
    """Compile ``cf`` into a harness (inputs as aligned initialised arrays), run it, read the outputs."""
    ctype = "float" if dtype == "float32" else "double"
    n_in = len(args)
    lines = ['#include <math.h>', '#include <stdio.h>', '#include <stdlib.h>', '#include "slave.h"',
             '#include "simd.h"',
             'void swemu_simd_unaligned(const void *p, int need) {',
             '  fprintf(stderr, "unaligned simd access %p (%d)\\n", p, need); exit(3);', '}',
             PRELUDE, *cf.ldm_decls, cf.code]
    for i, a in enumerate(args):
        lines.append(f"static {ctype} a{i}[{a.size}] __attribute__((aligned(64))) = {{{_literal(a)}}};")
    outs = cf.param_shapes[n_in:]
    for j, s in enumerate(outs):
        lines.append(f"static {ctype} a{n_in + j}[{max(1, math.prod(s))}] __attribute__((aligned(64)));")
    lines.append("int main(void) {")
    lines.append(f"  body({', '.join(f'a{i}' for i in range(len(cf.param_shapes)))});")
    for j, s in enumerate(outs):
        lines.append(f'  for (int i = 0; i < {math.prod(s)}; i++) printf("%.17g\\n", (double)a{n_in + j}[i]);')
    lines += ["  return 0;", "}"]
    src = "\n".join(lines) + "\n"
    key = hashlib.sha1(src.encode()).hexdigest()[:16]
    exe = cache / f"h{key}"
    if not exe.exists():
        (cache / f"h{key}.c").write_text(src)
        subprocess.run(["gcc", "-O1", "-std=gnu11", "-Wall", "-Werror", "-Wno-unused-function",
                        "-Wno-psabi", "-I", str(EMU), "-o", str(exe), str(cache / f"h{key}.c"), "-lm"],
                       check=True, capture_output=True, text=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    vals = np.array([float(v) for v in got])
    res, at = [], 0
    for s in outs:
        res.append(vals[at:at + math.prod(s)].reshape(s))
        at += math.prod(s)
    assert at == len(vals)
    return res


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("simd_harness")


def _total(w: Work) -> int:
    return w.loads + w.stores + w.arith


def _check(name: str, dtype: str, lanes: int, cache: Path) -> tuple[CFunction, CFunction]:
    make, shapes, ref, _ = CASES[name]
    func = _prim(make, shapes, dtype)
    ctype = "float" if dtype == "float32" else "double"
    scalar = print_prim_func(func, "body", ctype, ldm_prefix="g")
    vec = print_prim_func(func, "body", ctype, ldm_prefix="g", lanes=lanes)
    args = _inputs(shapes, dtype)
    want = ref(*[a.astype(np.float64) for a in args])
    rtol, atol = TOL[dtype]
    for cf in (scalar, vec):
        (got,) = _run_c(cf, args, dtype, cache)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"{name} {dtype} lanes={lanes}")
    return scalar, vec


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(CASES))
def test_lanes4_matches_numpy(name: str, dtype: str, cache: Path) -> None:
    if name == "layer_norm" and dtype == "float64":
        pytest.skip("TVM's topi layer_norm supports float32/float16 only")
    scalar, vec = _check(name, dtype, 4, cache)
    assert scalar.vector_loops == 0
    assert vec.vector_loops == CASES[name][3]
    if vec.vector_loops == 0:  # nothing vectorisable: exactly the scalar function
        assert (vec.code, vec.work, vec.ldm_decls) == (scalar.code, scalar.work, scalar.ldm_decls)
        assert "simd_" not in vec.code
        return
    vtype = ("floatv4" if dtype == "float32" else "doublev4")
    assert vtype in vec.code
    assert all("aligned(64)" in d for d in vec.ldm_decls)
    assert _total(vec.work) < _total(scalar.work)
    assert vec.work.transcendental <= scalar.work.transcendental


def test_softmax_layer_norm_work(cache: Path) -> None:
    """Work of the float32 bodies at 4 lanes (CPE cycles = loads + stores + arith + transcendental x
    Target.cpe_transcendental_cycles).

    softmax (2, 64): scalar Work(stores=768, loads=1024, arith=384, transcendental=256) -> SIMD
    Work(stores=68, loads=132, arith=112, transcendental=160): loads+stores+arith 2176 -> 312 (7.0x);
    the exps stay per lane (128 calls), the divides become 32 vector divides.
    layer_norm (4, 32): scalar Work(644, 1540, 1280, 260) -> Work(41, 173, 329, 9): 3464 -> 543
    (6.4x); the row's rsqrt is loop-invariant and computed once per row (4 instead of 128), which a
    human (and gcc) would do in scalar code too.
    """
    sm = print_prim_func(_prim(CASES["softmax"][0], CASES["softmax"][1], "float32"), "body", "float", "g", lanes=4)
    assert sm.work == Work(stores=68, loads=132, arith=112, transcendental=160)
    ln = print_prim_func(_prim(*CASES["layer_norm"][:2], "float32"), "body", "float", "g", lanes=4)
    assert ln.work == Work(stores=41, loads=173, arith=329, transcendental=9)
    # the reductions: vector accumulators folded after the loop, no per-element store into the row sum
    assert sm.code.count("acc") and "SWG_MAX(SWG_MAX(" in sm.code and "simd_vfcmplt" in sm.code
    assert ln.code.count("simd_loade") == 2  # the row mean, in the variance and the normalise loops


def test_lanes8(cache: Path) -> None:
    """floatv8/doublev8 (SW26010-Pro): layer_norm's 4-row mean loop has a remainder at 8 lanes and
    stays scalar; doublev8 loads need 64-byte alignment (the harness aborts otherwise)."""
    scalar, vec = _check("layer_norm", "float32", 8, cache)
    assert vec.vector_loops == 3 and "floatv8" in vec.code
    assert "for (long v2 = 0; v2 < 4L; v2++) {" in vec.code  # the mean loop, as the scalar printer prints it
    assert _total(vec.work) < _total(scalar.work)
    _, vec = _check("softmax", "float64", 8, cache)
    assert vec.vector_loops == 4 and "doublev8" in vec.code


def test_unaligned_rows_use_loadu(cache: Path) -> None:
    """x[:, 1:9] of a (3, 10): the loads start at 10 i + 1 (unaligned, 2 loads each by assumption [A]),
    the stores at 8 i (aligned)."""
    _, vec = _check("slice", "float32", 4, cache)
    assert "simd_loadu(" in vec.code and "simd_store(" in vec.code
    assert "simd_load(" not in vec.code and "simd_storeu(" not in vec.code
    assert vec.work == Work(stores=6, loads=12, arith=0, transcendental=0)  # 6 vectors


def test_alignment_helper() -> None:
    i, j = tvm.tirx.Var("i", "int64"), tvm.tirx.Var("j", "int64")

    def aligned(indices: list[Any], shape: list[int], lo: int = 0, lanes: int = 4) -> bool:
        lin, rest = flat_offset(indices, shape)
        assert lin.get(j, 0) == 1
        return is_aligned(lin, rest, j, lo, lanes)

    assert aligned([i, j], [3, 8])
    assert not aligned([i, j], [3, 6])  # row stride 6
    assert aligned([i, j], [3, 6], lanes=2)
    assert not aligned([i, j + 2], [5, 8])  # inner offset 2
    assert aligned([i, j + 2], [5, 8], lo=2)  # ... cancelled by the loop's start
    assert not aligned([i // 2, j], [4, 8])  # a floordiv term: not provable
    assert affine(i * 3 + j - 1) == {i: 3, j: 1, None: -1}
    assert affine(i // 2) is None
