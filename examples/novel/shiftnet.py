"""ShiftNet: the shift operation, a zero-FLOP, zero-parameter spatial convolution, fused with the
1 x 1 convolution that follows it into one expression operator.

Wu, Wan, Yue, Jin, Zhao, Golmant, Gholaminejad, Gonzalez and Keutzer, "Shift: A Zero FLOP, Zero
Parameter Alternative to Spatial Convolutions", CVPR 2018. The C channels are split into K*K groups of
C / (K*K); group (u, v) is shifted by (u - p, v - p), p = (K - 1) / 2, filling with zeros (the
paper's grouped shift, which gives each shift to an equal share of the channels); a 1 x 1 convolution
then mixes the channels. The Conv-Shift-Conv (CSC) module::

    a = relu(conv1x1(x))
    shifted[n, (u*K + v)*C/(K*K) + q, i, j] = apad[n, (u*K + v)*C/(K*K) + q, i + u, j + v]
    y = relu(conv1x1(shifted)) + x

Expression operator: ``shift_conv`` (apad, W -> the 1 x 1 convolution of the shifted input): the
shift fused into the 1 x 1 convolution's reduction, so that it costs no pass over memory of its own,
and the operator is GEMM-like (a tuning task the CPEs run). The padding by p is torch's pad before it;
the channel (u*K + v)*C/(K*K) + q is written by its shift group (u, v) and its place q, every index
affine. Its derived data gradient is the opposite shift: the derivation views the channel as its
shift group and place (u, v, q), solves u and v from it and substitutes them in the rows and columns
(i' - u, j' - v; tuner.expr.gather_form's triangular solve), so it is a 1 x 1 conv's data gradient of
the head shifted back, zero outside the output, and no sum over every group under a guard.

Sizes: 3 x 16 x 16 images, a 3 x 3 stem conv to C = 72 channels (8 per shift group of a 3 x 3 shift),
two CSC modules with expansion 1, a global average pool and a Linear to 10 classes; the batch is the
command line's (8)::

    swtune train examples/novel/shiftnet.py:model -o shiftnet --optimizer sgd --lr 0.05 --batch 8 --steps 5 --trials 0
"""

from pathlib import Path

from tvm import te

HERE = Path(__file__).resolve()


def shift_conv(n=2, c=18, h=6, w=6, k_out=8, k=3, dtype="float32"):
    """y[n, o, i, j] = sum_{u, v, q} W[o, (u*k + v)*cg + q] * apad[n, (u*k + v)*cg + q, i + u, j + v],
    cg = c / (k*k)."""
    p = (k - 1) // 2
    cg = c // (k * k)
    xp = te.placeholder((n, c, h + 2 * p, w + 2 * p), dtype, name="data_pad")
    weight = te.placeholder((k_out, c), dtype, name="weight")
    ru, rv, rq = te.reduce_axis((0, k), "ru"), te.reduce_axis((0, k), "rv"), te.reduce_axis((0, cg), "rq")
    out = te.compute((n, k_out, h, w), lambda b, o, y, z: te.sum(
        weight[o, (ru * k + rv) * cg + rq] * xp[b, (ru * k + rv) * cg + rq, y + ru, z + rv], axis=[ru, rv, rq]),
        name="shift_conv")
    return [xp, weight, out]


def shift_torch(data_pad, k=3):
    """The grouped shift alone: channel group (u, v) of the padded input read at offset (u, v)."""
    import torch

    n, c, hp, wp = data_pad.shape
    h, w = hp - (k - 1), wp - (k - 1)
    cg = c // (k * k)
    return torch.cat([data_pad[:, g * cg:(g + 1) * cg, g // k:g // k + h, g % k:g % k + w] for g in range(k * k)],
                     dim=1)


def shift_conv_torch(data_pad, weight, k=3, **_):
    """The shift, then the 1 x 1 convolution."""
    import torch

    return torch.nn.functional.conv2d(shift_torch(data_pad, k), weight[:, :, None, None])


def model(batch=8, image=16, channels=72, k=3, blocks=2, classes=10):
    import torch

    from tuner.ir.expr_layer import expression_layer

    class CSC(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.expand = torch.nn.Conv2d(channels, channels, 1)
            self.shift_conv = expression_layer(f"{HERE}:shift_conv", {
                "n": batch, "c": channels, "h": image, "w": image, "k_out": channels, "k": k})

        def forward(self, x):
            p = (k - 1) // 2
            a = torch.nn.functional.pad(torch.relu(self.expand(x)), (p, p, p, p))
            return torch.relu(self.shift_conv(a)) + x

    class ShiftNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, channels, 3, padding=1)
            self.blocks = torch.nn.Sequential(*[CSC() for _ in range(blocks)])
            self.head = torch.nn.Linear(channels, classes)

        def forward(self, x):
            return self.head(self.blocks(torch.relu(self.stem(x))).mean(dim=(2, 3)))

    torch.manual_seed(0)
    return ShiftNet(), (torch.randn(batch, 3, image, image),)
