"""A model holding a new operator written as an expression: an MLP whose middle layer is
``examples/ops/nn.py:gated_dense``, a gated linear unit in one operator. It trains through the
gradient derived from the expression:

    swtune train examples/train/gated_mlp.py:model -o gated --optimizer adam --lr 0.01 --batch 8

``model(batch)`` returns (module, example inputs), as ``swtune train FILE.py:FUNC`` expects.
"""

from pathlib import Path

import torch

from tuner.ir.expr_layer import expression_layer

OPS = Path(__file__).resolve().parent.parent / "ops" / "nn.py"


def model(batch=8, features=32, hidden=24, classes=10):
    torch.manual_seed(0)
    gated = expression_layer(f"{OPS}:gated_dense", {"m": batch, "n": hidden, "k": hidden})
    module = torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.Tanh(), gated,
                                 torch.nn.Linear(hidden, classes))
    return module, (torch.randn(batch, features),)
