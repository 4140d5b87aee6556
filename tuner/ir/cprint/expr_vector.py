"""An expression of a scheduled kernel's loop body as a vector of ``w`` lanes (simd.h instructions).

Lanes run ``w`` consecutive iterations of the loop variable. Every load becomes a vector: broadcast
when it does not move with the loop, ``SW_VLOADU`` when it moves with unit stride in its innermost
index, read from the operand's repacked copy when the update loop's operand has one (``packed``),
else gathered lane by lane. An add or subtract of a product is one ``simd_vmad``/``simd_vmsd``/
``simd_vnmad``, max/min a compare and a select, + - * / and the calls with a vector intrinsic
(tuner.expr.intrinsics: sqrt, fabs) their instruction -- the instruction count the parser gives the
analysis (tuner/expr/parse.py). Any other node has no vector form (NotVector).
"""

from __future__ import annotations

from typing import Any, Protocol

from tuner.expr.intrinsics import INTRINSICS, vector_function
from tuner.ir.cprint import vector
from tuner.ir.cprint.lanes import unit_stride
from tuner.ir.tir import free_vars, kind

_VOP = {"Add": "simd_vadd", "Sub": "simd_vsub", "Mul": "simd_vmul", "Div": "simd_vdiv"}


class Tiles(Protocol):
    """What the kernel's vector loops ask of the slave printer (tuner.codegen.printer.SlavePrinter):
    the C of an element of an LDM tile."""

    ty: str  # C type of the kernel's elements
    roles: dict[str, str]  # LDM buffer name -> its operand's role
    pack: dict[str, int]  # role -> the dimension its repacked copy has innermost

    def load(self, e: Any, env: dict[str, str] | None = None) -> str:
        """An element a TIR load reads (``env`` renames loop variables)."""

    def ldm_ref(self, buf: Any, indices: list, env: dict[str, str] | None = None) -> str:
        """An element of LDM buffer ``buf``."""

    def pk_ref(self, e: Any, env: dict[str, str] | None = None) -> str:
        """An element of the packed copy of a gathered operand (its lanes' dimension innermost)."""

    def ldm_shape(self, buf: Any) -> list[int]:
        """The extents of ``buf``'s LDM tile as the vector loops see them."""

    def pack_aligned(self, role: str) -> bool:
        """Every row of ``role``'s repacked copy starts on a whole vector."""

    def plain(self, node: Any, ctx: Any, block: bool = True) -> None:
        """Print a compute statement without vectors."""


class NotVector(Exception):
    """A node with no vector form: the loop is printed scalar (the parser gave it simd = 1)."""


class Vectoriser:
    """Vector C of the expressions of one loop (variable ``var``, ``w`` lanes)."""

    def __init__(self, pr: Tiles, var: str, w: int, packed: bool = False) -> None:
        self.pr, self.var, self.w, self.packed = pr, var, w, packed
        self.ty = pr.ty
        self.vt = vector.vector_type(pr.ty, w)
        self.sfx = vector.suffix(pr.ty)
        self.dtype = "float32" if pr.ty == "float" else "float64"
        self.lanes = [f"({var} + {i})" for i in range(w)]
        self.pre: list[str] = []  # temporaries the loop body computes first (a select reads its operands twice)

    def tmp(self, x: str) -> str:
        if x.isidentifier():
            return x
        name = f"_v{len(self.pre)}"
        self.pre.append(f"const {self.vt} {name} = {x};")
        return name

    def splat(self, x: str) -> str:
        return vector.splat(self.vt, x, self.w)

    def load(self, e: Any) -> str:
        pr, var = self.pr, self.var
        idx = list(e.indices)
        if not any(var in free_vars(i) for i in idx):
            return self.splat(pr.load(e))
        if unit_stride(idx, var, pr.ldm_shape(e.source)):
            return vector.load_value(self.vt, f"&{pr.load(e)}")
        if self.packed and pr.roles.get(e.source.name) in pr.pack:  # the repacked copy: lanes contiguous
            return vector.load_value(self.vt, f"&{pr.pk_ref(e)}")
        return vector.set_lanes(self.vt, [pr.load(e, {var: ln}) for ln in self.lanes])

    def select(self, op: str, a: str, b: str) -> str:
        """max/min as a compare and a select (a < b ? b : a for max)."""
        return vector.select(op, self.tmp(a), self.tmp(b))

    def vec(self, e: Any) -> str:
        k = kind(e)
        if k == "TensorLoad":
            return self.load(e)
        if k in ("FloatImm", "IntImm"):
            return self.splat(repr(float(e.value)))
        if k == "Cast":
            if kind(e.value) not in ("FloatImm", "IntImm") and str(e.dtype) != self.dtype:
                raise NotVector(k)
            return self.vec(e.value)
        if k in ("Add", "Sub"):
            for mul, other, first in ((e.b, e.a, False), (e.a, e.b, True)):
                if kind(mul) == "Mul":
                    x, y, z = self.vec(mul.a), self.vec(mul.b), self.vec(other)
                    if k == "Add":
                        return f"{vector.fma(self.ty)}({x}, {y}, {z})"
                    # x*y - z (the product first) or z - x*y
                    return f"simd_vms{self.sfx}({x}, {y}, {z})" if first else f"simd_vnma{self.sfx}({x}, {y}, {z})"
            return f"{_VOP[k]}{self.sfx}({self.vec(e.a)}, {self.vec(e.b)})"
        if k in ("Mul", "Div"):
            return f"{_VOP[k]}{self.sfx}({self.vec(e.a)}, {self.vec(e.b)})"
        if k in ("Max", "Min"):
            return self.select(k, self.vec(e.a), self.vec(e.b))
        if k == "Call":
            op = str(e.op.name)
            fn = vector_function(op, self.dtype) if op in INTRINSICS else None
            if fn is None or len(e.args) != 1:
                raise NotVector(op)
            return f"{fn}({self.vec(e.args[0])})"
        raise NotVector(k)
