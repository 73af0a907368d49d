"""Differential tests: every program of the repository on the embedded target and on real BMv2,
same entries, same frames, outputs compared per port frame by frame, then every register and
counter cell. BMv2 is the reference. Skipped, with the reason, where BMv2 cannot run.

* every P4 program: hypothesis draws table contents from the program's P4Info and frames from a
  shared value pool (so they hit the entries), mutated and malformed ones included;
* ``p4/hina.p4`` at 64 and 128 words: hypothesis draws jobs (workers, slots, LUT, generation)
  and worker traffic (every op, block-sparse ones included, slots, pools, sequence numbers, retransmissions, generations
  matching or stale, strangers, frames on wrong ingress ports or with wrong source MACs),
  mutated, with generation bumps by the controller in between;
* the malformed-frame cases of ``tests/softswitch/test_frame_fuzz.py`` around a routed l3fwd
  frame.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from hina import pipeline
from hina import protocol as P
from hina.softswitch.api import ActionCall, Lpm, Range, Replica, TableEntry

from hina.testing import frames as J
from bmv2_tests import strategies as S
from hina.testing.targets import HINA_P4, bmv2_missing

ROOT = Path(__file__).resolve().parent.parent
#: Programs for Tofino (TNA/T2NA): BMv2 cannot run them (tests/softswitch/test_tna.py does).
_INCLUDES_TNA = re.compile(r'^\s*#\s*include\s*[<"]t2?na\.p4[>"]', re.MULTILINE)
#: Every v1model P4 program of the repository but hina.p4 (its own tests are below) and the
#: malformed front-end cases; a new program in these folders is covered without editing this list.
PROGRAMS = sorted(p for folder in ("p4", "bench/programs", "tests/golden",
                                   "tests/softswitch/programs", "tests/softswitch/stf")
                  for p in (ROOT / folder).glob("*.p4")
                  if p != HINA_P4 and not _INCLUDES_TNA.search(p.read_text(errors="replace")))
#: Ports the generated traffic enters on; outputs to ports BMv2 has no interface for are
#: compared as absent on both targets.
IN_PORTS = (1, 2, 3, 4)
#: Actions left out of generated entries, per program, with the reason.
UNWRITABLE = {
    # A top-level action with a parameter, called directly in the ingress (so P4Info lists it
    # without parameters, p4c's rule) and held by an egress table: p4c's JSON has two actions
    # named count_up, PI maps the P4Info id to the other one and BMv2 refuses every entry
    # ("Error when adding match entry to target"). A p4c/PI limitation, not a dataplane case.
    "p4info_view.p4": {"count_up"},
}
MULTICAST = {1: (Replica(1, 10), Replica(2, 20)), 2: (Replica(3, 1), Replica(4, 2))}


@pytest.fixture(autouse=True)
def _needs_bmv2():
    reason = bmv2_missing()
    if reason:
        pytest.skip(reason)


def _settings(examples: int):
    # No shrinking: each step of it is a BMv2 run (minutes per failure); the failing draws are
    # printed as they are, and both targets' outputs as scapy dissections.
    return settings(max_examples=examples, deadline=None,
                    phases=(Phase.explicit, Phase.reuse, Phase.generate),
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow, HealthCheck.data_too_large])


def _open(p4: Path, defines=None):
    from bmv2_tests.differential import Differential
    return Differential(p4, defines)


# ------------------------------------------------------------------------------------------------
# Every program: generated table contents and frames
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: str(p.relative_to(ROOT)))
@_settings(12)
@given(data=st.data())
def test_program_agrees_with_bmv2(program, data):
    diff = _open(program)
    skip = UNWRITABLE.get(program.name, set())
    entries = [e for e in data.draw(S.table_contents(diff.info), label="entries")
               if e.action.action not in skip]
    diff.insert(entries, strict=False)
    for group, replicas in MULTICAST.items():
        diff.set_mcast_group(group, replicas)
    frames = data.draw(st.lists(st.tuples(st.sampled_from(IN_PORTS), S.any_frame()),
                                min_size=1, max_size=10), label="frames")
    for port, frame in frames:
        diff.send(port, frame)
    diff.check_state()


# ------------------------------------------------------------------------------------------------
# The malformed-frame cases of the embedded target's fuzz test, on l3fwd with its routes
# ------------------------------------------------------------------------------------------------
L3FWD = ROOT / "tests" / "softswitch" / "programs" / "l3fwd.p4"


def _route(addr: int, mac: int, port: int) -> TableEntry:
    return TableEntry("MyIngress.ipv4_lpm", (Lpm(addr, 32),),
                      ActionCall("MyIngress.ipv4_forward", (mac, port)))


def _l3fwd_valid() -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    return bytes(Ether(dst="00:00:00:00:00:fe", src="00:00:00:00:01:01")
                 / IP(src="10.0.1.1", dst="10.0.2.2", ttl=64) / UDP(sport=4321, dport=4321)
                 / b"template payload")


VALID = _l3fwd_valid()
ETH, IPV4_TOTAL_LEN = 14, 16
hostile = st.one_of(
    st.binary(max_size=128),
    st.integers(0, len(VALID)).map(lambda n: VALID[:n]),
    st.lists(st.integers(0, len(VALID) - 1), min_size=1, max_size=6).map(
        lambda pos: bytes(b ^ (0xFF if i in pos else 0) for i, b in enumerate(VALID))),
    st.integers(0, 0xFF).map(lambda b: VALID[:ETH] + bytes([b]) + VALID[ETH + 1:]),
    st.integers(0, 0xFFFF).map(lambda n: VALID[:IPV4_TOTAL_LEN] + n.to_bytes(2, "big")
                               + VALID[IPV4_TOTAL_LEN + 2:]),
    st.binary(min_size=1, max_size=64).map(lambda tail: VALID + tail),
).map(S.padded)


@_settings(25)
@given(burst=st.lists(hostile, min_size=1, max_size=12))
def test_malformed_frames_agree_with_bmv2(burst):
    diff = _open(L3FWD)
    diff.insert([_route(0x0A000101, 0x000000000101, 1), _route(0x0A000202, 0x000000000202, 2)])
    for frame in burst:
        diff.send(1, frame)
    assert diff.send(1, VALID), "the valid frame after the burst is routed by both"
    diff.check_state()


# ------------------------------------------------------------------------------------------------
# hina.p4: jobs and worker traffic
# ------------------------------------------------------------------------------------------------
OPS = (P.Op.SUM, P.Op.LUT_SUM, P.Op.MAX, P.Op.OR, P.Op.BLOCK_SUM, P.Op.BLOCK_SKIP)
#: Ingress ports of forged frames: the ports of a generated job's workers (1..4) and one outside.
FORGERY_PORTS = (1, 2, 3, 4, 5)


@st.composite
def hina_job(draw, words: int):
    n_workers = draw(st.integers(1, 4))
    n_slots = draw(st.integers(1, 3))
    lut_id = draw(st.sampled_from([0, 1]))
    return J.make_job(1, n_workers, n_slots=n_slots, reg_base=draw(st.integers(0, 2)),
                      words=words, lut_id=lut_id, generation=draw(st.integers(1, 3)))


@st.composite
def hina_frame(draw, job, words: int) -> tuple[int, bytes]:
    """A worker's frame into its port: a contribution (any op, slot, pool, seq, a generation
    that mostly matches the job's), mutated at times; a stranger's frame; or a forgery: a
    worker's frame on another ingress port or with another source MAC (admission drops it as
    WRONG_PORT)."""
    op = draw(st.sampled_from(OPS))
    worker = draw(st.integers(0, len(job.workers) - 1))
    count = 2 * words if op == P.Op.LUT_SUM else words
    top = P.THC_TABLE_SIZE - 1 if op == P.Op.LUT_SUM else (1 << 32) - 1
    base = draw(st.sampled_from([0, 1, top] + ([] if op == P.Op.LUT_SUM else [1 << 31])))
    values = np.full(count, base, dtype=np.int64)
    values[draw(st.integers(0, count - 1))] = draw(st.integers(0, top))
    generation = draw(S.hina_generation(job.generation))
    where = dict(slot=draw(st.integers(0, job.n_slots)), pool=draw(st.integers(0, 1)),
                 seq=draw(st.integers(0, 3)), generation=generation)
    if op in (P.Op.BLOCK_SUM, P.Op.BLOCK_SKIP):     # block-sparse (v4): block header first
        block = draw(st.integers(0, 3))
        nxt = draw(st.sampled_from([block + 1, block + 2, P.BLOCK_END, block]))
        data = J.block_contribution(job, worker, block, nxt,
                                    values if op == P.Op.BLOCK_SUM else None, **where)
    else:
        data = J.contribution(job, worker, op, values, **where)
    port = job.workers[worker].port
    kind = draw(st.integers(0, 9))
    if kind == 0:                                             # now and then, a stranger
        stranger = J.worker_address(8)
        data = J.frame(stranger, data[42 + P.HEADER_BYTES:], op=op, job_id=job.job_id,
                       generation=generation)
        return stranger.port, data
    if kind == 1:       # a forgery: the worker's headers on another port (of the job or not)
        port = draw(st.sampled_from([p for p in FORGERY_PORTS if p != port]))
    elif kind == 2:     # a forgery: the worker's IPv4 and UDP port with another MAC
        data = data[:6] + draw(S.value(48)).to_bytes(6, "big") + data[12:]
    return port, draw(S.mutated(st.just(data)).map(S.padded))


def _hina_run(data, words: int) -> None:
    diff = _open(HINA_P4, {"HINA_WORDS": words})
    job = data.draw(hina_job(words), label="job")
    diff.insert(pipeline.job_entries(job))
    group, replicas = pipeline.multicast_group(job)
    diff.set_mcast_group(group, replicas)
    if job.lut_id:
        diff.insert(pipeline.lut_entries(job.lut_id, pipeline.THC_DEFAULT_TABLE, words))
    for step in range(data.draw(st.integers(1, 16), label="steps")):
        if step and data.draw(st.integers(0, 7), label=f"bump? {step}") == 0:
            # The controller moves the job to another generation (its workers restarted).
            job = dataclasses.replace(job, generation=data.draw(
                st.sampled_from([P.next_generation(job.generation), 1, P.MAX_GENERATION]),
                label=f"generation {step}"))
            diff.modify(pipeline.admission_entries(job))
        port, frame = data.draw(hina_frame(job, words), label=f"frame {step}")
        diff.send(port, frame)
    diff.check_state()


@_settings(15)
@given(data=st.data())
def test_hina_64_words_agrees_with_bmv2(data):
    _hina_run(data, 64)


@_settings(5)
@given(data=st.data())
def test_hina_128_words_agrees_with_bmv2(data):
    _hina_run(data, 128)


def test_a_complete_round_is_compared_frame_by_frame():
    """Not left to chance: a full SUM round of three workers (multicast result), its
    retransmission (unicast result) and a stale frame, through both targets."""
    diff = _open(HINA_P4, {"HINA_WORDS": 64})
    job = J.make_job(1, 3, n_slots=2)
    diff.insert(pipeline.job_entries(job))
    diff.set_mcast_group(*pipeline.multicast_group(job))
    frames = [J.contribution(job, w, P.Op.SUM, np.arange(64) * (w + 1) - 50) for w in range(3)]
    assert [diff.send(job.workers[w].port, f) for w, f in enumerate(frames[:2])] == [{}, {}]
    result = diff.send(job.workers[2].port, frames[2])
    assert sorted(result) == [1, 2, 3]
    assert list(diff.send(job.workers[0].port, frames[0])) == [1]      # retransmission: unicast
    diff.check_state()


# ------------------------------------------------------------------------------------------------
# Range entries whose bounds, written in the fewest bytes, look like a full range
# ------------------------------------------------------------------------------------------------
RANGE_TAGS = ROOT / "tests" / "softswitch" / "programs" / "range_tags.p4"


def test_range_bounds_that_look_full_in_their_own_bytes():
    """simple_switch_grpc's P4Runtime server (PI) refuses a range whose bounds, as sent, are all
    zeros and all ones for their own length (its "don't care" check): canonical, [0, 255] on the
    16-bit EtherType (b'\\x00', b'\\xff') was refused while the embedded target took it (the
    explore profile found it). The client pads range bounds to the field's bytes; here such
    entries, a full range (left out: don't care) and ranges on a 12-bit field go to both
    targets, and frames at and around every bound are compared."""
    diff = _open(RANGE_TAGS)

    def ether(low, high, port, mark, priority):
        return TableEntry("RangeIngress.ether_type_ranges", (Range(low, high),),
                          ActionCall("RangeIngress.mark_ether_type", (port, mark)), priority)

    def tag(low, high, port, priority):
        return TableEntry("RangeIngress.tag_id_ranges", (Range(low, high),),
                          ActionCall("RangeIngress.mark_tag", (port, port)), priority)

    entries = [ether(0, 0xFF, 1, 0xA, 3), ether(0x100, 0xFFFE, 2, 0xB, 2),
               ether(0, 0xFFFF, 3, 0xC, 1),                       # full: sent as don't care
               tag(0, 0xFF, 1, 4), tag(0, 0x1FF, 2, 3), tag(0x200, 0xFFE, 3, 2),
               tag(0, 0xFFF, 4, 1)]                               # full on 12 bits: don't care
    assert diff.insert(entries) == len(entries)
    head = bytes.fromhex("0000000000fe" "000000000101")
    seen = set()
    for ether_type in (0, 0xFF, 0x100, 0x1FF, 0x8100 - 1, 0xFFFE, 0xFFFF):
        out = diff.send(1, head + ether_type.to_bytes(2, "big") + bytes(46))
        seen |= set(out)
    for tag_id in (0, 0xFF, 0x100, 0x1FF, 0x200, 0xFFE, 0xFFF):
        tci = (5 << 12 | tag_id).to_bytes(2, "big")
        out = diff.send(1, head + b"\x81\x00" + tci + b"\x08\x00" + bytes(44))
        seen |= set(out)
    assert seen == {1, 2, 3, 4}, seen           # every entry but the shadowed ones took frames
