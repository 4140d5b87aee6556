"""SCRNN, the structurally constrained recurrent network (a slow context state beside the hidden
state), its recurrences as expression operators.

Mikolov, Joulin, Chopra, Mathieu and Ranzato, "Learning Longer Memory in Recurrent Neural Networks",
ICLR 2015 workshop (arXiv:1412.7753, 2014). A context state s, updated with a fixed slow decay alpha,
sits beside the hidden state h, per time step::

    s' = (1 - alpha) B x + alpha s            (B x: torch.nn.Linear without bias; alpha fixed, 0.95)
    h' = sigmoid(P s' + A x + R h)            (A x + R h: one torch.nn.Linear over [x, h])
    y  = softmax(U h' + V s')                 (here after the last step: one Linear over [h, s], the
                                               cross-entropy of training taking the softmax)

Expression operators: ``scrnn_context`` (B x, s -> s') and ``scrnn_hidden`` (s', A x + R h -> h', with P
as its parameter: a reduction stage P s' and the sigmoid, one operator of two stages).

Sizes: 64 input features, context 64 and hidden 128 (the paper keeps the context layer the smaller),
T = 4 unrolled steps, 10 classes; the batch is the command line's (8); the input is [batch, T, 64]::

    swtune train examples/novel/scrnn.py:model -o scrnn --optimizer sgd --lr 0.05 --batch 8 --steps 5 --trials 0
"""

from pathlib import Path

from tvm import te

HERE = Path(__file__).resolve()


def scrnn_context(batch=8, context=64, alpha=0.95, dtype="float32"):
    """s' = (1 - alpha) * bx + alpha * s, alpha a fixed constant."""
    bx = te.placeholder((batch, context), dtype, name="bx")
    s = te.placeholder((batch, context), dtype, name="s")
    out = te.compute((batch, context), lambda b, k: (1.0 - alpha) * bx[b, k] + alpha * s[b, k], name="scrnn_context")
    return [bx, s, out]


def scrnn_context_torch(bx, s, alpha=0.95, **_):
    return (1.0 - alpha) * bx + alpha * s


def scrnn_hidden(batch=8, context=64, hidden=128, dtype="float32"):
    """h' = sigmoid(P s' + pre), pre = A x + R h; P [hidden, context] the operator's parameter."""
    s = te.placeholder((batch, context), dtype, name="s_new")
    pre = te.placeholder((batch, hidden), dtype, name="pre")
    p = te.placeholder((hidden, context), dtype, name="P")
    rk = te.reduce_axis((0, context), "rk")
    ps = te.compute((batch, hidden), lambda b, j: te.sum(s[b, rk] * p[j, rk], axis=rk), name="ps")
    out = te.compute((batch, hidden), lambda b, j: 1.0 / (1.0 + te.exp(0.0 - ps[b, j] - pre[b, j])),
                     name="scrnn_hidden")
    return [s, pre, p, out]


def scrnn_hidden_torch(s_new, pre, p, **_):
    import torch

    return torch.sigmoid(s_new @ p.T + pre)


def model(batch=8, features=64, context=64, hidden=128, steps=4, classes=10, alpha=0.95):
    import torch

    from tuner.ir.expr_layer import expression_layer

    class SCRNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.b = torch.nn.Linear(features, context, bias=False)
            self.ar = torch.nn.Linear(features + hidden, hidden)
            self.context = expression_layer(f"{HERE}:scrnn_context",
                                            {"batch": batch, "context": context, "alpha": alpha}, inputs=2)
            self.hidden = expression_layer(f"{HERE}:scrnn_hidden",
                                           {"batch": batch, "context": context, "hidden": hidden}, inputs=2)
            self.head = torch.nn.Linear(hidden + context, classes)

        def forward(self, x):
            h = x.new_zeros(batch, hidden)
            s = x.new_zeros(batch, context)
            for t in range(steps):
                xt = x[:, t]
                s = self.context(self.b(xt), s)
                h = self.hidden(s, self.ar(torch.cat([xt, h], dim=1)))
            return self.head(torch.cat([h, s], dim=1))

    torch.manual_seed(0)
    return SCRNN(), (torch.randn(batch, steps, features),)
