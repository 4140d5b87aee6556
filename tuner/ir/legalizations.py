"""Legalizations this TVM lacks, registered once with Relax's LegalizeOps so every path that legalizes
(the compiler's reader, task extraction, the CPE cutter's per-block legalization) lowers them alike.

* ``relax.cumsum`` -> ``topi.cumsum`` (a scan along one axis: one sequential loop per line, the other
  axes independent, so the CPE cutter can slice it along any axis before the scanned one).

A legalization TVM itself provides is never replaced. ``legalize`` runs LegalizeOps with them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _cumsum(bb: Any, call: Any) -> Any:
    from tvm import topi

    attrs = call.attrs
    axis = None if attrs.axis is None else int(attrs.axis)
    dtype = None if attrs.dtype is None or str(attrs.dtype) in ("", "void") else str(attrs.dtype)
    return bb.call_te(topi.cumsum, call.args[0], axis, dtype, bool(attrs.exclusive), primfunc_name_hint="cumsum")


_MISSING = {"relax.cumsum": _cumsum}


def register() -> None:
    """Register each missing legalization (idempotent; TVM's own, where it has one, wins)."""
    import tvm
    from tvm.relax.transform.legalize_ops.common import register_legalize

    for name, fn in _MISSING.items():
        if tvm.ir.Op.get(name).get_attr("FLegalize") is None:
            register_legalize(name, fn)


def legalize(mod: Any, skip: Sequence[str]) -> Any:
    """Every Relax operator of ``mod`` but ``skip`` (names without "relax.") lowered by TVM to ``call_tir``
    of a PrimFunc, these legalizations included."""
    import tvm
    from tvm import relax

    register()
    with tvm.transform.PassContext(opt_level=3):
        return relax.transform.LegalizeOps(skip_ops=[f"relax.{op}" for op in skip])(mod)
