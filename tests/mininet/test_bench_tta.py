"""``bench/bench_tta.py`` (time to accuracy over tc-limited links): its table logic without root,
and its smallest configuration for real in Mininet (root; skipped with the reason otherwise):
2 workers, one rate (2 Mbit/s), fp32 (gloo) and THC (the switch), a few steps, no accuracy
target. The real run checks the table's shape, that tc applies the rate on both ends of every
link (data and control), that the fp32 step takes at least the time the rate implies for the
bytes gloo moved (it takes ~5 ms with unlimited links), and that nothing is left behind.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hina.procs import with_default_signals

ROOT = Path(__file__).resolve().parents[2]
RATE = 2.0
STEPS = 6


def _bench():
    spec = importlib.util.spec_from_file_location("bench_tta", ROOT / "bench" / "bench_tta.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mininet_missing() -> str | None:
    if os.geteuid() != 0:
        return "Mininet needs root (network namespaces, veth links, tc)"
    try:
        import mininet.net  # noqa: F401
    except ImportError as exc:
        return f"Mininet is not importable ({exc}): apt-get install mininet"
    if shutil.which("mnexec") is None or shutil.which("tc") is None:
        return "Mininet's mnexec or iproute2's tc is not on PATH"
    return None


def _run(fp32_ms: float, thc_ms: float, free_fp32: float, free_thc: float) -> dict:
    def row(ms, link_ms, secs):
        return {"runs": [{"seconds_to_target": secs, "ms_per_step": ms, "steps_to_target": 10,
                          "bytes_per_worker_step": 1000.0, "link_ms": link_ms,
                          "switch_packets_per_s": 0.0, "link_packets_per_s": None,
                          "final_accuracy": 0.95, "loadavg": [1.0, 1.0, 1.0]}]}
    return {"none": {"fp32": row(free_fp32, None, 1.0), "thc": row(free_thc, None, 1.0)},
            "2": {"fp32": row(fp32_ms, 150.0, 3.0), "thc": row(thc_ms, 40.0, 2.0)}}


def test_table_speedup_and_what_limits_each_run():
    b = _bench()
    rows = b.table(_run(160.0, 90.0, free_fp32=5.0, free_thc=60.0), [None, 2.0], ["fp32", "thc"])
    by = {(r["rate_mbit"], r["mode"]): r for r in rows}
    assert by["2", "fp32"]["limited_by"] == "link"          # 150 ms of link > 5 ms unlimited
    assert by["2", "thc"]["limited_by"] == "switch"         # 40 ms of link < 60 ms unlimited
    assert by["2", "thc"]["speedup_vs_fp32"] == pytest.approx(1.5)
    assert by["none", "thc"]["limited_by"] == "-"
    text = b.render(rows, markdown=True)
    assert text.count("\n") == len(rows) + 1 and "1.50x" in text
    assert b.htb_rate_mbit("class htb 5:1 root leaf 10: prio 0 rate 2Mbit ceil 2Mbit") == 2.0
    assert b.htb_rate_mbit("class htb 5:1 root rate 500Kbit ceil 500Kbit") == 0.5
    assert b.htb_rate_mbit("") is None
    with pytest.raises(Exception, match="rates"):
        b.parse_rates("10,-2")


def _suffix() -> str:
    n, digits = os.getpid(), ""
    while n:
        n, d = divmod(n, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[d] + digits
    return ("b" + digits)[:6]


def _interfaces() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def _our_processes(suffix: str) -> list[int]:
    """Worker agents of the network (tagged in their environment) and its switch process
    (its command line names the switch's interfaces)."""
    tag, port = f"HINA_MN_NETWORK=s1{suffix}".encode(), f"s1{suffix}-eth".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if tag in env or port in cmd:
            pids.append(int(entry))
    return pids


@pytest.mark.root
def test_smallest_configuration_in_mininet(tmp_path):
    why = _mininet_missing()
    if why:
        pytest.skip(why)
    suffix = _suffix()
    out = tmp_path / "tta.json"
    cmd = [sys.executable, str(ROOT / "bench" / "bench_tta.py"), "--rates", f"{RATE:g}",
           "--workers", "2", "--codecs", "fp32,thc", "--target-acc", "0", "--max-steps",
           str(STEPS), "--no-unlimited", "--json", str(out), "--name-suffix", suffix,
           "--log-dir", str(tmp_path / "logs"), "--timeout", "90"]
    # Ctrl-C must reach it even in a suite run under nohup (no preexec_fn: see hina.procs)
    proc = subprocess.Popen(with_default_signals(cmd), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        try:
            stdout, stderr = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            # Ctrl-C first, so the benchmark tears its network down (a SIGKILL would leave it)
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()
            pytest.fail("bench_tta.py took over 180 s (interrupted; its teardown ran)")
        done = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
    finally:
        leftover = sorted(n for n in _interfaces() if n.startswith((f"s1{suffix}-",
                                                                    f"mgmt0{suffix}")))
        procs = _our_processes(suffix)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert not leftover, f"interfaces left behind: {leftover}"
    assert not procs, f"processes left behind: {procs}"

    data = json.loads(out.read_text())
    rows = {r["mode"]: r for r in data["table"]}
    assert set(rows) == {"fp32", "thc"} and all(r["rate_mbit"] == "2" for r in rows.values())
    for r in rows.values():
        assert r["steps_to_target"] is None and r["limited_by"] == "?"
        assert r["ms_per_step"] > 0 and r["bytes_per_worker_step"] > 0
    results = data["results"]["2"]
    # tc really applies the rate, on both ends of every data and control link (2 hosts x 2).
    rates = results["fp32"]["tc_rates_mbit"]
    assert len(rates) == 8 and all(v == pytest.approx(RATE, rel=0.01) for v in rates.values())
    fp32, thc = results["fp32"]["runs"][0], results["thc"]["runs"][0]
    assert fp32["steps"] == STEPS and thc["steps"] == STEPS
    # gloo's ring crosses the limited control links: a step takes at least the time the
    # busiest link needs for the bytes it carried at the rate (~160 ms; ~5 ms unlimited).
    implied_ms = fp32["busiest_link_bytes_per_step"] * 8 / (RATE * 1e6) * 1e3
    assert fp32["control_bytes_per_worker_step"] > 30_000      # 9,610 fp32 gradients
    assert fp32["data_bytes_per_worker_step"] == 0            # nothing crosses the switch
    assert fp32["ms_per_step"] >= 0.9 * implied_ms, (fp32["ms_per_step"], implied_ms)
    # THC went through the switch, without falling back, and sent fewer bytes than fp32.
    assert thc["hina_buckets"] > 0 and thc["fallback_buckets"] == 0
    assert thc["data_bytes_per_worker_step"] > 0 and thc["switch_packets_per_s"] > 0
    assert thc["bytes_per_worker_step"] < fp32["bytes_per_worker_step"] / 2


@pytest.mark.parametrize("workload, codec", [("digits", "thc"), ("dlrm", "sparse"),
                                             ("dlrm", "block_sparse"), ("moe", "adaptive")])
def test_tta_worker_tasks_train_and_measure(workload, codec):
    """What a host trains for each workload (no network): a step's loss and backward, the test
    metric in [0, 1], the optimiser and, through the switch, the workload's codec; dlrm's
    ``sparse`` mode gives sparse embedding gradients."""
    import argparse

    import torch

    from hina.mininet import tta_worker as T
    args = argparse.Namespace(workload=workload, codec=codec, seed=0, batch=None, lr=None,
                              target_acc=None)
    T.fill_defaults(args)
    assert (args.batch, args.lr, args.target_acc) == T.DEFAULTS[workload]
    task = T.Task(workload, codec, args)
    opt = task.optimizer(task.module.parameters(), args.lr)
    before = [p.detach().clone() for p in task.module.parameters()]
    loss = task.loss(task.module, torch.arange(args.batch))
    loss.backward()
    opt.step()
    assert torch.isfinite(loss) and any(not torch.equal(a, p) for a, p in
                                        zip(before, task.module.parameters()))
    assert 0.0 <= task.evaluate(task.module) <= 1.0
    grads = [p.grad for p in task.module.parameters() if p.grad is not None]
    assert any(g.is_sparse for g in grads) == (codec == "sparse")
    if codec not in T.GLOO_MODES:
        assert task.codec(2, 0, 0).name == codec
    assert codec in T.codecs_of(workload)


def test_tta_worker_refuses_a_mode_its_workload_lacks(capsys):
    from hina.mininet import tta_worker as T
    assert "sparse" not in T.codecs_of("moe") and "sparse" not in T.codecs_of("digits")
    assert T.main(["--rank", "0", "--workers", "2", "--job-id", "1", "--slots", "4", "--words",
                   "32", "--bind", "10.0.0.1:40000", "--switch", "10.0.0.254:48864",
                   "--codec", "sparse", "--workload", "moe", "--master", "10.0.0.9:1"]) == 2
    assert "for moe, one of" in capsys.readouterr().err
