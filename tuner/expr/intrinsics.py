"""The math intrinsics an expression operator may call, and what each costs and prints as.

One home for the table the parser (which refuses any other call, by name), the analysis (instructions
per point) and the C printer (tuner/ir/cprint/expr.py ``cexpr``, tuner/ir/cprint/expr_vector.py) read. The C
names are what TVM's C codegen prints for the same ``tirx`` ops (libm, ``f`` suffix for float32). A
call with a vector instruction on the CPE (sqrt, fabs) keeps the loop vectorisable; the others are
scalar libm calls, so an expression using one runs scalar (its space offers ``simd`` = 1 alone).

Costs are P0 instructions per call. libm's exp, log, tanh... are software sequences on the CPE (no
hardware transcendental unit): the figures are assumptions [A] of a short polynomial evaluation plus
range reduction, not measured on the hardware.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Intrinsic:
    c_name: str  # the libm function for float64; float32 appends "f"
    cost: int  # P0 instructions per call [A] for the software ones
    vector: str | None = None  # the Sunway vector intrinsic stem (+ "d" float64 / "s" float32), if any


INTRINSICS: dict[str, Intrinsic] = {
    "tirx.sqrt": Intrinsic("sqrt", 1, "simd_vsqrt"),
    "tirx.fabs": Intrinsic("fabs", 1, "simd_vabs"),
    "tirx.exp": Intrinsic("exp", 20),
    "tirx.exp2": Intrinsic("exp2", 20),
    "tirx.log": Intrinsic("log", 20),
    "tirx.log2": Intrinsic("log2", 20),
    "tirx.log10": Intrinsic("log10", 20),
    "tirx.tanh": Intrinsic("tanh", 30),
    "tirx.pow": Intrinsic("pow", 40),
    "tirx.sin": Intrinsic("sin", 25),
    "tirx.cos": Intrinsic("cos", 25),
    "tirx.erf": Intrinsic("erf", 30),
    "tirx.floor": Intrinsic("floor", 2),
    "tirx.ceil": Intrinsic("ceil", 2),
    "tirx.trunc": Intrinsic("trunc", 2),
}


# numpy forms for the tile check (tuner/codegen/tilecheck.py), which evaluates the body in numpy
NUMPY: dict[str, Callable[..., Any]] = {
    "tirx.sqrt": np.sqrt, "tirx.fabs": np.abs, "tirx.exp": np.exp, "tirx.exp2": np.exp2, "tirx.log": np.log,
    "tirx.log2": np.log2, "tirx.log10": np.log10, "tirx.tanh": np.tanh, "tirx.pow": np.power, "tirx.sin": np.sin,
    "tirx.cos": np.cos, "tirx.erf": np.vectorize(math.erf, otypes=[float]), "tirx.floor": np.floor,
    "tirx.ceil": np.ceil, "tirx.trunc": np.trunc,
}


def supported_names() -> str:
    return ", ".join(sorted(n.removeprefix("tirx.") for n in INTRINSICS))


def c_function(op: str, dtype: str) -> str:
    """The C function an intrinsic call prints as (``expf`` for a float32 ``tirx.exp``)."""
    return INTRINSICS[op].c_name + ("f" if dtype == "float32" else "")


def vector_function(op: str, dtype: str) -> str | None:
    """The vector intrinsic of a call on ``dtype`` lanes, or None when it has none."""
    stem = INTRINSICS[op].vector
    return None if stem is None else stem + ("s" if dtype == "float32" else "d")
