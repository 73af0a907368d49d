"""The controller library over real gRPC: the embedded target, and BMv2 where it is installed
(slot state after traffic read through BMv2's Thrift runtime; its CLI as the fallback)."""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest
from scapy.packet import raw

from hina.controller.config import ConfigError, JobConfig, WorkerConfig, parse_worker
from hina.controller.inspect import decode_lanes, job_progress, reason_counts, slot_state
from hina.controller.jobs import JobError, JobManager, UnknownJobError
from hina.controller.p4runtime_client import NotPrimaryError, P4RuntimeClientError, SwitchConnection
from hina.controller.state import ControllerState
from hina.controller.target import PipelineConfig, ThriftRegisters
from hina import pipeline
from hina import protocol as P
from hina.layers import HINA, HINABlock, HINAThc, HINAWords, pack_nibbles

from ctlutil import TEST_WORDS, free_port, wait_for

RECV_TIMEOUT_S = 5.0


@pytest.fixture
def conn(embedded_switch, embedded_pipeline):
    sw = SwitchConnection(embedded_switch.address)
    sw.set_pipeline(*embedded_pipeline.build())
    yield sw
    sw.close()


@pytest.fixture
def tconn(traffic_switch):
    """A primary connection to ``traffic_switch`` (either target) with the program pushed."""
    conn = SwitchConnection(traffic_switch.address)
    try:
        conn.set_pipeline(*traffic_switch.pipeline.build())
        yield conn
    finally:
        conn.close()


def _entries(conn, table):
    return conn.read_entries(table)


def _aggregate(job_id, slot, seq, words, op=P.Op.SUM, pool=0):
    payload = HINAThc(data=pack_nibbles(words)) if op == P.Op.LUT_SUM else HINAWords(words=words)
    return raw(HINA(msg_type=P.MsgType.AGGREGATE, op=op, job_id=job_id, slot=slot, pool=pool,
                    seq=seq) / payload)


# -- lifecycle ----------------------------------------------------------------------------------
def test_job_lifecycle_installs_and_removes_everything(conn, embedded_switch):
    jobs = JobManager(conn)
    config = jobs.create_job(embedded_switch.job(job_id=3, n_workers=3, codec="thc"))
    assert config.lut_id == 1 and config.reg_base == 0 and config.thc_table

    assert [e["params"]["n_slots"] for e in _entries(conn, pipeline.JOB_CONFIG)] == [4]
    admitted = _entries(conn, pipeline.WORKER_ADMISSION)
    assert sorted(e["params"]["worker_id"] for e in admitted) == [0, 1, 2]
    assert len(_entries(conn, pipeline.REPLICA_REWRITE)) == 3
    groups = conn.read_multicast_groups()
    assert groups == {4: [(w + 1, 3 * P.RID_WORKERS + w + 1) for w in range(3)]}
    hi, _ = pipeline.lut_table_names(TEST_WORDS - 1)
    lut = _entries(conn, hi[0])
    assert sorted(e["params"]["value"] for e in lut) == sorted(config.thc_table)

    # a second job gets the next free slots
    second = jobs.create_job(embedded_switch.job(job_id=4, n_workers=1))
    assert (second.reg_base, second.lut_id) == (4, 0)
    assert sorted(jobs.configs()) == [3, 4]

    jobs.delete(3)
    jobs.delete(4)
    for table in (pipeline.JOB_CONFIG, pipeline.WORKER_ADMISSION, pipeline.REPLICA_REWRITE,
                  hi[0]):
        assert _entries(conn, table) == [], table
    assert conn.read_multicast_groups() == {}
    with pytest.raises(UnknownJobError, match="job 3 does not exist"):
        jobs.delete(3)


def test_failure_mid_creation_rolls_back(conn, embedded_switch):
    # Plant an entry the job's THC table will collide with: the job's registers, multicast
    # group, admission and rewrite entries and part of its table are written before the failure.
    hi, lo = pipeline.lut_table_names(1)
    conn.insert_entry(lo[0], {"lut_id": 1, "index": 7}, lo[1], {"value": 99})
    jobs = JobManager(conn)
    with pytest.raises(JobError, match=r"job 1 not created \(rolled back\).*ALREADY_EXISTS"):
        jobs.create_job(embedded_switch.job(job_id=1, n_workers=2, codec="thc"))
    for table in (pipeline.JOB_CONFIG, pipeline.WORKER_ADMISSION, pipeline.REPLICA_REWRITE,
                  hi[0]):
        assert _entries(conn, table) == [], table
    assert [e["params"]["value"] for e in _entries(conn, lo[0])] == [99]   # ours is left alone
    assert conn.read_multicast_groups() == {}
    assert jobs.configs() == {}
    # and the job can be created once the obstacle is gone
    conn.delete_entry(lo[0], {"lut_id": 1, "index": 7})
    jobs.create_job(embedded_switch.job(job_id=1, n_workers=2, codec="thc"))


def test_set_generation_rewrites_admission_all_or_nothing(conn, embedded_switch):
    jobs = JobManager(conn)
    jobs.create_job(embedded_switch.job(job_id=3, n_workers=3))
    jobs.create_job(embedded_switch.job(job_id=4, n_workers=1))

    def generations(job_id):
        return sorted(e["params"]["generation"] for e in _entries(conn, pipeline.WORKER_ADMISSION)
                      if e["match"]["job_id"].exact.value[-1] == job_id)

    assert generations(3) == [P.FIRST_GENERATION] * 3
    assert jobs.bump_generation(3) == 2
    assert generations(3) == [2, 2, 2] and generations(4) == [1]     # the other job untouched
    record = jobs.record(3)
    assert record.spec.generation == 2 and record.config.generation == 2
    assert sorted(a.action.args[-1] for a in record.entries
                  if a.table == pipeline.WORKER_ADMISSION) == [2, 2, 2]
    with pytest.raises(JobError, match=r"generation=0: must be an integer in \[1, 65535\]"):
        jobs.set_generation(3, 0)

    # One of the entries vanished behind the controller's back: the rewrite fails, and the
    # entries it did rewrite are put back, so the job stays wholly in generation 2.
    w = record.spec.workers[1]
    conn.delete_entry(pipeline.WORKER_ADMISSION, {"job_id": 3, "ingress_port": w.port,
                                                   "src_mac": w.mac, "src_addr": w.ip,
                                                   "src_port": w.udp_port})
    with pytest.raises(JobError, match=r"job 3: generation stays 2 \(rolled back\).*NOT_FOUND"):
        jobs.set_generation(3, 9)
    assert generations(3) == [2, 2] and jobs.record(3).spec.generation == 2

    # wrapping to the first generation again zeroes the job's registers too
    resets = []
    jobs.reset = lambda job_id: resets.append(job_id)
    jobs.set_generation(4, P.MAX_GENERATION - 1)
    assert jobs.bump_generation(4) == P.MAX_GENERATION and resets == []
    assert jobs.bump_generation(4) == P.FIRST_GENERATION and resets == [4]
    assert generations(4) == [P.FIRST_GENERATION]
    jobs.delete(4)
    with pytest.raises(UnknownJobError):
        jobs.bump_generation(4)


@pytest.mark.parametrize("make, message", [
    (lambda sw: sw.job(n_workers=1).replace(workers=tuple(
        WorkerConfig(f"10.0.2.{i // 200}", 1000 + i, 1, "02:00:00:00:00:01")
        for i in range(33))), "33 workers; the program supports at most 32"),
    (lambda sw: sw.job(n_workers=1).replace(workers=(sw.worker(0), sw.worker(0))),
     "share the address 10.0.1.1:40000"),
    (lambda sw: sw.job(codec="zip"), "unknown codec 'zip'"),
])
def test_impossible_jobs_are_refused(embedded_switch, make, message):
    with pytest.raises(ConfigError, match=message):
        make(embedded_switch)


def test_conflicting_jobs_are_refused(conn, embedded_switch):
    jobs = JobManager(conn)
    jobs.create_job(embedded_switch.job(job_id=1, reg_base=0, n_slots=8))
    with pytest.raises(JobError, match="jobs 1 and 2 share slots"):
        jobs.create_job(embedded_switch.job(job_id=2, reg_base=4))
    with pytest.raises(JobError, match="job 1 already exists"):
        jobs.create_job(embedded_switch.job(job_id=1))
    with pytest.raises(JobError, match="reg_base=510"):
        jobs.create_job(embedded_switch.job(job_id=3, reg_base=510))
    assert sorted(jobs.configs()) == [1]


def test_thc_beyond_bmv2_packet_headroom_is_refused_on_bmv2_only(embedded_switch):
    """simple_switch aborts (assertion in packet_buffer.h) when a packet grows by more than its
    512-byte headroom; a THC result at 256 words grows by 768. The controller refuses such a job
    for --target bmv2 instead of letting the first result crash the switch; the embedded target
    has no such limit. (The guard is the target name: the 256-word program is compiled by the
    embedded target here, p4c takes minutes on it; bench/bench_program_sizes.py shows the crash.)"""
    with SwitchConnection(embedded_switch.address) as conn:
        conn.set_pipeline(*PipelineConfig(target="embedded", defines={"HINA_WORDS": 256}).build())
        thc = dataclasses.replace(embedded_switch.job(job_id=1, n_workers=2, codec="thc"),
                                  words=256)
        with pytest.raises(JobError, match="grows each result by 768 bytes; BMv2 grows a packet "
                                           "by at most 512"):
            JobManager(conn, target="bmv2").create_job(thc)
        assert conn.read_entries(pipeline.WORKER_ADMISSION) == []          # nothing written
        JobManager(conn).create_job(thc)                                   # embedded: fine
        assert len(conn.read_entries(pipeline.WORKER_ADMISSION)) == 2


def test_worker_syntax():
    w = parse_worker("10.0.1.7:40001,port=9,mac=02:00:00:00:00:09,tunnel=127.0.0.1:5>127.0.0.1:6")
    assert (w.ip, w.udp_port, w.port, w.tunnel_local, w.tunnel_switch) == \
        ("10.0.1.7", 40001, 9, "127.0.0.1:5", "127.0.0.1:6")
    for bad, why in [("10.0.1.7", "HOST:PORT"), ("10.0.1.300:5", "not an IPv4"),
                     ("10.0.1.7:5,speed=3", "unknown option"), ("10.0.1.7:5,mac=xx", "MAC")]:
        with pytest.raises(ConfigError, match=why):
            parse_worker(bad)


SKETCHED_SGD_FIELDS = ("sketch_k", "sketch_k_fraction", "sketch_bits", "value_bits",
                       "value_blocks", "sketch_rotate")


def test_sketched_sgd_config_defaults_and_state_round_trip(embedded_switch, tmp_path: Path):
    """Defaults filled in and kept; the state file round-trips them; a state file written before
    the sketched_sgd fields existed still loads (every other codec: the fields stay 0)."""
    job = embedded_switch.job(job_id=1, n_workers=2, codec="sketched_sgd")
    assert job.lane_op == "SUM"
    assert (job.sketch_rows, job.sketch_columns, job.sketch_k, job.sketch_k_fraction,
            job.sketch_bits, job.value_bits, job.value_blocks, job.sketch_rotate) == \
        (3, 4096, 0, 0.01, 10, 6, 120, 8)
    # value_bits defaults to max(6, ceil(log2 n) + 4): 3 magnitude bits for 32 workers too
    many = job.replace(workers=tuple(WorkerConfig(f"10.0.2.{i + 1}", 1, 1, "02:00:00:00:00:01")
                                     for i in range(32)), value_bits=0)
    assert many.value_bits == 9
    counted = embedded_switch.job(job_id=2, codec="sketched_sgd", sketch_k=2560, value_bits=8)
    assert (counted.sketch_k, counted.sketch_k_fraction, counted.value_bits) == (2560, 0.0, 8)
    state = ControllerState(jobs={1: job, 2: counted, 3: embedded_switch.job(job_id=3)})
    state.save(tmp_path / "ctl.json")
    assert ControllerState.load(tmp_path / "ctl.json").jobs == state.jobs

    old = {"version": 1, "pipeline": None, "jobs": []}
    for config in (embedded_switch.job(job_id=4, codec="fetchsgd"), job):
        data = config.to_json()
        for key in SKETCHED_SGD_FIELDS:
            del data[key]
        old["jobs"].append(data)
    (tmp_path / "old.json").write_text(json.dumps(old))
    loaded = ControllerState.load(tmp_path / "old.json").jobs
    assert all(getattr(loaded[4], key) == 0 for key in SKETCHED_SGD_FIELDS)
    assert loaded[1] == job                  # the defaults, as when it was created


@pytest.mark.parametrize("changes, message", [
    ({"sketch_columns": 96}, "sketch_columns=96: must be a power of two"),
    ({"sketch_rows": 3, "sketch_columns": 1 << 30}, "must be < 2\\*\\*31"),
    ({"sketch_k": 10, "sketch_k_fraction": 0.5}, "give k as a count .* or a fraction"),
    ({"sketch_k_fraction": 1.5}, r"k fraction 1.5: must be in \(0, 1\]"),
    ({"sketch_k": 2.5}, "sketch_k=2.5: must be an int >= 1"),
    ({"value_bits": 32}, "value_bits=32: a field must be 2..31 bits"),
    ({"sketch_bits": 2}, r"sketch_bits=2: .*for 2 workers \(>= 3\)"),
    ({"value_blocks": -1}, "value_blocks=-1"),
    ({"in_switch_sketch": True}, "in-switch sketching is not for it"),
])
def test_sketched_sgd_bad_parameters_are_refused(embedded_switch, changes, message):
    with pytest.raises(ConfigError, match="job 1: codec sketched_sgd: .*" + message):
        embedded_switch.job(job_id=1, codec="sketched_sgd", **changes)


def test_sketched_sgd_parameters_only_for_sketched_sgd(embedded_switch):
    for codec in ("fixed", "fetchsgd", "thc"):
        with pytest.raises(ConfigError, match="sketch_rotate is only for codec sketched_sgd"):
            embedded_switch.job(codec=codec, sketch_rotate=4)


# -- primaryship --------------------------------------------------------------------------------
def test_second_controller_is_refused_as_non_primary(embedded_switch, embedded_pipeline):
    with SwitchConnection(embedded_switch.address, election_id=10) as first:
        first.set_pipeline(*embedded_pipeline.build())
        with pytest.raises(NotPrimaryError, match="another controller is primary"):
            SwitchConnection(embedded_switch.address, election_id=5, timeout=3)
        with pytest.raises(NotPrimaryError, match="already used"):
            SwitchConnection(embedded_switch.address, election_id=10, timeout=3)
        # a read-only session does not arbitrate and may read, but not write
        with SwitchConnection(embedded_switch.address, primary=False) as reader:
            assert reason_counts(reader)["BAD_JOB"] == 0
            with pytest.raises(JobError, match="PERMISSION_DENIED.*not the primary"):
                JobManager(reader).create_job(embedded_switch.job())


def test_unreachable_switch_is_one_clear_error():
    with pytest.raises(P4RuntimeClientError, match="cannot reach the P4Runtime server"):
        SwitchConnection("127.0.0.1:1", timeout=0.5)


# -- state read-back ----------------------------------------------------------------------------
def test_slot_state_after_traffic_sum(tconn, traffic_switch):
    sw, conn = traffic_switch, tconn
    regs = sw.registers(conn)
    jobs = JobManager(conn, registers=regs)
    job = jobs.create_job(sw.job(job_id=5, n_workers=2, codec="fixed", reg_base=8))
    links = [sw.link(w) for w in job.workers]
    try:
        a = [i - 20 for i in range(TEST_WORDS)]
        links[0].send(_aggregate(5, slot=1, seq=1, words=a))
        state = wait_for(lambda: slot_state(regs, job, 1),     # no answer to wait on
                         lambda st: st["pools"][0]["bitmap"] and st["pools"][0]["lanes"] == a)
        half = state["pools"][0]
        assert (half["seq"], half["count"], half["contributors"], half["complete"]) == \
            (1, 1, [0], False)
        assert half["lanes"] == a
        assert state["pools"][1]["in_use"] is False

        b = [1000] * TEST_WORDS
        links[1].send(_aggregate(5, slot=1, seq=1, words=b))
        for link in links:                       # the result is multicast to both
            message = link.recv(RECV_TIMEOUT_S)
            assert message is not None
            assert HINA(message).msg_type == P.MsgType.RESULT
        full = slot_state(regs, job, 1)["pools"][0]
        assert (full["count"], full["contributors"], full["complete"]) == (2, [0, 1], True)
        assert full["lanes"] == [x + 1000 for x in a]
        assert job_progress(regs, job)["chunks"] == 2

        # a stranger is counted by reason
        stranger = dataclasses.replace(job.workers[0], udp_port=40999)
        links[0].close()
        links[0] = sw.link(stranger)
        links[0].send(_aggregate(5, slot=0, seq=0, words=a))
        assert links[0].recv(0.3) is None
        assert wait_for(lambda: reason_counts(conn),
                        lambda c: c["UNKNOWN_WORKER"] == 1)["UNKNOWN_WORKER"] == 1

        jobs.reset(5)
        zeroed = slot_state(regs, job, 1)["pools"][0]
        assert (zeroed["in_use"], zeroed["count"], zeroed["bitmap"], zeroed["lanes"]) == \
            (False, 0, 0, [0] * TEST_WORDS)
    finally:
        for link in links:
            link.close()
        regs.close()


def test_slot_state_decodes_thc_sums(tconn, traffic_switch):
    sw, conn = traffic_switch, tconn
    regs = sw.registers(conn)
    jobs = JobManager(conn, registers=regs)
    job = jobs.create_job(sw.job(job_id=6, n_workers=2, codec="thc"))
    links = [sw.link(w) for w in job.workers]
    try:
        indices = [i % 16 for i in range(2 * TEST_WORDS)]
        links[0].send(_aggregate(6, 0, 0, indices, op=P.Op.LUT_SUM))
        links[1].send(_aggregate(6, 0, 0, indices[::-1], op=P.Op.LUT_SUM))
        assert links[0].recv(RECV_TIMEOUT_S) is not None
        lanes = slot_state(regs, job, 0)["pools"][0]["lanes"]
        table = job.thc_table
        assert lanes == [table[x] + table[y] for x, y in zip(indices, indices[::-1])]
    finally:
        for link in links:
            link.close()
        regs.close()


def test_slot_state_shows_block_sparse_rounds(tconn, traffic_switch):
    """A block-sparse job's slot copies show the block their round sums and the smallest next
    block announced so far (``None``: BLOCK_END); dense jobs read no block registers."""
    sw, conn = traffic_switch, tconn
    regs = sw.registers(conn)
    jobs = JobManager(conn, registers=regs)
    job = jobs.create_job(sw.job(job_id=7, n_workers=2, codec="block_sparse", n_slots=2))
    assert job.uses_blocks
    links = [sw.link(w) for w in job.workers]

    def block_frame(block, next_block, words=None):
        op = P.Op.BLOCK_SKIP if words is None else P.Op.BLOCK_SUM
        head = HINA(msg_type=P.MsgType.AGGREGATE, op=op, job_id=7, slot=0, seq=0,
                    generation=job.generation) / HINABlock(block=block, next=next_block)
        return raw(head if words is None else head / HINAWords(words=words))
    try:
        v = [i - 3 for i in range(TEST_WORDS)]
        links[0].send(block_frame(0, 4, v))      # slot 0's round of block 0; worker 0 next: 4
        half = wait_for(lambda: slot_state(regs, job, 0),
                        lambda st: st["pools"][0]["count"] == 1)["pools"][0]
        assert (half["block"], half["block_next"], half["lanes"]) == (0, 4, v)
        links[1].send(block_frame(0, P.BLOCK_END))   # worker 1 skips: nothing further
        for link in links:
            assert HINA(link.recv(RECV_TIMEOUT_S)).msg_type == P.MsgType.RESULT
        full = slot_state(regs, job, 0)["pools"][0]
        assert (full["complete"], full["block"], full["block_next"]) == (True, 0, 4)
        assert "block" not in slot_state(regs, sw.job(job_id=8, n_workers=2, codec="fixed"), 0)["pools"][0]
    finally:
        for link in links:
            link.close()
        regs.close()


def test_decode_lanes():
    assert decode_lanes([0x80000000, 7], "SUM") == [-(1 << 31), 7]
    assert decode_lanes([0xFFFF0001], "LUT_SUM") == [0xFFFF, 1]
    assert decode_lanes([0xFFFFFFFF], "MAX") == [0xFFFFFFFF]
    with pytest.raises(ValueError, match="lane op"):
        decode_lanes([1], "XOR")


# -- restart ------------------------------------------------------------------------------------
def test_resync_after_switch_restart(embedded_switch, embedded_pipeline, tmp_path: Path):
    state_path = tmp_path / "ctl.json"
    with SwitchConnection(embedded_switch.address) as conn:
        conn.set_pipeline(*embedded_pipeline.build())
        jobs = JobManager(conn)
        state = ControllerState(embedded_pipeline)
        for config in (embedded_switch.job(job_id=1, codec="thc"),
                       embedded_switch.job(job_id=2, codec="fixed")):
            config = jobs.create_job(config)
            state.jobs[config.job_id] = config
        state.save(state_path)

    embedded_switch.restart()
    with SwitchConnection(embedded_switch.address) as conn:
        assert conn.fetch_pipeline() is None                  # the restart lost everything
        state = ControllerState.load(state_path)
        conn.set_pipeline(*state.pipeline.build())
        JobManager(conn).resync(list(state.jobs.values()))
        assert sorted(e["match"]["job_id"].exact.value[-1]
                      for e in conn.read_entries(pipeline.JOB_CONFIG)) == [1, 2]
        assert sorted(conn.read_multicast_groups()) == [2, 3]
        # traffic works again, with the THC table back in place
        job = state.jobs[1]
        links = [embedded_switch.link(w) for w in job.workers]
        try:
            for link in links:
                link.send(_aggregate(1, 0, 0, [1] * (2 * TEST_WORDS), op=P.Op.LUT_SUM))
            assert all(link.recv(RECV_TIMEOUT_S) is not None for link in links)
        finally:
            for link in links:
                link.close()
        # a job adopted from the state file is deleted completely
        jobs = JobManager(conn)
        for config in state.jobs.values():
            jobs.adopt(config)
        jobs.delete(1)
        jobs.delete(2)
        assert conn.read_entries(pipeline.JOB_CONFIG) == []


# -- BMv2 -----------------------------------------------------------------------------------
def test_bmv2_job_lifecycle_and_register_paths(bmv2_switch, bmv2_pipeline):
    """A job on simple_switch_grpc (no ports: no root needed); its slot registers read and
    zeroed through BMv2's Thrift runtime in process and through the real ``simple_switch_CLI``
    (the fallback), which must agree: unsigned values, whole arrays, errors that name the
    register."""
    from hina.controller.bmv2 import Bmv2Thrift
    with SwitchConnection(bmv2_switch.address) as conn:
        conn.set_pipeline(*bmv2_pipeline.build())
        via_thrift = ThriftRegisters(bmv2_switch.thrift_port, use_cli=False)
        via_cli = ThriftRegisters(bmv2_switch.thrift_port, use_cli=True)
        jobs = JobManager(conn, registers=via_thrift)
        workers = tuple(WorkerConfig(f"10.0.1.{i + 1}", 40000, i + 1, f"02:00:00:00:01:{i:02x}")
                        for i in range(2))
        job = jobs.create_job(JobConfig(job_id=1, codec="fixed", workers=workers,
                                        n_slots=4, reg_base=2, words=TEST_WORDS))
        assert len(conn.read_entries(pipeline.WORKER_ADMISSION)) == 2
        assert slot_state(via_thrift, job, 0)["pools"][0]["in_use"] is False

        last = job.n_slots - 1
        copy = (job.reg_base + last) * 2 + 1             # the job's last slot copy: pool 1
        planted = {pipeline.SLOT_SEQ: 5, pipeline.SLOT_COUNT: 2,
                   pipeline.SLOT_BITMAP: 0xFFFFFFFF, pipeline.lane_register(0): 0xFFFFFFFE,
                   pipeline.lane_register(TEST_WORDS - 1): 7}
        neighbours = [(pipeline.SLOT_SEQ, 2 * job.reg_base - 1), (pipeline.SLOT_SEQ, copy + 1)]
        with Bmv2Thrift(bmv2_switch.thrift_port) as thrift:
            for name, value in planted.items():
                thrift.register_write(name, copy, value)
            for name, index in neighbours:                # other jobs' cells, either side
                thrift.register_write(name, index, 9)
        state = slot_state(via_thrift, job, last)
        assert state == slot_state(via_cli, job, last)
        pool = state["pools"][1]
        assert (pool["seq"], pool["count"], pool["bitmap"], pool["contributors"]) == \
            (4, 2, 0xFFFFFFFF, list(range(32)))
        assert pool["lanes"][0] == -2 and pool["lanes"][-1] == 7 and pool["lanes"][1] == 0
        assert state["pools"][0]["in_use"] is False

        cells = [(name, copy) for name in planted]
        via_cli.zero([(pipeline.SLOT_SEQ, copy, 1), (pipeline.SLOT_COUNT, copy - 1, 2)])
        assert via_thrift.read(cells)[:2] == [0, 0]
        via_thrift.zero(pipeline.register_ranges(job.to_spec()))  # the job's ranges, ends in
        assert via_cli.read(cells) == [0] * len(cells)
        assert via_thrift.read(neighbours) == [9, 9]              # and nothing beyond them

        for regs, why in ((via_thrift, "InvalidRegisterOperation"),
                          (via_cli, "Invalid register name")):
            with pytest.raises(P4RuntimeClientError, match=f"HinaIngress.nosuch.*{why}|"
                                                          f"{why}.*HinaIngress.nosuch"):
                regs.read([("HinaIngress.nosuch", 0)])
            with pytest.raises(P4RuntimeClientError, match=f"register {pipeline.SLOT_SEQ} has "
                                                          r"\d+ cells: index 1048576"):
                regs.read([(pipeline.SLOT_SEQ, 1 << 20)])
        assert via_thrift.read([(pipeline.SLOT_SEQ, copy)]) == [0]   # reconnected after errors

        jobs.delete(1)
        assert conn.read_entries(pipeline.WORKER_ADMISSION) == []
        assert conn.read_multicast_groups() == {}
        via_thrift.close()
    with pytest.raises(P4RuntimeClientError, match="does not answer") as err:
        ThriftRegisters(free_port(), use_cli=False).read([(pipeline.SLOT_SEQ, 0)])
    assert err.value.code == "UNAVAILABLE"


def test_bmv2_second_controller_refused(bmv2_switch, bmv2_pipeline):
    with SwitchConnection(bmv2_switch.address, election_id=10):
        with pytest.raises(NotPrimaryError):
            SwitchConnection(bmv2_switch.address, election_id=5, timeout=3)


# -- target plumbing that runs without BMv2 ---------------------------------------------------
FAKE_CLI = """#!/bin/sh
# stands in for simple_switch_CLI: answers as BMv2's runtime_CLI prints (checked against the
# real one by test_bmv2_job_lifecycle_and_register_paths): a whole array for register_read
# without an index, nothing for register_write, an Error line (and exit status 0) for a
# register the program does not have
here="$(dirname "$0")"
echo "$@" > "$here/args"
echo "Obtaining JSON from switch..."
echo "Done"
while read cmd name index value; do
  echo "$cmd $name $index $value" >> "$here/commands"
  if [ "$name" = "nosuch" ]; then
    echo "RuntimeCmd: Error: Invalid register name (nosuch)"
    continue
  fi
  case "$cmd" in
    register_read) echo "RuntimeCmd: $name= 0, 10, 20, 30, 40, 50, 60, -1";;
    register_write) printf "RuntimeCmd: ";;
  esac
done
echo "RuntimeCmd: "
"""


def test_thrift_registers_speak_simple_switch_cli(tmp_path, monkeypatch):
    """The fallback path (no Thrift modules): one ``register_read NAME`` per register for any
    number of its cells, whole-array answers parsed, one ``register_write`` per zeroed cell."""
    import hina.controller.target as target
    cli = tmp_path / "simple_switch_CLI"
    cli.write_text(FAKE_CLI)
    cli.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setattr(target, "thrift_missing", lambda: "no bm_runtime here")
    regs = ThriftRegisters(9091)
    assert regs.use_cli
    assert regs.read([(pipeline.SLOT_SEQ, 3), (pipeline.SLOT_COUNT, 7),
                      (pipeline.SLOT_SEQ, 1)]) == [30, (1 << 64) - 1, 10]
    assert (tmp_path / "args").read_text().split() == ["--thrift-ip", "127.0.0.1",
                                                      "--thrift-port", "9091"]
    assert (tmp_path / "commands").read_text().split("\n")[:2] == [
        f"register_read {pipeline.SLOT_SEQ}  ", f"register_read {pipeline.SLOT_COUNT}  "]
    (tmp_path / "commands").unlink()
    regs.zero([(pipeline.SLOT_FLAGS, 4, 2), (pipeline.SLOT_SEQ, 0, 0)])
    assert (tmp_path / "commands").read_text().splitlines() == [
        f"register_write {pipeline.SLOT_FLAGS} 4 0", f"register_write {pipeline.SLOT_FLAGS} 5 0"]
    with pytest.raises(P4RuntimeClientError, match="thrift port 127.0.0.1:9091: Error: Invalid "
                                                   r"register name \(nosuch\)"):
        regs.read([("nosuch", 0)])
    with pytest.raises(P4RuntimeClientError, match="index 8 is out of range"):
        regs.read([(pipeline.SLOT_SEQ, 8)])


def test_bmv2_pipeline_needs_p4c_or_prebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))        # no p4c-bm2-ss
    with pytest.raises(ConfigError, match="p4c-bm2-ss is not on PATH.*--bmv2-json"):
        PipelineConfig(target="bmv2").build()
    with pytest.raises(ConfigError, match="go together"):
        PipelineConfig(target="bmv2", bmv2_json="x.json")
    (tmp_path / "hina.json").write_text("{}")
    (tmp_path / "hina.p4info.txt").write_text('pkg_info { arch: "v1model" }\n')
    p4info, config = PipelineConfig(target="bmv2", bmv2_json=str(tmp_path / "hina.json"),
                                    p4info=str(tmp_path / "hina.p4info.txt")).build()
    assert (p4info.pkg_info.arch, config) == ("v1model", b"{}")


def test_embedded_pipeline_cache_is_reused(embedded_pipeline):
    first = embedded_pipeline.build()
    again = embedded_pipeline.build()                # from the cache: same messages
    assert first[0] == again[0] and first[1] == again[1]
    assert len(first[0].tables) > 2 * TEST_WORDS     # the LUT tables are there


def test_allocation_avoids_jobs_installed_as_specs(conn, embedded_switch):
    """A job installed at the JobSpec level (as demo/local.py does) is allocated around."""
    jobs = JobManager(conn)
    spec = pipeline.JobSpec(job_id=9, workers=(embedded_switch.worker(3).address(),), n_slots=6,
                            reg_base=0, pair_stream_base=0)
    with pytest.raises(JobError, match="words=128, but the pushed program has HINA_WORDS=64"):
        jobs.create(spec)
    with pytest.raises(JobError, match=r"job 9: words=32: the v1model program \(p4/hina.p4\) "
                       r"is compiled with HINA_WORDS 64, 128 or 256 .*TNA program's Tofino 1 "
                       r"build .*: use 64, 128 or 256 words on a v1model target"):
        jobs.create(dataclasses.replace(spec, words=32))
    jobs.create(dataclasses.replace(spec, words=TEST_WORDS))
    config = jobs.create_job(embedded_switch.job(job_id=1))
    assert (config.reg_base, config.pair_stream_base) == (6, 1)


def test_clone_sessions(conn):
    conn.write([conn.clone_session_update("INSERT", 5, [(3, 1), (4, 2)])])
    assert conn.read_clone_sessions() == {5: [(3, 1), (4, 2)]}
    conn.write([conn.clone_session_update("DELETE", 5)])
    assert conn.read_clone_sessions() == {}


def test_embedded_pipeline_cache_entries_are_whole(embedded_pipeline, tmp_path, monkeypatch):
    """Cache entries appear whole (temporary folder, then rename), and one missing a file
    (left by a run killed under the older, file-by-file writes) is rebuilt, not kept."""
    monkeypatch.setenv("HINA_CACHE_DIR", str(tmp_path))
    first = embedded_pipeline.build()
    entries = [p for p in tmp_path.iterdir() if not p.name.startswith(".")]
    assert len(entries) == 1 and not any(p.name.startswith(".tmp-") for p in tmp_path.iterdir())
    assert sorted(f.name for f in entries[0].iterdir()) == ["device_config.json", "p4info.txt"]
    (entries[0] / "p4info.txt").unlink()
    assert embedded_pipeline.build() == first
    assert sorted(f.name for f in entries[0].iterdir()) == ["device_config.json", "p4info.txt"]


# -- the TNA program ------------------------------------------------------------------------------
def test_jobs_on_the_tna_program(embedded_switch):
    """JobManager on the TNA program (p4/tna/hina_tna.p4 behind the embedded target's P4Runtime
    server): the same JobConfig installs in its layout (hina.pipeline.TnaLayout), a round through
    it is exact (THC's LUT entries, 8,192 of them, are left to bmv2_tests on embedded-tna), a
    generation change re-keys its admission (a late packet gets a NOTICE) and a delete leaves
    none of its entries."""
    from hina.programs import HINA_TNA_P4
    from hina.testing import frames as F
    config = PipelineConfig(target="embedded", p4=str(HINA_TNA_P4),
                            defines={"TNA_LANES": str(TEST_WORDS // 2),
                                     "HINA_PAIRS": str(P.PAIRS_PER_PACKET)})
    conn = SwitchConnection(embedded_switch.address)
    try:
        conn.set_pipeline(*config.build())
        jobs = JobManager(conn)
        jobs.create_job(embedded_switch.job(job_id=3, n_workers=3))
        spec = jobs.record(3).spec
        tables = {name: f"HinaTnaIngress.{name}" for name in (
            "admission.job_config", "admission.worker_admission", "admission.slot_range",
            "reason.worker_generation", "reason.worker_by_address")}
        counts = {name: len(_entries(conn, t)) for name, t in tables.items()}
        assert counts == {"admission.job_config": 1, "admission.worker_admission": 3,
                          "admission.slot_range": 1, "reason.worker_generation": 3,
                          "reason.worker_by_address": 3}
        dp = embedded_switch.switch.require_dataplane()

        def send(s, w, **kw):
            rng = np.random.default_rng(w)
            values = rng.integers(-1000, 1000, TEST_WORDS)
            out = dp.process(s.workers[w].port, F.contribution(s, w, P.Op.SUM, values, **kw))
            return values, [F.parse(p, f) for p, f in out.outputs]

        sent = [send(spec, w) for w in range(3)]
        assert [len(r) for _, r in sent] == [0, 0, 3]
        expected = F.reference(P.Op.SUM, [v for v, _ in sent])
        for reply in sent[-1][1]:
            assert reply.checksum_ok and reply.count == 3
            np.testing.assert_array_equal(reply.words(), expected)
        jobs.set_generation(3, 2)
        new = jobs.record(3).spec
        assert sorted(int.from_bytes(e["match"]["generation"].exact.value, "big") for e in
                      _entries(conn, tables["admission.worker_admission"])) == [2, 2, 2]
        _, (notice,) = send(spec, 0, seq=1, slot=1)                 # generation 1: stale
        assert notice.msg_type == P.MsgType.NOTICE and notice.generation == 2
        assert [len(send(new, w, seq=1, slot=1)[1]) for w in range(3)] == [0, 0, 3]
        assert jobs.reason_counts()["STALE_GENERATION"] == 1
        jobs.delete(3)
        assert all(not _entries(conn, t) for t in tables.values())
    finally:
        conn.close()
