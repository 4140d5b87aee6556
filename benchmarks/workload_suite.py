"""The workloads the search benchmarks run on: the full suite and the --quick subset."""

from __future__ import annotations

import _common  # noqa: F401  (import path)

from tuner.models import model_layers
from tuner.workloads import Workload

QUICK_PICKS = [  # a conv and a dense layer at batch 1, a batch-64 conv, a float64 layer on the Pro
    ("sw26010", "alexnet", 1, "conv2"), ("sw26010", "alexnet", 1, "fc7"),
    ("sw26010", "resnet18", 64, "layer2.0.downsample"), ("sw26010-pro", "alexnet", 1, "conv3"),
]


def suite(quick: bool) -> list[tuple[str, Workload]]:
    """(target, workload) pairs, distinct: AlexNet, VGG-19, ResNet-18 at batch 1 and 64 (float32,
    sw26010) plus a float64 subset on sw26010-pro; ``quick`` takes the four of ``QUICK_PICKS``."""
    if quick:
        out = []
        for target, model, batch, name in QUICK_PICKS:
            dtype = "float64" if target == "sw26010-pro" else "float32"
            layer = next(l for l in model_layers(model, batch, dtype) if l.name == name)
            out.append((target, layer.workload))
        return out
    seen: dict[str, tuple[str, Workload]] = {}
    for model in ("alexnet", "vgg19", "resnet18"):
        for batch in (1, 64):
            for layer in model_layers(model, batch, "float32"):
                seen.setdefault(f"sw26010:{layer.workload.key}", ("sw26010", layer.workload))
    for layer in model_layers("alexnet", 1, "float64") + model_layers("resnet18", 1, "float64")[:4]:
        seen.setdefault(f"sw26010-pro:{layer.workload.key}", ("sw26010-pro", layer.workload))
    return list(seen.values())
