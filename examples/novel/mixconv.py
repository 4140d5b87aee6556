"""MixConv: a depthwise convolution whose channel groups have kernels of different sizes, each group's
convolution an expression operator.

Tan and Le, "MixConv: Mixed Depthwise Convolutional Kernels", BMVC 2019. The C channels are split into
groups (the paper's equal partition), group g is a depthwise convolution with a k_g x k_g kernel
(3, 5, 7, ...: k_g = 2g + 3), and the outputs are concatenated::

    x_1, ..., x_G = split(x, C / G)
    y = concat_g( depthwise_conv_{k_g}(x_g) )

Expression operators: ``mixconv_group`` (the group's input padded by (k_g - 1) / 2, W_g -> its
output), once per kernel size. The split, the paddings and the concat are torch's (library region
copies). Reading each group's channels out of one input padded by the largest kernel's padding instead
makes each group's data gradient pad the output gradient along the channels, a padding no CPE kernel
takes (it ran on the MPE, 40% of the step).

Sizes: 3 x 16 x 16 images, a 3 x 3 stem conv to C = 48 channels, one MixConv block of three groups of
16 channels with 3 x 3, 5 x 5 and 7 x 7 kernels followed by ReLU, a 1 x 1 conv and a residual
connection, a global average pool and a Linear to 10 classes; the batch is the command line's (8)::

    swtune train examples/novel/mixconv.py:model -o mixconv --optimizer sgd --lr 0.05 --batch 8 --steps 5 --trials 0
"""

from pathlib import Path

from tvm import te

HERE = Path(__file__).resolve()


def mixconv_group(n=2, group=4, h=6, w=6, k=3, dtype="float32"):
    """y[b, q, i, j] = sum_{u, v} W[q, u, v] * xpad[b, q, i + u, j + v]: the group's depthwise k x k
    convolution, its input padded by (k - 1) / 2."""
    pad = (k - 1) // 2
    xp = te.placeholder((n, group, h + 2 * pad, w + 2 * pad), dtype, name="data_pad")
    weight = te.placeholder((group, k, k), dtype, name="weight")
    ru, rv = te.reduce_axis((0, k), "ru"), te.reduce_axis((0, k), "rv")
    out = te.compute((n, group, h, w), lambda b, q, y, z: te.sum(weight[q, ru, rv] * xp[b, q, y + ru, z + rv],
                                                                 axis=[ru, rv]), name=f"mixconv_k{k}")
    return [xp, weight, out]


def mixconv_group_torch(data_pad, weight, **_):
    import torch

    return torch.nn.functional.conv2d(data_pad, weight[:, None], groups=weight.shape[0])


def model(batch=8, image=16, channels=48, kernels=(3, 5, 7), classes=10):
    import torch

    from tuner.ir.expr_layer import expression_layer

    group = channels // len(kernels)

    class MixConvNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, channels, 3, padding=1)
            self.groups = torch.nn.ModuleList()
            for k in kernels:
                layer = expression_layer(f"{HERE}:mixconv_group", {"n": batch, "group": group, "h": image,
                                                                   "w": image, "k": k})
                with torch.no_grad():  # a depthwise conv's bound, 1/sqrt(k*k) (the layer's default is 1/sqrt(k))
                    layer.weight.uniform_(-1.0 / k, 1.0 / k)
                self.groups.append(layer)
            self.pointwise = torch.nn.Conv2d(channels, channels, 1)
            self.head = torch.nn.Linear(channels, classes)

        def forward(self, x):
            x = torch.relu(self.stem(x))
            parts = torch.split(x, group, dim=1)
            mixed = torch.cat([layer(torch.nn.functional.pad(part, ((k - 1) // 2,) * 4))
                               for layer, part, k in zip(self.groups, parts, kernels)], dim=1)
            y = torch.relu(self.pointwise(torch.relu(mixed))) + x
            return self.head(y.mean(dim=(2, 3)))

    torch.manual_seed(0)
    return MixConvNet(), (torch.randn(batch, 3, image, image),)
