"""subLSTM, the subtractive-gating LSTM of cortical microcircuits, its cell as expression operators.

Costa, Assael, Shillingford, de Freitas and Vogels, "Cortical microcircuits as gated-recurrent neural
networks", NeurIPS 2017. Every gate is a sigmoid and gating is subtractive (inhibition) instead of
multiplicative, per time step::

    [i, f, z, o] = sigmoid(W x + R h + b)      (W x + R h + b: one torch.nn.Linear over [x, h])
    c' = f * c + z - i
    h' = sigmoid(c') - o

The element-wise part is two expression operators (an operator has one output): ``sublstm_cell``
(gates, c -> c') and ``sublstm_hidden`` (gates, c' -> h'), sigmoid written ``1 / (1 + exp(-x))``.

Sizes: 64 input features, hidden 128 (gates 512 wide), T = 4 unrolled steps, 10 classes from the last h;
the batch is the command line's (8); the input is [batch, T, 64]. Sizes as LLTM's: the gate GEMM (8 x
192 x 512 per step) and the element-wise kernels each do real work, and the emulator runs 5 steps in
seconds::

    swtune train examples/novel/sublstm.py:model -o sublstm --optimizer sgd --lr 0.05 --batch 8 --steps 5 --trials 0
"""

from pathlib import Path

from tvm import te

HERE = Path(__file__).resolve()


def _sigmoid(x):
    return 1.0 / (1.0 + te.exp(0.0 - x))


def sublstm_cell(batch=8, hidden=128, dtype="float32"):
    """c' = sigmoid(f) * c + sigmoid(z) - sigmoid(i); the gate pre-activations [batch, 4 * hidden] in
    the order i, f, z, o."""
    gates = te.placeholder((batch, 4 * hidden), dtype, name="gates")
    c = te.placeholder((batch, hidden), dtype, name="c")
    out = te.compute((batch, hidden), lambda b, j: _sigmoid(gates[b, hidden + j]) * c[b, j]
                     + _sigmoid(gates[b, 2 * hidden + j]) - _sigmoid(gates[b, j]), name="sublstm_cell")
    return [gates, c, out]


def sublstm_cell_torch(gates, c, **_):
    import torch

    i, f, z, _o = torch.sigmoid(gates).chunk(4, dim=1)
    return f * c + z - i


def sublstm_hidden(batch=8, hidden=128, dtype="float32"):
    """h' = sigmoid(c') - sigmoid(o)."""
    gates = te.placeholder((batch, 4 * hidden), dtype, name="gates")
    c = te.placeholder((batch, hidden), dtype, name="c_new")
    out = te.compute((batch, hidden), lambda b, j: _sigmoid(c[b, j]) - _sigmoid(gates[b, 3 * hidden + j]),
                     name="sublstm_hidden")
    return [gates, c, out]


def sublstm_hidden_torch(gates, c_new, hidden=128, **_):
    import torch

    return torch.sigmoid(c_new) - torch.sigmoid(gates[:, 3 * hidden:])


def model(batch=8, features=64, hidden=128, steps=4, classes=10):
    import torch

    from tuner.ir.expr_layer import expression_layer

    class SubLSTM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gates = torch.nn.Linear(features + hidden, 4 * hidden)
            args = {"batch": batch, "hidden": hidden}
            self.cell = expression_layer(f"{HERE}:sublstm_cell", args, inputs=2)
            self.hidden = expression_layer(f"{HERE}:sublstm_hidden", args, inputs=2)
            self.head = torch.nn.Linear(hidden, classes)

        def forward(self, x):
            h = x.new_zeros(batch, hidden)
            c = x.new_zeros(batch, hidden)
            for t in range(steps):
                gates = self.gates(torch.cat([x[:, t], h], dim=1))
                c = self.cell(gates, c)
                h = self.hidden(gates, c)
            return self.head(h)

    torch.manual_seed(0)
    return SubLSTM(), (torch.randn(batch, steps, features),)
