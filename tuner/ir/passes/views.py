"""Reshape-like operators as views, and shapes as compile-time values.

reshape, flatten, squeeze and expand_dims make no step: their result is a view sharing its operand's
storage (of a constant, a constant of its own). ``shape_of`` is a tensor's static shape, and
``tensor_to_shape`` (ONNX Reshape's target computed from Shape/Gather/Concat) must fold to a constant:
the AOT compiler needs static shapes. Each is reported as a view or as done at compile time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuner.ir.graph import AotError, Where
from tuner.ir.passes.emit import out_shape
from tuner.ir.passes.lowering_pass import LoweringPass, Value

if TYPE_CHECKING:
    from tuner.ir.relax_reader import RelaxReader

VIEWS = ("expand_dims", "flatten", "reshape", "squeeze")


def view(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    """A reshape-like operator: its operand viewed in the result's shape."""
    x = r.tensor(call.args[0], name)
    shape = out_shape(call, name)
    r.note(name, op, Where.COMPILE_TIME if x.kind == "const" else Where.VIEW, f"{list(x.shape)} -> {list(shape)}")
    return r.view(x, shape, name)


def shape_of(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    """A tensor's shape as a value (ONNX Expand/Reshape compute their target shapes from it): static, so
    known at compile time."""
    x = r.tensor(call.args[0], name)
    r.note(name, op, Where.COMPILE_TIME, f"shape {list(x.shape)}")
    return tuple(x.shape)


def tensor_to_shape(r: RelaxReader, call: Any, name: str, op: str) -> Value:
    """A shape computed as a tensor (ONNX Reshape's target from Shape/Gather/Concat): it must be a
    compile-time constant, since the AOT compiler needs static shapes."""
    x = r.tensor(call.args[0], name)
    if x.kind != "const" or x.data is None:
        raise AotError(f"{name} ({op}): a shape computed at run time; the AOT compiler needs static shapes")
    r.note(name, op, Where.COMPILE_TIME, f"shape {x.data.astype(int).tolist()}")
    return tuple(int(v) for v in x.data.reshape(-1))


PASS = LoweringPass("views", rules={"shape_of": shape_of, "tensor_to_shape": tensor_to_shape,
                                    **dict.fromkeys(VIEWS, view)})
