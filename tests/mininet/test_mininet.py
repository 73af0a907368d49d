"""HINA end to end in Mininet: hosts in network namespaces, real kernel links, one switch process.

Needs root and Debian's Mininet (CI installs it); skipped with the reason otherwise. The BMv2
variant runs when ``simple_switch_grpc`` and ``p4c-bm2-ss`` are on PATH. The embedded target
runs the P4 program in Python (a few thousand packets/s), so allreduces are 64k coordinates.

Loss: netem when the kernel has it, else nftables drop rules on the hosts' links (this project's
CI kernel has no ``sch_netem``), see ``hina_mn.deploy.resolve_loss_method``.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

SIZE = 65536
N_WORKERS = 4
LOSS_PCT = 2.0
CODECS = ("sum", "thc", "sketch", "lossless")


def _mininet_missing() -> str | None:
    if os.geteuid() != 0:
        return "Mininet needs root (network namespaces, veth links)"
    try:
        import mininet.net  # noqa: F401
    except ImportError as exc:
        return f"Mininet is not importable ({exc}): apt-get install mininet"
    if shutil.which("mnexec") is None:
        return "Mininet's mnexec is not on PATH: apt-get install mininet"
    return None


def _bmv2_missing() -> str | None:
    missing = [b for b in ("simple_switch_grpc", "p4c-bm2-ss") if shutil.which(b) is None]
    return f"{' and '.join(missing)} not on PATH (BMv2 not installed)" if missing else None


# ------------------------------------------------------------------------------------------------
# Without root: topology and loss-rule building
# ------------------------------------------------------------------------------------------------
def _import_topo():
    pytest.importorskip("mininet.topo", reason="Mininet is not installed: apt-get install mininet")
    from hina_mn import topo
    return topo


def test_star_topology_ports_and_addresses():
    T = _import_topo()
    t = T.StarTopo(n_workers=3, shape=T.LinkShape(bw=100, loss=2), netem_loss=True)
    assert t.workers == ["h1", "h2", "h3"]
    assert [t.worker_port(h) for h in t.workers] == [1, 2, 3]
    assert t.nodeInfo("h2")["ip"] == "10.0.0.2/24"
    assert t.linkInfo("h1", "s1")["loss"] == 2 and t.linkInfo("h1", "s1")["bw"] == 100
    no_netem = T.StarTopo(n_workers=1, shape=T.LinkShape(loss=2), netem_loss=False)
    assert "loss" not in no_netem.linkInfo("h1", "s1")
    with pytest.raises(ValueError, match="loss=100"):
        T.LinkShape(loss=100)
    with pytest.raises(ValueError, match="delay='5'"):
        T.LinkShape(delay="5")


def test_topology_json_tutorials_format(tmp_path):
    T = _import_topo()
    spec = {"hosts": {"h1": {"ip": "10.0.1.1/24", "mac": "08:00:00:00:01:11",
                             "commands": ["true"]},
                      "h2": {"ip": "10.0.2.2/24", "mac": "08:00:00:00:02:22"}},
            "switches": {"s1": {"runtime_json": "ignored.json"}},
            "links": [["h1", "s1-p1"], ["h2", "s1-p2", "5ms", 10]]}
    path = tmp_path / "topology.json"
    path.write_text(json.dumps(spec))
    t = T.JsonTopo(path=str(path))
    assert t.aggregator == "s1" and t.workers == ["h1", "h2"]
    assert [t.worker_port(h) for h in t.workers] == [1, 2]
    assert t.linkInfo("h2", "s1")["delay"] == "5ms" and t.linkInfo("h2", "s1")["bw"] == 10
    spec["switches"]["s2"] = {}
    spec["links"][1] = ["h2", "s2-p1"]
    path.write_text(json.dumps(spec))
    with pytest.raises(ValueError, match="same switch"):
        T.JsonTopo(path=str(path))


def test_nft_loss_rules_cover_both_directions():
    T = _import_topo()
    rules = T.nft_loss_rules("h1-eth0", 2.0)
    assert rules.count('device "h1-eth0"') == 2
    assert "hook ingress" in rules and "hook egress" in rules
    assert "numgen random mod 1000000 < 20000" in rules


# ------------------------------------------------------------------------------------------------
# In Mininet (root)
# ------------------------------------------------------------------------------------------------
needs_mininet = pytest.mark.skipif(_mininet_missing() is not None,
                                   reason=_mininet_missing() or "")
pytestmark = pytest.mark.root


def _check(reports, codecs):
    errors = [f"{r.host}: {r.report.get('error')}\n{r.stderr_tail}" for r in reports
              if "error" in r.report]
    assert not errors, "\n".join(errors)
    for r in reports:
        assert [res["codec"] for res in r.report["results"]] == list(codecs)
        for res in r.report["results"]:
            assert res["ok"], f"{r.host} {res['codec']}: {res}"
            if res["codec"] == "sum":
                assert res["exact"] and res["wrong_coordinates"] == 0
    return [res for r in reports for res in r.report["results"]]


def _start(target="embedded", loss=0.0, n_workers=N_WORKERS, **kwargs):
    from hina_mn import topo as T
    from hina_mn.deploy import HinaNetwork, resolve_loss_method
    shape = T.LinkShape(loss=loss)
    method = resolve_loss_method("auto", target, shape)
    topo = T.StarTopo(n_workers=n_workers, shape=shape, netem_loss=method == "netem")
    return HinaNetwork(topo, target=target, shape=shape, loss_method=method, **kwargs).start()


def _interfaces() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


@pytest.fixture(scope="class")
def star():
    """4 workers around the embedded switch, no impairments; torn down after its class (the
    other tests build networks with the same interface names)."""
    if _mininet_missing():
        pytest.skip(_mininet_missing())
    hn = _start()
    try:
        yield hn
    finally:
        hn.stop()


@needs_mininet
class TestStar:
    """Runs on one network: each run of worker processes gets a fresh job (``reset_job``)."""

    def test_allreduce_embedded_exact_sum_and_bounded_codecs(self, star):
        star.reset_job()
        reports = star.run_workers("allreduce", CODECS, size=SIZE, timeout_s=120)
        _check(reports, CODECS)
        counters = star.counters()
        assert all(counters[k] == 0 for k in ("UNKNOWN_WORKER", "BAD_JOB", "BAD_SLOT",
                                              "MALFORMED", "OVERFLOW")), counters

    def test_ddp_training_steps_through_the_switch(self, star):
        star.reset_job()
        reports = star.run_workers("ddp", ["thc"], steps=4, timeout_s=120)
        results = _check(reports, ["thc"])
        assert all(r["hina_buckets"] > 0 and r["fallback_buckets"] == 0 for r in results)
        assert all(r["replicas_in_sync"] for r in results)


@needs_mininet
def test_allreduce_with_loss_on_every_link_is_still_exact():
    hn = _start(loss=LOSS_PCT)
    try:
        reports = hn.run_workers("allreduce", ("sum", "thc", "sketch"), size=SIZE,
                                 timeout_s=120)
        results = _check(reports, ("sum", "thc", "sketch"))
        assert sum(r["retransmissions"] for r in results) > 0, "loss must cost retransmissions"
        if hn.loss_method == "nft":
            assert all(n > 0 for n in hn.nft_drops().values()), hn.nft_drops()
    finally:
        hn.stop()


@needs_mininet
def test_teardown_leaves_no_interfaces_or_processes_also_on_failure():
    from hina_mn.deploy import leftover_interfaces
    hn = _start(n_workers=2)
    try:
        # the switch side of every link and the control bridge are in the root namespace
        names = {n for n in hn._intf_names if n.startswith(("s1-", "mgmt0"))}
        assert len(names) == 5 and names <= _interfaces()
        pid = hn.switch.proc.pid
    finally:
        hn.stop()
    assert leftover_interfaces(names) == []
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    # A failure after the network is up (here: an invalid job) tears everything down too.
    with pytest.raises(ValueError, match="n_slots"):
        _start(n_workers=2, n_slots=0)
    assert leftover_interfaces(names) == []


@needs_mininet
def test_refuses_to_start_over_existing_interfaces_and_leaves_them_alone():
    from hina_mn.deploy import DeploymentError
    subprocess.run(["ip", "link", "add", "s1-eth1", "type", "veth", "peer", "name",
                    "hina-test-peer"], check=True)
    try:
        with pytest.raises(DeploymentError, match="s1-eth1 already exist"):
            _start(n_workers=1)
        assert "s1-eth1" in _interfaces()
    finally:
        subprocess.run(["ip", "link", "del", "s1-eth1"], check=False)


@needs_mininet
def test_launcher_ctrl_c_tears_everything_down():
    """``run.py`` interrupted (SIGINT, as Ctrl-C) while the workers run: exit 1, nothing left."""
    import signal
    import sys
    import time
    from pathlib import Path
    from hina_mn.deploy import leftover_interfaces
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, str(root / "mininet" / "run.py"), "--workers", "2",
                             "--codec", "sum", "--size", "4000000", "--no-control-network"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in proc.stdout:                # wait until switch, pipeline and job are up
            if " up (P4Runtime " in line:
                break
        time.sleep(3)                           # the workers are running now
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1 and "interrupted; tearing down" in out, out
    assert leftover_interfaces({"s1-eth1", "s1-eth2"}) == []
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "mininet/host_worker.py" not in ps and "@s1-eth1" not in ps   # workers, our switch


# Command-line shims: BMv2's two programs mapped onto the embedded target's, so that the launcher's
# BMv2 code path (switch command line, p4c-bm2-ss invocation, P4Info text, no register zeroing,
# job reset by re-pushing the pipeline) runs where BMv2 is not installed. Not a test of BMv2.
SIMPLE_SWITCH_SHIM = """
import os, sys
args, out, i = sys.argv[1:], ["--no-p4"], 0
while i < len(args):
    a = args[i]
    if a == "--thrift-port":
        i += 2
    elif a in ("--log-console", "--no-p4", "--"):
        i += 1
    elif a in ("-i", "--device-id", "--log-level", "--grpc-server-addr"):
        out += [a, args[i + 1]]
        i += 2
    elif a.startswith("--pcap="):
        out += ["--pcap", a.split("=", 1)[1]]
        i += 1
    else:
        sys.exit(f"simple_switch_grpc shim: unexpected argument {a}")
os.execv(sys.executable, [sys.executable, "-m", "softswitch", *out])
"""
P4C_SHIM = """
import os, sys
args, out, i, program = sys.argv[1:], [], 0, None
while i < len(args):
    a = args[i]
    if a == "--arch":
        i += 2
    elif a in ("-o", "--p4runtime-files"):
        out += ["--device-config" if a == "-o" else "--p4info", args[i + 1]]
        i += 2
    elif a.startswith("-D"):
        out += ["-D", a[2:]]
        i += 1
    else:
        program, i = a, i + 1
os.execv(sys.executable, [sys.executable, "-m", "softswitch", "compile", program, *out])
"""


@needs_mininet
def test_bmv2_code_path_through_a_command_line_shim(tmp_path, monkeypatch):
    import sys
    from hina_mn import deploy
    for name, body in (("simple_switch_grpc", SIMPLE_SWITCH_SHIM), ("p4c-bm2-ss", P4C_SHIM)):
        (tmp_path / name).write_text(f"#!{sys.executable}\n{body}")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setattr(deploy, "compile_pipeline", deploy.compile_pipeline.__wrapped__)
    hn = _start(target="bmv2", n_workers=2)
    try:
        assert hn.jobs.zero_registers is False
        assert "--thrift-port" in " ".join(hn.switch.command())
        hn.reset_job()                  # BMv2: a fresh pipeline instead of zeroed registers
        _check(hn.run_workers("allreduce", ["sum"], size=16384, timeout_s=120), ["sum"])
    finally:
        hn.stop()


@pytest.mark.skipif(_mininet_missing() is not None or _bmv2_missing() is not None,
                    reason=_mininet_missing() or _bmv2_missing() or "")
def test_allreduce_bmv2_exact_sum_and_bounded_codecs():
    hn = _start(target="bmv2")
    try:
        _check(hn.run_workers("allreduce", CODECS, size=SIZE, timeout_s=300), CODECS)
    finally:
        hn.stop()
