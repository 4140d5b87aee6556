"""Small models to train, defined in torch (random weights, seeded): what ``swtune train`` takes by
name beside the inference zoo (tuner.models.torch_models), whose models it also trains.

Each returns a classifier over ``classes`` outputs, sized so a few emulated steps take seconds: an MLP,
a CNN with batch norm and dropout, a ResNet-18 at reduced width on 32x32 images, and a transformer encoder layer
(BERT's, at reduced width) with a mean-pooled classification head.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def mlp(width: float = 1.0, features: int = 32, hidden: int = 64, classes: int = 10) -> Any:
    from torch import nn

    h = max(4, int(hidden * width))
    return nn.Sequential(nn.Linear(features, h), nn.ReLU(), nn.Linear(h, h), nn.Tanh(), nn.Linear(h, classes))


def cnn(width: float = 1.0, classes: int = 10) -> Any:
    """conv-BN-ReLU, max pool, strided conv-BN-ReLU, global average pool, dropout, linear (the
    convolutions before batch norm have no bias, as usual)."""
    from torch import nn

    c1, c2 = max(2, int(8 * width)), max(2, int(16 * width))
    return nn.Sequential(
        nn.Conv2d(3, c1, 3, padding=1, bias=False), nn.BatchNorm2d(c1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(c2), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.25), nn.Linear(c2, classes))


def resnet18_small(width: float = 0.125, classes: int = 10) -> Any:
    from tuner.models.torch_models import resnet18

    return resnet18(width, num_classes=classes)


def transformer(width: float = 1.0, hidden: int = 64, heads: int = 4, classes: int = 10) -> Any:
    import torch
    from torch import nn

    from tuner.models.torch_models import bert_layer

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = bert_layer(width, hidden=hidden, heads=heads, ff=4 * hidden)
            # the key projection's bias has a gradient of exactly zero (softmax ignores a shift shared by
            # every key); Adam would turn the rounding noise there into full-size steps
            self.layer.att.k.bias = None
            self.head = nn.Linear(self.layer.ln1.normalized_shape[0], classes)

        def forward(self, x: Any) -> Any:
            return self.head(torch.mean(self.layer(x), dim=1))

    return Encoder()


TRAINABLE: dict[str, Callable[..., Any]] = {"mlp": mlp, "cnn": cnn, "resnet18_small": resnet18_small,
                                            "transformer": transformer}
SEQUENCE = 16  # the transformer's tokens


def build_trainable(name: str, batch: int, width: float | None = None, image: int = 32) -> tuple[Any, tuple[Any, ...]]:
    """(module in train mode, example inputs) of a model named for training: one of :data:`TRAINABLE`,
    or a zoo model (tuner.models.torch_models.build, at ``width`` and ``image``)."""
    import torch

    torch.manual_seed(0)
    if name in TRAINABLE:
        module = TRAINABLE[name]() if width is None else TRAINABLE[name](width)
        if name == "mlp":
            x = torch.randn(batch, module[0].in_features)
        elif name == "transformer":
            x = torch.randn(batch, SEQUENCE, module.layer.ln1.normalized_shape[0])
        else:
            x = torch.randn(batch, 3, image, image)
        return module.train(), (x,)
    from tuner.models.torch_models import build

    module, inputs = build(name, batch=batch, width=1.0 if width is None else width, image=image)
    return module.train(), inputs
