"""The wire protocol's single source (hina.protocol) against the P4 #defines, the scapy layers
and the entry builders. No switch needed."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import raw

from hina import hashing, pipeline
from hina import protocol as P
from hina.layers import (HINA, HINABlock, HINAHarvest, HINAPair, HINAPairs, HINAThc, HINAWords, pack_nibbles,
                         unpack_nibbles)

INCLUDE = Path(__file__).resolve().parent.parent / "p4" / "include"
_DEFINE = re.compile(r"^#define\s+(\w+)\s+(?:(\d+)w)?(0x[0-9A-Fa-f]+|\d+)\s*(?://.*)?$", re.M)


def p4_defines() -> dict[str, int]:
    out = {}
    for name in ("config.p4", "types.p4"):
        for m in _DEFINE.finditer((INCLUDE / name).read_text()):
            out.setdefault(m.group(1), int(m.group(3), 0))
    return out


def test_p4_defines_match_protocol_constants():
    d = p4_defines()
    pairs = {
        "HINA_UDP_PORT_BASE": P.UDP_PORT_BASE, "HINA_UDP_PORT_MASK": P.UDP_PORT_MASK,
        "HINA_VERSION": P.VERSION, "HINA_HEADER_BYTES": P.HEADER_BYTES,
        "HINA_HARVEST_BYTES": P.HARVEST_HEADER_BYTES, "HINA_PAIR_BYTES": P.PAIR_BYTES,
        "IPV4_BYTES": P.IPV4_BYTES, "UDP_BYTES": P.UDP_BYTES,
        "HINA_WORDS": P.WORDS, "HINA_PAIRS": P.PAIRS_PER_PACKET,
        "HINA_MAX_WORKERS": P.MAX_WORKERS, "HINA_SLOT_CAPACITY": P.SLOT_CAPACITY,
        "HINA_MAX_JOBS": P.MAX_JOB_ID + 1,
        "HINA_SKETCH_ROWS": P.SKETCH_ROWS, "HINA_SKETCH_CAPACITY": P.SKETCH_CAPACITY,
        "HINA_PAIR_STREAMS": P.PAIR_STREAMS, "HINA_REASONS": P.REASONS,
        "HINA_BLOCK_BYTES": P.BLOCK_HEADER_BYTES, "HINA_BLOCK_END": P.BLOCK_END,
        "HINA_ROW_OFFSET_MULTIPLIER": hashing.ROW_OFFSET_MULTIPLIER,
        "HINA_HASH_PASSES": hashing.HASH_PASSES,
    }
    pairs.update({f"MSG_{m.name}": m.value for m in P.MsgType})
    pairs.update({f"OP_{o.name}": o.value for o in P.Op})
    pairs.update({f"FLAG_{f.name}": f.value for f in P.Flag})
    pairs.update({f"REASON_{r.name}": r.value for r in P.DropReason})
    mismatched = {k: (d.get(k), v) for k, v in pairs.items() if d.get(k) != v}
    assert not mismatched, f"P4 #define != hina.protocol (p4, python): {mismatched}"
    # And nothing on the P4 side that Python lacks.
    p4_only = {k for k in d if k.startswith(("MSG_", "OP_", "FLAG_", "REASON_"))} - set(pairs)
    assert p4_only == {"REASON_NONE"}
    assert max(P.DropReason) < P.REASONS


def test_p4_hina_header_is_header_bytes_long():
    text = (INCLUDE / "headers.p4").read_text()
    body = re.search(r"header hina_t \{(.*?)\}", text, re.S).group(1)
    bits = sum(int(b) for b in re.findall(r"bit<(\d+)>", body))
    assert bits == 8 * P.HEADER_BYTES == 8 * len(HINA())


def test_header_golden_bytes_and_dissection():
    h = HINA(msg_type=P.MsgType.AGGREGATE, op=P.Op.LUT_SUM, flags=P.Flag.RETRANSMIT, count=0,
             job_id=0x0102, pool=1, slot=0x0304, seq=0xA0B0C0D0, generation=0x0506)
    assert raw(h) == bytes.fromhex("41 02 02 00 0102 8304 A0B0C0D0 0506 0000")
    pkt = Ether(raw(Ether() / IP() / UDP(sport=40000, dport=P.UDP_PORT_BASE + 3) / h
                    / HINAThc.from_indices([1, 2, 15, 0])))
    assert pkt[HINA].slot == 0x304 and pkt[HINA].pool == 1 and pkt[HINA].job_id == 0x102
    assert list(pkt[HINAThc].indices()) == [1, 2, 15, 0]
    assert "LUT_SUM" in pkt[HINA].mysummary() and "job=258" in pkt[HINA].mysummary()
    assert pkt[HINA].generation == 0x506 and "gen=1286" in pkt[HINA].mysummary()


def test_header_fields_are_one_definition_in_p4_scapy_and_python():
    """hina.protocol.HEADER_FIELDS (names and widths, in wire order) is what headers.p4's hina_t
    and the scapy layer declare."""
    text = (INCLUDE / "headers.p4").read_text()
    body = re.search(r"header hina_t \{(.*?)\}", text, re.S).group(1)
    p4 = [(name, int(bits)) for bits, name in re.findall(r"bit<(\d+)>\s+(\w+);", body)]
    assert p4 == list(P.HEADER_FIELDS)
    scapy = [(f.name, f.size if hasattr(f, "size") else 8 * f.sz) for f in HINA.fields_desc]
    assert scapy == list(P.HEADER_FIELDS)


_FIELD_VALUES = st.fixed_dictionaries(
    {name: st.integers(0, (1 << bits) - 1) for name, bits in P.HEADER_FIELDS})


@settings(max_examples=300, deadline=None)
@given(_FIELD_VALUES)
def test_pack_header_agrees_with_scapy_and_the_packetizer_dtype(fields):
    packed = P.pack_header(**fields)
    assert packed == raw(HINA(**fields))
    assert P.unpack_header(packed) == fields
    rec = np.frombuffer(packed, dtype=P.HEADER_DTYPE)[0]
    assert (rec["ver_type"], rec["pool_slot"], rec["seq"]) == (
        (fields["version"] << 4) | fields["msg_type"], (fields["pool"] << 15) | fields["slot"],
        fields["seq"])


def test_pack_header_refuses_values_that_do_not_fit_unless_told_to_wrap():
    with pytest.raises(ValueError, match="slot=32768: must fit 15 bits"):
        P.pack_header(P.MsgType.AGGREGATE, P.Op.SUM, slot=1 << 15)
    assert P.unpack_header(P.pack_header(1, 256 + 3, slot=(1 << 15) + 5, wrap=True))[
        "slot"] == 5
    with pytest.raises(ValueError, match="shorter than the 16-byte"):
        P.unpack_header(b"\x31" * 15)


def test_block_header_golden_bytes_dissection_and_sizes():
    """v4's block-sparse messages: the 8-byte block header (block, next) after the HINA header,
    then the lanes (BLOCK_SUM, its RESULT) or nothing (BLOCK_SKIP)."""
    h = HINA(msg_type=P.MsgType.AGGREGATE, op=P.Op.BLOCK_SUM, job_id=1, slot=2, seq=3)
    pkt = h / HINABlock(block=5, next=9) / HINAWords(words=[1, -1])
    assert raw(pkt) == bytes.fromhex("41 05 00 00 0001 0002 00000003 0001 0000"
                                     "00000005 00000009 00000001 FFFFFFFF")
    back = HINA(raw(pkt))
    assert (back[HINABlock].block, back[HINABlock].next) == (5, 9)
    assert back[HINAWords].words == [1, -1]
    skip = HINA(raw(HINA(op=P.Op.BLOCK_SKIP) / HINABlock(block=7)))
    assert skip[HINABlock].next == P.BLOCK_END and not skip[HINABlock].payload
    assert "next=END" in skip[HINABlock].mysummary()
    result = HINA(raw(HINA(msg_type=P.MsgType.RESULT, op=P.Op.BLOCK_SUM) / HINABlock(block=1, next=4)
                      / HINAWords(words=[7])))
    assert result[HINABlock].next == 4 and result[HINAWords].words == [7]
    W = 64
    assert P.payload_bytes(P.MsgType.AGGREGATE, P.Op.BLOCK_SUM, words=W) == 8 + 4 * W
    assert P.payload_bytes(P.MsgType.AGGREGATE, P.Op.BLOCK_SKIP, words=W) == 8
    assert P.payload_bytes(P.MsgType.RESULT, P.Op.BLOCK_SUM, words=W) == 8 + 4 * W
    assert P.payload_bytes(P.MsgType.RESULT, P.Op.SUM, words=W) == 4 * W


def test_notice_layer_names_the_reason():
    n = HINA(raw(HINA(msg_type=P.MsgType.NOTICE, op=P.DropReason.STALE_GENERATION, job_id=3,
                      generation=9)))
    assert n.msg_type == P.MsgType.NOTICE and n.generation == 9 and not n.payload
    assert "NOTICE" in n.mysummary() and "STALE_GENERATION" in n.mysummary()
    assert P.payload_bytes(P.MsgType.NOTICE) == 0


def test_header_fields_match_packetizer_dtype():
    """The worker's numpy header (worker.packetizer.HEADER_DTYPE) and the scapy layer agree."""
    from hina.worker.packetizer import HEADER_DTYPE
    assert HEADER_DTYPE.itemsize == P.HEADER_BYTES == len(HINA())
    assert HEADER_DTYPE.itemsize % 4 == 0, "the header keeps the payload 4-byte aligned"
    h = np.zeros(1, dtype=HEADER_DTYPE)
    h["ver_type"], h["seq"], h["generation"] = (P.VERSION << 4) | 1, 77, 0xBEEF
    back = HINA(h.tobytes())
    assert (back.version, back.msg_type, back.seq, back.generation, back.reserved) == \
        (P.VERSION, 1, 77, 0xBEEF, 0)


def test_generation_arithmetic():
    assert P.next_generation(P.FIRST_GENERATION) == P.FIRST_GENERATION + 1
    assert P.next_generation(P.MAX_GENERATION) == P.FIRST_GENERATION      # 0 is skipped
    for bad in (0, P.MAX_GENERATION + 1, True, 1.0):
        with pytest.raises(ValueError, match="generation"):
            P.check_generation(bad)


def test_result_and_pairs_and_harvest_layers():
    res = Ether(raw(Ether() / IP() / UDP(sport=P.UDP_PORT_BASE, dport=40000)
                    / HINA(msg_type=P.MsgType.RESULT, op=P.Op.SUM) / HINAWords(words=[1, -2, 3])))
    assert res[HINAWords].words == [1, -2, 3]
    np.testing.assert_array_equal(res[HINAWords].as_array(), [1, -2, 3])
    pairs = Ether(raw(Ether() / IP() / UDP(sport=40000, dport=P.UDP_PORT_BASE)
                      / HINA(msg_type=P.MsgType.PAIRS)
                      / HINAPairs(pairs=[HINAPair(index=7, value=-3), HINAPair(index=9, value=4)])))
    assert [(p.index, p.value) for p in pairs[HINAPairs].pairs] == [(7, -3), (9, 4)]
    data = Ether(raw(Ether() / IP() / UDP(sport=P.UDP_PORT_BASE, dport=40000)
                     / HINA(msg_type=P.MsgType.HARVEST_DATA) / HINAHarvest(row=2, block=5)
                     / HINAWords(words=[0, 1])))
    assert data[HINAHarvest].row == 2 and data[HINAWords].words == [0, 1]


def test_nibble_packing_first_coordinate_high():
    assert pack_nibbles([0xA, 0x5, 0x0, 0xF]) == b"\xa5\x0f"
    np.testing.assert_array_equal(unpack_nibbles(b"\xa5\x0f"), [0xA, 0x5, 0, 0xF])
    with pytest.raises(ValueError, match="even"):
        pack_nibbles([1, 2, 3])
    with pytest.raises(ValueError, match=r"\[0, 15\]"):
        pack_nibbles([1, 16])


def test_payload_sizes():
    assert P.payload_bytes(P.MsgType.AGGREGATE, P.Op.SUM) == 4 * P.WORDS
    assert P.payload_bytes(P.MsgType.AGGREGATE, P.Op.LUT_SUM) == P.WORDS
    assert P.payload_bytes(P.MsgType.HARVEST_DATA) == 4 + 4 * P.WORDS
    with pytest.raises(ValueError, match="needs an op"):
        P.payload_bytes(P.MsgType.AGGREGATE)


def test_word_counts_are_the_programs():
    """V1MODEL_WORDS are the HINA_WORDS p4/include/config.p4 accepts; TNA_TOFINO1_WORDS is two
    blocks of the TNA program's Tofino 1 default TNA_LANES; workers speak both, nothing else."""
    config = (INCLUDE / "config.p4").read_text()
    assert tuple(int(v) for v in re.findall(r"#(?:el)?if HINA_WORDS == (\d+)", config)) == \
        P.V1MODEL_WORDS
    tna = (INCLUDE.parent / "tna" / "hina_tna.p4").read_text()
    m = re.search(r"#if __TARGET_TOFINO__ == 2\s*#define TNA_LANES (\d+)\s*#else\s*"
                  r"#define TNA_LANES (\d+)", tna)
    assert m and 2 * int(m.group(2)) == P.TNA_TOFINO1_WORDS and 2 * int(m.group(1)) == 64
    assert set(P.WORKER_WORDS) == {P.TNA_TOFINO1_WORDS, *P.V1MODEL_WORDS}
    for words in P.WORKER_WORDS:
        assert P.check_worker_words(words) == words
    for bad in (16, 48, 512, True):
        with pytest.raises(ValueError, match="workers speak 32, 64, 128 or 256 words"):
            P.check_worker_words(bad)
    with pytest.raises(ValueError, match=r"words=32: the v1model program \(p4/hina.p4\) is "
                       r"compiled with HINA_WORDS 64, 128 or 256 .*Tofino 1 build"):
        P.check_v1model_words(32)
    assert P.payload_bytes(P.MsgType.AGGREGATE, P.Op.LUT_SUM, words=32) == 32
    assert P.payload_bytes(P.MsgType.RESULT, P.Op.LUT_SUM, words=32) == 128


# -- hina.pipeline -----------------------------------------------------------------------------
def _workers(n):
    return tuple(pipeline.WorkerAddress(port=i + 1, mac=i + 1, ip=0x0A000001 + i, udp_port=40000)
                 for i in range(n))


def test_job_entries_and_group():
    job = pipeline.JobSpec(job_id=3, workers=_workers(2), n_slots=8, reg_base=16, lut_id=1,
                           sketch_columns=1024, sketch_base=2048, sketch_seed=9)
    entries = pipeline.job_entries(job)
    assert [e.table for e in entries] == ([pipeline.JOB_CONFIG] + [pipeline.WORKER_ADMISSION] * 2
                                          + [pipeline.WORKER_BY_ADDRESS] * 2
                                          + [pipeline.REPLICA_REWRITE] * 2)
    assert entries[0].action.args == (8, 1, 2048, 1023, 9)
    # admission: job, ingress port, MAC, IPv4, UDP port; the port is the worker's switch port
    w1 = job.workers[1]
    assert [m.value for m in entries[2].matches] == [3, w1.port, w1.mac, w1.ip, w1.udp_port]
    assert entries[2].action.args == (1, 2, 2, job.mcast_grp, 16, 1, P.FIRST_GENERATION)
    assert [m.value for m in entries[4].matches] == [3, w1.ip, w1.udp_port]
    bumped = pipeline.admission_entries(dataclasses.replace(job, generation=7))
    assert [e.matches for e in bumped] == [e.matches for e in entries[1:3]]
    assert [e.action.args[-1] for e in bumped] == [7, 7]
    group, replicas = pipeline.multicast_group(job)
    assert group == 4 and [(r.port, r.rid) for r in replicas] == [(1, 193), (2, 194)]
    assert len(pipeline.lut_entries(1, words=64)) == 2 * 64 * 16


@pytest.mark.parametrize("kwargs, message", [
    (dict(n_slots=0), "n_slots"),
    (dict(n_slots=4, reg_base=P.SLOT_CAPACITY - 2), "reg_base"),
    (dict(job_id=P.MAX_JOB_ID + 1), "job_id"),
    (dict(sketch_columns=1000), "power of two"),
    (dict(thc_max_value=70000), "16-bit"),
])
def test_job_spec_refuses_bad_input(kwargs, message):
    base = dict(job_id=1, workers=_workers(2), n_slots=4, reg_base=0)
    base.update(kwargs)
    with pytest.raises(ValueError, match=message):
        pipeline.JobSpec(**base)


def test_too_many_workers_for_thc_sums():
    with pytest.raises(ValueError, match="16-bit"):
        pipeline.JobSpec(job_id=1, workers=_workers(32), n_slots=1, reg_base=0,
                         thc_max_value=4000)


def test_check_isolated_refuses_overlaps():
    a = pipeline.JobSpec(job_id=1, workers=_workers(1), n_slots=4, reg_base=0)
    b = pipeline.JobSpec(job_id=2, workers=_workers(1), n_slots=4, reg_base=3, pair_stream_base=1)
    with pytest.raises(ValueError, match="share slots"):
        pipeline.check_isolated([a, b])
    c = pipeline.JobSpec(job_id=2, workers=_workers(1), n_slots=4, reg_base=4, pair_stream_base=1)
    pipeline.check_isolated([a, c])


# -- scapy round trip over the whole header space ------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(msg_type=st.integers(0, 15), op=st.integers(0, 255), flags=st.integers(0, 255),
       count=st.integers(0, 255), job_id=st.integers(0, 0xFFFF), pool=st.integers(0, 1),
       slot=st.integers(0, 0x7FFF), seq=st.integers(0, 0xFFFFFFFF),
       generation=st.integers(0, 0xFFFF))
def test_header_round_trip(msg_type, op, flags, count, job_id, pool, slot, seq, generation):
    h = HINA(msg_type=msg_type, op=op, flags=flags, count=count, job_id=job_id, pool=pool,
             slot=slot, seq=seq, generation=generation)
    data = raw(h)
    assert len(data) == P.HEADER_BYTES
    assert data[0] == (P.VERSION << 4) | msg_type
    back = HINA(data)
    assert (back.msg_type, back.op, int(back.flags), back.count, back.job_id, back.pool,
            back.slot, back.seq, back.generation, back.reserved) == \
        (msg_type, op, flags, count, job_id, pool, slot, seq, generation, 0)


# -- the TNA program's layout (hina.pipeline.TnaLayout) ------------------------------------------
def _tna_layout():
    kinds = ["ternary" if i in (5, 6) else "exact" for i in range(32)]
    return pipeline.TnaLayout(32, kinds)


def test_tna_layout_builds_the_tna_tables_from_the_same_job():
    tna = _tna_layout()
    job = pipeline.JobSpec(job_id=3, workers=_workers(2), n_slots=4, reg_base=8, sketch_seed=9,
                           sketch_columns=1024, sketch_base=2048, pair_stream_base=5, words=64)
    entries = pipeline.job_entries(job, tna)
    tables = [e.table.split(".", 1)[1] for e in entries]
    assert tables == (["admission.job_config"] + ["admission.worker_admission"] * 2
                      + ["reason.worker_generation"] * 2 + ["admission.slot_range"]
                      + ["reason.worker_by_address"] * 2 + ["replica_rewrite"] * 2)
    seeds = [(9 + r, ((9 + r) * hashing.ROW_OFFSET_MULTIPLIER) & 0xFFFFFFFF) for r in range(3)]
    assert entries[0].action.args == (4, 0, 2048, 1023, *[x for s in seeds for x in s])
    w1 = job.workers[1]
    assert [m.value for m in entries[2].matches] == [3, w1.port, w1.mac, w1.ip, w1.udp_port,
                                                     P.FIRST_GENERATION]
    assert entries[2].action.args == (1, 2, 3, 2, job.mcast_grp, 8, 16, 32, 6, P.FIRST_GENERATION)
    assert entries[5].matches[1] == pipeline.Range(0, 3) and entries[5].priority > 0
    # a generation change: the new admission in, the old out, the stale sender's generation
    moved = pipeline.generation_updates(job, dataclasses.replace(job, generation=4), tna)
    assert [(k, e.table.rsplit(".", 1)[1]) for k, e in moved] == (
        [("INSERT", "worker_admission")] * 2 + [("DELETE", "worker_admission")] * 2
        + [("MODIFY", "worker_generation")] * 2)
    assert moved[0][1].matches[-1].value == 4 and moved[2][1].matches[-1].value == 1
    # lanes: word w of copy c in lane_<w % 32> at 2c + w // 32
    assert tna.lane_cell(33, 5) == ("HinaTnaIngress.lanes.lane_1", 11)
    assert tna.register(pipeline.SLOT_COUNT) is None


def test_tna_layout_lut_entries_and_refusals():
    tna = _tna_layout()
    entries = pipeline.lut_entries(2, words=64, layout=tna)
    assert len(entries) == 32 * 256
    t = pipeline.THC_DEFAULT_TABLE
    by_table = {}
    for e in entries:
        by_table.setdefault(e.table.rsplit(".", 1)[1], []).append(e)
    e = by_table["lut_0"][0xA5]
    assert [m.value for m in e.matches] == [1, 2, 0xA5] and e.action.args == ((t[10] << 16) | t[5],)
    ternary = by_table["lut_5"][0x3C]
    assert ternary.matches[2] == pipeline.Ternary(0x3C, 0xFF) and ternary.priority > 0
    with pytest.raises(ValueError, match="words=128"):
        pipeline.lut_entries(2, words=128, layout=tna)
    # Tofino 1's build: 16 lanes, 32 words per packet; the v1model program refuses 32
    tofino1 = pipeline.TnaLayout(16, ["exact"] * 16)
    job = pipeline.JobSpec(job_id=1, workers=_workers(2), n_slots=4, reg_base=0, words=32)
    assert len(pipeline.job_entries(job, tofino1)) == 10
    assert len(pipeline.lut_entries(2, words=32, layout=tofino1)) == 16 * 256
    with pytest.raises(ValueError, match="words=64, but the TNA program carries 32 words"):
        pipeline.job_entries(dataclasses.replace(job, words=64), tofino1)
    for build in (lambda: pipeline.job_entries(job), lambda: pipeline.lut_entries(2, words=32)):
        with pytest.raises(ValueError, match="Tofino 1 build .*: use 64, 128 or 256 words"):
            build()
    with pytest.raises(ValueError, match="workers speak"):
        dataclasses.replace(job, words=48)
    unaligned = pipeline.JobSpec(job_id=1, workers=_workers(1), n_slots=3, reg_base=2, words=64)
    with pytest.raises(ValueError, match="multiple of 4"):
        pipeline.job_entries(unaligned, tna)
    with pytest.raises(ValueError, match="not a HINA program"):
        pipeline.layout_for([])


def test_every_tna_unsupported_entry_names_a_test():
    """Each entry of bmv2_tests/conftest.py's TNA_UNSUPPORTED names a test that exists (a renamed
    test would otherwise run on TNA again, or its entry skip nothing, unnoticed)."""
    import importlib
    from bmv2_tests.conftest import TNA_UNSUPPORTED
    for reason, prefixes in TNA_UNSUPPORTED.items():
        for prefix in prefixes:
            file, _, test = prefix.partition("::")
            module = importlib.import_module(f"bmv2_tests.{file.removesuffix('.py')}")
            assert callable(getattr(module, test.partition("[")[0], None)), (prefix, reason)
