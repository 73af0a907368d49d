"""The two programs against each other: p4/hina.p4 and the TNA program (p4/tna/hina_tna.p4), both
on the embedded target at 64 words, given the same job and the same worker traffic, send the
same bytes out of the same ports and count the same drop reasons.

The traffic is the protocol's (docs/protocol.md): workers with a self-clocked window of
``n_slots`` chunks, each chunk a random op (SUM, MAX, OR, LUT_SUM) and values, interleaved at
random, retransmitting what went unanswered, with duplicated frames and lost frames and replies.
Within it the programs must agree byte for byte (a RESULT's header, lanes, addresses, UDP
checksum; a NOTICE; the DUPLICATE and STALE_* counts). What the TNA program is known to do
otherwise (``bmv2_tests/conftest.py``, ``TNA_UNSUPPORTED``) lies outside it: SUM values stay far
from int32's bounds, every chunk's LUT is installed, and no copy arrives after its worker moved
on (a frame is delivered at once or lost).

Block-sparse rounds (BLOCK_SUM / BLOCK_SKIP, the TNA program's block-sparse profile, as
``EmbeddedTnaTarget`` loads it) are compared the same way, and so are frames with one defect
each (``DEFECTS``) between the protocol's: the same reason counted, the same bytes out.

The other dataplane tests check each program against expected values; this one finds where the
two programs differ in what those tests do not pin down.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from hina import blocksparse as B
from hina import framing as F
from hina import protocol as P
from bmv2_tests.conftest import TEST_DEFINES, TEST_WORDS
from hina.testing.frames import (contribution, install, install_lut, make_job, parse, reason_count,
                                 set_generation)
from hina.testing.blockrun import run_block_sparse, sparse_vectors
from hina.testing.targets import EmbeddedTarget, EmbeddedTnaTarget

OPS = (P.Op.SUM, P.Op.MAX, P.Op.OR, P.Op.LUT_SUM)
LUT_ID = 1


def _values(rng: np.random.Generator, op: P.Op) -> np.ndarray:
    if op == P.Op.LUT_SUM:
        return rng.integers(0, P.THC_TABLE_SIZE, 2 * TEST_WORDS)        # 4-bit table indices
    if op == P.Op.SUM:
        return rng.integers(-(1 << 24), 1 << 24, TEST_WORDS)             # no partial sum near a bound
    return rng.integers(0, 1 << 32, TEST_WORDS)                          # MAX, OR: any word


class _Worker:
    """A worker as the protocol has it: at most ``n_slots`` chunks past its oldest unanswered."""

    def __init__(self, index: int, n_slots: int, chunks: int):
        self.index, self.n_slots, self.chunks = index, n_slots, chunks
        self.next_seq = 0
        self.done: set[int] = set()

    def can_send_new(self) -> bool:
        oldest = min((s for s in range(self.chunks) if s not in self.done), default=self.chunks)
        return self.next_seq < self.chunks and self.next_seq < oldest + self.n_slots

    def unanswered(self) -> list[int]:
        return [s for s in range(self.next_seq) if s not in self.done]


def _load(programs, job) -> None:
    """Both programs afresh (zero registers and counters), the job and its LUT installed."""
    for t in programs:
        t.load(defines=TEST_DEFINES)
        install(t, job)
        install_lut(t, LUT_ID, words=TEST_WORDS)


def _chunks(rng: np.random.Generator, n_workers: int, chunks: int):
    """Each chunk's op, and each worker's values for it."""
    ops = [OPS[k] for k in rng.integers(0, len(OPS), chunks)]
    return ops, [[_values(rng, ops[c]) for _ in range(n_workers)] for c in range(chunks)]


def _run(programs, seed: int, n_workers: int, n_slots: int, chunks: int):
    """A run's start: its generator, the job (loaded into both programs), each chunk's op and
    values, the workers, and which worker each switch port is."""
    rng = np.random.default_rng(seed)
    job = make_job(1, n_workers, n_slots=n_slots, lut_id=LUT_ID)
    _load(programs, job)
    ops, values = _chunks(rng, n_workers, chunks)
    workers = [_Worker(w, n_slots, chunks) for w in range(n_workers)]
    return rng, job, ops, values, workers, {a.port: w for w, a in enumerate(job.workers)}


def _protocol_frame(rng: np.random.Generator, workers: list, job, ops, values):
    """A random worker's next frame as the protocol has it: a new chunk inside its window (most
    of the time) or a retransmission of an unanswered one; (worker, seq, flags, frame), or None
    when the drawn worker has nothing to send."""
    w = workers[int(rng.integers(len(workers)))]
    if w.can_send_new() and rng.random() < 0.7:
        seq, flags = w.next_seq, 0
        w.next_seq += 1
    elif w.unanswered():
        seq, flags = int(rng.choice(w.unanswered())), P.Flag.RETRANSMIT
    else:
        return None
    slot, pool = P.slot_and_pool(seq, job.n_slots)
    frame = contribution(job, w.index, ops[seq], values[seq][w.index], slot=slot, pool=pool,
                         seq=seq, flags=flags)
    return w, seq, flags, frame


def _send_both(programs, port: int, frame: bytes, what: str) -> list:
    """``frame`` into ``port`` of both programs; their outputs must be the same bytes."""
    v1, tna = (t.send(port, frame) for t in programs)
    assert tna == v1, (f"{what}: v1model sent {_describe(v1)}; TNA sent {_describe(tna)}; first "
                       f"differing byte {_first_difference(v1, tna)}")
    return v1


def _describe(outputs) -> list:
    """(port, message type, flags, count, seq, length) of each frame a program sent."""
    described = []
    for port, frame in outputs:
        r = parse(port, frame)
        described.append((port, P.MsgType(r.msg_type).name, r.flags, r.count, r.seq, r.length))
    return described


def _first_difference(a, b):
    """(frame index, byte offset) where two programs' outputs first differ, or None."""
    for k, ((pa, fa), (pb, fb)) in enumerate(zip(a, b)):
        if pa != pb or fa != fb:
            return k, next((i for i, (x, y) in enumerate(zip(fa, fb)) if x != y), min(len(fa), len(fb)))
    return None if len(a) == len(b) else (min(len(a), len(b)), 0)


@pytest.fixture(scope="module")
def programs():
    """(v1model, TNA) embedded targets; each example loads its job into both afresh."""
    pair = (EmbeddedTarget(), EmbeddedTnaTarget())
    yield pair
    for t in pair:
        t.close()


@settings(max_examples=12, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), n_workers=st.integers(1, 4), n_slots=st.integers(2, 3),
       chunks=st.integers(1, 8), loss=st.sampled_from([0.0, 0.15]),
       bump_at=st.one_of(st.none(), st.integers(0, 40)))
def test_both_programs_send_the_same_bytes_and_count_the_same_drops(programs, seed, n_workers,
                                                                    n_slots, chunks, loss, bump_at):
    """``bump_at``: at that step the controller moves the job to its next generation (its workers
    restarted): each worker's next frame is still of the old one (a STALE_GENERATION NOTICE
    back), then the workers start their chunks again in the new one, on slots the old
    generation left filled."""
    rng, job, ops, values, workers, port_to_worker = _run(programs, seed, n_workers, n_slots, chunks)
    stale: set[int] = set()          # workers whose next frame is of the old generation
    for step in range(4000):
        if step == bump_at:
            old_job = job
            for t in programs:
                job = set_generation(t, old_job, P.next_generation(old_job.generation))
            stale = set(range(n_workers))
            workers = [_Worker(w, n_slots, chunks) for w in range(n_workers)]
            event("generation bumped")
        if all(len(w.done) == chunks for w in workers) and not stale:
            break
        if stale:
            w = int(rng.choice(sorted(stale)))
            stale.discard(w)
            frame = contribution(old_job, w, ops[0], values[0][w], seq=0)
            out = _send_both(programs, job.workers[w].port, frame,
                             f"step {step}: worker {w}'s frame of the old generation")
            assert [parse(p, f).msg_type for p, f in out] == [P.MsgType.NOTICE]
            continue
        drawn = _protocol_frame(rng, workers, job, ops, values)
        if drawn is None:
            continue
        w, seq, flags, frame = drawn
        for _ in range(2 if rng.random() < 0.1 else 1):                  # a duplicated frame
            if rng.random() < loss:                                      # lost on the way up
                continue
            out = _send_both(programs, job.workers[w.index].port, frame,
                             f"step {step}: worker {w.index} chunk {seq} ({ops[seq].name}, flags {flags})")
            for out_port, reply_frame in out:
                reply = parse(out_port, reply_frame)
                assert reply.msg_type == P.MsgType.RESULT, _describe(out)
                if rng.random() >= loss:                                 # the reply arrives
                    workers[port_to_worker[out_port]].done.add(reply.seq)
    else:
        pytest.fail("no progress in 4000 steps")
    v1_reasons, tna_reasons = ({r.name: reason_count(t, r) for r in P.DropReason} for t in programs)
    assert tna_reasons == v1_reasons


@settings(max_examples=8, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), n_workers=st.integers(1, 4), n_slots=st.integers(1, 2),
       n_blocks=st.integers(1, 6), density=st.sampled_from([0.0, 0.3, 1.0]))
def test_both_programs_agree_on_block_sparse_rounds(programs, seed, n_workers, n_slots, n_blocks,
                                                    density):
    """Block-sparse runs (BLOCK_SUM / BLOCK_SKIP rounds, ``hina.testing.blockrun``: lost
    results, duplicates, a random order) through both programs, every output byte for byte, and
    the same drop counts; values far from int32's bounds (BLOCK_SUM saturates on TNA)."""
    rng = np.random.default_rng(seed)
    job = make_job(1, n_workers, n_slots=n_slots)
    _load(programs, job)
    qs = sparse_vectors(rng, n_workers, n_blocks, TEST_WORDS, density)
    run = run_block_sparse(lambda port, frame: _send_both(programs, port, frame, "block-sparse"),
                           job, qs, TEST_WORDS, rng, lose=0.3, duplicate=0.3)
    np.testing.assert_array_equal(run.result, B.reference_sum(qs))
    v1_reasons, tna_reasons = ({r.name: reason_count(t, r) for r in P.DropReason} for t in programs)
    assert tna_reasons == v1_reasons


def _with_message(frame: bytes, change) -> bytes:
    """``frame`` rebuilt around ``change(its UDP payload)``, with right IPv4 and UDP checksums
    (the defect is the message's, not a checksum's)."""
    parsed = F.parse_frame(frame)
    return F.build_frame(parsed.src, parsed.dst, change(parsed.message))


def _rewrite_hina(frame: bytes, **fields) -> bytes:
    """``frame`` with HINA header fields replaced."""
    def change(message: bytes) -> bytes:
        h = {**P.unpack_header(message), **fields}
        return P.pack_header(h["msg_type"], h["op"], flags=h["flags"], count=h["count"],
                             job_id=h["job_id"], pool=h["pool"], slot=h["slot"], seq=h["seq"],
                             generation=h["generation"], version=h["version"],
                             reserved=h["reserved"], wrap=True) + message[P.HEADER_BYTES:]
    return _with_message(frame, change)


#: One defect each, applied to a worker's well-formed frame: (name, function of (frame, job,
#: rng) -> (ingress port offset, frame)). Every program must drop it for the same reason (or
#: answer the same NOTICE) and change nothing else.
DEFECTS = {
    "unknown job": lambda f, job, rng: (0, _rewrite_hina(f, job_id=job.job_id + 1)),
    "slot out of range": lambda f, job, rng: (0, _rewrite_hina(f, slot=job.n_slots)),
    "next generation": lambda f, job, rng: (0, _rewrite_hina(f, generation=P.next_generation(job.generation))),
    "version": lambda f, job, rng: (0, _rewrite_hina(f, version=P.VERSION + 1)),
    "reserved": lambda f, job, rng: (0, _rewrite_hina(f, reserved=1)),
    "switch-only type": lambda f, job, rng: (0, _rewrite_hina(f, msg_type=P.MsgType.RESULT)),
    "unknown op": lambda f, job, rng: (0, _rewrite_hina(f, op=15)),
    "short by a word": lambda f, job, rng: (0, _with_message(f, lambda m: m[:-4])),
    "long by a word": lambda f, job, rng: (0, _with_message(f, lambda m: m + bytes(4))),
    "UDP checksum": lambda f, job, rng: (0, f[:F.FRAME_HEADER_BYTES - 2]
                                         + bytes([f[F.FRAME_HEADER_BYTES - 2] ^ 0x10])
                                         + f[F.FRAME_HEADER_BYTES - 1:]),
    "IPv4 checksum": lambda f, job, rng: (0, f[:24] + bytes([f[24] ^ 0x01]) + f[25:]),
    "another port": lambda f, job, rng: (len(job.workers) + 2, f),
    "another source MAC": lambda f, job, rng: (0, f[:6] + bytes.fromhex("02aabbccddee") + f[12:]),
    "a stranger's address": lambda f, job, rng: (0, F.build_frame(
        F.Endpoint.make(0x02AA00000001, 0x0A0001F0, 40100), F.parse_frame(f).dst,
        F.parse_frame(f).message)),
}


@settings(max_examples=10, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), n_workers=st.integers(1, 4), n_slots=st.integers(2, 3),
       chunks=st.integers(1, 6))
def test_both_programs_drop_each_defect_for_the_same_reason(programs, seed, n_workers, n_slots,
                                                             chunks):
    """Protocol traffic as above, and between its frames copies of them with one defect each
    (``DEFECTS``: a field out of range, a length, a checksum, a forged port, MAC or address):
    both programs send the same bytes for every frame, count the defective ones under the same
    reason, step by step, and the real rounds still complete."""
    rng, job, ops, values, workers, port_to_worker = _run(programs, seed, n_workers, n_slots, chunks)
    names = sorted(DEFECTS)
    for step in range(4000):
        if all(len(w.done) == chunks for w in workers):
            break
        drawn = _protocol_frame(rng, workers, job, ops, values)
        if drawn is None:
            continue
        w, _, _, frame = drawn
        port = job.workers[w.index].port
        if rng.random() < 0.4:                                           # a defective copy first
            name = names[int(rng.integers(len(names)))]
            offset, bad = DEFECTS[name](frame, job, rng)
            before = [{r: reason_count(t, r) for r in P.DropReason} for t in programs]
            out = _send_both(programs, port + offset, bad, f"step {step}, {name}")
            assert all(parse(p, f).msg_type == P.MsgType.NOTICE for p, f in out), (name, _describe(out))
            counted = [{r.name: reason_count(t, r) - before[k][r] for r in P.DropReason
                        if reason_count(t, r) != before[k][r]} for k, t in enumerate(programs)]
            assert counted[1] == counted[0], f"step {step}, {name}: v1model {counted[0]}, TNA {counted[1]}"
            assert sum(counted[0].values()) == 1, (name, counted[0])
        for out_port, out in _send_both(programs, port, frame, f"step {step}"):
            workers[port_to_worker[out_port]].done.add(parse(out_port, out).seq)
    else:
        pytest.fail("no progress in 4000 steps")
