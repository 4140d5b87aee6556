"""Workload validation, canonical JSON and keys."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tuner.errors import InvalidWorkloadError
from tuner.workloads import BatchMatmul, Conv2d, Dense, workload_from_json


def test_conv_output_shape_and_flops_follow_the_formula():
    w = Conv2d(1, 3, 224, 224, 64, 11, 11, stride_h=4, stride_w=4, pad_h=2, pad_w=2)
    assert (w.oh, w.ow) == (55, 55)
    assert w.flops == 2 * 64 * 55 * 55 * 3 * 11 * 11


def test_depthwise_is_grouped_conv():
    w = workload_from_json({"op": "depthwise_conv2d", "n": 1, "c": 32, "h": 8, "w": 8, "k": 32, "r": 3, "s": 3,
                            "groups": 32, "padding": 1})
    assert w.is_depthwise and w.flops == 2 * 32 * 8 * 8 * 9


@pytest.mark.parametrize("spec, message", [
    ({"op": "dense", "m": 0, "n": 4, "k": 4}, "m must be positive"),
    ({"op": "dense", "m": -3, "n": 4, "k": 4}, "must be positive"),
    ({"op": "dense", "m": 2.5, "n": 4, "k": 4}, "must be an integer"),
    ({"op": "conv2d", "n": 1, "c": 3, "h": 4, "w": 4, "k": 8, "r": 7, "s": 7}, "larger than the padded input"),
    ({"op": "conv2d", "n": 1, "c": 3, "h": 8, "w": 8, "k": 8, "r": 3, "s": 3, "groups": 2}, "groups=2 must divide"),
    ({"op": "conv2d", "n": 1, "c": 4, "h": 8, "w": 8, "k": 8, "r": 3, "s": 3, "padding": -1}, "non-negative"),
    ({"op": "dense", "m": 4, "n": 4, "k": 4, "dtype": "int8"}, "unsupported dtype"),
    ({"op": "softmax", "n": 4}, "unknown op"),
    ({"op": "dense", "m": 4, "n": 4}, "missing fields"),
    ({"op": "dense", "m": 4, "n": 4, "k": 4, "bias": True}, "unknown fields"),
    ("not json", "not valid JSON"),
    ([1, 2], "must be a JSON object"),
])
def test_bad_workloads_raise_a_clear_error(spec, message):
    with pytest.raises(InvalidWorkloadError, match=message):
        workload_from_json(spec)


@given(m=st.integers(1, 5000), n=st.integers(1, 5000), k=st.integers(1, 5000),
       dtype=st.sampled_from(["float32", "float64"]), batch=st.integers(0, 16))
def test_canonical_json_round_trips_and_keys_are_stable(m, n, k, dtype, batch):
    w = BatchMatmul(batch, m, n, k, dtype) if batch else Dense(m, n, k, dtype)
    again = workload_from_json(w.canonical_json())
    assert again == w and again.key == w.key
    assert workload_from_json(dict(reversed(list(w.to_json().items())))).key == w.key


def test_keys_differ_when_any_field_differs():
    base = Conv2d(1, 16, 14, 14, 32, 3, 3)
    variants = [Conv2d(1, 16, 14, 14, 32, 3, 3, stride_h=2), Conv2d(1, 16, 14, 14, 32, 3, 3, dtype="float64"),
                Conv2d(1, 16, 14, 14, 32, 3, 3, pad_w=1), Conv2d(2, 16, 14, 14, 32, 3, 3)]
    assert len({base.key, *(v.key for v in variants)}) == 5
