"""ResNet-18 (width 1/8, 32x32, batch 8) trains as torch with a tuned layer3 conv, where float32 can tell.

Session 13 pinned this config as "trains wrong in the whole program" (parameters 0.6 off torch after 5
SGD steps at lr 0.05). Session 14 found the program right: the same step run by TVM's own LLVM build,
and torch itself in float32, end as far from torch in float64 (0.57). Those steps amplify rounding:
a max-pool's argmax or a ReLU's sign switches once parameters differ by ~1e-5. So the comparison runs
where torch's float32 run agrees with its float64 run (Adam, lr 1e-3: 1.8e-5), and checks that first.
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
def test_resnet18_with_the_tuned_layer3_conv_trains_as_torch(tmp_path: Path) -> None:
    from tuner.ir.optimizers import Optimizer, OptimizerKind
    from tuner.ir.training import Loss, target_shape, training_step
    from tuner.models.trainable import build_trainable
    from tuner.train import data as train_data
    from tuner.train.program import build_emulated, compile_training, run_emulated, split_state
    from tuner.train.reference import float64_floor, relative_error, torch_steps

    module, inputs = build_trainable("resnet18_small", 8)
    reference = copy.deepcopy(module)
    opt = Optimizer(OptimizerKind.ADAM, 0.001)
    batches = train_data.synthetic(7, 3, 8, tuple(inputs[0].shape),
                                   target_shape(module, inputs, Loss.CROSS_ENTROPY), Loss.CROSS_ENTROPY)
    step = training_step(module, inputs, Loss.CROSS_ENTROPY, opt)
    used = set()

    def lookup(w: object) -> dict | None:
        used.add(getattr(w, "key", ""))
        return CONFIG if getattr(w, "key", "") == KEY else None

    program = compile_training(step, "sw26010", tmp_path, lookup, "resnet18_small")
    assert KEY in used
    # (#46) the record also runs, as a near record, on the 3x3 and 1x1 convs of layer1 and layer2 that its
    # space accepts and where it simulates faster than their baseline; every other GEMM-like kernel (the
    # derived gradients included) runs its kind's baseline on the CPEs
    statuses = {k.workload.key: k.status for k in program.result.kernels}
    assert statuses[KEY] == "tuned"
    assert sum(status == f"fallback: near record of {KEY}" for status in statuses.values()) == 3, statuses
    batches.tofile(tmp_path / "data.bin", step.dtype)
    build_emulated(tmp_path)
    run = run_emulated(tmp_path, tmp_path / "data.bin", 5, step.dtype)
    assert float64_floor(reference, batches, opt, Loss.CROSS_ENTROPY, 5) <= 5e-5  # float32 can tell
    ref = torch_steps(reference, batches, opt, Loss.CROSS_ENTROPY, 5)
    state = split_state(run.state, step)
    # 2e-4, not 1e-4, since #46 runs the record on the three near convs: their kernels are as accurate as
    # the baseline's (conv2d n8 c8 8x8 k8 3x3 on the emulator, max error / max |out| against float64:
    # 3.2e-7 with the record, 2.9e-7 with the baseline, 2.65e-7 torch float32), but their other summation
    # order, amplified by 5 Adam steps, moved the worst parameter (10.conv1.weight) to 1.38e-4 off torch's
    # float32 run and 1.07e-4 off its float64 one (torch float32 itself: 3.1e-5 off float64); with the
    # near records off the program ends 8.9e-5 off, and before #46 (gradients on the MPE) 6.7e-5
    assert max(relative_error(state[n], v) for n, v in {**ref.params, **ref.buffers}.items()) <= 2e-4
    assert relative_error(run.losses, np.array(ref.losses)) <= 1e-4


def test_the_float64_floor_says_when_float32_cannot_judge_a_run() -> None:
    """torch alone: the SGD run of session 13 ends far from float64; the Adam run above does not."""
    from tuner.ir.optimizers import Optimizer, OptimizerKind
    from tuner.ir.training import Loss, target_shape
    from tuner.models.trainable import build_trainable
    from tuner.train import data as train_data
    from tuner.train.reference import float64_floor

    module, inputs = build_trainable("resnet18_small", 8)
    batches = train_data.synthetic(7, 3, 8, tuple(inputs[0].shape),
                                   target_shape(module, inputs, Loss.CROSS_ENTROPY), Loss.CROSS_ENTROPY)
    assert float64_floor(module, batches, Optimizer(OptimizerKind.SGD, 0.05), Loss.CROSS_ENTROPY, 5) > 1e-2
    assert float64_floor(module, batches, Optimizer(OptimizerKind.ADAM, 0.001), Loss.CROSS_ENTROPY, 5) < 5e-5
