"""Reference models: layer tables (AlexNet, VGG-19, ResNet-18) as swtune workloads (zoo), and their
torch definitions at any width (torch_models), importing torch lazily.
"""

from tuner.models.zoo import MODELS, model_layers

__all__ = ["MODELS", "model_layers"]
