"""Operators that call math functions inside the body: L1 distances (fabs, a vector instruction) and
an exponential-weight GEMM (exp, a scalar libm call: the operator runs scalar)."""

from tvm import te


def l1_distance(m=256, n=256, d=64):
    """D[i,j] = sum_d |X[i,d] - Y[j,d]|: pairwise L1 distances (nearest neighbours, k-medians)."""
    x = te.placeholder((m, d), name="X")
    y = te.placeholder((n, d), name="Y")
    rd = te.reduce_axis((0, d), name="rd")
    dist = te.compute((m, n), lambda i, j: te.sum(te.abs(x[i, rd] - y[j, rd]), axis=rd), name="l1_distance")
    return [x, y, dist]


def exp_gemm(m=128, n=128, k=128):
    """C[i,j] = sum_k A[i,k] * exp(B[k,j]): a GEMM against exponentiated scores."""
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    rk = te.reduce_axis((0, k), name="rk")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, rk] * te.exp(b[rk, j]), axis=rk), name="exp_gemm")
    return [a, b, c]
