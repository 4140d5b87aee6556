"""Every model family of the zoo differentiates: ``relax.transform.Gradient`` builds the backward graph of
loss = sum(model(x) * r) with swtune's registered gradients (tuner/ir/gradients.py), and for two families it
compiles for the host and matches torch autograd. Eval-mode export (batch norm frozen, decomposed for
inference): the fine-tuning semantics the training notes describe; TVM alone differentiates 9 of the 20."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tvm = pytest.importorskip("tvm")

from tvm import relax  # noqa: E402
from tvm.relax.frontend.torch import from_exported_program  # noqa: E402

from tuner.ir.gradients import register  # noqa: E402
from tuner.models.torch_families import FAMILIES  # noqa: E402
from tuner.models.torch_models import TORCH_MODELS, build  # noqa: E402

pytestmark = pytest.mark.slow

IMAGE = {"alexnet": 224, "vgg19": 224, "vit_tiny": 224, "swin_block": 56}  # the rest at 64


class _Loss(torch.nn.Module):
    def __init__(self, model: Any, out_shape: tuple[int, ...]) -> None:
        super().__init__()
        self.model = model
        self.register_buffer("r", torch.randn(out_shape))

    def forward(self, x: Any) -> Any:
        return (self.model(x) * self.r).sum()


def _loss_and_module(name: str) -> tuple[Any, Any, Any]:
    torch.manual_seed(0)
    model, (x,) = build(name, batch=2, width=0.125, image=IMAGE.get(name, 64))
    with torch.no_grad():
        loss = _Loss(model.eval(), tuple(model(x).shape)).eval()
    ep = torch.export.export(loss, (x,))
    mod = from_exported_program(ep, keep_params_as_input=True, unwrap_unit_return_tuple=True)
    mod = relax.transform.DecomposeOpsForInference("main")(mod)
    params = [p for p in mod["main"].params[1:] if str(p.ty.dtype).startswith("float")]
    register()
    return loss, x, relax.transform.Gradient("main", require_grads=params)(mod)


@pytest.mark.parametrize("name", list(dict.fromkeys([*TORCH_MODELS, *FAMILIES])))
def test_every_family_gets_a_backward_graph(name: str) -> None:
    _, _, mod = _loss_and_module(name)
    assert "main_adjoint" in [gv.name_hint for gv in mod.get_global_vars()]


@pytest.mark.parametrize("name", ["diffusion_resblock", "gpt2_block"])
def test_the_backward_graph_computes_torchs_gradients(name: str) -> None:
    loss, x, mod = _loss_and_module(name)
    vm = relax.VirtualMachine(tvm.compile(mod, "llvm"), tvm.cpu())
    params = list(loss.parameters())
    _, grads = vm["main_adjoint"](*(tvm.runtime.tensor(a.detach().numpy()) for a in [x, *params]))
    loss(x).backward()
    for got, p in zip(grads, params, strict=True):
        want = p.grad.numpy()
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-3, atol=1e-4 * np.abs(want).max())
