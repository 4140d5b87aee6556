"""Neural-network layers written as tensor expressions of several stages, each with its torch twin.

``swtune grad`` derives their gradients; ``swtune check-grad examples/ops/nn.py:conv2d --torch
examples/ops/nn.py:conv2d_torch`` checks them against torch autograd (the twin takes the same
keyword arguments and the tensors in the operator's input order). Padding is a stage of its own
here (``if_then_else``), as TOPI writes it: the gradient composes through it.
"""

import math

from tvm import te, tirx


def _pad(x, pad, name):
    n, c, h, w = (int(s) for s in x.shape)
    if pad == 0:
        return x
    return te.compute((n, c, h + 2 * pad, w + 2 * pad),
                      lambda b, k, y, z: tirx.if_then_else(
                          tirx.all(y >= pad, y < h + pad, z >= pad, z < w + pad), x[b, k, y - pad, z - pad],
                          tirx.const(0.0, x.dtype)), name=name)


def conv2d(n=1, c=16, h=14, w=14, k=32, r=3, stride=1, padding=1, dilation=1, groups=1, dtype="float32"):
    """NCHW convolution with stride, padding, dilation and groups (depthwise: groups = c = k)."""
    x = te.placeholder((n, c, h, w), dtype, name="data")
    weight = te.placeholder((k, c // groups, r, r), dtype, name="weight")
    xp = _pad(x, padding, "data_pad")
    oh = (h + 2 * padding - dilation * (r - 1) - 1) // stride + 1
    ow = (w + 2 * padding - dilation * (r - 1) - 1) // stride + 1
    cg, kg = c // groups, k // groups
    rc, ry, rx = te.reduce_axis((0, cg), "rc"), te.reduce_axis((0, r), "ry"), te.reduce_axis((0, r), "rx")
    out = te.compute((n, k, oh, ow), lambda b, f, y, z: te.sum(
        xp[b, (f // kg) * cg + rc, y * stride + ry * dilation, z * stride + rx * dilation] * weight[f, rc, ry, rx],
        axis=[rc, ry, rx]), name="conv2d")
    return [x, weight, out]


def conv2d_torch(data, weight, stride=1, padding=1, dilation=1, groups=1, **_):
    import torch

    return torch.nn.functional.conv2d(data, weight, stride=stride, padding=padding, dilation=dilation, groups=groups)


def max_pool2d(n=1, c=16, h=14, w=14, r=3, stride=2, padding=1, dtype="float32"):
    """Max pooling; the padding is -inf-free: the window only reads the padded copy's real elements
    where they exist, as torch's max_pool2d (inputs here are positive). Its gradient goes through the
    forward's argmax (the first maximum of each window, as torch's)."""
    x = te.placeholder((n, c, h, w), dtype, name="data")
    xp = _pad(x, padding, "data_pad")
    oh, ow = (h + 2 * padding - r) // stride + 1, (w + 2 * padding - r) // stride + 1
    ry, rx = te.reduce_axis((0, r), "ry"), te.reduce_axis((0, r), "rx")
    out = te.compute((n, c, oh, ow), lambda b, k, y, z: te.max(xp[b, k, y * stride + ry, z * stride + rx],
                                                               axis=[ry, rx]), name="max_pool2d")
    return [x, out]


def max_pool2d_torch(data, r=3, stride=2, padding=1, **_):
    import torch

    return torch.nn.functional.max_pool2d(data, r, stride, padding)


def avg_pool2d(n=1, c=16, h=14, w=14, r=2, stride=2, dtype="float32"):
    x = te.placeholder((n, c, h, w), dtype, name="data")
    oh, ow = (h - r) // stride + 1, (w - r) // stride + 1
    ry, rx = te.reduce_axis((0, r), "ry"), te.reduce_axis((0, r), "rx")
    out = te.compute((n, c, oh, ow), lambda b, k, y, z: te.sum(x[b, k, y * stride + ry, z * stride + rx] / (r * r),
                                                               axis=[ry, rx]), name="avg_pool2d")
    return [x, out]


def avg_pool2d_torch(data, r=2, stride=2, **_):
    import torch

    return torch.nn.functional.avg_pool2d(data, r, stride)


def dense(m=64, n=48, k=80, dtype="float32"):
    """y = x W^T + b."""
    x = te.placeholder((m, k), dtype, name="data")
    weight = te.placeholder((n, k), dtype, name="weight")
    bias = te.placeholder((n,), dtype, name="bias")
    rk = te.reduce_axis((0, k), "rk")
    mm = te.compute((m, n), lambda i, j: te.sum(x[i, rk] * weight[j, rk], axis=rk), name="matmul")
    out = te.compute((m, n), lambda i, j: mm[i, j] + bias[j], name="dense")
    return [x, weight, bias, out]


def dense_torch(data, weight, bias, **_):
    import torch

    return torch.nn.functional.linear(data, weight, bias)


def softmax(m=32, n=64, dtype="float32"):
    """Row softmax in three stages: exp, row sum, quotient (inputs of moderate size: no max shift)."""
    x = te.placeholder((m, n), dtype, name="data")
    e = te.compute((m, n), lambda i, j: te.exp(x[i, j]), name="exp")
    rj = te.reduce_axis((0, n), "rj")
    total = te.compute((m,), lambda i: te.sum(e[i, rj], axis=rj), name="total")
    out = te.compute((m, n), lambda i, j: e[i, j] / total[i], name="softmax")
    return [x, out]


def softmax_torch(data, **_):
    import torch

    return torch.softmax(data, dim=1)


def layer_norm(m=32, n=64, eps=1e-5, dtype="float32"):
    """Layer norm over the last axis, with scale and shift: mean, variance, normalise."""
    x = te.placeholder((m, n), dtype, name="data")
    gamma = te.placeholder((n,), dtype, name="gamma")
    beta = te.placeholder((n,), dtype, name="beta")
    r1, r2 = te.reduce_axis((0, n), "r1"), te.reduce_axis((0, n), "r2")
    mean = te.compute((m,), lambda i: te.sum(x[i, r1] / n, axis=r1), name="mean")
    var = te.compute((m,), lambda i: te.sum((x[i, r2] - mean[i]) * (x[i, r2] - mean[i]) / n, axis=r2), name="var")
    out = te.compute((m, n), lambda i, j: (x[i, j] - mean[i]) / te.sqrt(var[i] + eps) * gamma[j] + beta[j],
                     name="layer_norm")
    return [x, gamma, beta, out]


def layer_norm_torch(data, gamma, beta, eps=1e-5, **_):
    import torch

    return torch.nn.functional.layer_norm(data, data.shape[-1:], gamma, beta, eps)


def gelu(m=64, n=64, dtype="float32"):
    x = te.placeholder((m, n), dtype, name="data")
    out = te.compute((m, n), lambda i, j: 0.5 * x[i, j] * (1.0 + te.erf(x[i, j] * (1.0 / math.sqrt(2.0)))),
                     name="gelu")
    return [x, out]


def gelu_torch(data, **_):
    import torch

    return torch.nn.functional.gelu(data)


def batch_matmul(b=4, m=32, n=24, k=40, dtype="float32"):
    """C[z] = A[z] B[z]^T, as TVM's nn.batch_matmul (the right operand transposed)."""
    a = te.placeholder((b, m, k), dtype, name="A")
    bt = te.placeholder((b, n, k), dtype, name="B")
    rk = te.reduce_axis((0, k), "rk")
    out = te.compute((b, m, n), lambda z, i, j: te.sum(a[z, i, rk] * bt[z, j, rk], axis=rk), name="batch_matmul")
    return [a, bt, out]


def batch_matmul_torch(A, B, **_):
    return A @ B.transpose(1, 2)


def group_norm(n=2, c=8, h=6, w=6, groups=2, eps=1e-5, dtype="float32"):
    """Group norm over (channels of a group, h, w) with per-channel scale and shift; the group of
    channel k is k // (c / groups), a split axis for the gradient."""
    x = te.placeholder((n, c, h, w), dtype, name="data")
    gamma = te.placeholder((c,), dtype, name="gamma")
    beta = te.placeholder((c,), dtype, name="beta")
    cg = c // groups
    size = cg * h * w
    r1 = [te.reduce_axis((0, cg), "c1"), te.reduce_axis((0, h), "y1"), te.reduce_axis((0, w), "x1")]
    mean = te.compute((n, groups), lambda b, g: te.sum(x[b, g * cg + r1[0], r1[1], r1[2]] / size, axis=r1),
                      name="mean")
    r2 = [te.reduce_axis((0, cg), "c2"), te.reduce_axis((0, h), "y2"), te.reduce_axis((0, w), "x2")]

    def centred(b, g, k, y, z):
        return x[b, g * cg + k, y, z] - mean[b, g]

    var = te.compute((n, groups), lambda b, g: te.sum(centred(b, g, *r2) * centred(b, g, *r2) / size, axis=r2),
                     name="var")
    out = te.compute((n, c, h, w), lambda b, k, y, z: (x[b, k, y, z] - mean[b, k // cg])
                     / te.sqrt(var[b, k // cg] + eps) * gamma[k] + beta[k], name="group_norm")
    return [x, gamma, beta, out]


def group_norm_torch(data, gamma, beta, groups=2, eps=1e-5, **_):
    import torch

    return torch.nn.functional.group_norm(data, groups, gamma, beta, eps)


def batch_norm(n=4, c=6, h=5, w=5, eps=1e-5, dtype="float32"):
    """Batch norm in training mode: the batch's statistics per channel, then scale and shift."""
    x = te.placeholder((n, c, h, w), dtype, name="data")
    gamma = te.placeholder((c,), dtype, name="gamma")
    beta = te.placeholder((c,), dtype, name="beta")
    size = n * h * w
    r1 = [te.reduce_axis((0, n), "b1"), te.reduce_axis((0, h), "y1"), te.reduce_axis((0, w), "x1")]
    mean = te.compute((c,), lambda k: te.sum(x[r1[0], k, r1[1], r1[2]] / size, axis=r1), name="mean")
    r2 = [te.reduce_axis((0, n), "b2"), te.reduce_axis((0, h), "y2"), te.reduce_axis((0, w), "x2")]
    var = te.compute((c,), lambda k: te.sum((x[r2[0], k, r2[1], r2[2]] - mean[k])
                                            * (x[r2[0], k, r2[1], r2[2]] - mean[k]) / size, axis=r2), name="var")
    out = te.compute((n, c, h, w), lambda b, k, y, z: (x[b, k, y, z] - mean[k]) / te.sqrt(var[k] + eps) * gamma[k]
                     + beta[k], name="batch_norm")
    return [x, gamma, beta, out]


def batch_norm_torch(data, gamma, beta, eps=1e-5, **_):
    import torch

    return torch.nn.functional.batch_norm(data, None, None, gamma, beta, training=True, eps=eps)


def relu(m=64, n=64, dtype="float32"):
    x = te.placeholder((m, n), dtype, name="data")
    return [x, te.compute((m, n), lambda i, j: te.max(x[i, j], tirx.const(0.0, dtype)), name="relu")]


def relu_torch(data, **_):
    import torch

    return torch.relu(data)


def leaky_relu(m=64, n=64, alpha=0.1, dtype="float32"):
    x = te.placeholder((m, n), dtype, name="data")
    return [x, te.compute((m, n), lambda i, j: tirx.Select(x[i, j] > 0.0, x[i, j], x[i, j] * alpha),
                          name="leaky_relu")]


def leaky_relu_torch(data, alpha=0.1, **_):
    import torch

    return torch.nn.functional.leaky_relu(data, alpha)


def sigmoid(m=64, n=64, dtype="float32"):
    x = te.placeholder((m, n), dtype, name="data")
    return [x, te.compute((m, n), lambda i, j: 1.0 / (1.0 + te.exp(0.0 - x[i, j])), name="sigmoid")]


def sigmoid_torch(data, **_):
    import torch

    return torch.sigmoid(data)


def gated_dense(m=8, n=16, k=32, dtype="float32"):
    """A gated linear unit in one operator: y = (x W^T + b) * sigmoid(x G^T). Four stages (two
    reductions, a gate, a product): its gradient takes the chain rule through all of them."""
    x = te.placeholder((m, k), dtype, name="data")
    weight = te.placeholder((n, k), dtype, name="weight")
    bias = te.placeholder((n,), dtype, name="bias")
    gate = te.placeholder((n, k), dtype, name="gate")
    rk = te.reduce_axis((0, k), "rk")
    value = te.compute((m, n), lambda i, j: te.sum(x[i, rk] * weight[j, rk], axis=rk), name="value")
    rg = te.reduce_axis((0, k), "rg")
    logit = te.compute((m, n), lambda i, j: te.sum(x[i, rg] * gate[j, rg], axis=rg), name="logit")
    out = te.compute((m, n), lambda i, j: (value[i, j] + bias[j]) / (1.0 + te.exp(0.0 - logit[i, j])),
                     name="gated_dense")
    return [x, weight, bias, gate, out]


def gated_dense_torch(data, weight, bias, gate, **_):
    import torch

    return (data @ weight.T + bias) * torch.sigmoid(data @ gate.T)
