"""Count-sketch aggregation: dense (worker sketches summed) and in-switch sketching."""
from __future__ import annotations

import json

import numpy as np
import pytest

from hina import hashing
from hina import protocol as P
from hina.pipeline import JobSpec, sketch_register
from bmv2_tests.conftest import TEST_WORDS
from hina.testing.frames import (contribution, frame, install, make_job, reason_count, send,
                             worker_address)

ROWS = P.SKETCH_ROWS


def count_sketch(seed: int, rows: int, columns: int, indices, values) -> np.ndarray:
    """numpy reference: rows x columns int64 sketch of the sparse vector (indices, values)."""
    sk = np.zeros((rows, columns), dtype=np.int64)
    idx = np.asarray(indices, dtype=np.uint64)
    for r in range(rows):
        h = hashing.sketch_hash_numpy(seed, r, idx).astype(np.int64)
        np.add.at(sk[r], h & (columns - 1), hashing.sign_of(h) * np.asarray(values))
    return sk


def sparse_gradient(rng, dim, nnz):
    idx = rng.choice(dim, nnz, replace=False)
    return idx, rng.integers(-5000, 5000, nnz)


# --------------------------------------------------------------------------------------------
# Dense: workers sketch locally, the switch SUMs counters and ORs nonzero bitmaps
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n_workers", [2, 4])
def test_dense_sketch_sum_is_bit_exact(target, n_workers):
    dim, nnz, seed, columns = 2000, 60, 0x5EED, TEST_WORDS
    job = make_job(1, n_workers, n_slots=ROWS + 1)
    install(target, job)
    rng = np.random.default_rng(n_workers)
    grads = [sparse_gradient(rng, dim, nnz) for _ in range(n_workers)]
    sketches = [count_sketch(seed, ROWS, columns, i, v) for i, v in grads]
    bitmaps = []
    for idx, _ in grads:
        bits = np.zeros(TEST_WORDS * 32, dtype=np.uint8)
        bits[idx] = 1
        bitmaps.append(np.packbits(bits, bitorder="little").view("<u4").astype(np.int64))
    results = {}
    for w in range(n_workers):
        for r in range(ROWS):                  # one SUM slot per sketch row
            for reply in send(target, job, w, contribution(job, w, P.Op.SUM, sketches[w][r],
                                                            slot=r, seq=r)):
                results.setdefault(("row", r), []).append(reply)
        for reply in send(target, job, w, contribution(job, w, P.Op.OR, bitmaps[w],
                                                        slot=ROWS, seq=ROWS)):
            results.setdefault("bitmap", []).append(reply)
    total = np.zeros(dim, dtype=np.int64)
    for idx, v in grads:
        total[idx] += v
    summed = count_sketch(seed, ROWS, columns, np.nonzero(total)[0], total[np.nonzero(total)])
    for r in range(ROWS):
        replies = results[("row", r)]
        assert len(replies) == n_workers
        for reply in replies:
            # Homomorphic: the switch's sum of sketches is the sketch of the summed gradient.
            np.testing.assert_array_equal(reply.words(), sum(s[r] for s in sketches))
            np.testing.assert_array_equal(reply.words(), summed[r])
    got = results["bitmap"][0].words(">u4").astype(np.int64)
    np.testing.assert_array_equal(got, np.bitwise_or.reduce(np.stack(bitmaps), axis=0))
    support = np.nonzero(np.unpackbits(got.astype("<u4").view(np.uint8), bitorder="little"))[0]
    np.testing.assert_array_equal(support, np.unique(np.concatenate([i for i, _ in grads])))


# --------------------------------------------------------------------------------------------
# In-switch sketching: PAIRS streams, HARVEST, RESET
# --------------------------------------------------------------------------------------------
def pairs_payload(indices, values) -> bytes:
    if len(indices) > P.PAIRS_PER_PACKET:
        raise ValueError("too many pairs for one packet")
    buf = np.zeros((P.PAIRS_PER_PACKET, 2), dtype=">u4")
    buf[:len(indices), 0] = np.asarray(indices, dtype=np.uint64)
    buf[:len(indices), 1] = np.asarray(values, dtype=np.int64).astype(np.uint32)
    return buf.tobytes()


def pairs_frame(job: JobSpec, worker: int, seq: int, indices, values) -> bytes:
    return frame(job.workers[worker], pairs_payload(indices, values),
                 msg_type=P.MsgType.PAIRS, job_id=job.job_id, seq=seq, generation=job.generation)


def harvest(target, job: JobSpec, worker: int = 0) -> np.ndarray:
    """Read every counter of the job's sketch through HARVEST requests (the TNA program, whose
    HARVEST is the control plane's: through register reads)."""
    if not target.layout.switch_harvest:
        return np.array([[target.register_read(sketch_register(r), job.sketch_base + c)
                          for c in range(job.sketch_columns)] for r in range(ROWS)],
                        dtype=np.uint32).view(np.int32).astype(np.int64)
    blocks = job.sketch_columns // TEST_WORDS
    out = np.zeros((ROWS, job.sketch_columns), dtype=np.int64)
    for r in range(ROWS):
        for b in range(blocks):
            payload = bytes([r, 0]) + b.to_bytes(2, "big")
            replies = send(target, job, worker, frame(job.workers[worker], payload,
                                                      msg_type=P.MsgType.HARVEST,
                                                      job_id=job.job_id, seq=1000 + b,
                                                      generation=job.generation), expected=1)
            assert len(replies) == 1
            reply = replies[0]
            assert reply.msg_type == P.MsgType.HARVEST_DATA and reply.ip_ok
            assert reply.port == job.workers[worker].port and reply.seq == 1000 + b
            assert reply.payload[:4] == payload
            out[r, b * TEST_WORDS:(b + 1) * TEST_WORDS] = np.frombuffer(reply.payload[4:], ">i4")
    return out


def reset(target, job: JobSpec) -> None:
    if not target.layout.switch_harvest:          # TNA: the control plane's register writes
        for r in range(ROWS):
            for c in range(job.sketch_columns):
                target.register_write(sketch_register(r), job.sketch_base + c, 0)
        return
    for r in range(ROWS):
        for b in range(job.sketch_columns // TEST_WORDS):
            payload = bytes([r, 0]) + b.to_bytes(2, "big")
            replies = send(target, job, 0, frame(job.workers[0], payload, msg_type=P.MsgType.RESET,
                                                 job_id=job.job_id, generation=job.generation),
                           expected=1)
            assert len(replies) == 1 and replies[0].msg_type == P.MsgType.RESET


def sketch_job(job_id=1, n_workers=3, columns=4 * TEST_WORDS, seed=0xC0FFEE, **kw) -> JobSpec:
    return make_job(job_id, n_workers, sketch_columns=columns, sketch_seed=seed, **kw)


def test_in_switch_sketch_bit_exact_with_retransmissions(target):
    job = sketch_job()
    install(target, job)
    rng = np.random.default_rng(11)
    dim = 100_000
    streams = [sparse_gradient(rng, dim, 40) for _ in range(3)]
    P_ = P.PAIRS_PER_PACKET
    for w, (idx, val) in enumerate(streams):
        chunks = [(idx[k:k + P_], val[k:k + P_]) for k in range(0, len(idx), P_)]
        for seq, (ci, cv) in enumerate(chunks):
            replies = send(target, job, w, pairs_frame(job, w, seq, ci, cv))
            assert len(replies) == 1
            ack = replies[0]
            assert ack.msg_type == P.MsgType.PAIRS_ACK and ack.seq == seq and ack.ip_ok
            assert ack.port == job.workers[w].port and ack.dst_port == job.workers[w].udp_port
        # A retransmission of an applied packet is acknowledged, not applied again.
        replies = send(target, job, w, pairs_frame(job, w, 0, *chunks[0]))
        assert len(replies) == 1 and replies[0].seq == 0
        # A packet ahead of the stream is dropped (go-back-N).
        assert send(target, job, w, pairs_frame(job, w, len(chunks) + 1, *chunks[0])) == []
    assert reason_count(target, P.DropReason.OUT_OF_ORDER) == 3
    expected = sum(count_sketch(job.sketch_seed, ROWS, job.sketch_columns, i, v)
                   for i, v in streams)
    np.testing.assert_array_equal(harvest(target, job), expected)
    # HARVEST is idempotent; RESET zeroes.
    np.testing.assert_array_equal(harvest(target, job, worker=2), expected)
    reset(target, job)
    assert not harvest(target, job).any()


def test_in_switch_sketch_matches_reference_vectors(target):
    """The switch's hash agrees with hina/testdata/sketch_hash_vectors.json (the contract file),
    independently of hina.hashing: one job per seed, each pair adds 1 to bucket(h) * sign(h)."""
    vectors = json.loads(hashing.VECTORS_PATH.read_text())["vectors"]
    columns = 1024
    seeds = sorted({v["seed"] for v in vectors})
    for k, seed in enumerate(seeds):
        job = JobSpec(job_id=10 + k, workers=(worker_address(k),), n_slots=1, reg_base=k,
                      sketch_base=k * columns, sketch_columns=columns, sketch_seed=seed,
                      pair_stream_base=k, words=TEST_WORDS)
        install(target, job)
        mine = [v for v in vectors if v["seed"] == seed]
        indices = sorted({v["index"] for v in mine})
        expected = np.zeros((ROWS, columns), dtype=np.int64)
        for v in mine:
            if v["row"] < ROWS:
                expected[v["row"], v["bucket"][str(columns)]] += v["sign"]
        for seq, start in enumerate(range(0, len(indices), P.PAIRS_PER_PACKET)):
            chunk = indices[start:start + P.PAIRS_PER_PACKET]
            assert len(send(target, job, 0, pairs_frame(job, 0, seq, chunk, [1] * len(chunk)))) == 1
        got = harvest(target, job)
        # Padding pairs (index 0, value 0) add nothing.
        np.testing.assert_array_equal(got, expected)


def test_harvest_outside_the_sketch_is_bad_slot(target):
    job = sketch_job(columns=TEST_WORDS)
    install(target, job)
    for row, block in ((ROWS, 0), (0, 1)):
        payload = bytes([row, 0]) + block.to_bytes(2, "big")
        assert send(target, job, 0, frame(job.workers[0], payload, msg_type=P.MsgType.HARVEST,
                                          job_id=job.job_id)) == []
    assert reason_count(target, P.DropReason.BAD_SLOT) == 2


def test_sketches_of_two_jobs_are_isolated(target):
    a = sketch_job(1, 2, columns=TEST_WORDS, seed=1, sketch_base=0)
    b = sketch_job(2, 2, columns=TEST_WORDS, seed=1, sketch_base=TEST_WORDS, first_worker=2,
                   reg_base=4, pair_stream_base=2)
    install(target, a)
    install(target, b)
    send(target, a, 0, pairs_frame(a, 0, 0, [1, 2, 3], [10, 20, 30]))
    assert not harvest(target, b).any()
    np.testing.assert_array_equal(harvest(target, a),
                                  count_sketch(1, ROWS, TEST_WORDS, [1, 2, 3], [10, 20, 30]))


def test_job_without_sketch_cannot_touch_counters(target):
    """A job with no sketch columns owns no counters: PAIRS and HARVEST are BAD_JOB."""
    owner = sketch_job(1, 1, columns=TEST_WORDS, seed=3)
    other = make_job(2, 1, first_worker=1, reg_base=4, pair_stream_base=1)
    install(target, owner)
    install(target, other)
    send(target, owner, 0, pairs_frame(owner, 0, 0, [5], [9]))
    before = harvest(target, owner)
    assert send(target, other, 0, pairs_frame(other, 0, 0, [5], [1000])) == []
    payload = bytes([0, 0, 0, 0])
    assert send(target, other, 0, frame(other.workers[0], payload, msg_type=P.MsgType.HARVEST,
                                        job_id=other.job_id)) == []
    assert reason_count(target, P.DropReason.BAD_JOB) == 2
    np.testing.assert_array_equal(harvest(target, owner), before)
