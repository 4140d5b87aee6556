"""A tuned config that trains wrong in a whole program, pinned until it is found and fixed (strict xfail:
the test fails once the program trains right, so the mark is removed with the fix).

Found by ``benchmarks/training.py`` (session 13): ResNet-18 at width 1/8, SGD, 5 steps, goes wrong
(parameters 0.6 off torch) with every task at its tuned config; bisected to this one config of layer3's
3x3 conv (8x16x4x4 -> 16 channels). Alone, the kernel is right on the emulator (zeroed or poisoned
output), and a one-conv model trains right with it; in ResNet-18 the error is 4e-5 after 2 steps and
0.6 after 5, so it needs the whole program (several calls of the kernel per step, its neighbours in
the memory plan or in a launch group).
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

KEY = "conv2d-n8-c16-h4-w4-k16-r3-s3-stride_h1-stride_w1-pad_h1-pad_w1-dil_h1-dil_w1-groups1-float32"
CONFIG = {"tile_n": 1, "tile_oh": 4, "tile_ow": 4, "tile_k": 4, "tile_c": 2, "grid": "8x8", "share": "mesh",
          "dma": "strided", "put_lines": 0, "db_a": 1, "db_b": 1, "db_c": 0, "tile_order": "col", "inner": "k",
          "simd": 4, "unroll": 8, "acc": "reg", "pack": "b"}


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="ResNet-18 trains wrong with this tuned conv config (cause not found yet)")
def test_resnet18_with_the_tuned_layer3_conv_trains_as_torch(tmp_path: Path) -> None:
    from tuner.ir.optimizers import Optimizer, OptimizerKind
    from tuner.ir.training import Loss, target_shape, training_step
    from tuner.models.trainable import build_trainable
    from tuner.train import data as train_data
    from tuner.train.program import build_emulated, compile_training, run_emulated, split_state
    from tuner.train.reference import torch_steps

    module, inputs = build_trainable("resnet18_small", 8)
    reference = copy.deepcopy(module)
    opt = Optimizer(OptimizerKind.SGD, 0.05)
    batches = train_data.synthetic(7, 3, 8, tuple(inputs[0].shape),
                                   target_shape(module, inputs, Loss.CROSS_ENTROPY), Loss.CROSS_ENTROPY)
    step = training_step(module, inputs, Loss.CROSS_ENTROPY, opt)
    used = set()

    def lookup(w: object) -> dict | None:
        used.add(getattr(w, "key", ""))
        return CONFIG if getattr(w, "key", "") == KEY else None

    compile_training(step, "sw26010", tmp_path, lookup, "resnet18_small")
    assert KEY in used
    batches.tofile(tmp_path / "data.bin", step.dtype)
    build_emulated(tmp_path)
    run = run_emulated(tmp_path, tmp_path / "data.bin", 5, step.dtype)
    ref = torch_steps(reference, batches, opt, Loss.CROSS_ENTROPY, 5)
    state = split_state(run.state, step)
    worst = max(float(np.abs(state[n] - v).max() / np.abs(v).max()) for n, v in ref.params.items())
    assert worst <= 1e-4
