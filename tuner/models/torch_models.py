"""PyTorch definitions of AlexNet and ResNet-18 (torchvision's architectures, random weights).

torchvision itself does not install beside the CPU torch build on these machines, and no weights can
be downloaded, so the two reference networks are defined here; task extraction only needs shapes.
``width`` scales every channel count (tests use narrow copies to stay fast).
"""

from __future__ import annotations

from typing import Any


def alexnet(width: float = 1.0, num_classes: int = 1000) -> Any:
    from torch import nn

    def ch(c: int) -> int:
        return max(1, int(c * width))

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

    def ch(c: int) -> int:
        return max(1, int(c * width))

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


TORCH_MODELS = {"alexnet": alexnet, "resnet18": resnet18}


def build(name: str, batch: int = 1, width: float = 1.0, image: int = 224) -> tuple[Any, tuple[Any, ...]]:
    """(module in eval mode, example inputs) of a named reference network."""
    import torch

    if name not in TORCH_MODELS:
        raise ValueError(f"unknown model {name!r}; expected one of {sorted(TORCH_MODELS)}")
    torch.manual_seed(0)
    module = TORCH_MODELS[name](width).eval()
    return module, (torch.randn(batch, 3, image, image),)
