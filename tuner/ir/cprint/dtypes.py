"""The C type of a TIR dtype, and of an integer or bool model input's file."""

from __future__ import annotations

from typing import Any

from tuner.ir.graph import AotError

# integer and bool model inputs (token ids, masks): dtype -> the C type of an element of its input
# file; the program converts them to the model's type as it reads them (tuner.aot.host)
INPUT_FILE_TYPES = {"int64": "int64_t", "int32": "int32_t", "bool": "uint8_t"}

# the dtypes a model's tensors and a tuned kernel's operands may have (ctype)
_MODEL_DTYPES = ("float32", "float64", "int32", "int64", "bool")


def ctype_of(dtype: str) -> str:
    """The C type of any TIR dtype a legalized operator uses (scratch of int or bool too)."""
    if dtype in ("float32", "float64"):
        return "float" if dtype == "float32" else "double"
    if dtype == "bool":
        return "int"
    if dtype.startswith("int") or dtype.startswith("uint"):
        bits = int(dtype.removeprefix("u").removeprefix("int") or 32)
        return ("long" if bits > 32 else "int") if not dtype.startswith("u") else (
            "unsigned long" if bits > 32 else "unsigned int")
    raise AotError(f"dtype {dtype} has no C type in the generic operator path")


_MODEL_CTYPES = {d: ctype_of(d) for d in _MODEL_DTYPES}


def ctype(dtype: str) -> str:
    """The C type of a model's tensors or a kernel's operands; a KeyError for any other dtype (the
    kernel generator falls back to the generic lowering on it)."""
    return _MODEL_CTYPES[dtype]


def dtype_of(e: Any) -> str:
    """dtype of a TIR expression (its PrimType)."""
    ty = getattr(e, "ty", None)
    return str(ty) if ty is not None else str(getattr(e, "dtype", ""))
