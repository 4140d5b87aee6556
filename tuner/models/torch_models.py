"""PyTorch definitions of the model zoo (torchvision / timm / BERT architectures, random weights).

AlexNet, VGG-19, ResNet-18, ResNet-50, MobileNetV2, a BERT-base encoder layer (sequence 128) and
ViT-tiny/16. torchvision itself does not install beside the CPU torch build on these machines, and no
weights can be downloaded, so the networks are defined here; compilation and tuning only need shapes
and some weights. ``width`` scales every channel count / hidden size (1.0 = the published model; tests
and benchmarks use narrow copies to stay fast and say so); depths and sequence lengths are kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tuner.models.torch_families import FAMILIES, build_family, family_input, heads_dim


def _width_scaled(width: float) -> Callable[[int], int]:
    """A model's channel counts scaled by ``width`` (each at least 1)."""
    return lambda c: max(1, int(c * width))


def alexnet(width: float = 1.0, num_classes: int = 1000) -> Any:
    from torch import nn

    ch = _width_scaled(width)

    return nn.Sequential(
        nn.Conv2d(3, ch(64), 11, stride=4, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(ch(64), ch(192), 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(ch(192), ch(384), 3, padding=1), nn.ReLU(),
        nn.Conv2d(ch(384), ch(256), 3, padding=1), nn.ReLU(),
        nn.Conv2d(ch(256), ch(256), 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Flatten(),
        nn.Linear(ch(256) * 36, ch(4096)), nn.ReLU(),
        nn.Linear(ch(4096), ch(4096)), nn.ReLU(),
        nn.Linear(ch(4096), num_classes),
    )


def resnet18(width: float = 1.0, num_classes: int = 1000) -> Any:
    from torch import nn

    ch = _width_scaled(width)

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x: Any) -> Any:
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + (x if self.down is None else self.down(x)))

    layers: list[Any] = [nn.Conv2d(3, ch(64), 7, 2, 3, bias=False), nn.BatchNorm2d(ch(64)), nn.ReLU(),
                         nn.MaxPool2d(3, 2, 1)]
    cin = ch(64)
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Block(cin, ch(cout), stride), Block(ch(cout), ch(cout), 1)]
        cin = ch(cout)
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes)]
    return nn.Sequential(*layers)


def vgg19(width: float = 1.0, num_classes: int = 1000, image: int = 224) -> Any:
    """VGG-19 (configuration E): 16 3x3 convs in five stages, max pools, three fc layers."""
    from torch import nn

    ch = _width_scaled(width)

    layers: list[Any] = []
    cin = 3
    for cout, reps in ((64, 2), (128, 2), (256, 4), (512, 4), (512, 4)):
        for _ in range(reps):
            layers += [nn.Conv2d(cin, ch(cout), 3, padding=1), nn.ReLU()]
            cin = ch(cout)
        layers.append(nn.MaxPool2d(2, 2))
    side = image // 32
    layers += [nn.Flatten(), nn.Linear(cin * side * side, ch(4096)), nn.ReLU(),
               nn.Linear(ch(4096), ch(4096)), nn.ReLU(), nn.Linear(ch(4096), num_classes)]
    return nn.Sequential(*layers)


def resnet50(width: float = 1.0, num_classes: int = 1000) -> Any:
    """ResNet-50: bottleneck blocks (1x1, 3x3, 1x1 x4 expansion), stages of 3, 4, 6, 3 blocks."""
    from torch import nn

    ch = _width_scaled(width)

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, mid: int, stride: int) -> None:
            super().__init__()
            cout = mid * 4
            self.body = nn.Sequential(
                nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
                nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
                nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            self.relu = nn.ReLU()

        def forward(self, x: Any) -> Any:
            return self.relu(self.body(x) + (x if self.down is None else self.down(x)))

    layers: list[Any] = [nn.Conv2d(3, ch(64), 7, 2, 3, bias=False), nn.BatchNorm2d(ch(64)), nn.ReLU(),
                         nn.MaxPool2d(3, 2, 1)]
    cin = ch(64)
    for mid, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, ch(mid), stride if i == 0 else 1))
            cin = ch(mid) * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes)]
    return nn.Sequential(*layers)


def mobilenet_v2(width: float = 1.0, num_classes: int = 1000) -> Any:
    """MobileNetV2: inverted residuals (1x1 expand, 3x3 depthwise, 1x1 project), ReLU6, width multiplier."""
    from torch import nn

    def ch(c: float) -> int:  # torchvision's rounding to multiples of 8 (kept >= 8)
        v = max(8, int(c * width + 4) // 8 * 8)
        return v + 8 if v < 0.9 * c * width else v

    class Inverted(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
            super().__init__()
            hidden = cin * expand
            layers: list[Any] = []
            if expand != 1:
                layers += [nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6()]
            layers += [nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
                       nn.ReLU6(), nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
            self.body = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x: Any) -> Any:
            return x + self.body(x) if self.residual else self.body(x)

    cin = ch(32)
    layers: list[Any] = [nn.Conv2d(3, cin, 3, 2, 1, bias=False), nn.BatchNorm2d(cin), nn.ReLU6()]
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            layers.append(Inverted(cin, ch(c), s if i == 0 else 1, t))
            cin = ch(c)
    last = max(ch(1280), 1280) if width > 1.0 else ch(1280)
    layers += [nn.Conv2d(cin, last, 1, bias=False), nn.BatchNorm2d(last), nn.ReLU6(),
               nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(last, num_classes)]
    return nn.Sequential(*layers)


class _Attention:
    """Multi-head self-attention written with matmul/softmax (what torch.export hands TVM cleanly)."""

    @staticmethod
    def build(dim: int, heads: int) -> Any:
        import torch
        from torch import nn

        class Attention(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.heads, self.hd = heads, dim // heads
                self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
                self.out = nn.Linear(dim, dim)

            def forward(self, x: Any) -> Any:
                b, n, _ = x.shape

                def split(t: Any) -> Any:  # [b, n, dim] -> [b * heads, n, hd]
                    return t.reshape(b, n, self.heads, self.hd).permute(0, 2, 1, 3).reshape(b * self.heads, n, self.hd)

                q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
                att = torch.softmax(torch.matmul(q, k.transpose(1, 2)) * (self.hd ** -0.5), dim=-1)
                y = torch.matmul(att, v).reshape(b, self.heads, n, self.hd).permute(0, 2, 1, 3).reshape(b, n, dim)
                return self.out(y)

        return Attention()


def bert_layer(width: float = 1.0, hidden: int = 768, heads: int = 12, ff: int = 3072) -> Any:
    """One BERT-base encoder layer (post-norm): self-attention, add & LayerNorm, GELU FFN, add & LayerNorm."""
    from torch import nn

    dim = heads_dim(hidden, heads, width)
    inner = max(1, int(ff * width))

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.att = _Attention.build(dim, heads)
            self.ln1, self.ln2 = nn.LayerNorm(dim, eps=1e-12), nn.LayerNorm(dim, eps=1e-12)
            self.ff = nn.Sequential(nn.Linear(dim, inner), nn.GELU(), nn.Linear(inner, dim))

        def forward(self, x: Any) -> Any:
            x = self.ln1(x + self.att(x))
            return self.ln2(x + self.ff(x))

    return Layer()


def vit_tiny(width: float = 1.0, num_classes: int = 1000, image: int = 224, patch: int = 16) -> Any:
    """ViT-tiny/16: 16x16 patch embedding, class token, 12 pre-norm blocks (dim 192, 3 heads, MLP 768)."""
    import torch
    from torch import nn

    heads = 3
    dim = heads_dim(192, heads, width)
    tokens = (image // patch) ** 2 + 1

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
            self.att = _Attention.build(dim, heads)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x: Any) -> Any:
            x = x + self.att(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class ViT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.patch = nn.Conv2d(3, dim, patch, patch)
            self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
            self.pos = nn.Parameter(torch.randn(1, tokens, dim) * 0.02)
            self.blocks = nn.Sequential(*[Block() for _ in range(12)])
            self.norm = nn.LayerNorm(dim, eps=1e-6)
            self.head = nn.Linear(dim, num_classes)

        def forward(self, x: Any) -> Any:
            t = self.patch(x).flatten(2).transpose(1, 2)  # [b, patches, dim]
            t = torch.cat([self.cls.expand(x.shape[0], -1, -1), t], dim=1) + self.pos
            t = self.norm(self.blocks(t))
            return self.head(t[:, 0])

    return ViT()


TORCH_MODELS: dict[str, Callable[..., Any]] = {
    "alexnet": alexnet, "vgg19": vgg19, "resnet18": resnet18, "resnet50": resnet50,
    "mobilenet_v2": mobilenet_v2, "bert_layer": bert_layer, "vit_tiny": vit_tiny, **FAMILIES}
SEQUENCE = 128  # the BERT layer's sequence length (its input is [batch, 128, hidden])


def _calibrate_batch_norm(module: Any, example: Any) -> None:
    """Set every BatchNorm's running statistics from a forward pass over random inputs. With the
    default statistics (mean 0, var 1) a randomly initialised deep net such as MobileNetV2 decays to
    an output that no longer depends on its input, and a numerical check of it would prove nothing."""
    import torch

    norms = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for bn in norms:
        bn.reset_running_stats()
        bn.momentum = None  # a cumulative average over the calibration pass
    module.train()
    with torch.no_grad():
        module(torch.randn(8, *example.shape[1:]))
    module.eval()


def _he_init(module: Any) -> None:
    """He (Kaiming) initialisation of a net without normalisation (AlexNet, VGG): torch's default
    init shrinks activations layer by layer until a deep VGG's output no longer depends on its input."""
    import torch

    torch.manual_seed(0)
    for m in module.modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
            torch.nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            if m.bias is not None:
                torch.nn.init.uniform_(m.bias, -0.1, 0.1)


def build(name: str, batch: int = 1, width: float = 1.0, image: int = 224) -> tuple[Any, tuple[Any, ...]]:
    """(module in eval mode, example inputs) of a named reference network; ``image`` is the input
    side of the image models (the BERT layer takes [batch, 128, hidden] activations instead)."""
    import torch

    if name not in TORCH_MODELS:
        raise ValueError(f"unknown model {name!r}; expected one of {sorted(TORCH_MODELS)}")
    torch.manual_seed(0)
    if name in FAMILIES:
        module = build_family(name, width, image).eval()
        x = torch.randn(*family_input(name, batch, image, module))
        _calibrate_batch_norm(module, x)
        return module, (x,)
    if name == "bert_layer":
        module = bert_layer(width).eval()
        return module, (torch.randn(batch, SEQUENCE, module.ln1.normalized_shape[0]),)
    if name in ("vgg19", "vit_tiny"):
        module = TORCH_MODELS[name](width, image=image).eval()
    else:
        module = TORCH_MODELS[name](width).eval()
    if name in ("alexnet", "vgg19"):
        _he_init(module)
    x = torch.randn(batch, 3, image, image)
    _calibrate_batch_norm(module, x)
    return module, (x,)
