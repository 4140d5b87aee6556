"""CapsNet: capsule layers with routing-by-agreement, its capsule operators as expression operators.

Sabour, Frosst and Hinton, "Dynamic Routing Between Capsules", NeurIPS 2017. A capsule is a vector
whose length is the probability that its entity is present (``squash``); each lower capsule i predicts
every upper capsule j through its own matrix, and r iterations of routing-by-agreement (Procedure 1)
weigh the predictions by how well they agree with the upper capsule's output::

    squash(s) = (|s|^2 / (1 + |s|^2)) s / |s|
    u_hat[j|i] = W[i, j] u[i]
    b[i, j] = 0; r times:  c[i] = softmax_j(b[i]);  s[j] = sum_i c[i, j] u_hat[j|i];  v[j] = squash(s[j]);
                           b[i, j] += u_hat[j|i] . v[j]
    return v

Expression operators: ``squash`` (the primary capsules' nonlinearity, two stages: the squared length,
then the scale ``s |s| / (1 + |s|^2)``), ``capsule_predict`` (u -> u_hat, the transformation matrices W
[I, J, Dout, Din] its parameter: a batched GEMM of I * J small matrices) and ``dynamic_routing`` (u_hat
-> v: the r = 3 iterations unrolled into one operator of 16 stages; the first iteration's c is softmax(0)
= 1/J, and the last update of b, which nothing reads, is left out).

Sizes: 1 x 12 x 12 images; a 3 x 3 conv to 32 channels and ReLU; primary capsules as in the paper, a
stride-2 3 x 3 conv to 8 capsule types of 8 dimensions on a 4 x 4 grid (I = 128 capsules, Din = 8);
J = 10 digit capsules of Dout = 16 (the paper's); r = 3 routing iterations (the paper's); a Linear over
the 10 x 16 digit capsules to 10 classes (the training loss is cross-entropy over it, where the paper
uses the capsules' lengths and a margin loss). The batch is the command line's (8)::

    swtune train examples/novel/capsnet.py:model -o capsnet --optimizer sgd --lr 0.05 --batch 8 --steps 5 --trials 0
"""

from pathlib import Path

from tvm import te

HERE = Path(__file__).resolve()


def _squash_stages(s, shape, name):
    """|s|^2 over the last axis, then s * |s| / (1 + |s|^2) (= (|s|^2 / (1 + |s|^2)) s / |s|)."""
    *lead, d = shape
    rd = te.reduce_axis((0, d), f"{name}_rd")
    n2 = te.compute(tuple(lead), lambda *i: te.sum(s[(*i, rd)] * s[(*i, rd)], axis=rd), name=f"{name}_norm2")
    return te.compute(tuple(shape), lambda *i: s[i] * te.sqrt(n2[i[:-1]]) / (1.0 + n2[i[:-1]]), name=name)


def _squash_torch(s):
    import torch

    n2 = (s * s).sum(dim=-1, keepdim=True)
    return s * torch.sqrt(n2) / (1.0 + n2)


def squash(batch=2, caps=6, dim=4, dtype="float32"):
    """v = squash(s) along the last axis of s [batch, caps, dim]."""
    s = te.placeholder((batch, caps, dim), dtype, name="s")
    return [s, _squash_stages(s, (batch, caps, dim), "squash")]


def squash_torch(s, **_):
    return _squash_torch(s)


def capsule_predict(batch=2, lower=6, upper=3, din=4, dout=5, dtype="float32"):
    """u_hat[b, i, j, d] = sum_k W[i, j, d, k] u[b, i, k]: every lower capsule's prediction of every upper one."""
    u = te.placeholder((batch, lower, din), dtype, name="u")
    w = te.placeholder((lower, upper, dout, din), dtype, name="W")
    rk = te.reduce_axis((0, din), "rk")
    out = te.compute((batch, lower, upper, dout), lambda b, i, j, d: te.sum(w[i, j, d, rk] * u[b, i, rk], axis=rk),
                     name="capsule_predict")
    return [u, w, out]


def capsule_predict_torch(u, w, **_):
    import torch

    return torch.einsum("ijdk,bik->bijd", w, u)


def _coupled_sum(u_hat, logits, shape, r):
    """s[b, j, d] = sum_i softmax_j(logits)[b, i, j] u_hat[b, i, j, d] (logits None: all zero, c = 1/J)."""
    batch, lower, upper, dout = shape
    ri = te.reduce_axis((0, lower), f"ri{r}")
    if logits is None:
        return te.compute((batch, upper, dout), lambda b, j, d: te.sum(u_hat[b, ri, j, d] / upper, axis=ri),
                          name=f"s{r}")
    e = te.compute((batch, lower, upper), lambda b, i, j: te.exp(logits[b, i, j]), name=f"exp{r}")
    rj = te.reduce_axis((0, upper), f"rj{r}")
    z = te.compute((batch, lower), lambda b, i: te.sum(e[b, i, rj], axis=rj), name=f"z{r}")
    return te.compute((batch, upper, dout), lambda b, j, d: te.sum(e[b, ri, j] / z[b, ri] * u_hat[b, ri, j, d],
                                                                   axis=ri), name=f"s{r}")


def _agreement(u_hat, v, logits, shape, r):
    """logits + u_hat . v: b[b, i, j] += sum_d u_hat[b, i, j, d] v[b, j, d]."""
    batch, lower, upper, dout = shape
    rd = te.reduce_axis((0, dout), f"rd{r}")
    agree = te.compute((batch, lower, upper), lambda b, i, j: te.sum(u_hat[b, i, j, rd] * v[b, j, rd], axis=rd),
                       name=f"agree{r}")
    if logits is None:
        return agree
    return te.compute((batch, lower, upper), lambda b, i, j: logits[b, i, j] + agree[b, i, j], name=f"b{r}")


def dynamic_routing(batch=2, lower=6, upper=3, dout=5, iterations=3, dtype="float32"):
    """v [batch, upper, dout] from u_hat [batch, lower, upper, dout] by ``iterations`` of routing-by-agreement."""
    shape = (batch, lower, upper, dout)
    u_hat = te.placeholder(shape, dtype, name="u_hat")
    logits = None  # b[i, j]; None: all zero (the first iteration's c is 1 / upper)
    for r in range(iterations):
        s = _coupled_sum(u_hat, logits, shape, r)
        v = _squash_stages(s, (batch, upper, dout), "dynamic_routing" if r == iterations - 1 else f"v{r}")
        if r < iterations - 1:
            logits = _agreement(u_hat, v, logits, shape, r)
    return [u_hat, v]


def dynamic_routing_torch(u_hat, iterations=3, **_):
    import torch

    logits = torch.zeros(u_hat.shape[:3], dtype=u_hat.dtype)
    v = None
    for r in range(iterations):
        c = torch.softmax(logits, dim=2)
        v = _squash_torch((c.unsqueeze(-1) * u_hat).sum(dim=1))
        if r < iterations - 1:
            logits = logits + (u_hat * v.unsqueeze(1)).sum(dim=-1)
    return v


def model(batch=8, image=12, channels=32, types=8, din=8, upper=10, dout=16, iterations=3, classes=10):
    import torch

    from tuner.ir.expr_layer import expression_layer

    grid = (image - 2 - 3) // 2 + 1  # the conv, then the stride-2 primary-capsule conv
    lower = types * grid * grid

    class CapsNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, channels, 3)
            self.primary = torch.nn.Conv2d(channels, types * din, 3, stride=2)
            self.squash = expression_layer(f"{HERE}:squash", {"batch": batch, "caps": lower, "dim": din})
            self.predict = expression_layer(f"{HERE}:capsule_predict", {
                "batch": batch, "lower": lower, "upper": upper, "din": din, "dout": dout})
            self.routing = expression_layer(f"{HERE}:dynamic_routing", {
                "batch": batch, "lower": lower, "upper": upper, "dout": dout, "iterations": iterations})
            self.head = torch.nn.Linear(upper * dout, classes)

        def forward(self, x):
            p = self.primary(torch.relu(self.conv(x)))  # [batch, types * din, grid, grid]
            u = p.reshape(batch, types, din, grid * grid).permute(0, 1, 3, 2).reshape(batch, lower, din)
            v = self.routing(self.predict(self.squash(u)))
            return self.head(v.reshape(batch, upper * dout))

    torch.manual_seed(0)
    return CapsNet(), (torch.randn(batch, 1, image, image),)
