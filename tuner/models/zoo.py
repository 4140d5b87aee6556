"""The conv and dense layers of AlexNet, VGG-19 and ResNet-18 (torchvision shapes, NCHW).

These tables let the tuner, the benchmarks and the demo run without a model file; task extraction
from real PyTorch / ONNX models (the TVM bridge) yields the same workloads for these networks.
Each layer has a name and a weight: how many times the model runs that exact workload.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.workloads import Conv2d, Dense, Workload


@dataclass(frozen=True)
class Layer:
    name: str
    workload: Workload
    weight: int = 1


def _conv(n: int, c: int, hw: int, k: int, ksize: int, stride: int = 1, pad: int = 0, dtype: str = "float32") -> Conv2d:
    return Conv2d(n, c, hw, hw, k, ksize, ksize, stride_h=stride, stride_w=stride, pad_h=pad, pad_w=pad, dtype=dtype)


def alexnet(batch: int = 1, dtype: str = "float32") -> list[Layer]:
    return [
        Layer("conv1", _conv(batch, 3, 224, 64, 11, 4, 2, dtype)),
        Layer("conv2", _conv(batch, 64, 27, 192, 5, 1, 2, dtype)),
        Layer("conv3", _conv(batch, 192, 13, 384, 3, 1, 1, dtype)),
        Layer("conv4", _conv(batch, 384, 13, 256, 3, 1, 1, dtype)),
        Layer("conv5", _conv(batch, 256, 13, 256, 3, 1, 1, dtype)),
        Layer("fc6", Dense(batch, 4096, 9216, dtype)),
        Layer("fc7", Dense(batch, 4096, 4096, dtype)),
        Layer("fc8", Dense(batch, 1000, 4096, dtype)),
    ]


def vgg19(batch: int = 1, dtype: str = "float32") -> list[Layer]:
    plan = [(3, 64, 224, 1), (64, 64, 224, 1), (64, 128, 112, 1), (128, 128, 112, 1), (128, 256, 56, 1),
            (256, 256, 56, 3), (256, 512, 28, 1), (512, 512, 28, 3), (512, 512, 14, 4)]
    layers = [Layer(f"conv{i + 1}", _conv(batch, c, hw, k, 3, 1, 1, dtype), reps)
              for i, (c, k, hw, reps) in enumerate(plan)]
    layers += [Layer("fc6", Dense(batch, 4096, 25088, dtype)), Layer("fc7", Dense(batch, 4096, 4096, dtype)),
               Layer("fc8", Dense(batch, 1000, 4096, dtype))]
    return layers


def resnet18(batch: int = 1, dtype: str = "float32") -> list[Layer]:
    return [
        Layer("conv1", _conv(batch, 3, 224, 64, 7, 2, 3, dtype)),
        Layer("layer1.conv", _conv(batch, 64, 56, 64, 3, 1, 1, dtype), 4),
        Layer("layer2.0.conv1", _conv(batch, 64, 56, 128, 3, 2, 1, dtype)),
        Layer("layer2.0.downsample", _conv(batch, 64, 56, 128, 1, 2, 0, dtype)),
        Layer("layer2.conv", _conv(batch, 128, 28, 128, 3, 1, 1, dtype), 3),
        Layer("layer3.0.conv1", _conv(batch, 128, 28, 256, 3, 2, 1, dtype)),
        Layer("layer3.0.downsample", _conv(batch, 128, 28, 256, 1, 2, 0, dtype)),
        Layer("layer3.conv", _conv(batch, 256, 14, 256, 3, 1, 1, dtype), 3),
        Layer("layer4.0.conv1", _conv(batch, 256, 14, 512, 3, 2, 1, dtype)),
        Layer("layer4.0.downsample", _conv(batch, 256, 14, 512, 1, 2, 0, dtype)),
        Layer("layer4.conv", _conv(batch, 512, 7, 512, 3, 1, 1, dtype), 3),
        Layer("fc", Dense(batch, 1000, 512, dtype)),
    ]


MODELS = {"alexnet": alexnet, "vgg19": vgg19, "resnet18": resnet18}


def model_layers(name: str, batch: int = 1, dtype: str = "float32") -> list[Layer]:
    try:
        return MODELS[name](batch, dtype)
    except KeyError:
        raise ValueError(f"unknown model {name!r}; expected one of {sorted(MODELS)}") from None
