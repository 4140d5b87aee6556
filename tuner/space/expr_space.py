"""The schedule space of an expression operator: a :class:`~tuner.space.space.ScheduleSpace`.

Same knobs, encoding and analysis as every operator (the simulator, the cost-model features, the
OpenACC baseline and the search strategies use it unchanged); its geometry is derived from the
expression (tuner/space/expr_opgeometry.py ExprOpGeometry), which also says what the ``simd``, ``acc`` and
``pack`` knobs may offer for its body and accesses. The class exists so code can name the kind of
space it needs (``space_for`` returns one for an expression workload).
"""

from __future__ import annotations

from tuner.expr.workload import ExprWorkload
from tuner.space.expr_opgeometry import ExprOpGeometry
from tuner.space.space import ScheduleSpace


class ExprSpace(ScheduleSpace):
    """All schedules of one expression operator on one target."""

    workload: ExprWorkload
    geometry: ExprOpGeometry
