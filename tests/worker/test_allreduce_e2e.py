"""``allreduce`` end to end through the embedded switch running p4/hina.p4, for every codec.

The switch's lanes are exact integer arithmetic, so an allreduce through it must give, bit for bit,
what the codecs give when driven by the reference aggregation (numpy sums,
:func:`worker.codecs.reference_allreduce`): any difference is a switch, packetizer or transport
bug. On top, each codec's result is checked against the true mean with the codec's own bound.
Loss on every switch port (1% and 5%, both directions) must change nothing but the
retransmission count; a worker process killed mid-allreduce must make the others fail, within a
bounded time, with an error that says so.
"""
from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest
import torch

from hina import protocol as P
from hina.procs import rank_processes
from hina.softswitch.ports import UdpPort
from hina.testing.switchjob import SWITCH, WORDS, LocalJob, allreduce_steps, run_workers
from hina.worker.codecs import (AdaptiveCodec, FixedPointCodec, LosslessSketchCodec, SketchCodec, SketchedSgdCodec,
                           SparseThcCodec, ThcCodec, reference_allreduce)
from hina.worker.link import Endpoint, FrameLink
from hina.worker.packetizer import build_aggregates, layout_for
from hina.worker.collective import allreduce
from hina.worker.transport import TransportTimeout

NUMEL = 6000
SEED = 11

#: codec name -> (factory(n_workers, rank), gradient kind, bound on the NMSE against the mean)
CODECS = {
    # block fixed point: 2**-20-ish relative rounding per block
    "fixed": (lambda n, r: FixedPointCodec(n, rank=r), "dense", 1e-8),
    # THC b=4: NMSE of the mean of n workers is ~0.1/n on Gaussian data; loose bound
    "thc": (lambda n, r: ThcCodec(n, rank=r, seed=SEED), "dense", 0.3),
    # THC of the union of the workers' touched rows: an OR round, then LUT-SUM lanes
    "sparse_thc": (lambda n, r: SparseThcCodec(n, rank=r, seed=SEED), "rows", 0.3),
    # Sketched SGD: 64 planted heavy coordinates among the k=256 candidates (a 3 x 1024 sketch
    # keeps heavy-heavy collisions in two rows of three rare), values exact to 10-bit fields
    "sketched_sgd": (lambda n, r: SketchedSgdCodec(n, rows=3, columns=1024, k=256, sketch_bits=10,
                                                   value_bits=10, value_blocks=8, seed=SEED),
                     "heavy", 0.05),
    # FetchSGD: unsketched top-k of the summed sketch, planted heavy coordinates
    "fetchsgd": (lambda n, r: SketchCodec(n, rows=5, columns=1 << 11, k=128, seed=SEED),
                 "heavy", 0.05),
    # lossless sketch: a sparse union support well under the peeling threshold: exact up to the
    # fixed-point rounding
    "lossless": (lambda n, r: LosslessSketchCodec(n, columns=1 << 9, seed=SEED), "sparse", 1e-8),
    # per bucket: lossless for the sparse gradients (exact), THC for the dense ones
    "adaptive-sparse": (lambda n, r: AdaptiveCodec(n, rank=r, seed=SEED, columns=1 << 9,
                                                   sketch_seed=SEED), "sparse", 1e-8),
    "adaptive-dense": (lambda n, r: AdaptiveCodec(n, rank=r, seed=SEED, columns=1 << 9,
                                                  sketch_seed=SEED), "dense", 0.3),
}

try:  # THC on the fused Triton kernels, where they run on CPU tensors (Triton's interpreter)
    from hina.worker.codecs import thc_triton as _thc_triton
    if _thc_triton.AVAILABLE and _thc_triton.INTERPRET:
        CODECS["thc-triton"] = (lambda n, r: ThcCodec(n, rank=r, seed=SEED, triton=True), "dense", 0.3)
except ImportError:
    pass


def _grads(kind: str, n: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(SEED + n)
    if kind == "dense":
        return [torch.randn(NUMEL, generator=gen) for _ in range(n)]
    if kind == "heavy":  # 64 shared heavy coordinates on a small dense background
        heavy = torch.randperm(NUMEL, generator=gen)[:64]
        out = []
        for _ in range(n):
            g = 0.01 * torch.randn(NUMEL, generator=gen)
            g[heavy] += 10.0 + torch.rand(64, generator=gen)
            out.append(g)
        return out
    if kind == "rows":  # each worker touches 30 rows of 16 values (an embedding table's)
        out = []
        for _ in range(n):
            g = torch.zeros(NUMEL // 16, 16)
            g[torch.randperm(NUMEL // 16, generator=gen)[:30]] = torch.randn(30, 16, generator=gen)
            out.append(g.reshape(-1))
        return out
    # sparse: each worker 40 nonzeros (union <= 40 n, peeling threshold ~0.8 * 3 * 512)
    out = []
    for _ in range(n):
        g = torch.zeros(NUMEL)
        g[torch.randperm(NUMEL, generator=gen)[:40]] = torch.randn(40, generator=gen)
        out.append(g)
    return out


def _through_switch(program, name: str, n: int, grads, loss: float = 0.0, steps: int = 2):
    """``steps`` allreduces of ``grads`` through the switch; returns each step's results and the
    total retransmissions."""
    factory = CODECS[name][0]
    codecs = [factory(n, w) for w in range(n)]
    job = LocalJob(program, n, n_slots=8, loss=loss, table=tuple(ThcCodec(n).table))
    results, transports = allreduce_steps(job, codecs, grads, steps)
    if name.endswith("-triton"):  # the kernels ran (no worker fell back to the eager path)
        assert all(set(c.last_kernels.values()) == {"triton"} for c in codecs)
    return results, sum(t.total.retransmissions for t in transports)


def _reference(name: str, n: int, grads, steps: int = 2):
    factory = CODECS[name][0]
    codecs = [factory(n, w) for w in range(n)]
    return [reference_allreduce(codecs, grads) for _ in range(steps)]


def _nmse(got: torch.Tensor, want: torch.Tensor) -> float:
    return float(((got - want) ** 2).sum() / (want ** 2).sum())


@pytest.mark.parametrize("n", [2, 8])
@pytest.mark.parametrize("name", list(CODECS))
def test_allreduce_equals_reference_and_is_within_bound(program, name, n):
    """Two steps (error feedback / accumulators carry over) for 2 and 8 workers."""
    _, kind, bound = CODECS[name]
    grads = _grads(kind, n)
    results, _ = _through_switch(program, name, n, grads)
    reference = _reference(name, n, grads)
    mean = torch.stack(grads).mean(0)
    for w in range(n):
        for step in range(2):
            assert torch.equal(results[w][step], reference[step][w]), (w, step)
    # step 0 against the true mean (step 1 adds what error feedback held back)
    assert _nmse(results[0][0], mean) < bound


@pytest.mark.parametrize("loss", [0.01, 0.05])
@pytest.mark.parametrize("name", ["fixed", "thc", "sketched_sgd"])
def test_loss_changes_nothing_but_retransmissions(program, name, loss):
    n = 4
    grads = _grads(CODECS[name][1], n)
    results, retransmissions = _through_switch(program, name, n, grads, loss=loss)
    reference = _reference(name, n, grads)
    for w in range(n):
        for step in range(2):
            assert torch.equal(results[w][step], reference[step][w]), (w, step)
    assert retransmissions > 0, "loss on every port must cost retransmissions"


@pytest.mark.parametrize("build, name", [
    ("tna_program", "thc"),
    ("tofino1_program", "thc"), ("tofino1_program", "fixed"), ("tofino1_program", "sparse_thc")])
def test_allreduce_through_the_tna_program(request, build, name):
    """Allreduces through the TNA program (p4/tna/hina_tna.p4 on the embedded target's TNA
    dataplane: the LUT in the switch, two passes per packet): bit for bit the reference, as
    through p4/hina.p4. ``tna_program``: 64 words per packet (32 lanes, Tofino 2's build), THC
    only, with 2% loss on every port; ``tofino1_program``: the Tofino 1 build (its default
    16 lanes) at 32 words per packet, every lane op a worker uses: THC (a MAX agreement round,
    then LUT-SUM), fixed point (MAX, then SUM), sparse THC (OR, then LUT-SUM). The program
    refuses a payload of any other length (``message_check``: MALFORMED), so the results are
    the 32-word packets'. The dataplane cases of every op run in bmv2_tests on embedded-tna."""
    program = request.getfixturevalue(build)
    # the Tofino 1 cases: 2 workers, one step (error feedback's second step is the codec's,
    # checked above on p4/hina.p4), no loss (the 64-word case has it) and a window of 4 slots
    # (8 outrun the two-pass dataplane on a loaded machine: timeouts, resends), for the suite's
    # time
    n, steps, loss, slots = (4, 2, 0.02, 8) if build == "tna_program" else (2, 1, 0.0, 4)
    grads = _grads(CODECS[name][1], n)
    factory = CODECS[name][0]
    codecs = [factory(n, w) for w in range(n)]
    job = LocalJob(program, n, n_slots=slots, loss=loss, table=tuple(ThcCodec(n).table))
    words = P.TNA_TOFINO1_WORDS if build == "tofino1_program" else WORDS
    assert job.params.words == job.spec.words == words
    results, transports = allreduce_steps(job, codecs, grads, steps=steps)
    reference = _reference(name, n, grads, steps)
    for w in range(n):
        for step in range(steps):
            assert torch.equal(results[w][step], reference[step][w]), (w, step)
    if loss:
        assert sum(t.total.retransmissions for t in transports) > 0


def test_a_saturating_switch_flags_every_overflow_on_every_worker(tofino1_program):
    """TNA's SUM saturates (no overflow flag) and its saturation sticks: a job on it
    (``sum_saturates``) takes any int32 values; a result word within the bounds is exact, one at
    a bound is the overflow, which every worker raises (``OverflowFlagged``, as for v1model's
    flag). A true sum beyond int32 overflows in every order of arrival. One that leaves int32 in
    a partial sum only in some orders and comes back within it (INT32_MAX + 1 - 2) is either
    flagged on every worker or exact on every worker, depending on the order the workers' packets
    reached the switch, never a wrong word within the bounds (bmv2_tests'
    test_tna_sum_saturation_sticks fixes the order that saturates)."""
    from hina.worker.transport import OverflowFlagged
    n = 3
    big, low = np.iinfo(np.int32).max, np.iinfo(np.int32).min
    job = LocalJob(tofino1_program, n, n_slots=4)
    assert job.params.sum_saturates
    size = 3 * P.TNA_TOFINO1_WORDS
    rng = np.random.default_rng(5)
    within = [rng.integers(-(2**29), 2**29, size, dtype=np.int32) for _ in range(n)]
    # near the bounds, no partial sum at one in any order: exact
    within[0][4], within[1][4], within[2][4] = big - 1, -1, 0
    within[0][9], within[1][9], within[2][9] = low + 1, 1, 0

    def with_word(word, values):
        data = [w.copy() for w in within]
        for w, v in enumerate(values):
            data[w][word] = v
        return data
    above = with_word(7, (big, 1, 0))          # true sum INT32_MAX + 1
    below = with_word(2, (low, -5, 0))         # true sum INT32_MIN - 5
    back = with_word(5, (big, 1, -2))          # true sum INT32_MAX - 1, beyond it in some orders
    try:
        transports = job.transports(min_rto=0.03, give_up_s=5)
        results, errors = run_workers(lambda w, t: t.reduce(P.Op.SUM, within[w]), transports)
        assert errors == [None] * n, errors
        total = sum(w.astype(np.int64) for w in within)
        for r in results:
            np.testing.assert_array_equal(r, total)
        for data, word in ((above, 7), (below, 2)):
            _, errors = run_workers(lambda w, t: t.reduce(P.Op.SUM, data[w]), transports)
            assert all(isinstance(e, OverflowFlagged) for e in errors), errors
            assert all(f"result word {word} is" in str(e) for e in errors), errors
        results, errors = run_workers(lambda w, t: t.reduce(P.Op.SUM, back[w]), transports)
        if errors[0] is None:
            assert errors == [None] * n, errors
            for r in results:
                np.testing.assert_array_equal(r, sum(w.astype(np.int64) for w in back))
        else:
            assert all(isinstance(e, OverflowFlagged) and "result word 5 is" in str(e) for e in errors), errors
    finally:
        job.close()


# ----------------------------------------------------------------------- a forger
FORGER_PORT = 9          # a switch port of the forger's own: a host wired to the switch
FORGED_SEQS = 256        # every chunk of the run below (two steps of fixed point at 64 words)
FORGE_INTERVAL_S = 0.002


def _forge(links, messages, stop) -> None:
    """Send every forged message on every link once, then keep cycling until ``stop``."""
    for msg in messages:
        for link in links:
            link.send(msg)
    k = 0
    while not stop.wait(FORGE_INTERVAL_S):
        for link in links:
            link.send(messages[k % len(messages)])
        k += 1


def test_forged_frames_change_no_result(program):
    """A forger sends worker 0's frames (worker 0's MAC, IPv4 address and UDP port, garbage
    payloads, every chunk's slot and sequence number) during an allreduce of two workers, from
    sockets of its own: into worker 0's and worker 1's switch ports (UDP tunnels whose peer it is
    not: the port drops them) and into a switch port of its own (admission drops them as
    WRONG_PORT). Both workers still get results bit-equal to the reference."""
    n, name = 2, "fixed"
    grads = _grads("dense", n)
    codecs = [CODECS[name][0](n, w) for w in range(n)]
    job = LocalJob(program, n, n_slots=8)
    victim = job.spec.workers[0]
    me = Endpoint(victim.mac, victim.ip, victim.udp_port)
    into = [job.switch.ports[w.port].local_address for w in job.spec.workers]
    links = [FrameLink(me, SWITCH, ("127.0.0.1", 0), address) for address in into]
    own = FrameLink(me, SWITCH, ("127.0.0.1", 0), ("127.0.0.1", 0))
    own_port = UdpPort(FORGER_PORT, ("127.0.0.1", 0), peer=own.sock.getsockname())
    own.tunnel_switch = own_port.local_address
    job.switch.add_port(own_port)
    links.append(own)
    layout = layout_for(P.Op.SUM, FORGED_SEQS * WORDS, WORDS)
    garbage = np.full(layout.elements, 1 << 24, dtype=np.int32)
    messages = [m.tobytes() for m in build_aggregates(layout, garbage, job.spec.job_id, 0,
                                                      job.params.n_slots)]
    stop = threading.Event()
    forger = threading.Thread(target=_forge, args=(links, messages, stop), daemon=True)
    transports = job.transports(min_rto=0.03, give_up_s=20.0)
    try:
        forger.start()
        time.sleep(0.5)                       # the forged frames go first
        results, errors = run_workers(
            lambda w, t: [allreduce(grads[w], codecs[w], t, key=0) for _ in range(2)],
            transports)
        stop.set()
        forger.join(timeout=10)
        dp = job.switch.dataplane
        wrong_port = dp.counter_read(P.REASON_COUNTER, int(P.DropReason.WRONG_PORT))[1]
        foreign = [job.switch.ports[w.port].stats["rx_foreign_peer"] for w in job.spec.workers]
    finally:
        stop.set()
        for link in links:
            link.close()
        job.close()
    assert errors == [None] * n, errors
    reference = _reference(name, n, grads)
    for w in range(n):
        for step in range(2):
            assert torch.equal(results[w][step], reference[step][w]), (w, step)
    assert wrong_port >= FORGED_SEQS, wrong_port
    assert all(count >= FORGED_SEQS for count in foreign), foreign


# ----------------------------------------------------------------------- a killed worker
GIVE_UP_S = 2.0


def _long_allreduce(seat, out) -> None:
    """A worker process: one large fixed-point allreduce; reports how it ended."""
    from hina.demo.local import connect_worker
    torch.set_num_threads(1)
    transport = connect_worker(seat, min_rto=0.05, max_rto=0.5, give_up_s=GIVE_UP_S)
    codec = FixedPointCodec(seat.n_workers, rank=seat.index)
    out.put(("started", seat.index, time.time()))
    try:
        allreduce(torch.randn(1 << 20), codec, transport)
        out.put(("finished", seat.index, time.time()))
    except TransportTimeout as exc:
        out.put(("timeout", seat.index, time.time(), str(exc)))
    except BaseException as exc:  # noqa: BLE001 - reported to the test
        out.put(("error", seat.index, time.time(), repr(exc)))


def test_killed_worker_fails_the_others_in_bounded_time():
    """Three worker processes through the switch process; one gets SIGKILL mid-allreduce."""
    from hina.demo.local import LocalDeployment
    n = 3
    with LocalDeployment(n, words=64) as dep:
        seats = dep.create_job(job_id=1, n_slots=8)
        ctx = rank_processes()
        out = ctx.Queue()
        procs = [ctx.Process(target=_long_allreduce, args=(seats[w], out)) for w in range(n)]
        for p in procs:
            p.start()
        try:
            started = [out.get(timeout=60) for _ in range(n)]
            assert all(s[0] == "started" for s in started)
            time.sleep(1.0)                      # well inside the ~10 s allreduce
            os.kill(procs[2].pid, signal.SIGKILL)
            killed_at = time.time()
            ends = [out.get(timeout=GIVE_UP_S + 30) for _ in range(n - 1)]
        finally:
            for p in procs:
                p.join(timeout=10)
                if p.is_alive():
                    p.kill()
    assert sorted(e[1] for e in ends) == [0, 1]
    for kind, index, at, *message in ends:
        assert kind == "timeout", (kind, index, message)
        assert "stopped contributing" in message[0]
        assert at - killed_at < GIVE_UP_S + 10, at - killed_at


@pytest.mark.parametrize("name", ["fixed", "thc", "sparse_thc", "sketched_sgd"])
def test_a_non_finite_gradient_fails_every_worker_at_once(program, name):
    """One worker's gradient holds a NaN: its codec refuses it, but its agreement round still
    goes out, poisoned, so every other worker's encode refuses the aggregated value at once
    ("agreed") instead of waiting for the missing lanes until it gives up (20 s here). The
    next allreduce of the same transports works again (a failed call leaves no half state)."""
    from hina.worker.codecs import NonFiniteGradientError
    n = 3
    kind = "heavy" if name == "sketched_sgd" else "dense"
    grads = _grads(kind, n)
    bad = [g.clone() for g in grads]
    bad[1][17] = float("nan")
    job = LocalJob(program, n, n_slots=8, table=tuple(ThcCodec(n).table))
    transports = job.transports(min_rto=0.03, give_up_s=20.0)
    try:
        codecs = [CODECS[name][0](n, w) for w in range(n)]
        started = time.monotonic()
        _, errors = run_workers(lambda w, t: allreduce(bad[w], codecs[w], t, key=0), transports)
        took = time.monotonic() - started
        assert all(isinstance(e, NonFiniteGradientError) for e in errors), errors
        assert [e.where for e in errors] == ["agreed", "local", "agreed"]
        assert took < 5.0, f"the workers learnt of the NaN after {took:.1f} s"
        fresh = [CODECS[name][0](n, w) for w in range(n)]
        results, errors = run_workers(lambda w, t: allreduce(grads[w], fresh[w], t, key=0),
                                      transports)
        assert errors == [None] * n, errors
        want = reference_allreduce([CODECS[name][0](n, w) for w in range(n)], grads)
        assert all(torch.equal(results[w], want[w]) for w in range(n))
    finally:
        job.close()
