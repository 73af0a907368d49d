"""The demo's argument checks (no training: each is refused before any worker starts)."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def _demo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hina.demo.digits", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: --device cuda is valid")
def test_device_cuda_without_a_gpu_is_a_usage_error():
    done = _demo("--device", "cuda")
    assert done.returncode == 2 and "--device cuda: no CUDA device available" in done.stderr


def test_unknown_device_is_a_usage_error():
    done = _demo("--device", "tpu")
    assert done.returncode == 2 and "invalid choice: 'tpu'" in done.stderr


@pytest.mark.parametrize("args, message", [
    (("demo.dlrm", "--lossless-columns", "3000"), "--lossless-columns 3000: must be a power of two"),
    (("demo.moe", "--modes", "sparse"), "unknown mode 'sparse'"),
    (("demo.dlrm", "--hina-bucket-mb", "0"), "--hina-bucket-mb 0.0: must be > 0"),
    (("demo.dlrm", "--modes", "adaptive,zip"), "unknown mode 'zip'"),
    (("demo.moe", "--program", "tna", "--words", "128"), "--words 128: the tna program takes 32, 64"),
    (("demo.dlrm", "--program", "tofino"), "invalid choice: 'tofino'"),
])
def test_sparse_workload_usage_errors(args, message):
    done = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 2 and message in done.stderr, done.stderr
