"""Operators in which an input appears more than once in a product, each with its torch twin.

The gradient of such an input is one term per place it appears, summed (tuner/expr/autodiff.py): each
term is an expression operator of its own with affine reads, so each is tuned and checked like any
other, and an operand read at two indices within one term is passed as two operands::

    swtune grad examples/ops/repeated.py:quadratic_form
    swtune check-grad examples/ops/repeated.py:quadratic_form --torch examples/ops/repeated.py:quadratic_form_torch

The twins take the same keyword arguments and the tensors in the operator's input order.
"""

from tvm import te


def quadratic_form(m=64, n=48, dtype="float32"):
    """The quadratic form of each row, ``out[i] = x[i]^T W x[i] = sum_{j,k} x[i,j] * W[j,k] * x[i,k]``:
    x appears twice (its gradient is ``W x`` plus ``W^T x``, two GEMM-like terms; W's is
    ``sum_i g[i] x[i,j] x[i,k]``, which reads x at two indices)."""
    x = te.placeholder((m, n), dtype, name="x")
    w = te.placeholder((n, n), dtype, name="W")
    rj, rk = te.reduce_axis((0, n), "rj"), te.reduce_axis((0, n), "rk")
    out = te.compute((m,), lambda i: te.sum(x[i, rj] * w[rj, rk] * x[i, rk], axis=[rj, rk]), name="quadratic_form")
    return [x, w, out]


def quadratic_form_torch(x, w, **_):
    return ((x @ w) * x).sum(dim=1)


def weighted_squares(m=64, n=48, dtype="float32"):
    """``out[i] = sum_j x[i,j] * x[i,j] * w[j]``: x twice at the same index (one term, by the product
    rule)."""
    x = te.placeholder((m, n), dtype, name="x")
    w = te.placeholder((n,), dtype, name="w")
    rj = te.reduce_axis((0, n), "rj")
    out = te.compute((m,), lambda i: te.sum(x[i, rj] * x[i, rj] * w[rj], axis=rj), name="weighted_squares")
    return [x, w, out]


def weighted_squares_torch(x, w, **_):
    return (x * x * w).sum(dim=1)


def symmetric_product(n=48, dtype="float32"):
    """Element-wise, ``out[i,j] = x[i,j] * x[j,i] + x[i,j] * y[i,j]``: x three times, at two indices
    (x and its transpose); its gradient is two element-wise terms, summed."""
    x = te.placeholder((n, n), dtype, name="x")
    y = te.placeholder((n, n), dtype, name="y")
    out = te.compute((n, n), lambda i, j: x[i, j] * x[j, i] + x[i, j] * y[i, j], name="symmetric_product")
    return [x, y, out]


def symmetric_product_torch(x, y, **_):
    return x * x.T + x * y
