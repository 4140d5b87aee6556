"""Thirteen more model families in torch, each small and written from its paper's block structure
(torchvision is not usable beside our torch): the operators a user's first model brings that the
classic CNNs and the BERT/ViT layers do not -- channels-last Linear (ConvNeXt), squeeze-excitation
and hardswish (MobileNetV3, EfficientNet), upsampling and skip concatenation (U-Net), GroupNorm + SiLU
(a diffusion ResBlock), token mixing (MLP-Mixer), a causal mask, fused qkv and tanh-GELU (GPT-2),
rank-6 window partitions (Swin), dense concatenation (DenseNet), 1-D convolutions (an audio CNN), an
unrolled recurrent cell (LSTM), channel shuffle (ShuffleNetV2), fire modules (SqueezeNet).

Every builder takes ``width`` (channel multiplier) and returns an ``nn.Module``; ``FAMILY_INPUTS``
gives each one's example input shape for a batch and an image side. tuner.models.torch_models.build
registers them beside the original zoo.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _ch(c: int, width: float, multiple: int = 4) -> int:
    return max(multiple, int(c * width) // multiple * multiple)


def heads_dim(hidden: int, heads: int, width: float) -> int:
    """An attention model's width: ``hidden`` scaled by ``width``, a whole number of heads (at least one)."""
    return max(heads, int(hidden * width) // heads * heads)


def _pre_norm_attention(dim: int) -> tuple[Any, Any, Any, Any]:
    """A pre-norm attention block's layers, in the order they are made: the LayerNorm before attention
    and the one before the MLP, the fused q/k/v projection and attention's output projection."""
    from torch import nn

    return nn.LayerNorm(dim), nn.LayerNorm(dim), nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)


def convnext(width: float = 1.0, num_classes: int = 1000) -> Any:
    """ConvNeXt-T-like: 4x4 patchify stem, blocks of 7x7 depthwise conv, LayerNorm over channels-last
    and an inverted-bottleneck MLP as Linear layers on [N, H, W, C] (GELU), layer scale, residual."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, dim: int) -> None:
            super().__init__()
            self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
            self.norm = nn.LayerNorm(dim, eps=1e-6)
            self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
            self.gamma = nn.Parameter(torch.full((dim,), 0.5))

        def forward(self, x: Any) -> Any:
            y = self.dw(x).permute(0, 2, 3, 1)  # channels-last: Linear on a 4-D tensor
            y = self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(y)))) * self.gamma
            return x + y.permute(0, 3, 1, 2)

    dims = [_ch(d, width) for d in (96, 192)]

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, dims[0], 4, 4)
            self.stage1 = nn.Sequential(Block(dims[0]), Block(dims[0]))
            self.down = nn.Conv2d(dims[0], dims[1], 2, 2)
            self.stage2 = nn.Sequential(Block(dims[1]), Block(dims[1]))
            self.norm = nn.LayerNorm(dims[1], eps=1e-6)
            self.head = nn.Linear(dims[1], num_classes)

        def forward(self, x: Any) -> Any:
            y = self.stage2(self.down(self.stage1(self.stem(x))))
            return self.head(self.norm(y.mean(dim=(2, 3))))

    return Net()


def _se(c: int, squeeze: int, gate: Callable[[], Any]) -> Any:
    """Squeeze-excitation: global average pool, two 1x1 convs, a gate, rescale the input."""
    from torch import nn

    class SE(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, squeeze, 1), nn.ReLU(),
                                    nn.Conv2d(squeeze, c, 1), gate())

        def forward(self, x: Any) -> Any:
            return x * self.fc(x)

    return SE()


def _residual(layers: list[Any], residual: bool) -> Any:
    """``layers`` in sequence, their input added to their output when ``residual`` (an inverted residual)."""
    from torch import nn

    class Residual(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(*layers)
            self.residual = residual

        def forward(self, x: Any) -> Any:
            y = self.body(x)
            return x + y if self.residual else y

    return Residual()


def mobilenet_v3(width: float = 1.0, num_classes: int = 1000) -> Any:
    """MobileNetV3-Small-like: inverted residuals with squeeze-excitation (hardsigmoid gate) and
    hardswish activations."""
    from torch import nn

    def block(cin: int, exp: int, cout: int, k: int, stride: int, se: bool, hs: bool) -> Any:
        act = nn.Hardswish if hs else nn.ReLU
        layers: list[Any] = [nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), act(),
                             nn.Conv2d(exp, exp, k, stride, k // 2, groups=exp, bias=False), nn.BatchNorm2d(exp), act()]
        if se:
            layers.append(_se(exp, max(8, exp // 4), nn.Hardsigmoid))
        layers += [nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        return _residual(layers, stride == 1 and cin == cout)

    c = [_ch(v, width, 8) for v in (16, 24, 40, 48)]
    return nn.Sequential(
        nn.Conv2d(3, c[0], 3, 2, 1, bias=False), nn.BatchNorm2d(c[0]), nn.Hardswish(),
        block(c[0], c[0], c[0], 3, 2, True, False),
        block(c[0], 4 * c[0], c[1], 3, 2, False, False),
        block(c[1], 4 * c[1], c[2], 5, 2, True, True),
        block(c[2], 3 * c[2], c[3], 5, 1, True, True),
        nn.Conv2d(c[3], 6 * c[3], 1, bias=False), nn.BatchNorm2d(6 * c[3]), nn.Hardswish(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6 * c[3], num_classes))


def efficientnet(width: float = 1.0, num_classes: int = 1000) -> Any:
    """EfficientNet-B0-like: MBConv blocks with squeeze-excitation (sigmoid gate) and SiLU."""
    from torch import nn

    def mbconv(cin: int, cout: int, expand: int, k: int, stride: int) -> Any:
        exp = cin * expand
        layers: list[Any] = []
        if expand != 1:
            layers += [nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), nn.SiLU()]
        layers += [nn.Conv2d(exp, exp, k, stride, k // 2, groups=exp, bias=False), nn.BatchNorm2d(exp), nn.SiLU(),
                   _se(exp, max(4, cin // 4), nn.Sigmoid), nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        return _residual(layers, stride == 1 and cin == cout)

    c = [_ch(v, width, 8) for v in (32, 16, 24, 40)]
    return nn.Sequential(
        nn.Conv2d(3, c[0], 3, 2, 1, bias=False), nn.BatchNorm2d(c[0]), nn.SiLU(),
        mbconv(c[0], c[1], 1, 3, 1), mbconv(c[1], c[2], 6, 3, 2), mbconv(c[2], c[2], 6, 3, 1),
        mbconv(c[2], c[3], 6, 5, 2),
        nn.Conv2d(c[3], 4 * c[3], 1, bias=False), nn.BatchNorm2d(4 * c[3]), nn.SiLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * c[3], num_classes))


def unet(width: float = 1.0, classes: int = 2) -> Any:
    """A small U-Net: double 3x3 conv blocks, max-pool downsampling, bilinear upsampling, skip
    concatenation along the channels."""
    import torch
    from torch import nn

    def double(cin: int, cout: int) -> Any:
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())

    c = [_ch(v, width) for v in (32, 64, 128)]

    class UNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.d0, self.d1, self.d2 = double(3, c[0]), double(c[0], c[1]), double(c[1], c[2])
            self.u1, self.u0 = double(c[2] + c[1], c[1]), double(c[1] + c[0], c[0])
            self.head = nn.Conv2d(c[0], classes, 1)

        def forward(self, x: Any) -> Any:
            f = nn.functional
            x0 = self.d0(x)
            x1 = self.d1(f.max_pool2d(x0, 2))
            x2 = self.d2(f.max_pool2d(x1, 2))
            y = self.u1(torch.cat([f.interpolate(x2, scale_factor=2, mode="bilinear", align_corners=False), x1], 1))
            y = self.u0(torch.cat([f.interpolate(y, scale_factor=2, mode="nearest"), x0], 1))
            return self.head(y)

    return UNet()


def diffusion_resblock(width: float = 1.0) -> Any:
    """Two diffusion-model ResBlocks (DDPM/Stable Diffusion style): GroupNorm, SiLU, 3x3 conv, twice,
    and a 1x1 conv skip when the channels change."""
    from torch import nn

    class ResBlock(nn.Module):
        def __init__(self, cin: int, cout: int) -> None:
            super().__init__()
            self.n1, self.n2 = nn.GroupNorm(8, cin), nn.GroupNorm(8, cout)
            self.c1, self.c2 = nn.Conv2d(cin, cout, 3, padding=1), nn.Conv2d(cout, cout, 3, padding=1)
            self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x: Any) -> Any:
            f = nn.functional
            h = self.c1(f.silu(self.n1(x)))
            return self.skip(x) + self.c2(f.silu(self.n2(h)))

    c = [_ch(v, width, 8) for v in (64, 128)]
    return nn.Sequential(nn.Conv2d(3, c[0], 3, padding=1), ResBlock(c[0], c[1]), ResBlock(c[1], c[1]))


def mlp_mixer(width: float = 1.0, num_classes: int = 1000, image: int = 224, patch: int = 16) -> Any:
    """MLP-Mixer-S-like: patch embedding, then blocks of token mixing (an MLP across the patches, on the
    transposed [N, C, P] tensor) and channel mixing (an MLP across the channels), each pre-norm, GELU."""
    from torch import nn

    dim = _ch(512, width, 8)
    tokens = (image // patch) ** 2

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.tok = nn.Sequential(nn.Linear(tokens, 2 * tokens), nn.GELU(), nn.Linear(2 * tokens, tokens))
            self.chn = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x: Any) -> Any:
            x = x + self.tok(self.n1(x).transpose(1, 2)).transpose(1, 2)
            return x + self.chn(self.n2(x))

    class Mixer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.patch = nn.Conv2d(3, dim, patch, patch)
            self.blocks = nn.Sequential(Block(), Block())
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, num_classes)

        def forward(self, x: Any) -> Any:
            t = self.patch(x).flatten(2).transpose(1, 2)
            return self.head(self.norm(self.blocks(t)).mean(dim=1))

    return Mixer()


def gpt2_block(width: float = 1.0, hidden: int = 768, heads: int = 12) -> Any:
    """One GPT-2 decoder block (pre-norm): fused qkv projection, 4-D multi-head attention with a causal
    mask (masked_fill with -inf before the softmax), tanh-GELU MLP, residuals."""
    import torch
    from torch import nn

    dim = heads_dim(hidden, heads, width)
    hd = dim // heads

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2, self.qkv, self.proj = _pre_norm_attention(dim)
            self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

        def forward(self, x: Any) -> Any:
            b, n, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(dim, dim=2)
            q, k, v = (t.reshape(b, n, heads, hd).transpose(1, 2) for t in (q, k, v))  # [b, heads, n, hd]
            att = (q @ k.transpose(-2, -1)) * hd ** -0.5
            causal = torch.ones(n, n, dtype=torch.bool).tril()
            att = torch.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, n, dim)
            x = x + self.proj(y)
            return x + self.out(nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    return Block()


def swin_block(width: float = 1.0, image: int = 56, window: int = 7, heads: int = 3) -> Any:
    """One Swin transformer block on [N, H, W, C] tokens: window partition (a rank-6 reshape and
    permute), attention within each window with a learned relative-position bias, window reverse,
    MLP; pre-norm, residuals."""
    import torch
    from torch import nn

    dim = heads_dim(96, heads, width)
    hd = dim // heads

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2, self.qkv, self.proj = _pre_norm_attention(dim)
            self.bias = nn.Parameter(torch.randn(heads, window * window, window * window) * 0.02)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x: Any) -> Any:  # x: [b, H, W, C]
            b, h, w, c = x.shape
            t = self.ln1(x).reshape(b, h // window, window, w // window, window, c)
            t = t.permute(0, 1, 3, 2, 4, 5).reshape(-1, window * window, c)  # [windows, w*w, C]
            nw = t.shape[0]
            qkv = self.qkv(t).reshape(nw, window * window, 3, heads, hd).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]  # [windows, heads, w*w, hd]
            att = torch.softmax(q @ k.transpose(-2, -1) * hd ** -0.5 + self.bias, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(nw, window * window, c)
            y = self.proj(y).reshape(b, h // window, w // window, window, window, c)
            y = y.permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)
            x = x + y
            return x + self.mlp(self.ln2(x))

    class Swin(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.patch = nn.Conv2d(3, dim, 4, 4)
            self.block = Block()

        def forward(self, x: Any) -> Any:
            return self.block(self.patch(x).permute(0, 2, 3, 1))

    return Swin()


def densenet(width: float = 1.0, num_classes: int = 1000) -> Any:
    """DenseNet-like: dense blocks where each layer (BN, ReLU, 1x1 conv, BN, ReLU, 3x3 conv) sees the
    concatenation of every earlier feature map; transitions halve the channels and the side."""
    import torch
    from torch import nn

    growth = _ch(32, width)

    class Layer(nn.Module):
        def __init__(self, cin: int) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, 4 * growth, 1, bias=False),
                                      nn.BatchNorm2d(4 * growth), nn.ReLU(),
                                      nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False))

        def forward(self, x: Any) -> Any:
            return torch.cat([x, self.body(x)], 1)

    def block(cin: int, n: int) -> tuple[Any, int]:
        layers = []
        for _ in range(n):
            layers.append(Layer(cin))
            cin += growth
        return nn.Sequential(*layers), cin

    stem = 2 * growth
    b1, c1 = block(stem, 3)
    b2, c2 = block(c1 // 2, 3)
    return nn.Sequential(
        nn.Conv2d(3, stem, 7, 2, 3, bias=False), nn.BatchNorm2d(stem), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
        b1, nn.BatchNorm2d(c1), nn.ReLU(), nn.Conv2d(c1, c1 // 2, 1, bias=False), nn.AvgPool2d(2),
        b2, nn.BatchNorm2d(c2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c2, num_classes))


def audio_cnn1d(width: float = 1.0, classes: int = 35) -> Any:
    """A 1-D convolutional keyword-spotting net (M5-like) on raw audio [N, 1, samples]: strided and
    plain Conv1d, BatchNorm1d, ReLU, MaxPool1d, global average pooling, a linear classifier."""
    from torch import nn

    c = [_ch(v, width) for v in (32, 64)]
    return nn.Sequential(
        nn.Conv1d(1, c[0], 80, 16), nn.BatchNorm1d(c[0]), nn.ReLU(), nn.MaxPool1d(4),
        nn.Conv1d(c[0], c[0], 3, padding=1), nn.BatchNorm1d(c[0]), nn.ReLU(), nn.MaxPool1d(4),
        nn.Conv1d(c[0], c[1], 3, padding=1), nn.BatchNorm1d(c[1]), nn.ReLU(),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(c[1], classes))


def lstm_unrolled(width: float = 1.0, features: int = 64, hidden: int = 256, steps: int = 4, classes: int = 10) -> Any:
    """An LSTM cell unrolled over a few time steps (gates as one Linear over [x, h], sigmoid/tanh),
    then a classifier on the last hidden state; input [N, steps, features]."""
    import torch
    from torch import nn

    hid = _ch(hidden, width)

    class Unrolled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gates = nn.Linear(features + hid, 4 * hid)
            self.head = nn.Linear(hid, classes)
            # the zero initial state as a buffer expanded to the batch (torch.zeros(b, ...) exports as
            # ONNX ConstantOfShape of a Shape, which TVM's ONNX importer fails on)
            self.register_buffer("zero", torch.zeros(1, hid))

        def forward(self, x: Any) -> Any:
            b = x.shape[0]
            zero: Any = self.zero
            h = zero.expand(b, hid)
            c = zero.expand(b, hid)
            for t in range(steps):
                i, f, g, o = self.gates(torch.cat([x[:, t], h], 1)).chunk(4, 1)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                h = torch.sigmoid(o) * torch.tanh(c)
            return self.head(h)

    return Unrolled()


def shufflenet_v2(width: float = 1.0, num_classes: int = 1000) -> Any:
    """ShuffleNetV2-like: channel split, a 1x1 / depthwise 3x3 / 1x1 branch, concat and channel
    shuffle (a reshape to [N, 2, C/2, H, W], transpose, reshape back)."""
    import torch
    from torch import nn

    def shuffle(x: Any) -> Any:
        n, c, h, w = x.shape
        return x.reshape(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)

    class Unit(nn.Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            half = c // 2
            self.branch = nn.Sequential(nn.Conv2d(half, half, 1, bias=False), nn.BatchNorm2d(half), nn.ReLU(),
                                        nn.Conv2d(half, half, 3, padding=1, groups=half, bias=False),
                                        nn.BatchNorm2d(half), nn.Conv2d(half, half, 1, bias=False),
                                        nn.BatchNorm2d(half), nn.ReLU())

        def forward(self, x: Any) -> Any:
            a, b = x.chunk(2, dim=1)
            return shuffle(torch.cat([a, self.branch(b)], 1))

    c = _ch(116, width, 8)
    return nn.Sequential(nn.Conv2d(3, c, 3, 2, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                         Unit(c), Unit(c), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, num_classes))


def squeezenet(width: float = 1.0, num_classes: int = 1000) -> Any:
    """SqueezeNet 1.1-like: fire modules (a 1x1 squeeze, then 1x1 and 3x3 expands concatenated)."""
    import torch
    from torch import nn

    class Fire(nn.Module):
        def __init__(self, cin: int, squeeze: int, expand: int) -> None:
            super().__init__()
            self.s = nn.Sequential(nn.Conv2d(cin, squeeze, 1), nn.ReLU())
            self.e1 = nn.Sequential(nn.Conv2d(squeeze, expand, 1), nn.ReLU())
            self.e3 = nn.Sequential(nn.Conv2d(squeeze, expand, 3, padding=1), nn.ReLU())

        def forward(self, x: Any) -> Any:
            s = self.s(x)
            return torch.cat([self.e1(s), self.e3(s)], 1)

    s, e = _ch(16, width), _ch(64, width)
    return nn.Sequential(nn.Conv2d(3, 4 * s, 3, 2), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=False),
                         Fire(4 * s, s, e), Fire(2 * e, s, e), nn.MaxPool2d(3, 2),
                         Fire(2 * e, 2 * s, 2 * e), nn.Conv2d(4 * e, num_classes, 1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten())


FAMILIES: dict[str, Callable[..., Any]] = {
    "convnext": convnext, "mobilenet_v3": mobilenet_v3, "efficientnet": efficientnet, "unet": unet,
    "diffusion_resblock": diffusion_resblock, "mlp_mixer": mlp_mixer, "gpt2_block": gpt2_block,
    "swin_block": swin_block, "densenet": densenet, "audio_cnn1d": audio_cnn1d, "lstm_unrolled": lstm_unrolled,
    "shufflenet_v2": shufflenet_v2, "squeezenet": squeezenet,
}
SEQUENCE = 64  # the GPT-2 block's tokens
AUDIO_SAMPLES = 4000  # the audio CNN's input: a quarter second at 16 kHz
LSTM_STEPS, LSTM_FEATURES = 4, 64


def family_input(name: str, batch: int, image: int, module: Any) -> tuple[int, ...]:
    """The example input shape of a family (``image``: the side of the image models)."""
    if name == "gpt2_block":
        return (batch, SEQUENCE, module.ln1.normalized_shape[0])
    if name == "audio_cnn1d":
        return (batch, 1, AUDIO_SAMPLES)
    if name == "lstm_unrolled":
        return (batch, LSTM_STEPS, LSTM_FEATURES)
    return (batch, 3, image, image)


def build_family(name: str, width: float, image: int) -> Any:
    """The module of one family; the image-size-dependent ones (MLP-Mixer, Swin) are built for ``image``."""
    if name == "mlp_mixer":
        return mlp_mixer(width, image=image)
    if name == "swin_block":
        return swin_block(width, image=image)
    return FAMILIES[name](width)
