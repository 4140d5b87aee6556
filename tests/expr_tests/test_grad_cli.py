"""``swtune grad`` and ``swtune check-grad`` on the example operators, as a user runs them."""

import json

import pytest

pytest.importorskip("tvm")
pytest.importorskip("torch")
from typer.testing import CliRunner

from cli.app import build_app

app = build_app()
STRIDED = '{"c": 4, "h": 9, "w": 9, "k": 6, "stride": 2}'


def test_grad_prints_each_gradient_operator_and_writes_a_submit_file(examples, tmp_path):
    out = tmp_path / "grads.json"
    res = CliRunner().invoke(app, ["grad", f"{examples}/nn.py:conv2d", "--args", STRIDED, "--out", str(out)])
    assert res.exit_code == 0, res.output
    # the data gradient of a stride-2 conv: four residue classes, none reading an inserted zero
    assert all(f"conv2d_grad_data_{i}[" in res.output for i in range(4)) and "conv2d_grad_weight[" in res.output
    document = json.loads(out.read_text())
    assert document["labels"] == [f"conv2d_grad_data_{i}" for i in range(4)] + ["conv2d_grad_weight"]
    assert all(w["op"] == "expr" and "T.prim_func" in w["script"] for w in document["workloads"])


def test_grad_json_lines_carry_the_workloads(examples):
    res = CliRunner().invoke(app, ["grad", f"{examples}/linalg.py:weighted_gemm", "--args",
                                   '{"m": 16, "n": 12, "k": 8}', "--json"])
    assert res.exit_code == 0, res.output
    lines = [json.loads(line) for line in res.stdout.strip().splitlines()]
    assert [(x["wrt"], x["macs"], x["gemm_like"]) for x in lines] == [
        ("A", 16 * 12 * 8, True), ("B", 16 * 12 * 8, True), ("w", 16 * 12 * 8, True)]
    assert all(x["workload_key"].startswith("expr-weighted_gemm_grad_") for x in lines)


@pytest.mark.slow
def test_check_grad_checks_numerically_and_on_the_emulator(examples):
    res = CliRunner().invoke(app, ["check-grad", f"{examples}/nn.py:conv2d", "--args", STRIDED,
                                   "--torch", f"{examples}/nn.py:conv2d_torch", "--configs", "2"])
    assert res.exit_code == 0, res.output
    line = json.loads(res.stdout.strip().splitlines()[-1])
    assert line["operators_checked"] == 5 and line["configs_checked"] == 10
    assert line["fd_max_rel_err"] <= 1e-6 and line["autograd_max_rel_err"] <= 1e-10
    assert line["wrong_results"] == line["dma_count_mismatches"] == line["compile_failures"] == 0


def test_check_grad_refuses_what_it_cannot_differentiate_in_one_line(examples, tmp_path):
    ops = tmp_path / "ops.py"
    ops.write_text("from tvm import te\n\ndef diag(n=4):\n    a = te.placeholder((n, n), name='A')\n"
                   "    return [a, te.compute((n,), lambda i: a[i, i] * 2.0, name='diag')]\n")
    res = CliRunner().invoke(app, ["check-grad", f"{ops}:diag"])
    assert res.exit_code == 2 and "scatter form" in res.output
    res = CliRunner().invoke(app, ["grad", f"{examples}/nn.py:conv2d", "--args", "{not json"])
    assert res.exit_code == 2 and "not valid JSON" in res.output


@pytest.mark.slow
def test_check_grad_of_a_multi_stage_layer_norm(examples):
    """Eight gradient operators (mean, variance, normalise: the chain rule over stages); the emulator's
    random inputs make some variances negative, where the reference and the kernel both give NaN."""
    res = CliRunner().invoke(app, ["check-grad", f"{examples}/nn.py:layer_norm", "--args", '{"m": 4, "n": 8}',
                                   "--torch", f"{examples}/nn.py:layer_norm_torch", "--configs", "1"])
    assert res.exit_code == 0, res.output
    line = json.loads(res.stdout.strip().splitlines()[-1])
    assert line["operators_checked"] == 8 and line["wrong_results"] == 0 and line["autograd_max_rel_err"] <= 1e-10


@pytest.mark.slow
@pytest.mark.needs("gcc", "make")
@pytest.mark.parametrize("op,args,operators", [("quadratic_form", '{"m": 8, "n": 6}', 3),
                                               ("symmetric_product", '{"n": 10}', 3)],
                         ids=["reduction", "element-wise"])
def test_check_grad_of_an_input_at_two_places(examples, op, args, operators):
    """examples/ops/repeated.py: x at two places of a product, one gradient operator per place (and W's
    of the quadratic form reading x as two operands), each checked on the emulator; the summed
    gradient against finite differences and torch autograd."""
    res = CliRunner().invoke(app, ["check-grad", f"{examples}/repeated.py:{op}", "--args", args,
                                   "--torch", f"{examples}/repeated.py:{op}_torch", "--configs", "2"])
    assert res.exit_code == 0, res.output
    line = json.loads(res.stdout.strip().splitlines()[-1])
    assert line["operators_checked"] == operators and line["configs_checked"] == 2 * operators
    assert line["fd_max_rel_err"] <= 1e-6 and line["autograd_max_rel_err"] <= 1e-10
    assert line["wrong_results"] == line["dma_count_mismatches"] == line["compile_failures"] == 0
    assert line["tir_mismatches"] == line["runtime_errors"] == 0


def test_grad_prints_one_operator_per_place_an_input_appears(examples):
    res = CliRunner().invoke(app, ["grad", f"{examples}/repeated.py:quadratic_form", "--args", '{"m": 8, "n": 6}',
                                   "--json"])
    assert res.exit_code == 0, res.output
    lines = [json.loads(line) for line in res.stdout.strip().splitlines()]
    assert [(x["name"], x["wrt"], x["gemm_like"]) for x in lines] == [
        ("quadratic_form_grad_x_0", "x", True), ("quadratic_form_grad_x_1", "x", True),
        ("quadratic_form_grad_W", "W", True)]
