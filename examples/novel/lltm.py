"""LLTM, the "long-long-term memory" cell of PyTorch's C++/CUDA-extension tutorial, as expression operators.

The cell (PyTorch tutorial "Custom C++ and CUDA Extensions", Peter Goldsborough, pytorch.org, 2018; the
cell the tutorial fuses by hand into one CUDA kernel), per time step, with X = [h, x]::

    gates   = W X + b                       (torch.nn.Linear: the library GEMM)
    i, o, z = gates[:, 0:H], gates[:, H:2H], gates[:, 2H:3H]
    i, o    = sigmoid(i), sigmoid(o)
    z       = elu(z)                        (alpha = 1)
    c'      = c + z * i
    h'      = tanh(c') * o

The element-wise part is two expression operators, since an operator has one output: ``lltm_cell``
(gates, c -> c') and ``lltm_hidden`` (gates, c' -> h'). Sigmoid is written ``1 / (1 + exp(-x))`` and
elu ``max(z, 0) + exp(min(z, 0)) - 1`` (max/min are differentiated by their branch).

Sizes: 64 input features, hidden 128 (gates 384 wide), T = 4 unrolled steps, 10 classes from the last
h; the batch is the command line's (8). The input is [batch, T, 64]. Large enough that the gate GEMM
(8 x 192 x 384 per step) and the element-wise kernels each do real work, small enough that the
emulator runs 5 steps in seconds::

    swtune train examples/novel/lltm.py:model -o lltm --optimizer sgd --lr 0.05 --batch 8 --steps 5 --trials 0
"""

from pathlib import Path

from tvm import te, tirx

HERE = Path(__file__).resolve()


def _sigmoid(x):
    return 1.0 / (1.0 + te.exp(0.0 - x))


def _elu(x):
    return tirx.max(x, tirx.const(0.0, x.dtype)) + te.exp(tirx.min(x, tirx.const(0.0, x.dtype))) - 1.0


def lltm_cell(batch=8, hidden=128, dtype="float32"):
    """c' = c + elu(z) * sigmoid(i), i and z read from the gate pre-activations [batch, 3 * hidden]."""
    gates = te.placeholder((batch, 3 * hidden), dtype, name="gates")
    c = te.placeholder((batch, hidden), dtype, name="c")
    out = te.compute((batch, hidden), lambda b, j: c[b, j] + _elu(gates[b, 2 * hidden + j]) * _sigmoid(gates[b, j]),
                     name="lltm_cell")
    return [gates, c, out]


def lltm_cell_torch(gates, c, **_):
    import torch

    i, _o, z = gates.chunk(3, dim=1)
    return c + torch.nn.functional.elu(z) * torch.sigmoid(i)


def lltm_hidden(batch=8, hidden=128, dtype="float32"):
    """h' = tanh(c') * sigmoid(o), o read from the gate pre-activations."""
    gates = te.placeholder((batch, 3 * hidden), dtype, name="gates")
    c = te.placeholder((batch, hidden), dtype, name="c_new")
    out = te.compute((batch, hidden), lambda b, j: te.tanh(c[b, j]) * _sigmoid(gates[b, hidden + j]),
                     name="lltm_hidden")
    return [gates, c, out]


def lltm_hidden_torch(gates, c_new, **_):
    import torch

    _i, o, _z = gates.chunk(3, dim=1)
    return torch.tanh(c_new) * torch.sigmoid(o)


def model(batch=8, features=64, hidden=128, steps=4, classes=10):
    import torch

    from tuner.ir.expr_layer import expression_layer

    class LLTM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gates = torch.nn.Linear(features + hidden, 3 * hidden)
            self.cell = expression_layer(f"{HERE}:lltm_cell", {"batch": batch, "hidden": hidden}, inputs=2)
            self.hidden = expression_layer(f"{HERE}:lltm_hidden", {"batch": batch, "hidden": hidden}, inputs=2)
            self.head = torch.nn.Linear(hidden, classes)

        def forward(self, x):
            h = x.new_zeros(batch, hidden)
            c = x.new_zeros(batch, hidden)
            for t in range(steps):
                gates = self.gates(torch.cat([h, x[:, t]], dim=1))
                c = self.cell(gates, c)
                h = self.hidden(gates, c)
            return self.head(h)

    torch.manual_seed(0)
    return LLTM(), (torch.randn(batch, steps, features),)
