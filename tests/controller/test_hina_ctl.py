"""``hina-ctl`` run as a subprocess: the whole job lifecycle with ``--json`` output checked (slots,
bitmaps, sums, drop counters and packets per job after traffic, a restart and ``resync``), on
the embedded switch and on BMv2; the job service, and one-line errors."""
from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from scapy.packet import raw

from hina.controller.p4runtime_client import SwitchConnection
from ctlutil import TEST_WORDS, free_port, join_and_allreduce, sketched_sgd_grads, wait_for
from hina import protocol as P
from hina.layers import HINA, HINABlock, HINAWords

ROOT = Path(__file__).resolve().parents[2]
CLI_TIMEOUT_S = 60


class Ctl:
    """``hina-ctl`` against ``switch`` (an address, or a test switch whose ``address`` and
    ``thrift_port`` are read at every run: they change when a BMv2 switch restarts)."""

    def __init__(self, switch, state: Path):
        self.switch, self.state = switch, state

    @property
    def base(self) -> list[str]:
        sw = self.switch
        address = sw if isinstance(sw, str) else sw.address
        bmv2 = [] if isinstance(sw, str) or sw.kind != "bmv2" else [
            "--target", "bmv2", "--thrift-port", str(sw.thrift_port)]
        return [sys.executable, "-m", "hina.controller.cli", "--switch", address, "--state",
                str(self.state), "--timeout", "3", *bmv2]

    def run(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(self.base + list(args), capture_output=True, text=True, cwd=ROOT,
                              timeout=CLI_TIMEOUT_S)
        if ok:
            assert proc.returncode == 0, proc.stderr
        return proc

    def json(self, *args: str):
        return json.loads(self.run(*args, "--json").stdout)


@pytest.fixture
def ctl(embedded_switch, embedded_pipeline, tmp_path):
    # embedded_pipeline: the in-process switch then finds the program in its compile cache
    return Ctl(embedded_switch, tmp_path / "ctl.json")


def _send(sw, w: int, job_id: int, words, generation: int = P.FIRST_GENERATION,
          expect_reply: bool = False):
    link = sw.link(sw.worker(w))
    try:
        link.send(raw(HINA(msg_type=P.MsgType.AGGREGATE, op=P.Op.SUM, job_id=job_id, slot=0,
                           seq=0, generation=generation) / HINAWords(words=words)))
        return link.recv(0.5 if w == 0 and not expect_reply else 5.0)
    finally:
        link.close()


def test_cli_job_lifecycle_state_and_resync(traffic_switch, tmp_path):
    """On each target: push, create, traffic, then ``state`` (slot copy: sequence, count,
    contributor bitmap, decoded sums), ``counters`` (drops by reason, packets and bytes per
    job), ``watch``; a switch restart and ``resync``; ``reset`` and ``delete``."""
    sw = traffic_switch
    ctl = Ctl(sw, tmp_path / "ctl.json")
    out = ctl.run("pipeline", "push", "-D", f"HINA_WORDS={TEST_WORDS}").stdout
    assert "pushed" in out and f"({sw.kind})" in out

    job = ctl.json("job", "create", "--id", "1", "--codec", "fixed", "--slots", "4",
                   "--worker", sw.worker_arg(0), "--worker", sw.worker_arg(1))
    assert (job["job_id"], job["codec"], job["reg_base"], job["words"]) == (1, "fixed", 0,
                                                                            TEST_WORDS)
    assert [w["ip"] for w in job["workers"]] == ["10.0.1.1", "10.0.1.2"]
    assert ctl.json("job", "list") == [{"job": 1, "codec": "fixed", "lane_op": "SUM",
                                        "workers": 2, "slots": 4, "reg_base": 0, "lut_id": 0,
                                        "words": TEST_WORDS, "generation": 1}]
    shown = ctl.json("job", "show", "1")
    # job_config, then per worker: worker_admission, worker_by_address, replica_rewrite
    assert shown["multicast_group"] == 2 and shown["entries"] == 1 + 3 * 2

    # traffic, then the slot read back and decoded
    assert _send(sw, 0, 1, [-3] * TEST_WORDS) is None          # first half: no result yet
    assert _send(sw, 1, 1, [5] * TEST_WORDS) is not None       # completes: multicast
    slot = ctl.json("state", "--job", "1", "--slot", "0")
    pool = slot["pools"][0]
    assert (pool["seq"], pool["count"], pool["contributors"], pool["complete"]) == (0, 2, [0, 1],
                                                                                   True)
    assert pool["bitmap"] == 0b11 and pool["overflow"] is False
    assert pool["lanes"] == [2] * TEST_WORDS and slot["lane_op"] == "SUM"
    assert slot["pools"][1]["in_use"] is False and slot["pools"][1]["count"] == 0
    summary = ctl.json("state", "--job", "1")
    assert summary["chunks"] == 1 and len(summary["slots"]) == 4
    assert [s["pools"][0]["in_use"] for s in summary["slots"]] == [True, False, False, False]
    # a stranger (unknown UDP port) is dropped and counted by reason
    stranger = sw.worker(0, udp_port=40999)
    link = sw.link(stranger)
    try:
        link.send(raw(HINA(msg_type=P.MsgType.AGGREGATE, op=P.Op.SUM, job_id=1, slot=1, seq=1)
                      / HINAWords(words=[7] * TEST_WORDS)))
    finally:
        link.close()
    # worker 0's addresses forged on worker 1's port: dropped and counted apart as WRONG_PORT
    w1 = sw.worker(1)
    forged = dataclasses.replace(sw.worker(0), port=w1.port, tunnel_local=w1.tunnel_local,
                                 tunnel_switch=w1.tunnel_switch)
    link = sw.link(forged)
    try:
        link.send(raw(HINA(msg_type=P.MsgType.AGGREGATE, op=P.Op.SUM, job_id=1, slot=1, seq=1)
                      / HINAWords(words=[7] * TEST_WORDS)))
    finally:
        link.close()
    counters = wait_for(lambda: ctl.json("counters"),
                        lambda c: c["reasons"]["UNKNOWN_WORKER"] == 1
                        and c["reasons"]["WRONG_PORT"] == 1)
    assert sum(counters["reasons"].values()) == 2, counters["reasons"]
    assert "WRONG_PORT" in ctl.run("counters").stdout          # the people's view names it
    # read: one counter and one register cell by P4 name, the same as counters and state
    reasons = ctl.json("read", "counter", P.REASON_COUNTER)["values"]
    assert reasons[str(int(P.DropReason.WRONG_PORT))][1] == 1
    count = ctl.json("read", "register", "HinaIngress.slot_state.slot_count", "--index", "0")
    assert count["values"] == {"0": 2}                          # slot 0, copy 0: both workers
    assert ctl.json("state", "--job", "1", "--slot", "1")["pools"][1]["in_use"] is False
    frame_bytes = 14 + 20 + 8 + P.HEADER_BYTES + 4 * TEST_WORDS
    assert counters["jobs"] == [{"job": 1, "chunks": 1, "complete_copies": 1,
                                 "filling_copies": 0, "packets": 2, "bytes": 2 * frame_bytes}]
    lines = ctl.run("watch", "--json", "--count", "2", "--interval", "0.05").stdout.splitlines()
    assert len(lines) == 2 and json.loads(lines[1])["jobs"][0]["chunks"] == 1
    table = ctl.run("state", "--job", "1", "--slot", "0").stdout
    assert "0,1" in table and "2/2" in table                    # the people's view

    # a switch restart loses everything; resync puts pipeline and job back
    sw.restart()
    assert [j["job"] for j in ctl.json("job", "list")] == [1]      # the state file kept it
    assert "1 job(s) re-installed" in ctl.run("resync").stdout
    assert ctl.json("state", "--job", "1", "--slot", "0")["pools"][0]["in_use"] is False
    assert _send(sw, 0, 1, [1] * TEST_WORDS) is None
    assert _send(sw, 1, 1, [1] * TEST_WORDS) is not None

    assert ctl.json("counters")["jobs"][0]["packets"] == 2        # counted again after resync
    assert "zeroed" in ctl.run("reset", "--job", "1").stdout
    assert ctl.json("counters")["jobs"][0]["packets"] == 0        # reset zeroes the job's count
    assert ctl.json("state", "--job", "1", "--slot", "0")["pools"][0] == {
        "pool": 0, "in_use": False, "seq": None, "generation": 0, "current": False,
        "count": 0, "complete": False, "bitmap": 0, "contributors": [], "overflow": False,
        "lanes": [0] * TEST_WORDS}                                  # and its slots
    assert "job 1 deleted" in ctl.run("job", "delete", "1").stdout
    assert ctl.json("job", "list") == []
    with SwitchConnection(sw.address, primary=False) as reader:
        assert reader.read_multicast_groups() == {}


def test_cli_bump_generation_rewrites_admission_and_survives_resync(traffic_switch, tmp_path):
    """``job bump-generation``: the old generation's packets get a NOTICE naming the new one,
    the new generation's workers start again at seq 0 in slots the old run used (no reset),
    and the generation is kept in the state file, so ``resync`` re-installs it."""
    sw = traffic_switch
    ctl = Ctl(sw, tmp_path / "ctl.json")
    ctl.run("pipeline", "push", "-D", f"HINA_WORDS={TEST_WORDS}")
    ctl.run("job", "create", "--id", "2", "--codec", "fixed", "--slots", "2",
            "--worker", sw.worker_arg(0), "--worker", sw.worker_arg(1))
    assert _send(sw, 0, 2, [1] * TEST_WORDS) is None
    assert _send(sw, 1, 2, [2] * TEST_WORDS) is not None          # gen 1 used slot 0, seq 0

    assert ctl.run("job", "bump-generation", "2").stdout.strip() == "job 2: generation 2"
    assert ctl.json("job", "list")[0]["generation"] == 2
    assert ctl.json("job", "show", "2")["generation"] == 2

    def check_generation_2():
        notice = HINA(_send(sw, 0, 2, [1] * TEST_WORDS, expect_reply=True))   # generation 1
        assert (notice.msg_type, notice.op, notice.generation) == \
            (P.MsgType.NOTICE, P.DropReason.STALE_GENERATION, 2)
        assert _send(sw, 0, 2, [3] * TEST_WORDS, generation=2) is None
        result = HINA(_send(sw, 1, 2, [4] * TEST_WORDS, generation=2))
        assert (result.msg_type, result.generation, result.seq) == (P.MsgType.RESULT, 2, 0)
        assert result[HINAWords].words == [7] * TEST_WORDS        # no trace of generation 1

    check_generation_2()
    counters = wait_for(lambda: ctl.json("counters"),
                        lambda c: c["reasons"]["STALE_GENERATION"] == 1)
    assert counters["reasons"]["STALE_GENERATION"] == 1 and counters["jobs"][0]["chunks"] == 1
    slot = ctl.json("state", "--job", "2", "--slot", "0")["pools"][0]
    assert (slot["generation"], slot["current"], slot["count"]) == (2, True, 2)

    sw.restart()
    assert "1 job(s) re-installed" in ctl.run("resync").stdout
    check_generation_2()
    assert ctl.run("job", "bump-generation", "2", "--json").stdout.count('"generation": 3') == 1


def test_cli_state_shows_block_sparse_rounds(ctl, embedded_switch):
    """``state`` of a block-sparse job: each slot copy's block and next block, in the table
    ("-" for an unused copy, "end" for BLOCK_END) and in ``--json``."""
    sw = embedded_switch
    ctl.run("pipeline", "push", "-D", f"HINA_WORDS={TEST_WORDS}")
    job = ctl.json("job", "create", "--id", "3", "--codec", "block_sparse", "--slots", "2",
                   "--worker", sw.worker_arg(0), "--worker", sw.worker_arg(1))
    link = sw.link(sw.worker(0))
    try:
        link.send(raw(HINA(msg_type=P.MsgType.AGGREGATE, op=P.Op.BLOCK_SKIP, job_id=3, slot=1,
                           seq=0, generation=job["generation"]) / HINABlock(block=1)))
        copy = wait_for(lambda: ctl.json("state", "--job", "3", "--slot", "1")["pools"][0],
                        lambda p: p["count"] == 1)
    finally:
        link.close()
    assert (copy["block"], copy["block_next"]) == (1, None)
    lines = ctl.run("state", "--job", "3").stdout.splitlines()
    assert any("block" in line and "next" in line for line in lines), "\n".join(lines)
    rows = [line.split("│")[1:-1] for line in lines if line.count("│") > 8]
    cells = {(r[0].strip(), r[1].strip()): (r[-2].strip(), r[-1].strip()) for r in rows}
    assert cells[("1", "0")] == ("1", "end") and cells[("0", "0")] == ("-", "-")


def test_allreduce_after_switch_restart_and_resync(ctl, embedded_switch):
    """The workers' view of a switch restart: their allreduce fails with a clear timeout while
    the switch has no pipeline, and after ``hina-ctl resync`` the same transports (sequence
    numbers carried on, no re-join) complete the next allreduce with the right result."""
    import threading

    import torch

    from hina.worker.codecs import ThcCodec, reference_allreduce
    from hina.worker.link import Endpoint, FrameLink
    from hina.worker.collective import allreduce
    from hina.worker.transport import JobParams, Transport, TransportTimeout

    sw, n = embedded_switch, 2
    ctl.run("pipeline", "push", "-D", f"HINA_WORDS={TEST_WORDS}")
    job = ctl.json("job", "create", "--id", "7", "--codec", "thc", "--slots", "4",
                   "--worker", sw.worker_arg(0), "--worker", sw.worker_arg(1))
    params = JobParams(7, n, 4, TEST_WORDS, tuple(job["thc_table"]))
    links = [FrameLink(Endpoint.make(f"02:00:00:00:01:{w:02x}", f"10.0.1.{w + 1}", 40000),
                       Endpoint.make(job["switch_mac"], job["switch_ip"], P.UDP_PORT_BASE),
                       ("127.0.0.1", sw.worker_ports[w]), ("127.0.0.1", sw.switch_ports[w]))
             for w in range(n)]
    transports = [Transport(link, params, min_rto=0.05, max_rto=0.3, give_up_s=1.5)
                  for link in links]
    codecs = [ThcCodec(n, rank=w, seed=job["rht_seed"]) for w in range(n)]
    ref_codecs = [ThcCodec(n, rank=w, seed=job["rht_seed"]) for w in range(n)]
    gen = torch.Generator().manual_seed(3)
    grads = [torch.randn(3000, generator=gen) for _ in range(n)]

    def all_workers():
        out, errors = [None] * n, [None] * n

        def body(w):
            try:
                out[w] = allreduce(grads[w], codecs[w], transports[w])
            except Exception as exc:  # noqa: BLE001 - checked below
                errors[w] = exc
        threads = [threading.Thread(target=body, args=(w,)) for w in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        return out, errors

    try:
        out, errors = all_workers()
        assert errors == [None, None]
        want = reference_allreduce(ref_codecs, grads)
        assert all(torch.equal(out[w], want[w]) for w in range(n))

        sw.restart()
        out, errors = all_workers()          # no pipeline: nothing answers
        assert all(isinstance(e, TransportTimeout) for e in errors), errors
        for c in codecs + ref_codecs:
            c.reset()                        # the failed step's encode state is dropped alike

        assert "1 job(s) re-installed" in ctl.run("resync").stdout
        out, errors = all_workers()
        assert errors == [None, None]
        want = reference_allreduce(ref_codecs, grads)
        assert all(torch.equal(out[w], want[w]) for w in range(n))
    finally:
        for link in links:
            link.close()


def _one_line_error(proc: subprocess.CompletedProcess, code: int, text: str) -> None:
    assert proc.returncode == code
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and text in lines[0], proc.stderr


def test_cli_user_errors_are_one_line(ctl, tmp_path, embedded_switch, embedded_pipeline, capsys):
    _one_line_error(ctl.run("job", "show", "4", ok=False), 1, "job 4 does not exist")
    _one_line_error(ctl.run("state", "--job", "4", ok=False), 1, "job 4 does not exist")
    _one_line_error(ctl.run("job", "create", "--id", "1", "--codec", "thc", "--worker",
                            "10.0.1.1", ok=False), 1, "expected HOST:PORT")
    _one_line_error(ctl.run("job", "create", "--id", "1", "--codec", "zip", "--worker",
                            "10.0.1.1:1", ok=False), 2, "invalid choice: 'zip'")
    down = Ctl(f"127.0.0.1:{free_port()}", tmp_path / "other.json")
    _one_line_error(down.run("counters", ok=False), 1, "cannot reach the P4Runtime server")
    # another controller is primary: this one is refused, with one line
    with SwitchConnection(embedded_switch.address, election_id=100) as primary:
        primary.set_pipeline(*embedded_pipeline.build())
        _one_line_error(ctl.run("job", "create", "--id", "1", "--codec", "fixed",
                                "--worker", "10.0.1.1:1", ok=False), 1,
                        "another controller is primary")
        # reads still work beside the primary
        assert ctl.json("counters")["reasons"]["MALFORMED"] == 0
    # 32 words per packet is the TNA program's Tofino 1 build, never the v1model program's
    # (hina-ctl's main in this process: a command costs no interpreter start)
    from hina.controller import cli

    def main(*args: str):
        status = cli.main(["--switch", embedded_switch.address, "--state",
                           str(tmp_path / "inproc.json"), *args])
        return status, capsys.readouterr().err
    assert main("pipeline", "push", "-D", f"HINA_WORDS={TEST_WORDS}")[0] == 0
    status, err = main("job", "create", "--id", "1", "--codec", "fixed", "--words", "32",
                       "--worker", "10.0.1.1:1")
    assert status == 1 and len(err.strip().splitlines()) == 1, err
    assert ("job 1: words=32: the v1model program (p4/hina.p4) is compiled with HINA_WORDS 64, "
            "128 or 256 (p4/include/config.p4); 32 words per packet is the TNA program's "
            "Tofino 1 build (p4/tna/hina_tna.p4, TNA_LANES=16), not this one: use 64, 128 or "
            "256 words on a v1model target") in err


def test_cli_help_has_examples():
    for args in (["--help"], ["job", "create", "--help"], ["state", "--help"],
                 ["serve", "--help"], ["pipeline", "push", "--help"]):
        out = subprocess.run([sys.executable, "-m", "hina.controller.cli", *args], capture_output=True,
                             text=True, cwd=ROOT, timeout=CLI_TIMEOUT_S).stdout
        assert "example:" in out and "hina-ctl" in out, args


def test_cli_serve_answers_workers(ctl, embedded_switch, tmp_path):
    from hina.controller.config import JobConfig
    from hina.controller.state import ControllerState
    from hina.worker.jobclient import JobClient
    state = ControllerState(jobs={5: embedded_switch.job(job_id=5, n_workers=1)})
    state.save(tmp_path / "ctl.json")
    listen = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen(ctl.base + ["serve", "--listen", listen], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert "listening" in proc.stdout.readline()
        # serve gave the job of the older state file a token
        with JobClient(listen, token=ctl.run("job", "token", "5").stdout.strip()) as client:
            seat = client.join(5)
            assert (seat.worker_index, seat.n_workers) == (0, 1)
            assert client.barrier("go", timeout=5) == 1
        # a job created later (state file rewritten) is seen without a restart
        state.jobs[6] = JobConfig.from_json({**state.jobs[5].to_json(), "job_id": 6})
        state.save(tmp_path / "ctl.json")
        with JobClient(listen, token=ctl.run("job", "token", "6").stdout.strip()) as client:
            assert client.join(6).job_id == 6
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


def test_cli_sketched_sgd_job_to_workers(ctl, embedded_switch, tmp_path):
    """``job create --codec sketched_sgd`` with every flag; ``job show``; ``hina-ctl serve`` hands
    the workers a SketchedSgdCodec whose two rounds through the switch match reference_allreduce;
    ``hina-worker join ... bench`` runs it too."""
    import torch

    from hina.worker.codecs import SketchedSgdCodec, reference_allreduce

    sw, n = embedded_switch, 2
    ctl.run("pipeline", "push", "-D", f"HINA_WORDS={TEST_WORDS}")
    job = ctl.json("job", "create", "--id", "1", "--codec", "sketched_sgd", "--slots", "4",
                   "--worker", sw.worker_arg(0), "--worker", sw.worker_arg(1),
                   "--sketch-rows", "3", "--sketch-columns", "128", "--sketch-seed", "9",
                   "--sketch-k", "96", "--sketch-bits", "10", "--value-bits", "6",
                   "--value-blocks", "120", "--sketch-rotate", "8")
    params = {"sketch_rows": 3, "sketch_columns": 128, "sketch_seed": 9, "sketch_k": 96,
              "sketch_k_fraction": 0.0, "sketch_bits": 10, "value_bits": 6,
              "value_blocks": 120, "sketch_rotate": 8}
    assert job["codec"] == "sketched_sgd" and {k: job[k] for k in params} == params
    shown = ctl.json("job", "show", "1")
    assert shown["lane_op"] == "SUM" and {k: shown[k] for k in params} == params
    text = ctl.run("job", "show", "1").stdout
    assert "96 candidates" in text and "3 x 128, seed 9" in text and "sketch_rotate" in text
    # defaults: a fraction of the bucket, and value bits that fit the worker count
    default = ctl.json("job", "create", "--id", "2", "--codec", "sketched_sgd", "--slots", "4",
                       "--worker", "10.0.2.1:40000")
    assert {k: default[k] for k in params} == {
        "sketch_rows": 3, "sketch_columns": 4096, "sketch_seed": 0, "sketch_k": 0,
        "sketch_k_fraction": 0.01, "sketch_bits": 10, "value_bits": 6, "value_blocks": 120,
        "sketch_rotate": 8}
    assert ctl.json("job", "create", "--id", "3", "--codec", "sketched_sgd", "--slots", "4",
                    "--worker", "10.0.3.1:40000", "--sketch-k", "2%")["sketch_k_fraction"] == 0.02

    listen = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen(ctl.base + ["serve", "--listen", listen], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert "listening" in proc.stdout.readline()
        steps = sketched_sgd_grads(n, steps=2)
        token_file = tmp_path / "job1.token"
        ctl.run("job", "token", "1", "--token-file", str(token_file))
        seats, codecs, means = join_and_allreduce(listen, 1, steps,
                                                  token=token_file.read_text().strip())
        for codec in codecs:
            assert isinstance(codec, SketchedSgdCodec)
            assert (codec.k, codec.cs.rows, codec.cs.columns, codec.cs.seed, codec.sketch_bits,
                    codec.value_bits, codec.value_blocks, codec.rotate) == \
                (96, 3, 128, 9, 10, 6, 120, 8)
        ref = [SketchedSgdCodec(n, rows=3, columns=128, k=96, seed=9, rotate=8, sketch_bits=10,
                                value_bits=6, value_blocks=120) for _ in range(n)]
        for t, grads in enumerate(steps):
            want = reference_allreduce(ref, grads)
            assert all(torch.equal(means[w][t], want[w]) for w in range(n)), t

        # hina-worker bench on the same job (its slots zeroed: new transports start at seq 0);
        # serve is primary with election id 1: reset writes beside it with a higher one
        reset = ctl.run("--election-id", "2", "reset", "--job", "1")
        assert "zeroed" in reset.stdout
        workers = [subprocess.Popen(
            [sys.executable, "-m", "hina.worker.cli", "join", "--controller", listen, "--job", "1",
             "--token-file", str(token_file), "--barrier-timeout", "30", "bench", "--codec",
             "sketched_sgd", "--size", "500", "--rounds", "2", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
            for _ in range(n)]
        reports = []
        for worker in workers:
            out, err = worker.communicate(timeout=CLI_TIMEOUT_S)
            assert worker.returncode == 0, err
            reports.append(json.loads(out))
        assert sorted(r["worker_index"] for r in reports) == [0, 1]
        assert all(r["codec"] == "sketched_sgd" and len(r["seconds"]) == 2 for r in reports)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


@pytest.mark.parametrize("args, code, text", [
    (["--sketch-columns", "100"], 1, "sketch_columns=100: must be a power of two"),
    (["--value-bits", "2"], 1, "value_bits=2: a field must be 2..31 bits and leave >= 1 "
                               "magnitude bit beside 1 headroom bit(s) for 2 workers (>= 3)"),
    (["--sketch-bits", "32"], 1, "sketch_bits=32: a field must be 2..31 bits"),
    (["--value-blocks", "-1"], 1, "value_blocks=-1: must be an int >= 1"),
    (["--sketch-rotate", "-2"], 1, "sketch_rotate=-2: must be an int >= 1"),
    (["--sketch-k", "-5"], 1, "sketch_k=-5: must be an int >= 1"),
    (["--sketch-k", "1.5"], 2, "expected a count of candidates (2560) or a fraction"),
    (["--sketch-k", "many"], 2, "expected a count of candidates (2560) or a fraction"),
    (["--in-switch-sketch"], 1, "the workers sketch; in-switch sketching is not for it"),
])
def test_cli_sketched_sgd_bad_parameters_are_one_line(ctl, args, code, text):
    _one_line_error(ctl.run("job", "create", "--id", "1", "--codec", "sketched_sgd",
                            "--worker", "10.0.1.1:1", "--worker", "10.0.1.2:1", *args, ok=False),
                    code, text)


def test_cli_sketched_sgd_flags_need_the_codec(ctl):
    _one_line_error(ctl.run("job", "create", "--id", "1", "--codec", "fetchsgd", "--worker",
                            "10.0.1.1:1", "--value-bits", "8", ok=False), 1,
                    "job 1: value_bits is only for codec sketched_sgd")
