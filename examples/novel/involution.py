"""RedNet-style involution: a spatial kernel generated per pixel from the input, applied as an
expression operator.

Li, Hu, Wang, Li, She, Zhu, Zhang and Chen, "Involution: Inverting the Inherence of Convolution
for Visual Recognition", CVPR 2021. Where a convolution shares one kernel over all pixels and has a
kernel per channel, involution generates a K x K kernel at every pixel, shared by the C / G channels
of each of G groups (stride 1, as in the paper's reference ``involution`` module)::

    H = conv1x1(relu(bn(conv1x1(X))))             kernel generation, [N, G*K*K, H, W] (library convs, reduction r = 4)
    Y[n, c, i, j] = sum_{u, v} H[n, (c // (C/G)) * K*K + u*K + v, i, j] * Xpad[n, c, i + u, j + v]

Expression operator: ``involution`` (Xpad, H -> Y, no parameters of its own). Its tensors are free
views that keep it one stage with every index one axis plus an offset, which the compiler runs as a
CPE kernel and derives without copies: Xpad [N, G, C/G, H + 2p, W + 2p], H [N, G, K, K, H, W] and Y
[N, G, C/G, H, W] (the channel as its group and its place in the group; c // (C/G) is no affine
index, and a kernel channel read as g*K*K + u*K + v makes the derivation view the kernel's gradient as
[N, G, K, K, H, W] and copy it back). The padding by p = (K - 1) / 2 is torch's pad before the
operator (a stage ``if_then_else`` inside it would be a step of its own that no CPE kernel takes).

Sizes: 3 x 16 x 16 images, a 3 x 3 stem conv to C = 32 channels, G = 2 groups of 16 channels and K = 7
(the paper's RedNet: 16 channels per group, 7 x 7 kernels), one involution with its generation branch
(32 -> 8 -> 98 channels), a global average pool and a Linear to 10 classes; the batch is the command
line's (8)::

    swtune train examples/novel/involution.py:model -o inv --optimizer sgd --lr 0.05 --batch 8 --steps 5 --trials 0
"""

from pathlib import Path

from tvm import te

HERE = Path(__file__).resolve()


def involution(n=2, c=8, h=6, w=6, groups=2, k=3, dtype="float32"):
    """Y[n, g, q, i, j] = sum_{u,v} H[n, g, u, v, i, j] * Xpad[n, g, q, i + u, j + v]: channel
    g*(c/groups) + q written as its group g and its place q in the group, the kernel channel
    g*k*k + u*k + v as (g, u, v) (views of the [n, c, ...] and [n, groups*k*k, ...] tensors). Xpad is
    the input padded by (k - 1) / 2 on each side (torch's pad, before the operator)."""
    p = (k - 1) // 2
    cg = c // groups
    xp = te.placeholder((n, groups, cg, h + 2 * p, w + 2 * p), dtype, name="data_pad")
    kern = te.placeholder((n, groups, k, k, h, w), dtype, name="kernel")
    ru, rv = te.reduce_axis((0, k), "ru"), te.reduce_axis((0, k), "rv")
    out = te.compute((n, groups, cg, h, w), lambda b, g, q, y, z: te.sum(
        kern[b, g, ru, rv, y, z] * xp[b, g, q, y + ru, z + rv], axis=[ru, rv]), name="involution")
    return [xp, kern, out]


def involution_torch(data_pad, kernel, **_):
    """The reference module's unfold-multiply-sum, ``unfold`` written as the K*K shifted windows
    stacked (primitives torch.export keeps and TVM imports): K stacks of K windows, then a stack of
    those, so that no concat or split has more operands than a CPE kernel takes (16 pointers).
    ``torch.nn.functional.unfold`` itself does not import: torch.export decomposes im2col into an
    ``aten.index.Tensor`` of broadcast index grids with ``None`` axes, which TVM 0.27's importer
    refuses ("index_tensor: cannot broadcast index shapes")."""
    import torch

    n, groups, cg, hp, wp = data_pad.shape
    k, h, w = kernel.shape[2], kernel.shape[4], kernel.shape[5]
    rows = [torch.stack([data_pad[:, :, :, u:u + h, v:v + w] for v in range(k)], dim=3) for u in range(k)]
    unfolded = torch.stack(rows, dim=3)  # [n, groups, cg, k, k, h, w]
    return (kernel.unsqueeze(2) * unfolded).sum(dim=(3, 4))


def model(batch=8, image=16, channels=32, groups=2, k=7, reduction=4, classes=10):
    import torch

    from tuner.ir.expr_layer import expression_layer

    class RedNetBlock(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, channels, 3, padding=1)
            self.reduce = torch.nn.Conv2d(channels, channels // reduction, 1)
            self.bn = torch.nn.BatchNorm2d(channels // reduction)
            self.span = torch.nn.Conv2d(channels // reduction, groups * k * k, 1)
            self.inv = expression_layer(f"{HERE}:involution", {"n": batch, "c": channels, "h": image, "w": image,
                                                                "groups": groups, "k": k}, inputs=2)
            self.head = torch.nn.Linear(channels, classes)

        def forward(self, x):
            x = torch.relu(self.stem(x))
            kernel = self.span(torch.relu(self.bn(self.reduce(x))))
            p = (k - 1) // 2
            xp = torch.nn.functional.pad(x, (p, p, p, p)).reshape(batch, groups, channels // groups, image + 2 * p,
                                                                  image + 2 * p)
            y = self.inv(xp, kernel.reshape(batch, groups, k, k, image, image)).reshape(x.shape)
            y = torch.relu(y) + x
            return self.head(y.mean(dim=(2, 3)))

    torch.manual_seed(0)
    return RedNetBlock(), (torch.randn(batch, 3, image, image),)
