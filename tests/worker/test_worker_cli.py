"""hina-worker's argument checks that come before it joins a job (the other workers would wait)."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
BAD_DEVICES = ["tpu", "cuda:x"] + ([] if torch.cuda.is_available() else ["cuda"])


@pytest.mark.parametrize("device", BAD_DEVICES)
def test_bench_device_refused_before_joining(device):
    """An unusable --device is a usage error (exit 2, one line) without contacting the
    controller (the address here has nothing listening)."""
    done = subprocess.run([sys.executable, "-m", "hina.worker.cli", "join", "--controller", "127.0.0.1:9",
                           "--job", "1", "bench", "--device", device],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"hina-worker: error: --device {device!r}")
