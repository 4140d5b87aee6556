"""Operators written as TVM tensor expressions: the pure-Python expression (axes, affine accesses,
reducer), its parser and the workload that carries its TVMScript.

Owns: expr (the description), parse (``te.compute`` / TVMScript -> Expr), intrinsics (the math calls a
body may use), workload (``ExprWorkload``, keyed by a hash of the script), derivative, autodiff,
gather_form and adjoint_ops (every input's gradient derived as new expression operators), layers
(built-in layers as expressions, for their derived gradients). All but expr, intrinsics and workload
import tvm, inside functions. The geometry derived from an expression and
its space live in tuner.space (expr_geometry, expr_opgeometry, expr_space); its kind in
tuner.kinds.expr.
"""
