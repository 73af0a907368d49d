"""DDP training through the switch: 4 processes, the HINA comm hook, the embedded target.

Issue 6's bar: THC within 1 percentage point of the fp32 baseline's test accuracy, the count
sketch within 2 points at 10x compression or more. Same model, data, seed and steps for all.
"""
from __future__ import annotations

import argparse

import pytest

from hina.demo.digits import run_modes

WORKERS = 4


@pytest.fixture(scope="module")
def results():
    args = argparse.Namespace(workers=WORKERS, epochs=4, batch=32, lr=0.05, words=128, slots=32,
                              loss=0.0)
    return {r.mode: r for r in run_modes(["fp32", "thc", "sketched_sgd"], args)}


@pytest.mark.slow
def test_thc_matches_fp32_accuracy(results):
    fp32, thc = results["fp32"], results["thc"]
    assert fp32.accuracy > 0.85, "the baseline itself must learn the task"
    assert thc.accuracy >= fp32.accuracy - 0.01, (thc.accuracy, fp32.accuracy)
    assert thc.fallback_buckets == 0, "every bucket after warm-up went through the switch"


@pytest.mark.slow
def test_sketch_accuracy_at_10x_compression(results):
    fp32, sketch = results["fp32"], results["sketched_sgd"]
    # compression against the fp32 gradient, with every header of every packet counted
    fp32_gradient_bytes = 4 * sketch.n_params
    assert fp32_gradient_bytes / sketch.bytes_per_step >= 10, sketch.bytes_per_step
    assert sketch.accuracy >= fp32.accuracy - 0.02, (sketch.accuracy, fp32.accuracy)
    assert sketch.fallback_buckets == 0
