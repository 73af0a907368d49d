"""Every benchmark under ``bench/`` that no other test runs, run once with its smallest
arguments: it exits 0 and prints its figures, and where it checks what it measured (results
against numpy, retransmissions, losses), that check passed.

Figures in the README come from these commands; a benchmark that no longer runs (or, like
``bench_bmv2_vs_embedded.py`` between protocol v3 and its fix, runs and measures nothing) would
otherwise only be found by the next person who needs its numbers. The figures themselves are
not judged here (timed tests are not this suite's business).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hina.controller import bmv2

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _run(*argv: str, timeout: float = 120.0) -> str:
    proc = subprocess.run([sys.executable, str(BENCH / argv[0]), *argv[1:]], capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"{argv[0]} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_analyze_thc_buckets():
    out = _run("analyze_thc_buckets.py", "--workers", "2", "--batch", "16", "--steps", "1")
    assert "tables.0.weight" in out and "bottom.0.weight" in out


def test_bench_peel_load():
    out = _run("bench_peel_load.py", "--columns", "64", "--loads", "0.5", "--trials", "2")
    assert re.search(r"64\s+0\.50\s+\d+ of 2", out), out


def test_bench_softswitch():
    out = _run("bench_softswitch.py", "--packets", "200", "--rounds", "1")
    assert re.search(r"basic\.p4 .*: [\d.]+ kpps", out), out


def test_bench_transport_loss():
    out = _run("bench_transport_loss.py", "--loss", "0", "0.05", "--workers", "2",
               "--chunks", "50")
    rows = re.findall(r"^\s*([\d.]+)%\s+[\d.]+\s+(.*)$", out, re.M)
    assert [r[0] for r in rows] == ["0.00", "5.00"], out
    lossless = [tuple(map(int, w.split("/"))) for w in rows[0][1].split(", ")]
    assert lossless == [(50, 0, 0, 0)] * 2, "no loss: one packet per chunk, nothing resent"


def test_bench_wire():
    out = _run("bench_wire.py", "--dim", "10000")
    assert "THC" in out and "block-sparse" in out


def test_bench_worker_io():
    out = _run("bench_worker_io.py", "--packets", "2000", "--repeat", "1",
               "--switch-packets", "100")
    assert "batched / per-message" in out and "embedded switch, SUM" in out


def test_bench_dataplane():
    out = _run("bench_dataplane.py", "--packets", "40", "--repeat", "1", "--modes", "SUM",
               "THC LUT_SUM", "--words", "64")
    assert re.search(r"SUM\s+\d+ pkt/s in", out) and re.search(r"THC LUT_SUM\s+\d+ pkt/s", out)


@pytest.mark.slow
def test_bench_allreduce():
    out = _run("bench_allreduce.py", "--sizes", "4096", "--codecs", "thc", "--workers", "2",
               timeout=240)
    row = re.search(r"^thc\s+4,096\s.*$", out, re.M)
    assert row, out
    assert row.group(0).split()[-2] == "0", "no retransmission on loopback"


@pytest.mark.slow
def test_trace_ddp_overlap():
    """The trace runs bench_ddp_overlap.py itself: both are covered."""
    out = _run("trace_ddp_overlap.py", "--batch", "8", "--steps", "1", "--rounds", "1",
               timeout=240)
    assert "step, asynchronous hook" in out and "hidden" in out
    assert "backward ends" in out and "the switch process used" in out
    assert re.search(r"fp32 fallbacks 0\)", out), out


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the bench makes veth pairs")
def test_bench_bmv2_vs_embedded():
    targets = "embedded" if bmv2.missing() else "bmv2,embedded"
    out = _run("bench_bmv2_vs_embedded.py", "--quick", "--thc", "--no-basic", "--targets",
               targets, timeout=240)
    assert "every output checked: 0 wrong" in out, out
    for target in targets.split(","):
        for figure in ("hina SUM", "hina THC LUT_SUM"):
            row = re.search(rf"^\| {figure}\s+\| {target}\s+\|.*$", out, re.M)
            assert row, (figure, target, out)
            cells = [c.strip() for c in row.group(0).strip("|").split("|")]
            assert cells[3] != "-" and int(cells[3].replace(",", "")) > 0, row.group(0)


@pytest.mark.parametrize("argv, says", [
    (["--codec", "nope"], "unknown codec 'nope'"),
    (["--steps", "0"], "--steps and --rounds must be >= 1"),
    (["--rounds", "0"], "--steps and --rounds must be >= 1"),
    (["--switch-interval", "0"], "--switch-interval 0.0: must be in (0, 1] seconds"),
    (["--switch-interval", "2"], "--switch-interval 2.0: must be in (0, 1] seconds"),
])
def test_bench_ddp_overlap_refuses_bad_arguments_before_starting(argv, says):
    """A bad argument is an argparse error (exit 2) before the switch or any rank starts."""
    proc = subprocess.run([sys.executable, str(BENCH / "bench_ddp_overlap.py"), *argv],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr
    assert "DDP through the embedded switch" not in proc.stdout


def test_bench_thc_kernels():
    """The kernel sweep (Triton's interpreter without a GPU): every kernel in both transforms
    built, ran and matched the current launch's values; the best launch re-run end to end."""
    pytest.importorskip("triton")
    out = _run("bench_thc_kernels.py", "--size", "64K", "--repeats", "2", "--precisions", "ieee,butterfly",
               "--blocks", "256", "--warps", "1", "--groups", "1")
    for kernel in ("rotate", "inverse", "norm", "fused"):
        assert re.search(rf"^{kernel}\s+butterfly\s+1\s+1\s+[\d.]+", out, re.M), out
        assert f"{kernel}: best" in out
    assert "DIFFERS" not in out and "failed" not in out, out
    assert "THC encode+decode, best rotate launch" in out


def test_triton_aot_refuses_an_unknown_precision():
    """``--precisions`` names the codec's choice or the transforms it has: anything else is
    refused with the choices (exit 2) before any kernel is compiled."""
    pytest.importorskip("triton")
    proc = subprocess.run([sys.executable, str(BENCH / "triton_aot.py"), "--precisions", "codec,fp8"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--precisions: unknown fp8" in proc.stderr and "butterfly" in proc.stderr, \
        proc.stderr
    assert not proc.stdout
