"""The memory-bound operators of a training step run on the CPEs: a per-channel operand of an NCHW tensor
cut along C (the same block for every sample), ``broadcast_to`` and ``collapse_sum_to`` (their shape
argument is the block's), and reductions over the batch axis split by tuner.ir.split_reductions. Each
kernel is built and run on the emulator and checked against TVM llvm."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tvm")

import tvm  # noqa: E402
from emulator_helpers import run_model  # noqa: E402
from tvm import relax  # noqa: E402

from tuner.aot import compile_model  # noqa: E402
from tuner.ir.relax_reader import read_relax  # noqa: E402
from tuner.ir.split_reductions import split_leading_reductions  # noqa: E402
from tuner.space.cpe.cuts import plans_for  # noqa: E402
from tuner.targets import get_target  # noqa: E402

TARGET = "sw26010"


def _module(shapes: list[tuple[int, ...]], body: Callable[..., Any]) -> Any:
    xs = [relax.Var(f"x{i}", relax.TensorType(s, "float32")) for i, s in enumerate(shapes)]
    bb = relax.BlockBuilder()
    with bb.function("main", xs):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(body(*xs)))
        bb.emit_func_output(out)
    return bb.get()


def _one_node(mod: Any) -> Any:
    (node,) = [n for n in read_relax(mod, "sw26010").nodes if n.op == "tir"]
    return node


CASES = {
    "per_channel_subtract": ([(8, 8, 32, 32), (1, 8, 1, 1)], lambda x, m: relax.op.subtract(x, m)),
    "broadcast_to": ([(1, 8, 1, 1)], lambda m: relax.op.broadcast_to(m, (8, 8, 32, 32))),
    "collapse_sum_trailing": ([(8, 16, 64)], lambda x: relax.op.collapse_sum_to(x, (8, 16, 1))),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_operator_cuts_and_runs_right_on_the_emulator(case: str, tmp_path: Path) -> None:
    shapes, body = CASES[case]
    mod = _module(shapes, body)
    assert plans_for(_one_node(mod), get_target(TARGET), "float32"), f"{case}: no cut"
    result = compile_model(mod, TARGET, tmp_path, lambda w: None, cpe_mode="all")
    assert [n.op for n in result.graph.nodes] == ["cpe"]
    xs = [np.random.default_rng(i).standard_normal(s).astype("float32") for i, s in enumerate(shapes)]
    run = run_model(result.out_dir, xs, TARGET)
    np.testing.assert_allclose(run.output, _run(mod, xs).ravel(), rtol=1e-5, atol=1e-5)


@pytest.mark.needs("gcc", "make")
@pytest.mark.parametrize("start", [0, 3, 5, 8])
def test_a_slice_scatter_of_one_position_along_the_cut_is_right_in_every_block(start: int, tmp_path: Path) -> None:
    # slicing's adjoint in a training step: a source of extent 1 along axis 2 written at one position. A
    # cut along that axis once took the source for a broadcast operand, wrong in the blocks that do not
    # hold ``start``, and a check of three blocks (the ends and the middle) let it through
    shapes = [(2, 3, 9, 4), (2, 3, 1, 4)]
    mod = _module(shapes, lambda x, s: relax.op.slice_scatter(x, s, start, start + 1, 1, axis=2))
    result = compile_model(mod, TARGET, tmp_path, lambda w: None, cpe_mode="all")
    xs = [np.random.default_rng(i).standard_normal(s).astype("float32") for i, s in enumerate(shapes)]
    run = run_model(result.out_dir, xs, TARGET)
    np.testing.assert_allclose(run.output, _run(mod, xs).ravel(), rtol=1e-5, atol=1e-5)


def test_a_per_channel_operand_takes_the_same_block_for_every_sample() -> None:
    shapes, body = CASES["per_channel_subtract"]
    node = _one_node(_module(shapes, body))
    op = plans_for(node, get_target(TARGET), "float32")[0].best(get_target(TARGET))
    assert op is not None and op.lead == 8  # cut along C: one block of channels per sample
    assert [p.per_lead for p in op.params] == [True, False, True]


def _run(mod: Any, arrays: list[np.ndarray]) -> np.ndarray:
    exe = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return exe["main"](*[tvm.runtime.tensor(a) for a in arrays]).numpy()


@pytest.mark.parametrize("reduce", [
    lambda x: relax.op.mean(x, axis=[0, 2, 3]),  # a batch norm's statistics
    lambda x: relax.op.collapse_sum_to(x, (1, 8, 1, 1)),  # the adjoint of a per-channel broadcast
    lambda x: relax.op.sum(x, axis=[0, 1], keepdims=True),  # a bias's gradient (leading axes only)
])
def test_split_reductions_keep_the_value_and_reduce_trailing_axes_first(reduce: Callable[..., Any]) -> None:
    mod = _module([(8, 8, 32, 32)], reduce)
    split = split_leading_reductions(mod)
    x = np.random.default_rng(0).standard_normal((8, 8, 32, 32)).astype("float32")
    np.testing.assert_allclose(_run(split, [x]), _run(mod, [x]), rtol=1e-5, atol=1e-5)
    nodes = [n for n in read_relax(mod, "sw26010").nodes if n.op == "tir"]
    # the pass over the whole tensor is one the CPE cutter slices, and so is the small rest (after a
    # transpose): no step of the reduction is left to the MPE
    big = [n for n in nodes if n.inputs[0].size == x.size and n.relax_op in ("sum", "mean")]
    assert big and all(plans_for(n, get_target(TARGET), "float32") for n in nodes)


def test_the_caller_s_module_is_left_as_it_was() -> None:
    mod = _module([(8, 8, 32, 32)], lambda x: relax.op.mean(x, axis=[0, 2, 3]))
    before = mod.script()
    split_leading_reductions(mod)
    assert mod.script() == before


def test_a_cut_check_is_read_back_from_the_content_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The verdict of same_meaning is stored under the content cache: the same node and slicing checked
    again (another compile, another process) reads it instead of building and running llvm, and a
    verdict of "changes the result" is read back as such."""
    from tuner.ir import content_cache
    from tuner.space.cpe import cuts

    monkeypatch.setenv(content_cache.ENV, str(tmp_path / "cache"))
    shapes, body = CASES["per_channel_subtract"]
    node = _one_node(_module(shapes, body))
    plan = plans_for(node, get_target(TARGET), "float32")[0]
    op = plan.best(get_target(TARGET))
    assert cuts.same_meaning(node, plan, op, "float32")
    (entry,) = (tmp_path / "cache" / cuts.VERDICTS).iterdir()
    assert entry.read_bytes() == b"1"

    def not_run(*_: Any) -> bool:
        raise AssertionError("checked again instead of read back")

    monkeypatch.setattr(cuts, "_same_meaning", not_run)
    again = _one_node(_module(shapes, body))  # the same operator, built anew
    assert cuts.same_meaning(again, plan, op, "float32")
    entry.write_bytes(b"0")
    assert not cuts.same_meaning(again, plan, op, "float32")
    monkeypatch.delenv(content_cache.ENV)
    with pytest.raises(AssertionError, match="checked again"):  # no cache: every check runs
        cuts.same_meaning(again, plan, op, "float32")
