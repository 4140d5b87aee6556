"""GEMM-like operators: gemv, batched matmul with a transposed operand, weighted GEMM, attention score."""

import math

from tvm import te


def gemv(m=4096, k=4096):
    a = te.placeholder((m, k), name="A")
    x = te.placeholder((k,), name="x")
    rk = te.reduce_axis((0, k), name="rk")
    y = te.compute((m,), lambda i: te.sum(a[i, rk] * x[rk], axis=rk), name="gemv")
    return [a, x, y]


def batch_matmul_at(b=8, m=256, n=256, k=256):
    """C[b] = A[b]^T B[b], A stored (B, K, M): the left operand is transposed."""
    a = te.placeholder((b, k, m), name="A")
    bt = te.placeholder((b, k, n), name="B")
    rk = te.reduce_axis((0, k), name="rk")
    c = te.compute((b, m, n), lambda z, i, j: te.sum(a[z, rk, i] * bt[z, rk, j], axis=rk), name="bmm_at")
    return [a, bt, c]


def _scaled_gemm(m, n, k, vector, length, at, name):
    """C[i,j] = sum_k A[i,k] * B[k,j] * v[at(i, k)]: a GEMM whose products a vector ``v`` (named ``vector``,
    ``length`` long) scales."""
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    v = te.placeholder((length,), name=vector)
    rk = te.reduce_axis((0, k), name="rk")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, rk] * b[rk, j] * v[at(i, rk)], axis=rk), name=name)
    return [a, b, v, c]


def weighted_gemm(m=512, n=512, k=512):
    """C[i,j] = sum_k A[i,k] * B[k,j] * w[k]."""
    return _scaled_gemm(m, n, k, "w", k, lambda i, rk: rk, "weighted_gemm")


def attention_score(batch=1, heads=8, seq=256, d=64):
    """S = Q K^T / sqrt(d) per (batch, head)."""
    q = te.placeholder((batch, heads, seq, d), name="Q")
    kk = te.placeholder((batch, heads, seq, d), name="K")
    rd = te.reduce_axis((0, d), name="rd")
    scale = 1.0 / math.sqrt(d)
    s = te.compute((batch, heads, seq, seq),
                   lambda b, h, i, j: te.sum(q[b, h, i, rd] * kk[b, h, j, rd] * scale, axis=rd), name="attn_score")
    return [q, kk, s]


def row_scaled_gemm(m=256, n=192, k=320):
    """C[i,j] = s[i] * sum_k A[i,k] * B[k,j]: a GEMM with a per-row scale."""
    return _scaled_gemm(m, n, k, "s", m, lambda i, rk: i, "row_scaled_gemm")
