"""The SIMD emitter: Sunway vector types and the vector instructions of simd.h, as C text.

Every vector loop of the printer (a kernel's update and expression loops, its register block, the
legalized operators' loops) spells its vectors through these. ``floatv4``/``doublev4`` are 4 lanes,
``floatv8``/``doublev8`` 8 (SW26010 has 4 lanes of both; the caller picks the lanes from the target).
"""

from __future__ import annotations


def vector_type(ctype: str, lanes: int) -> str:
    """The simd.h type of ``lanes`` lanes of C type ``ctype`` (``floatv4``)."""
    return f"{ctype}v{lanes}"


def suffix(ctype: str) -> str:
    """The instruction suffix of ``ctype`` lanes: ``s`` (float) or ``d`` (double)."""
    return "s" if ctype == "float" else "d"


def fma(ctype: str) -> str:
    """a * b + c on ``ctype`` lanes."""
    return f"simd_vma{suffix(ctype)}"


def set_lanes(vtype: str, lanes: list[str]) -> str:
    """A vector of the scalar values ``lanes`` (one arith per vector)."""
    return f"simd_set_{vtype}({', '.join(lanes)})"


def splat(vtype: str, x: str, lanes: int) -> str:
    """``x`` in every lane."""
    return set_lanes(vtype, [x] * lanes)


def load(reg: str, addr: str, aligned: bool) -> str:
    """Load the vector at ``addr`` into ``reg`` (unaligned: two aligned accesses on the CPE)."""
    return f"{'simd_load' if aligned else 'simd_loadu'}({reg}, {addr});"


def load_value(vtype: str, addr: str) -> str:
    """The vector at ``addr`` as a value (an unaligned load)."""
    return f"SW_VLOADU({vtype}, {addr})"


def load_replicated(reg: str, addr: str) -> str:
    """The scalar at ``addr`` in every lane of ``reg``: one load."""
    return f"simd_loade({reg}, {addr});"


def store(value: str, addr: str, aligned: bool) -> str:
    """Store vector ``value`` at ``addr``."""
    return f"{'simd_store' if aligned else 'simd_storeu'}({value}, {addr});"


def lanes_array(ctype: str, lanes: int, name: str = "_l") -> str:
    """An aligned array a vector is stored into to reach its lanes one by one."""
    return f"{ctype} {name}[{lanes}] __attribute__((aligned(64)));"


def select(op: str, a: str, b: str) -> str:
    """max/min (``op`` Max or Min) as a compare and a select: a < b ? b : a for max."""
    lt = f"simd_vfcmplt({a}, {b})"
    return f"simd_vselne({lt}, {b}, {a})" if op == "Max" else f"simd_vselne({lt}, {a}, {b})"


def select_exact(op: str, a: str, b: str) -> str:
    """max/min as a compare and a select that picks what the scalar SWG_MAX/SWG_MIN pick with a NaN:
    SWG_MAX(a, b) = a > b ? a : b = !(b < a) ? b : a, SWG_MIN(a, b) = !(a < b) ? b : a."""
    if op == "Max":
        return f"simd_vseleq(simd_vfcmplt({b}, {a}), {b}, {a})"
    return f"simd_vseleq(simd_vfcmplt({a}, {b}), {b}, {a})"
