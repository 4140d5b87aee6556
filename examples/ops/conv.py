"""Convolutions over already padded inputs: conv1d, conv3d, conv2d_transpose, depthwise-separable."""

from tvm import te


def conv1d(n=1, c=64, w=130, k=128, s=3, stride=1):
    data = te.placeholder((n, c, w), name="data")
    weight = te.placeholder((k, c, s), name="weight")
    ow = (w - s) // stride + 1
    rc = te.reduce_axis((0, c), name="rc")
    rs = te.reduce_axis((0, s), name="rs")
    out = te.compute((n, k, ow), lambda b, f, x: te.sum(data[b, rc, x * stride + rs] * weight[f, rc, rs],
                                                        axis=[rc, rs]), name="conv1d")
    return [data, weight, out]


def conv3d(n=1, c=16, d=10, h=18, w=18, k=32, r=3):
    data = te.placeholder((n, c, d, h, w), name="data")
    weight = te.placeholder((k, c, r, r, r), name="weight")
    rc = te.reduce_axis((0, c), name="rc")
    rd = te.reduce_axis((0, r), name="rd")
    rh = te.reduce_axis((0, r), name="rh")
    rw = te.reduce_axis((0, r), name="rw")
    out = te.compute(
        (n, k, d - r + 1, h - r + 1, w - r + 1),
        lambda b, f, z, y, x: te.sum(data[b, rc, z + rd, y + rh, x + rw] * weight[f, rc, rd, rh, rw],
                                     axis=[rc, rd, rh, rw]),
        name="conv3d")
    return [data, weight, out]


def conv2d_transpose(n=1, c=64, h=16, w=16, k=32, r=4):
    """Stride-1 transposed conv: a full correlation of the input padded by r-1 with the flipped kernel.

    ``data`` is the input padded by r-1 on each side; the weight keeps PyTorch's (C_in, C_out, R, R) layout.
    """
    hp, wp = h + 2 * (r - 1), w + 2 * (r - 1)
    data = te.placeholder((n, c, hp, wp), name="data")
    weight = te.placeholder((c, k, r, r), name="weight")
    rc = te.reduce_axis((0, c), name="rc")
    ry = te.reduce_axis((0, r), name="ry")
    rx = te.reduce_axis((0, r), name="rx")
    out = te.compute(
        (n, k, h + r - 1, w + r - 1),
        lambda b, f, y, x: te.sum(data[b, rc, y + ry, x + rx] * weight[rc, f, r - 1 - ry, r - 1 - rx],
                                  axis=[rc, ry, rx]),
        name="conv2d_transpose")
    return [data, weight, out]


def depthwise_separable(n=1, c=64, h=30, w=30, k=128, r=3):
    """Depthwise r x r then pointwise 1x1, fused: out[k] = sum_c pw[k,c] * sum_rs dw[c,r,s] * x[c, y+r, x+s]."""
    data = te.placeholder((n, c, h, w), name="data")
    dw = te.placeholder((c, r, r), name="dw")
    pw = te.placeholder((k, c), name="pw")
    rc = te.reduce_axis((0, c), name="rc")
    ry = te.reduce_axis((0, r), name="ry")
    rx = te.reduce_axis((0, r), name="rx")
    out = te.compute(
        (n, k, h - r + 1, w - r + 1),
        lambda b, f, y, x: te.sum(pw[f, rc] * dw[rc, ry, rx] * data[b, rc, y + ry, x + rx], axis=[rc, ry, rx]),
        name="dw_separable")
    return [data, dw, pw, out]
