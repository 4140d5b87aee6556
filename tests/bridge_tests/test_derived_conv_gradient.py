"""``nn.conv2d``'s gradient routed to the derived operators (tuner.ir.expr_gradients.register_derived):
the backward graph of a small CNN holds one-stage expression functions instead of conv2d_transpose,
and the compiled adjoint matches torch autograd. Run in a fresh process: the registration (level 12)
lasts for the process, and other tests check TVM's and swtune's Relax-operator gradients."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tvm")
pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import numpy as np, torch, tvm
from tvm import relax
from tuner.ir.gradients import register
from tuner.ir.expr_gradients import register_derived
from tuner.expr.parse import describe

register()
register_derived()
x = relax.Var("x", relax.TensorType((2, 3, 9, 9), "float32"))
w1 = relax.Var("w1", relax.TensorType((8, 3, 3, 3), "float32"))
w2 = relax.Var("w2", relax.TensorType((8, 4, 3, 3), "float32"))
bb = relax.BlockBuilder()
with bb.function("main", [x, w1, w2]):
    with bb.dataflow():
        y = bb.emit(relax.op.nn.relu(relax.op.nn.conv2d(x, w1, strides=2, padding=1)))
        z = bb.emit(relax.op.nn.conv2d(y, w2, strides=1, padding=(1, 0, 1, 2), dilation=(1, 2), groups=2))
        loss = bb.emit_output(bb.emit(relax.op.sum(relax.op.multiply(z, z))))
    bb.emit_func_output(loss)
mod = relax.transform.Gradient("main", require_grads=[x, w1, w2])(bb.get())
text = mod["main_adjoint"].script()
assert "conv2d_transpose" not in text, text
tasks = [gv.name_hint for gv in mod.functions if "_grad_" in gv.name_hint and "_pass_" not in gv.name_hint]
for name in tasks:
    describe(mod[name])  # every derived operator is a one-stage expression
mod = relax.transform.LegalizeOps()(mod)
vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
rng = np.random.default_rng(0)
arrays = [rng.standard_normal(s).astype("float32") for s in [(2, 3, 9, 9), (8, 3, 3, 3), (8, 4, 3, 3)]]
_, grads = vm["main_adjoint"](*[tvm.runtime.tensor(a) for a in arrays])
ts = [torch.tensor(a, requires_grad=True) for a in arrays]
F = torch.nn.functional
hidden = F.relu(F.conv2d(ts[0], ts[1], stride=2, padding=1))
out = F.conv2d(F.pad(hidden, (0, 2, 1, 1)), ts[2], dilation=(1, 2), groups=2)
(out * out).sum().backward()
errors = [float(np.abs(g.numpy() - t.grad.numpy()).max() / np.abs(t.grad.numpy()).max()) for g, t in zip(grads, ts)]
print(len(tasks), max(errors))
'''


@pytest.mark.slow
def test_a_cnn_backward_graph_uses_the_derived_conv_gradients():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    tasks, error = done.stdout.split()
    assert int(tasks) >= 6 and float(error) <= 1e-5
