"""HINA end to end in Mininet: hosts in network namespaces, real kernel links, one switch process.

Needs root and Debian's Mininet (CI installs it); skipped with the reason otherwise. Every run is
made on the embedded target and on BMv2 (``simple_switch_grpc``; skipped with the reason where
the toolchain is missing, :func:`controller.bmv2.missing`): an allreduce of every codec of the
workload with its results checked, ``hina-ctl`` inspection of the job's slots and counters
afterwards, the same with loss on every link, a few DDP training steps through the switch
checked against DDP's own fp32 all-reduce, and teardown (also on failure and Ctrl-C). The
embedded target runs the P4 program in Python (a few thousand packets/s), so allreduces are 64k
coordinates; BMv2 runs ``HINA_WORDS=64`` (the compile is cached on disk).

Every network gets its own node names (``s1<suffix>``, ``mgmt0<suffix>``, suffix from this
process's id), so two test runs on one machine never share an interface.

Loss: netem when the kernel has it, else nftables drop rules on the hosts' links (this project's
CI kernel has no ``sch_netem``), see ``hina_mn.deploy.resolve_loss_method``.
"""
from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import time

import numpy as np
import pytest

SIZE = 65536
N_WORKERS = 4
LOSS_PCT = 2.0
#: Every codec of the workload (hina_mn.workloads.CODECS), "sum" last: its exact sums are what
#: the slots hold afterwards, which the hina-ctl inspection checks.
ALL_CODECS = ("fixed", "thc", "fetchsgd", "lossless", "sketched_sgd", "sum")
#: On the embedded target (a Python switch: packets are dear) the codecs that send few of them,
#: and SUM, last.
CODECS = ("thc", "fetchsgd", "lossless", "sketched_sgd", "sum")
BMV2_WORKERS = 3
BMV2_WORDS = 64
DDP_STEPS = 6


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
    from hina.controller.bmv2 import missing
    return _mininet_missing() or missing()


# ------------------------------------------------------------------------------------------------
# Without root: topology and loss-rule building
# ------------------------------------------------------------------------------------------------
def _import_topo():
    pytest.importorskip("mininet.topo", reason="Mininet is not installed: apt-get install mininet")
    from hina.mininet import topo
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


def test_name_suffix_keeps_networks_apart():
    T = _import_topo()
    t = T.StarTopo(n_workers=2, suffix="ab1")
    assert (t.aggregator, t.control_bridge) == ("s1ab1", "mgmt0ab1")
    assert sorted(t.switches()) == ["mgmt0ab1", "s1ab1"] and t.worker_port("h2") == 2
    from hina.mininet.deploy import expected_interfaces
    assert {"s1ab1-eth1", "s1ab1-eth2", "mgmt0ab1"} <= expected_interfaces(t)
    for bad in ("toolong7", "Caps", "a-b"):
        with pytest.raises(ValueError, match="suffix="):
            T.StarTopo(n_workers=1, suffix=bad)


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
needs_bmv2 = pytest.mark.skipif(_bmv2_missing() is not None, reason=_bmv2_missing() or "")
pytestmark = pytest.mark.root
TARGETS = [pytest.param("embedded", marks=needs_mininet),
           pytest.param("bmv2", marks=needs_bmv2)]
_networks = itertools.count()


def _base36(n: int) -> str:
    digits, out = "0123456789abcdefghijklmnopqrstuvwxyz", ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if not n:
            return out


def _suffix() -> str:
    """Node name suffix of a new network: this process's id and a counter (base 36, at most 6
    characters), so that no two live networks, of this run or another, share a name."""
    return _base36(os.getpid()) + _base36(next(_networks) % 36)


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
            if res["codec"] == "sketched_sgd":
                assert res["equals_reference"], res
    return [res for r in reports for res in r.report["results"]]


def _network(logs, target="embedded", loss=0.0, n_workers=N_WORKERS, control_network=True,
             **kwargs):
    """A star network (not started yet) with its own node names, its logs (switch, workers,
    hina-ctl state) in a folder of ``logs``; BMv2 at BMV2_WORDS."""
    from hina.mininet import topo as T
    from hina.mininet.deploy import HinaNetwork, resolve_loss_method
    shape = T.LinkShape(loss=loss)
    method = resolve_loss_method("auto", target, shape)
    if target == "bmv2":
        kwargs.setdefault("words", BMV2_WORDS)
    topo = T.StarTopo(n_workers=n_workers, shape=shape, netem_loss=method == "netem",
                      control_network=control_network, suffix=_suffix())
    return HinaNetwork(topo, target=target, shape=shape, loss_method=method,
                       log_dir=str(logs / f"{target}-{topo.suffix}"), **kwargs)


def _start(*args, **kwargs):
    return _network(*args, **kwargs).start()


def _interfaces() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def _ctl(hn, *args: str):
    """``hina-ctl ... --json`` against the network's switch (a read-only session beside the
    launcher's primary one), parsed."""
    done = subprocess.run(hn.ctl_command(*args, "--json"), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


ERROR_REASONS = ("UNKNOWN_WORKER", "BAD_JOB", "BAD_SLOT", "MALFORMED", "OVERFLOW",
                 "OUT_OF_ORDER", "WRONG_PORT", "BAD_CHECKSUM")


def _check_ctl_inspection(hn, reports, lossy: bool = False) -> None:
    """``hina-ctl counters`` and ``state`` after an allreduce run whose last codec was "sum":
    drops by reason, packets and bytes the switch admitted for the job against what the workers
    sent, chunks started, every slot copy complete, and the last chunk's slot decoded to the
    exact sums of the workers' inputs."""
    from hina import protocol as P
    from hina.mininet import workloads as W
    totals = [{k: sum(res[k] for res in r.report["results"])
               for k in ("packets_sent", "retransmissions", "bytes_sent")} for r in reports]
    chunks = {t["packets_sent"] - t["retransmissions"] for t in totals}
    assert len(chunks) == 1, totals                # every worker sent every chunk
    chunks = chunks.pop()
    n, slots, words = len(reports), hn.n_slots, hn.words

    counters = _ctl(hn, "counters")
    assert all(counters["reasons"][k] == 0 for k in ERROR_REASONS), counters["reasons"]
    retransmissions = sum(t["retransmissions"] for t in totals)
    assert counters["reasons"]["DUPLICATE"] + counters["reasons"]["STALE_POOL"] <= \
        retransmissions, (counters["reasons"], retransmissions)
    job = counters["jobs"][0]
    sent = sum(t["packets_sent"] for t in totals)
    frame_bytes = sum(t["bytes_sent"] for t in totals) + sent * (14 + 20 + 8)
    if lossy:          # what the links dropped on the way up never reached the switch
        assert n * chunks <= job["packets"] < sent, (job, sent)
    else:
        assert (job["packets"], job["bytes"]) == (sent, frame_bytes), (job, sent, frame_bytes)
    assert (job["job"], job["chunks"]) == (hn.job_id, chunks)
    assert (job["complete_copies"], job["filling_copies"]) == (min(2 * slots, chunks), 0)

    summary = _ctl(hn, "state", "--job", str(hn.job_id))
    assert summary["chunks"] == chunks and len(summary["slots"]) == slots
    for s in summary["slots"]:       # copies: the newest use holds every contributor, the
        older, newer = sorted(s["pools"], key=lambda p: p["seq"])  # older one is drained
        assert newer["seq"] == older["seq"] + slots, s
        assert [(p["count"], p["complete"], p["overflow"]) for p in s["pools"]] == \
            [(n, True, False)] * 2, s
        assert (newer["contributors"], older["contributors"]) == (list(range(n)), []), s

    last = chunks - 1
    slot = _ctl(hn, "state", "--job", str(hn.job_id), "--slot", str(last % slots))
    pool = slot["pools"][(last // slots) % 2]
    assert (pool["seq"], pool["count"], pool["contributors"], pool["complete"],
            pool["overflow"]) == (last, n, list(range(n)), True, False)
    # the job's codec is THC, so lanes are shown as LUT_SUM: two 16-bit halves per word
    assert slot["lane_op"] == "LUT_SUM" and len(pool["lanes"]) == 2 * words
    got = np.array([(hi << P.THC_SUM_BITS) | lo for hi, lo in zip(pool["lanes"][0::2],
                                                                  pool["lanes"][1::2])],
                   dtype=np.uint32).view(np.int32)
    k = SIZE // words - 1                          # the SUM run's last chunk
    inputs = np.stack([W.make_input("sum", r, SIZE, 0) for r in range(n)]).astype(np.int64)
    want = inputs.sum(0)[k * words:(k + 1) * words].astype(np.int32)
    assert np.array_equal(got, want)


def _check_ddp(reports, codec: str) -> None:
    """DDP through the switch against DDP's own fp32 all-reduce, same initial parameters and
    batches: fixed point matches it (to float rounding), THC stays close, every step after the
    warm-up went through the switch, and training made progress."""
    results = _check(reports, [codec])
    for r in results:
        assert r["hina_buckets"] > 0 and r["fallback_buckets"] == 0, r
        assert r["replicas_in_sync"], r
        assert r["loss_hina"] < r["loss_initial"] - 0.1, r      # DDP_STEPS steps learn
        if codec == "fixed":
            assert r["max_param_diff"] < 1e-5, r
            assert abs(r["loss_hina"] - r["loss_fp32"]) < 1e-4, r
        else:
            assert abs(r["loss_hina"] - r["loss_fp32"]) < 0.1, r
            assert r["max_param_diff"] < 0.05, r


@pytest.fixture(scope="session")
def logs(tmp_path_factory):
    """Where the networks' logs go (pytest keeps the last runs' temporary folders)."""
    return tmp_path_factory.mktemp("mininet")


@pytest.fixture(scope="class")
def star(logs):
    """4 workers around the embedded switch, no impairments; torn down after its class."""
    if _mininet_missing():
        pytest.skip(_mininet_missing())
    hn = _start(logs)
    try:
        yield hn
    finally:
        hn.stop()


@pytest.fixture(scope="class")
def bmv2_star(logs):
    """3 workers around BMv2 (HINA_WORDS=64), no impairments; torn down after its class."""
    if _bmv2_missing():
        pytest.skip(_bmv2_missing())
    hn = _start(logs, "bmv2", n_workers=BMV2_WORKERS)
    try:
        yield hn
    finally:
        hn.stop()


@needs_mininet
class TestStar:
    """Runs on one network: each run of worker processes gets a fresh job (``reset_job``)."""

    def test_allreduce_embedded_exact_sum_bounded_codecs_and_hina_ctl(self, star):
        star.reset_job()
        reports = star.run_workers("allreduce", CODECS, size=SIZE, timeout_s=120)
        _check(reports, CODECS)
        _check_ctl_inspection(star, reports)

    def test_ddp_training_steps_through_the_switch(self, star):
        star.reset_job()
        _check_ddp(star.run_workers("ddp", ["thc"], steps=DDP_STEPS, timeout_s=120), "thc")


@needs_bmv2
class TestBmv2Star:
    """The same on BMv2, every codec of the workload; one network for the class."""

    def test_allreduce_bmv2_every_codec_and_hina_ctl(self, bmv2_star):
        bmv2_star.reset_job()
        reports = bmv2_star.run_workers("allreduce", ALL_CODECS, size=SIZE, timeout_s=120)
        _check(reports, ALL_CODECS)
        _check_ctl_inspection(bmv2_star, reports)

    @pytest.mark.parametrize("codec", ["thc", "fixed"])
    def test_ddp_training_through_bmv2_against_fp32(self, bmv2_star, codec):
        bmv2_star.reset_job()
        _check_ddp(bmv2_star.run_workers("ddp", [codec], steps=DDP_STEPS, timeout_s=120),
                   codec)


@pytest.fixture(scope="class")
def tna_star(logs):
    """4 workers around the embedded target running the TNA program (64 words per packet);
    torn down after its class."""
    if _mininet_missing():
        pytest.skip(_mininet_missing())
    hn = _start(logs, program="tna", words=64)
    try:
        yield hn
    finally:
        hn.stop()


@needs_mininet
class TestTnaStar:
    """DDP through the TNA program (p4/tna/hina_tna.p4) in Mininet, as through p4/hina.p4 above:
    the workers' DDP against DDP's own fp32 all-reduce, then hina-ctl's view of the job: no
    error drop, and its slots by the TNA program's registers (contributors from its pair
    register of bitmaps: it keeps no count)."""

    @pytest.mark.parametrize("codec", ["thc", "fixed"])
    def test_ddp_training_through_the_tna_program_against_fp32(self, tna_star, codec):
        tna_star.reset_job()
        _check_ddp(tna_star.run_workers("ddp", [codec], steps=DDP_STEPS, timeout_s=120), codec)
        counters = _ctl(tna_star, "counters")
        assert all(counters["reasons"][k] == 0 for k in ERROR_REASONS), counters["reasons"]
        (job,) = counters["jobs"]
        assert job["job"] == tna_star.job_id and job["packets"] > 0, job
        n, slots = N_WORKERS, tna_star.n_slots
        assert (job["complete_copies"], job["filling_copies"]) == (2 * slots, 0), job
        state = _ctl(tna_star, "state", "--job", str(tna_star.job_id))
        assert state["chunks"] == job["chunks"] > 2 * slots
        for s in state["slots"]:
            assert [(p["count"], p["contributors"], p["complete"]) for p in s["pools"]] == \
                [(n, list(range(n)), True)] * 2, s
        last = state["chunks"] - 1
        slot = _ctl(tna_star, "state", "--job", str(tna_star.job_id), "--slot",
                    str(last % slots))
        pool = slot["pools"][(last // slots) % 2]
        # the network's job is a THC job (whatever codec the workers run), so its lanes show
        # as LUT_SUM: two 16-bit sums per word
        assert (pool["seq"], pool["complete"], len(pool["lanes"])) == \
            (last, True, 2 * tna_star.words), pool


@pytest.mark.parametrize("target", TARGETS)
def test_allreduce_with_loss_on_every_link_is_still_exact(target, logs):
    codecs = ("thc", "fetchsgd", "sum") if target == "embedded" else ALL_CODECS
    n_workers = N_WORKERS if target == "embedded" else BMV2_WORKERS
    hn = _start(logs, target, loss=LOSS_PCT, n_workers=n_workers, control_network=False)
    try:
        reports = hn.run_workers("allreduce", codecs, size=SIZE, timeout_s=180)
        results = _check(reports, codecs)
        assert sum(r["retransmissions"] for r in results) > 0, "loss must cost retransmissions"
        if hn.loss_method == "nft":
            assert all(n > 0 for n in hn.nft_drops().values()), hn.nft_drops()
        _check_ctl_inspection(hn, reports, lossy=True)
    finally:
        hn.stop()


@needs_mininet
def test_allreduce_through_the_tna_program_with_loss_is_still_exact(logs):
    """The TNA program (p4/tna/hina_tna.p4 at 32 lanes: 64 words per packet, two passes each)
    on the embedded target's TNA dataplane, in Mininet with loss on every link: THC, fixed point
    and the exact int32 sum come out as through p4/hina.p4 (the job says its SUM saturates, and
    the workers read it so), and hina-ctl reads the switch's counters by the TNA program's
    names: no error drop, the job's packets counted."""
    codecs = ("thc", "fixed", "sum")
    hn = _start(logs, "embedded", loss=LOSS_PCT, n_workers=N_WORKERS, control_network=False,
                program="tna", words=64)
    try:
        assert hn.job_config.sum_saturates and hn.job_config.words == 64
        reports = hn.run_workers("allreduce", codecs, size=SIZE, timeout_s=180)
        results = _check(reports, codecs)
        assert sum(r["retransmissions"] for r in results) > 0, "loss must cost retransmissions"
        counters = _ctl(hn, "counters")
        assert all(counters["reasons"][k] == 0 for k in ERROR_REASONS), counters["reasons"]
        (job,) = counters["jobs"]
        assert job["job"] == hn.job_id and job["packets"] > 0, job
    finally:
        hn.stop()


def test_a_tna_network_is_refused_where_it_cannot_run(tmp_path):
    """The TNA program runs on the embedded target only, at 32 or 64 words: anything else is
    refused before a node starts, saying why."""
    T = _import_topo()
    from hina.mininet.deploy import DeploymentError, HinaNetwork
    topo = T.StarTopo(n_workers=2, suffix=_suffix())
    with pytest.raises(DeploymentError, match="program tna: the embedded target runs it"):
        HinaNetwork(topo, target="bmv2", program="tna", words=64, log_dir=str(tmp_path))
    with pytest.raises(DeploymentError, match="words=128: the TNA program carries 32 or 64"):
        HinaNetwork(topo, program="tna", words=128, log_dir=str(tmp_path))
    with pytest.raises(DeploymentError, match="program 'psa': one of"):
        HinaNetwork(topo, program="psa", log_dir=str(tmp_path))


def _process_gone(pid: int, within_s: float = 5.0) -> bool:
    """Whether /proc/``pid`` disappears within ``within_s`` (a SIGKILL is delivered, and a
    process that is not our child reaped, asynchronously)."""
    deadline = time.monotonic() + within_s
    while os.path.exists(f"/proc/{pid}"):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _proc_status(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            status = "".join(line for line in f if line.startswith(("Name", "State", "PPid")))
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f"pid {pid} still there: {status} cmdline {f.read().replace(bytes(1), b' ')!r}"
    except OSError:
        return f"pid {pid} gone"


@pytest.mark.parametrize("target", TARGETS)
def test_teardown_leaves_no_interfaces_or_processes_also_on_failure(target, logs):
    from hina.mininet.deploy import DeploymentError, leftover_interfaces
    hn = _start(logs, target, n_workers=2)
    try:
        # the switch side of every link and the control bridge are in the root namespace
        names = {n for n in hn._intf_names if n.startswith((hn.topo.aggregator + "-",
                                                            hn.topo.control_bridge))}
        assert len(names) == 5 and names <= _interfaces()
        pid = hn.switch.proc.pid
        # an agent started but never recorded (an interrupt in between) is found and killed
        from hina.mininet.deploy import NETWORK_ENV
        stray = hn.workers[0].popen(["sleep", "600"],
                                    env=dict(os.environ, **{NETWORK_ENV: hn.topo.aggregator}))
        # its environment shows the tag once mnexec has exec'd (before, /proc shows ours)
        deadline = time.monotonic() + 10
        seen = []
        while seen != [stray.pid] and time.monotonic() < deadline:
            time.sleep(0.05)
            seen = hn.stray_workers()
        assert seen == [stray.pid]
    finally:
        hn.stop()
    assert leftover_interfaces(names) == []
    for gone in (pid, stray.pid):
        assert _process_gone(gone), _proc_status(gone)
    # A failure after the network is up (here: an invalid job) tears everything down too.
    hn = _network(logs, target, n_workers=2, n_slots=0)
    with pytest.raises(DeploymentError, match="n_slots"):
        hn.start()
    assert leftover_interfaces(hn._intf_names) == []
    assert _switch_pid(hn.topo.suffix) is None


@needs_mininet
def test_refuses_to_start_over_existing_interfaces_and_leaves_them_alone(tmp_path):
    from hina.mininet import topo as T
    from hina.mininet.deploy import DeploymentError, HinaNetwork
    topo = T.StarTopo(n_workers=1, suffix=_suffix())
    busy = f"{topo.aggregator}-eth1"
    subprocess.run(["ip", "link", "add", busy, "type", "veth", "peer", "name",
                    f"{topo.aggregator}p"], check=True)
    try:
        with pytest.raises(DeploymentError, match=f"{busy} already exist"):
            HinaNetwork(topo, log_dir=str(tmp_path)).start()
        assert busy in _interfaces()
    finally:
        subprocess.run(["ip", "link", "del", busy], check=False)


@needs_mininet
def test_a_temporary_log_dir_is_removed_on_request_a_given_one_never(tmp_path):
    """The benchmarks remove the log folder a network made for itself once their run went
    well (``remove_temporary_logs``); a folder the caller gave is the caller's."""
    from hina.mininet import topo as T
    from hina.mininet.deploy import HinaNetwork
    topo = T.StarTopo(n_workers=1, suffix=_suffix())
    made = HinaNetwork(topo)
    assert made.log_dir.is_dir() and made.log_dir.name.startswith("hina-mn-")
    made.remove_temporary_logs()
    assert not made.log_dir.exists()
    given = HinaNetwork(topo, log_dir=str(tmp_path / "logs"))
    given.remove_temporary_logs()
    assert given.log_dir.is_dir()


@pytest.mark.parametrize("target", TARGETS)
def test_launcher_ctrl_c_tears_everything_down(target, tmp_path):
    """``run.py`` interrupted (SIGINT, as Ctrl-C) while the workers run: exit 1, nothing left."""
    import signal
    import sys
    from pathlib import Path
    from hina.mininet.deploy import leftover_interfaces
    from hina.procs import with_default_signals
    root = Path(__file__).resolve().parents[2]
    suffix = _suffix()
    switch_ports = {f"s1{suffix}-eth1", f"s1{suffix}-eth2"}
    # a suite started in the background (nohup, `&`) ignores SIGINT and its children inherit
    # that: give the launcher Ctrl-C as a terminal does (no preexec_fn: gRPC runs in this
    # process, see hina.procs)
    proc = subprocess.Popen(with_default_signals([
        sys.executable, str(root / "mininet" / "run.py"), "--target", target, "--workers", "2",
        "--codec", "sum", "--size", "4000000", "--words", "64", "--no-control-network",
        "--name-suffix", suffix, "--log-dir", str(tmp_path)]),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    try:
        for line in proc.stdout:                # wait until switch, pipeline and job are up
            seen.append(line)
            if " up (P4Runtime " in line:
                switch_pid = _switch_pid(suffix)
                break
        else:
            pytest.fail(f"run.py exited before the network was up: {proc.wait()}\n"
                        + "".join(seen[-40:]))
        _wait_for_workers(suffix, 2)            # the workers are running now
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1 and "interrupted; tearing down" in out, out
    assert leftover_interfaces(switch_ports) == []
    assert switch_pid is not None and not os.path.exists(f"/proc/{switch_pid}")
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert f"@s1{suffix}-eth1" not in ps                  # our switch
    assert f"--name-suffix {suffix}" not in ps            # the launcher
    assert not _worker_pids(suffix)                       # our workers


def _processes():
    """``(pid, argv, environ)`` of every process that can be read."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().decode(errors="replace").split("\0")
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        yield int(pid), args, env


def _switch_pid(suffix: str):
    """The pid of the switch process serving ``s1<suffix>-eth1``."""
    return next((pid for pid, args, _ in _processes() if f"1@s1{suffix}-eth1" in args), None)


def _worker_pids(suffix: str) -> list[int]:
    """Worker agents of the network ``s1<suffix>`` (the launcher sets ``HINA_MN_NETWORK``)."""
    return [pid for pid, args, env in _processes()
            if "hina.mininet.host_worker" in args
            and f"HINA_MN_NETWORK=s1{suffix}" in env]


def _wait_for_workers(suffix: str, n: int, timeout: float = 60.0) -> None:
    import time
    deadline = time.monotonic() + timeout
    while len(_worker_pids(suffix)) < n:
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.1)
