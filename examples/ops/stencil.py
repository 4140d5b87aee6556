"""Stencils and a NeoFlow-style novel operator."""

from tvm import te


def stencil5(h=512, w=512):
    """5-point 2-D stencil over an input with a one-element halo."""
    x = te.placeholder((h + 2, w + 2), name="X")
    y = te.compute((h, w), lambda i, j: 0.5 * x[i + 1, j + 1] + 0.125 * (x[i, j + 1] + x[i + 2, j + 1]
                                                                         + x[i + 1, j] + x[i + 1, j + 2]),
                   name="stencil5")
    return [x, y]


def max_plus(m=256, n=256, k=256):
    """Tropical (max, +) matrix product: C[i,j] = max_k A[i,k] + B[k,j] (shortest/longest paths, Viterbi)."""
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    rk = te.reduce_axis((0, k), name="rk")
    c = te.compute((m, n), lambda i, j: te.max(a[i, rk] + b[rk, j], axis=rk), name="max_plus")
    return [a, b, c]
