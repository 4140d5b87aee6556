"""MI-LSTM, the LSTM with Multiplicative Integration, its gates and cell as expression operators.

Wu, Zhang, Zhang, Bengio and Salakhutdinov, "On Multiplicative Integration with Recurrent Neural
Networks", NeurIPS 2016. Multiplicative Integration replaces each gate's additive building block
``W x + U h + b`` by the general form with a Hadamard product of the two sources, per time step::

    Wx, Uh = W x, U h                                   (two torch.nn.Linear without bias: library GEMMs)
    pre    = alpha * Wx * Uh + beta1 * Uh + beta2 * Wx + b   (alpha, beta1, beta2, b: [4H], trainable)
    [i, f, g, o] = split(pre);  i, f, o = sigmoid;  g = tanh
    c' = f * c + i * g
    h' = o * tanh(c')

Expression operators: ``mi_gates`` (Wx, Uh -> pre, with alpha, beta1, beta2, b as its parameters: the
MI block of all four gates), ``lstm_cell`` (pre, c -> c') and ``lstm_hidden`` (pre, c' -> h'); the
latter two hold the LSTM's element-wise math, an operator having one output. The gating vectors start
at alpha = beta1 = beta2 = 1 and b = 0: the additive block plus the product term.

Sizes: 64 input features, hidden 128 (gates 512 wide), T = 4 unrolled steps, 10 classes from the last h;
the batch is the command line's (8); the input is [batch, T, 64]. Sizes as LLTM's: the GEMMs (8 x 64 x
512 and 8 x 128 x 512 per step) and the element-wise kernels each do real work, and the emulator runs 5
steps in seconds::

    swtune train examples/novel/mi_lstm.py:model -o mi_lstm --optimizer sgd --lr 0.05 --batch 8 --steps 5 --trials 0
"""

from pathlib import Path

from tvm import te

HERE = Path(__file__).resolve()


def _sigmoid(x):
    return 1.0 / (1.0 + te.exp(0.0 - x))


def mi_gates(batch=8, width=512, dtype="float32"):
    """pre = alpha * Wx * Uh + beta1 * Uh + beta2 * Wx + b, per gate unit (``width`` = 4 * hidden)."""
    wx = te.placeholder((batch, width), dtype, name="wx")
    uh = te.placeholder((batch, width), dtype, name="uh")
    alpha = te.placeholder((width,), dtype, name="alpha")
    beta1 = te.placeholder((width,), dtype, name="beta1")
    beta2 = te.placeholder((width,), dtype, name="beta2")
    bias = te.placeholder((width,), dtype, name="bias")
    out = te.compute((batch, width), lambda b, j: alpha[j] * wx[b, j] * uh[b, j] + beta1[j] * uh[b, j]
                     + beta2[j] * wx[b, j] + bias[j], name="mi_gates")
    return [wx, uh, alpha, beta1, beta2, bias, out]


def mi_gates_torch(wx, uh, alpha, beta1, beta2, bias, **_):
    return alpha * wx * uh + beta1 * uh + beta2 * wx + bias


def lstm_cell(batch=8, hidden=128, dtype="float32"):
    """c' = sigmoid(f) * c + sigmoid(i) * tanh(g); the pre-activations in the order i, f, g, o."""
    pre = te.placeholder((batch, 4 * hidden), dtype, name="pre")
    c = te.placeholder((batch, hidden), dtype, name="c")
    out = te.compute((batch, hidden), lambda b, j: _sigmoid(pre[b, hidden + j]) * c[b, j]
                     + _sigmoid(pre[b, j]) * te.tanh(pre[b, 2 * hidden + j]), name="lstm_cell")
    return [pre, c, out]


def lstm_cell_torch(pre, c, **_):
    import torch

    i, f, g, _o = pre.chunk(4, dim=1)
    return torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)


def lstm_hidden(batch=8, hidden=128, dtype="float32"):
    """h' = sigmoid(o) * tanh(c')."""
    pre = te.placeholder((batch, 4 * hidden), dtype, name="pre")
    c = te.placeholder((batch, hidden), dtype, name="c_new")
    out = te.compute((batch, hidden), lambda b, j: _sigmoid(pre[b, 3 * hidden + j]) * te.tanh(c[b, j]),
                     name="lstm_hidden")
    return [pre, c, out]


def lstm_hidden_torch(pre, c_new, hidden=128, **_):
    import torch

    return torch.sigmoid(pre[:, 3 * hidden:]) * torch.tanh(c_new)


def model(batch=8, features=64, hidden=128, steps=4, classes=10):
    import torch

    from tuner.ir.expr_layer import expression_layer

    class MILSTM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Linear(features, 4 * hidden, bias=False)
            self.u = torch.nn.Linear(hidden, 4 * hidden, bias=False)
            self.mi = expression_layer(f"{HERE}:mi_gates", {"batch": batch, "width": 4 * hidden}, inputs=2)
            with torch.no_grad():
                for name, value in (("alpha", 1.0), ("beta1", 1.0), ("beta2", 1.0), ("bias", 0.0)):
                    getattr(self.mi, name).fill_(value)
            args = {"batch": batch, "hidden": hidden}
            self.cell = expression_layer(f"{HERE}:lstm_cell", args, inputs=2)
            self.hidden = expression_layer(f"{HERE}:lstm_hidden", args, inputs=2)
            self.head = torch.nn.Linear(hidden, classes)

        def forward(self, x):
            h = x.new_zeros(batch, hidden)
            c = x.new_zeros(batch, hidden)
            for t in range(steps):
                pre = self.mi(self.w(x[:, t]), self.u(h))
                c = self.cell(pre, c)
                h = self.hidden(pre, c)
            return self.head(h)

    torch.manual_seed(0)
    return MILSTM(), (torch.randn(batch, steps, features),)
