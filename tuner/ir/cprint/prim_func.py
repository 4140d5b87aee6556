"""A legalized PrimFunc printed as C: scalar (legalized) or with SIMD vector loops (legalized_simd)."""

from __future__ import annotations

from typing import Any

from tuner.ir.cprint.legalized import CFunction, LegalizedPrinter, lower_for_mpe
from tuner.ir.cprint.legalized_simd import SimdPrinter


def print_prim_func(prim_func: Any, name: str, store_type: str, ldm_prefix: str | None = None,
                    lanes: int = 1) -> CFunction:
    """C source of one legalized PrimFunc, named ``name``; pointers of type ``store_type``. With
    ``ldm_prefix`` its scratch buffers are file-scope LDM arrays (a CPE kernel's body). With
    ``lanes`` > 1 the innermost loops that allow it use SIMD vectors (tuner.ir.cprint.legalized_simd)."""
    func = lower_for_mpe(prim_func)
    if lanes > 1:
        return SimdPrinter(func, name, store_type, ldm_prefix, lanes).function()
    return LegalizedPrinter(func, name, store_type, ldm_prefix).function()
