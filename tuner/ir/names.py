"""Names in a Relax function: unique binding names, and what a called PrimFunc computes.

The reader (tuner.ir.relax_reader) and task extraction name steps and layers by their binding's
variable name. Inlining functions (a training step inlines the adjoint into the step) leaves the same
name on several bindings (``lv2`` in the forward and in the backward), so every repeat is renamed
``<name>_<n>`` here; variables are matched by identity, never by name, so the program is unchanged.
"""

from __future__ import annotations

import re
from typing import Any

_SHAPE_SIGNATURE = re.compile(r"_\d+(?:x\d+)+(?=_|$)")  # "_2x4x4x3x3..." (tuner.ir.expr_gradients names layers so)


def operator_name(function: str) -> str:
    """What a called PrimFunc computes, as reports name it and near workloads share it: its name without
    a layer's shape signature (``conv2d_2x4x..._grad_data`` -> ``conv2d_grad_data``; a user's operator
    keeps its name)."""
    return _SHAPE_SIGNATURE.sub("", function)


def unique_binding_names(mod: Any, function: str = "main") -> Any:
    """``mod`` with every binding of ``function`` named once (the first keeps its name)."""
    from tvm import relax
    from tvm.relax.expr_functor import PyExprMutator, mutator

    @mutator
    class _Renamer(PyExprMutator):
        def __init__(self, module: Any) -> None:
            super().__init__(module)
            self.taken = {p.name for p in module[function].params}

        def visit_var_binding_(self, binding: Any) -> None:
            value = self.visit_expr(binding.value)
            name = fresh = binding.var.name
            n = 1
            while fresh in self.taken:
                fresh = f"{name}_{n}"
                n += 1
            self.taken.add(fresh)
            var = binding.var
            if fresh != name:
                kind = relax.DataflowVar if isinstance(var, relax.DataflowVar) else relax.Var
                var = kind(fresh, binding.var.ty)
                self.set_var_remap(binding.var, var)
            self.builder_.emit_normalized(relax.VarBinding(var, value))

    fn = _Renamer(mod).visit_expr(mod[function])
    out = mod.clone()
    out[function] = fn
    return out
