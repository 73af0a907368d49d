"""Restarts are seamless: workers of a new generation start again at seq 0 without a register
wipe, and a worker of an old generation learns at once that it is stale (a NOTICE from the
switch raises GenerationChanged) instead of timing out, and never returns a wrong sum."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from hina import protocol as P
from hina.testing.switchjob import WORDS, LocalJob, run_workers
from hina.worker.packetizer import HEADER_DTYPE
from hina.worker.transport import GenerationChanged, JobParams, Transport, TransportError


def _data(rng, n, chunks):
    return [rng.integers(-2**20, 2**20, size=chunks * WORDS - 5, dtype=np.int32)
            for _ in range(n)]


def _exact(results, data):
    expected = np.sum(np.stack(data).astype(np.int64), axis=0)
    for r in results:
        np.testing.assert_array_equal(r, expected)


def test_restarted_workers_aggregate_exactly_in_the_new_generation(program):
    n, n_slots = 3, 4
    job = LocalJob(program, n, n_slots=n_slots)
    rng = np.random.default_rng(5)
    try:
        first = _data(rng, n, 3 * n_slots + 1)            # the first run ends mid-cycle
        results, errors = run_workers(lambda w, t: t.reduce(P.Op.SUM, first[w]),
                                      job.transports())
        assert errors == [None] * n
        _exact(results, first)
        job.set_generation(2)                             # the controller's bump: no reset
        second = _data(rng, n, 2 * n_slots)
        started = time.monotonic()
        restarted = job.transports()                      # new processes: seq 0, generation 2
        assert all(t.next_seq == 0 and t.job.generation == 2 for t in restarted)
        results, errors = run_workers(lambda w, t: t.reduce(P.Op.SUM, second[w]), restarted)
        elapsed = time.monotonic() - started
    finally:
        job.close()
    assert errors == [None] * n
    _exact(results, second)
    assert elapsed < 2.0, f"the restarted job took {elapsed:.2f}s"
    assert sum(t.total.retransmissions for t in restarted) == 0


def test_old_generation_transport_raises_generation_changed_at_once(program):
    n = 2
    job = LocalJob(program, n, n_slots=4)
    try:
        job.set_generation(7)
        stale = Transport(job.links[0], job.params_of(generation=6))   # give_up_s 10 s
        started = time.monotonic()
        with pytest.raises(GenerationChanged) as info:
            stale.reduce(P.Op.SUM, np.arange(3 * WORDS, dtype=np.int32))
        elapsed = time.monotonic() - started
    finally:
        job.close()
    # at once: well inside the 10 s it would retransmit for (margin for a loaded machine)
    assert elapsed < 3.0, f"GenerationChanged after {elapsed:.2f}s"
    exc = info.value
    assert isinstance(exc, TransportError)
    assert exc.generation == 7 and exc.own_generation == 6 and exc.job_id == job.spec.job_id
    assert exc.reason == P.DropReason.STALE_GENERATION
    assert "STALE_GENERATION" in str(exc) and "generation 7" in str(exc)


def test_bump_mid_call_never_returns_a_wrong_sum(program):
    """Workers of generation 1 are mid-call (one worker is missing, so they wait) when the
    controller bumps the generation; the restarted worker 0 of generation 2 sends results of
    the same sequence numbers. The old transports raise GenerationChanged within 1 s of the
    bump and never take a result of generation 2 for theirs."""
    n = 3
    job = LocalJob(program, n, n_slots=2)
    rng = np.random.default_rng(9)
    data = _data(rng, n, 6)
    old = [Transport(job.links[w], job.params, min_rto=0.05, max_rto=0.2) for w in (1, 2)]
    raised_at = [None, None]
    bumped = threading.Event()
    bump_time = []

    def bump():
        time.sleep(0.3)
        job.set_generation(2)
        bump_time.append(time.monotonic())
        bumped.set()

    def body(w, t):
        try:
            return t.reduce(P.Op.SUM, data[w + 1])
        finally:
            raised_at[w] = time.monotonic()

    threading.Thread(target=bump, daemon=True).start()
    try:
        results, errors = run_workers(body, old)          # worker 0 missing: they wait
        assert bumped.wait(5)
        assert all(isinstance(e, GenerationChanged) for e in errors), (results, errors)
        assert all(at - bump_time[0] < 1.0 for at in raised_at), (raised_at, bump_time)
        # Everyone restarts in generation 2 and completes exactly; a late generation-1
        # transport on worker 2's address meanwhile gets NOTICEs, never generation-2 results.
        restarted = job.transports()
        results, errors = run_workers(lambda w, t: t.reduce(P.Op.SUM, data[w]), restarted)
    finally:
        job.close()
    assert errors == [None] * n
    _exact(results, data)


class _ScriptedLink:
    """A link that answers each request with the replies a test scripts (no switch)."""

    def __init__(self, answer):
        self.answer, self.queue, self.sent = answer, [], []

    def send(self, message):
        self.sent.append(bytes(message))
        self.queue += self.answer(bytes(message))

    def recv(self, timeout):
        return self.queue.pop(0) if self.queue else None

    def close(self):
        pass


def _reply(request: bytes, msg_type: P.MsgType, generation: int, payload: bytes = b"",
           op=None) -> bytes:
    h = np.frombuffer(request[:P.HEADER_BYTES], dtype=HEADER_DTYPE).copy()
    h["ver_type"] = (P.VERSION << 4) | int(msg_type)
    h["generation"] = generation
    if msg_type == P.MsgType.RESULT:
        h["count"] = 1                  # the scripted jobs below have one worker
    if op is not None:
        h["op"] = int(op)
    return h.tobytes() + payload


def test_results_of_another_generation_are_ignored_and_counted():
    params = JobParams(job_id=3, n_workers=1, n_slots=2, words=WORDS, generation=4)
    mine = np.arange(WORDS, dtype=np.int32)
    wrong = (-mine).astype(">i4").tobytes()

    def answer(request):
        # First a RESULT of generation 3 with the right seq and a wrong sum, then the real one.
        return [_reply(request, P.MsgType.RESULT, 3, wrong),
                _reply(request, P.MsgType.RESULT, 4, mine.astype(">i4").tobytes())]

    t = Transport(_ScriptedLink(answer), params)
    np.testing.assert_array_equal(t.reduce(P.Op.SUM, mine), mine)
    assert t.last.other_generation == 1 and t.last.results == 1


def test_results_without_one_contribution_per_worker_are_never_delivered():
    """A RESULT whose contributor count is not the job's worker count (a slot copy that took a
    worker's contribution twice) is ignored and counted; the real result is taken."""
    params = JobParams(job_id=3, n_workers=1, n_slots=2, words=WORDS, generation=4)
    mine = np.arange(WORDS, dtype=np.int32)
    doubled = (2 * mine).astype(">i4").tobytes()

    def answer(request):
        bad = np.frombuffer(_reply(request, P.MsgType.RESULT, 4), dtype=HEADER_DTYPE).copy()
        bad["count"] = 2
        return [bad.tobytes() + doubled,
                _reply(request, P.MsgType.RESULT, 4, mine.astype(">i4").tobytes())]

    t = Transport(_ScriptedLink(answer), params)
    np.testing.assert_array_equal(t.reduce(P.Op.SUM, mine), mine)
    assert t.last.bad_count == 1 and t.last.results == 1


def test_notice_of_our_own_generation_is_not_a_generation_change():
    """A NOTICE carrying this worker's own generation answers someone else's stale packet (an
    earlier process on the same address): counted, not raised."""
    params = JobParams(job_id=3, n_workers=1, n_slots=2, words=WORDS, generation=4)
    mine = np.arange(WORDS, dtype=np.int32)

    def answer(request):
        return [_reply(request, P.MsgType.NOTICE, 4, op=P.DropReason.STALE_GENERATION),
                _reply(request, P.MsgType.RESULT, 4, mine.astype(">i4").tobytes())]

    t = Transport(_ScriptedLink(answer), params)
    np.testing.assert_array_equal(t.reduce(P.Op.SUM, mine), mine)
    assert t.last.notices == 1


def test_job_params_generation_range():
    assert JobParams(job_id=1, n_workers=1, n_slots=1).generation == 1
    for bad in (0, P.MAX_GENERATION + 1):
        with pytest.raises(ValueError, match="generation"):
            JobParams(job_id=1, n_workers=1, n_slots=1, generation=bad)


# ------------------------------------------------------------------------------------------------
# allreduce_following: the retry in the new generation is the clean call, codec state included
# ------------------------------------------------------------------------------------------------
class _Crashed(Exception):
    pass


class _CrashesAfterAgreeing:
    """A worker's link that dies (raises) at its first message after the agreement round: the
    worker contributed to the agreement, so the others encode (and move their error feedback
    on) and then wait for its main stream, which never comes."""

    def __init__(self, link):
        self.link, self.crashed = link, threading.Event()

    def send(self, message):
        from hina.worker.packetizer import parse_header
        if parse_header(message)["op"] != P.Op.MAX:
            self.crashed.set()
            raise _Crashed("killed")
        self.link.send(message)

    def recv(self, timeout):
        return self.link.recv(timeout)

    def close(self):
        pass


def _stateful_codec(name: str, n: int, rank: int):
    from hina.worker.codecs import SketchedSgdCodec, ThcCodec
    if name == "thc":
        return ThcCodec(n, rank=rank, seed=11)
    return SketchedSgdCodec(n, rows=3, columns=64, k=16, momentum=0.5, rotate=2)


def _step_grads(step: int, n: int, numel: int = 700):
    import torch
    gen = torch.Generator().manual_seed(500 + step)
    return [torch.randn(numel, generator=gen) for _ in range(n)]


@pytest.mark.parametrize("codec_name", ["thc", "sketched_sgd"])
def test_retry_after_a_restart_is_the_clean_call(program, codec_name):
    """Worker 0 crashes in step 1 after the agreement round; the others have encoded (their
    error feedback moved on) and wait. The job moves to generation 2 and worker 0 starts again
    from its checkpoint. The survivors follow the switch's NOTICE without a job-service session
    (``allreduce_following(client=None)``, as under ``hina-worker run``) and retry: every
    worker's step 1 and step 2 equal, bit for bit, what the codecs give when nothing failed."""
    import torch

    from hina.worker.agent import allreduce_following
    from hina.worker.codecs import reference_allreduce
    n = 3
    grads = [_step_grads(s, n) for s in range(3)]
    clean = [_stateful_codec(codec_name, n, r) for r in range(n)]        # never fails
    expected = [reference_allreduce(clean, grads[s]) for s in range(3)]
    checkpoint = [_stateful_codec(codec_name, n, r) for r in range(n)]   # after step 0
    reference_allreduce(checkpoint, grads[0])
    codecs = [_stateful_codec(codec_name, n, r) for r in range(n)]
    job = LocalJob(program, n, n_slots=16)
    try:
        transports = job.transports()
        results, errors = run_workers(
            lambda w, t: allreduce_following(None, grads[0][w], codecs[w], t, call_id=0),
            transports)
        assert errors == [None] * n
        assert all(torch.equal(r, e) for r, e in zip(results, expected[0]))
        dying = _CrashesAfterAgreeing(job.links[0])
        transports[0].link = dying            # worker 0 goes on where it is, and dies there
        step1 = [None] * n
        errors = [None] * n

        def run(w):
            try:
                step1[w] = allreduce_following(None, grads[1][w], codecs[w], transports[w],
                                               call_id=1)
            except BaseException as exc:     # surfaced below
                errors[w] = exc

        threads = [threading.Thread(target=run, args=(w,)) for w in range(n)]
        for t in threads:
            t.start()
        assert dying.crashed.wait(30), "worker 0 never got past the agreement round"
        threads[0].join(30)
        assert isinstance(errors[0], _Crashed), errors[0]
        time.sleep(0.3)                       # the survivors send their main streams and wait
        job.set_generation(2)                 # worker 0's Join moves the job on
        codecs[0] = checkpoint[0]             # it restarts from its checkpoint of step 0
        transports[0] = Transport(job.links[0], job.params)
        errors[0] = None
        threads[0] = threading.Thread(target=run, args=(0,))
        threads[0].start()
        for t in threads:
            t.join(60)
        assert errors == [None] * n, errors
        assert all(t.job.generation == 2 for t in transports)
        assert all(torch.equal(r, e) for r, e in zip(step1, expected[1])), \
            "the retried step differs from the clean one"
        results, errors = run_workers(
            lambda w, t: allreduce_following(None, grads[2][w], codecs[w], t, call_id=2),
            transports)
        assert errors == [None] * n
        assert all(torch.equal(r, e) for r, e in zip(results, expected[2]))
    finally:
        job.close()


# ------------------------------------------------------------------------------------------------
# The call check of a new generation (Transport.begin_call)
# ------------------------------------------------------------------------------------------------
def test_a_worker_restarted_at_another_call_is_refused_not_summed(program):
    """Worker 0 restarts from an older checkpoint (call 3) while the others are at call 5: the
    first call of the new generation finds the workers at calls 3..5, so nothing is summed;
    the worker behind raises at once, the others (ahead) are told to wait for it."""
    from hina.worker.transport import CallMismatch
    n = 3
    job = LocalJob(program, n, n_slots=4)
    rng = np.random.default_rng(8)
    try:
        transports = job.transports()
        data = _data(rng, n, 2)
        results, errors = run_workers(
            lambda w, t: (t.begin_call(5 if w else 3), t.reduce(P.Op.SUM, data[w])), transports)
        assert all(isinstance(e, CallMismatch) for e in errors), errors
        assert [(e.own, e.lowest, e.highest) for e in errors] == [(3, 3, 5), (5, 3, 5), (5, 3, 5)]
        assert "this worker's call lost its result" in str(errors[0])
        assert all("lost its result" not in str(e) for e in errors[1:])
        # aligned again (the one behind moved on to the others' call): checked, then summed
        results, errors = run_workers(
            lambda w, t: (t.begin_call(5), t.reduce(P.Op.SUM, data[w]))[1], transports)
        assert errors == [None] * n
        _exact(results, data)
        # within the generation, later calls are not checked again (ids go on from there)
        assert [t.calls for t in transports] == [6] * n
        before = [t.next_seq for t in transports]
        results, errors = run_workers(
            lambda w, t: (t.begin_call(), t.reduce(P.Op.SUM, data[w]))[1], transports)
        assert errors == [None] * n
        assert [t.next_seq - b for t, b in zip(transports, before)] == [2] * n   # data only
    finally:
        job.close()


def test_call_ids_are_checked_again_in_each_generation(program):
    n = 2
    job = LocalJob(program, n, n_slots=4)
    try:
        transports = job.transports()
        results, errors = run_workers(lambda w, t: t.begin_call(), transports)
        assert errors == [None] * n and results == [0, 0]
        job.set_generation(2)
        for t in transports:
            t.follow(2)
        seq = [t.next_seq for t in transports]
        results, errors = run_workers(lambda w, t: t.begin_call(), transports)
        assert errors == [None] * n and results == [1, 1]
        assert [t.next_seq for t in transports] == [s + 1 for s in seq]   # the check's chunk
        with pytest.raises(ValueError, match="call_id"):
            transports[0].begin_call(-1)
    finally:
        job.close()
