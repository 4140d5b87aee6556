"""The schedule space of an expression operator: the built-in knobs over the derived geometry.

:class:`ExprSpace` is a :class:`~tuner.space.space.ScheduleSpace` (same knob names and encoding, same
analysis, so the simulator, the cost-model features, the OpenACC baseline and the search strategies
use it unchanged) whose geometry is derived from the expression
(:class:`~tuner.expr.opgeometry.ExprOpGeometry`), and whose ``simd``, ``acc`` and ``pack`` knobs
offer only what the generated C can do for the expression's body and accesses.
"""

from __future__ import annotations

from tuner.expr.geometry import PACK_UNSUPPORTED
from tuner.expr.opgeometry import ExprOpGeometry
from tuner.expr.workload import ExprWorkload
from tuner.space.choices import Acc, Pack
from tuner.space.knobs import Knob
from tuner.space.space import ScheduleSpace
from tuner.workloads import Workload


class ExprSpace(ScheduleSpace):
    """All schedules of one expression operator on one target."""

    workload: ExprWorkload
    geometry: ExprOpGeometry

    def _geometry(self, workload: Workload) -> ExprOpGeometry:
        assert isinstance(workload, ExprWorkload)
        return ExprOpGeometry(workload.expr)

    def _simd_knob(self) -> Knob:
        """Vector lanes, or ``simd`` = 1 alone when the body has a node with no vector form (a libm
        call, a cast, a select): the generated C then prints the loop scalar, and the analysis must
        not charge vectors it does not issue (tuner/codegen/simd_expr.py vectorises the rest)."""
        doc = "vector lanes (1 = scalar)"
        if self.workload.expr.scalar_reason:
            return Knob("simd", (1,), doc=f"{doc}; only 1: {self.workload.expr.scalar_reason}")
        return super()._simd_knob()

    def _acc_knob(self) -> Knob:
        """``acc = "reg"`` only where the micro-kernel prints the body (``c += a * b``); elsewhere the
        accumulators stay in LDM, as the generated C keeps them."""
        reason = self.workload.expr.block_reason
        if reason:
            return Knob("acc", (Acc.LDM.label,), ordered=False, default=Acc.LDM.label,
                        category_codes=(int(Acc.LDM),), doc=f"accumulators in LDM; only ldm: {reason}")
        return super()._acc_knob()

    def _pack_knob(self) -> Knob:
        """``pack`` only where every b operand's tile boxes partition it (ExprGeometry.packable): a
        halo, a stride or a flip makes boxes overlap or skip, and a tile-after-tile copy would then
        have to duplicate elements -- such operators offer ``pack="none"`` alone, by name here."""
        if all(self.geometry.packable(op) for op in self.geometry.group("b")):
            return super()._pack_knob()
        return Knob("pack", (Pack.NONE.label,), ordered=False, default=Pack.NONE.label,
                    category_codes=(int(Pack.NONE),),
                    doc=f"column-shared operands laid out tile after tile; {PACK_UNSUPPORTED}")
