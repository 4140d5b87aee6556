"""Layer tables of reference models (AlexNet, VGG-19, ResNet-18) as swtune workloads."""

from tuner.models.zoo import MODELS, model_layers

__all__ = ["MODELS", "model_layers"]
