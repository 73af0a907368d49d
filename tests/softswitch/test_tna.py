"""The TNA architecture on the embedded target (softswitch/p4include/tna.p4,
softswitch/engine/runtime_tna.py): programs/tna_basic.p4 run with frames, the expected bytes
derived here from the program's semantics (CRC32 by zlib); bf-p4c accepts the same program."""
from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from hina.softswitch.api import P4CompileError, P4UnsupportedError, Replica
from hina.softswitch.compiler import compile_file, compile_source

HERE = Path(__file__).parent
BASIC = HERE / "programs" / "tna_basic.p4"
TINY = HERE.parent / "controller" / "data" / "tiny_tna.p4"
OP = struct.Struct(">BBIIIHHH")
PAYLOAD = b"payload!"
ACC_INIT = 5                     # Register<bit<32>, bit<8>>(16, 5) acc


def frame(op: int, idx: int, value: int) -> bytes:
    return bytes(12) + b"\x88\xb5" + OP.pack(op, idx, value, 0, 0, 0, 0, 0) + PAYLOAD


def expected(op: int, idx: int, value: int, acc: int, pairs: int, eport: int, rid: int) -> bytes:
    crc = zlib.crc32(value.to_bytes(4, "big") + bytes([idx])) & 0xFFFF
    return bytes(12) + b"\x88\xb5" + OP.pack(op, idx, value, acc, pairs, crc, eport, rid) + PAYLOAD


@pytest.fixture
def dp():
    return compile_file(BASIC).instantiate()


def test_unicast_runs_register_actions_hash_and_counter(dp):
    r1 = dp.process(3, frame(1, 2, 7))
    assert r1.outputs == [(4, expected(1, 2, 7, ACC_INIT + 7, 1, 4, 0))]
    r2 = dp.process(9, frame(1, 2, 0x10))
    assert r2.outputs == [(10, expected(1, 2, 0x10, ACC_INIT + 7 + 0x10, 2, 10, 0))]
    # another index starts from the initial value; the control plane sees what the actions wrote
    assert dp.process(3, frame(1, 4, 1)).outputs[0][1] == expected(1, 4, 1, ACC_INIT + 1, 1, 4, 0)
    assert dp.register_read("Ig.acc", 2) == ACC_INIT + 0x17
    assert dp.register_read("Ig.acc", 0) == ACC_INIT
    n = len(frame(1, 2, 0))
    assert dp.counter_read("Ig.ops", 2) == (2 * n, 2)
    dp.register_reset("Ig.acc")
    assert dp.register_read("Ig.acc", 2) == ACC_INIT


def test_multicast_replicas_carry_rids_and_egress_drops_one(dp):
    dp.mcast_group_set(5, [Replica(1, 1), Replica(2, 2), Replica(6, 3)])
    r = dp.process(3, frame(2, 1, 0xABCDEF01))
    assert r.outputs == [(1, expected(2, 1, 0xABCDEF01, ACC_INIT + 0xABCDEF01, 1, 1, 1)),
                         (2, expected(2, 1, 0xABCDEF01, ACC_INIT + 0xABCDEF01, 1, 2, 2))]


def test_drop_ctl_and_no_destination_drop(dp):
    assert dp.process(3, frame(3, 0, 1)).outputs == []          # drop_ctl = 1 in ingress
    assert dp.process(3, frame(0, 0, 1)).outputs == []          # no port, no group
    assert dp.process(3, bytes(12) + b"\x08\x00" + PAYLOAD).outputs == []
    assert dp.counter_read("Ig.ops", 0) == (2 * len(frame(0, 0, 0)), 2)   # both ran ingress
    assert dp.process(3, frame(2, 0, 1)).outputs == []          # group 5 not configured


def test_register_action_index_out_of_range_returns_zero(dp):
    out = dp.process(3, frame(1, 200, 9)).outputs
    assert out == [(4, expected(1, 200, 9, 0, 0, 4, 0))]


def test_tiny_tna_program_compiles_with_p4runtime_names():
    dp = compile_file(TINY).instantiate()
    info = dp.info
    # the Register<pair_t, _> too, as bf-p4c's standard P4Info lists it (a register of structs)
    assert [(r.name, r.type_name) for r in info.registers] == [
        ("HinaTnaIngress.lane_0", ""), ("HinaTnaIngress.slot_bitmap", "pair_t")]
    assert [c.name for c in info.counters] == ["HinaTnaIngress.reason_counter"]
    assert [t.name for t in info.tables] == ["HinaTnaIngress.forwarding"]
    # no forwarding entry: the packet has no egress port and is dropped, registers updated
    assert dp.process(1, (0x0102).to_bytes(4, "big")).outputs == []
    assert dp.register_read("HinaTnaIngress.lane_0", 2) == 0x0102
    assert dp.register_read("HinaTnaIngress.slot_bitmap", 2) == (0x0102, 0)


@pytest.mark.skipif(shutil.which("bf-p4c") is None, reason="bf-p4c is not installed")
def test_bf_p4c_accepts_the_test_program(tmp_path):
    run = subprocess.run(["bf-p4c", "--target", "tofino", "--arch", "tna", "-o", str(tmp_path),
                          str(BASIC)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]


def _variant(old: str, new: str) -> str:
    text = BASIC.read_text()
    assert old in text
    return text.replace(old, new)


@pytest.mark.parametrize("old, new, exc, message", [
    ("HashAlgorithm_t.CRC32", "HashAlgorithm_t.CRC64", P4UnsupportedError,
     "Hash with algorithm CRC64"),
    ("void apply(inout bit<32> cell, out bit<32> result)",
     "void apply(inout bit<16> cell, out bit<32> result)", P4CompileError, "cell: expected inout"),
    ("void apply(inout pair_t cell", "void run(inout pair_t cell", P4CompileError,
     "must implement abstract method apply"),
    ("Counter<bit<32>, bit<8>>(16, CounterType_t.PACKETS_AND_BYTES) ops;",
     "Counter<bit<32>, bit<8>>(16, CounterType_t.PACKETS_AND_BYTES) ops;\n"
     "    Meter<bit<8>>(16, MeterType_t.BYTES) m;", P4CompileError, "Meter"),
])
def test_bad_or_unsupported_tna_is_located(old, new, exc, message):
    with pytest.raises(exc) as info:
        compile_source(_variant(old, new), str(BASIC), include_dirs=[str(BASIC.parent)])
    assert message in str(info.value)
    assert "tna_basic.p4:" in str(info.value)


def test_hina_tna_program_compiles_and_runs_a_frame():
    """HINA's TNA program (p4/tna/hina_tna.p4) on the embedded target: its P4Runtime names, and a
    frame that is not HINA's dropped by ingress (drop_ctl) rather than by an engine error."""
    root = HERE.parent.parent
    dp = compile_file(root / "p4" / "tna" / "hina_tna.p4").instantiate()
    assert "HinaTnaIngress.reason_counter" in [c.name for c in dp.info.counters]
    assert "HinaTnaIngress.admission.job_config" in [t.name for t in dp.info.tables]
    r = dp.process(1, bytes(12) + b"\x08\x06" + bytes(46), trace=True)
    assert r.outputs == []
    assert "dropped in ingress (drop_ctl)" in r.trace
    assert not [t for t in r.trace if "engine error" in t]
    # The default program has no block-sparse profile (TNA_BLOCK_SPARSE=1): no block registers,
    # and a BLOCK_SKIP (block header alone) is MALFORMED, not aggregated.
    from hina import pipeline
    from hina import protocol as P
    from hina.testing import frames as J
    assert not pipeline.layout_for(dp.info.tables).block_sparse
    assert not [r for r in dp.info.registers if "block_" in r.name]
    sender = J.worker_address(0)
    skip = J.frame(sender, struct.pack("!II", 0, P.BLOCK_END), op=P.Op.BLOCK_SKIP, job_id=1)
    assert dp.process(sender.port, skip).outputs == []
    assert dp.counter_read("HinaTnaIngress.reason_counter", int(P.DropReason.MALFORMED))[1] == 1


def test_checksum_verify_is_true_on_a_wrong_sum():
    """TNA ``Checksum.verify()`` as bf-p4c compiles it: true when the checksum is WRONG (the
    parser unit's error bit; bf-p4c's v1model translation ORs it into parser_err's checksum
    bit), false for a right one; a unit that added nothing reports an error."""
    from hina.softswitch.engine.externs import TnaChecksum
    words = [0x4500, 0x0054, 0x1C46, 0x4000, 0x4006, 0x0000, 0xAC10, 0x0A63, 0xAC10, 0x0A0C]
    right = 0xFFFF - (sum(words) % 0xFFFF)                # the header's checksum word
    for checksum, wrong in ((right, False), (right ^ 0x0100, True)):
        unit = TnaChecksum()
        data = words[:5] + [checksum] + words[6:]
        unit.add(int("".join(f"{w:04x}" for w in data), 16), 16 * len(data))
        assert unit.verify() is wrong
    assert TnaChecksum().verify() is True
