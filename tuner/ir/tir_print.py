"""A legalized PrimFunc printed as C: scalar (tuner.ir.tir_c) or with SIMD vector loops (tuner.ir.tir_simd)."""

from __future__ import annotations

from typing import Any

from tuner.ir.tir_c import CFunction, _Printer, lower_for_mpe
from tuner.ir.tir_simd import print_simd


def print_prim_func(prim_func: Any, name: str, store_type: str, ldm_prefix: str | None = None,
                    lanes: int = 1) -> CFunction:
    """C source of one legalized PrimFunc, named ``name``; pointers of type ``store_type``. With
    ``ldm_prefix`` its scratch buffers are file-scope LDM arrays (a CPE kernel's body). With
    ``lanes`` > 1 the innermost loops that allow it use SIMD vectors (tuner.ir.tir_simd)."""
    if lanes > 1:
        return print_simd(lower_for_mpe(prim_func), name, store_type, ldm_prefix, lanes)
    return _Printer(lower_for_mpe(prim_func), name, store_type, ldm_prefix).function()
