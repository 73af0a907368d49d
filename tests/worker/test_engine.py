"""The aggregation engine behind the DDP hook (worker.engine): the hook returns a pending future
that completes when the bucket's mean is decoded, buckets go through the switch in order, and DDP
training (join with uneven inputs included) gives what plain DDP gives."""
from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest
import torch

from hina.loopback import free_tcp_port
from hina.procs import rank_processes
from hina.testing.switchjob import LocalJob
from hina.worker.codecs import FixedPointCodec, ThcCodec
from hina.worker.engine import AggregationEngine


def test_submit_returns_a_pending_future_completed_with_the_mean(program):
    """Worker 0's bucket cannot complete before worker 1 hands over its own: the future is
    pending when submit returns (the hook's caller goes on), and completes with the mean."""
    n = 2
    job = LocalJob(program, n, n_slots=8)
    try:
        engines = [AggregationEngine(t, FixedPointCodec(n, rank=w), group=None)
                   for w, t in enumerate(job.transports())]
        gen = torch.Generator().manual_seed(3)
        buckets = [[torch.randn(500 * (k + 1), generator=gen) for k in range(3)]
                   for _ in range(n)]
        want = [(buckets[0][k] + buckets[1][k]) / n for k in range(3)]
        mine = [b.clone() for b in buckets[0]]
        futures0 = [engines[0].submit(k, mine[k]) for k in range(3)]
        assert not any(f.done() for f in futures0), "a bucket completed without worker 1"
        futures1 = [engines[1].submit(k, buckets[1][k].clone()) for k in range(3)]
        for k in range(3):
            for fut in (futures0[k], futures1[k]):
                got = fut.wait()
                torch.testing.assert_close(got, want[k], rtol=0, atol=1e-5)
        assert futures0[0].wait() is mine[0], "the mean is written into the bucket itself"
        assert all(e.stats["hina_buckets"] == 3 and e.stats["fallback_buckets"] == 0
                   for e in engines)
    finally:
        for e in engines:
            e.close()
        job.close()


def test_a_closed_engine_refuses_buckets(program):
    job = LocalJob(program, 1, n_slots=4)
    try:
        engine = AggregationEngine(job.transports()[0], FixedPointCodec(1), group=None)
        got = engine.submit(0, torch.ones(10)).wait()
        torch.testing.assert_close(got, torch.ones(10))
        engine.close()
        with pytest.raises(RuntimeError, match="closed"):
            engine.submit(1, torch.ones(10))
    finally:
        job.close()


def test_closing_the_hook_state_logs_what_it_did(program, caplog):
    """``HinaState.close`` says in one line how many buckets went through the switch, how many
    fell back, and what the engine sent and how long it was busy."""
    from hina.worker.ddp_hook import HinaState
    job = LocalJob(program, 1, n_slots=4)
    try:
        state = HinaState(job.transports()[0], FixedPointCodec(1))
        for k in range(2):
            state.engine.submit(k, torch.ones(300)).wait()
        with caplog.at_level(logging.INFO, logger="hina.worker"):
            state.close()
    finally:
        job.close()
    lines = [r.getMessage() for r in caplog.records if "HINA DDP hook closed" in r.getMessage()]
    assert len(lines) == 1, caplog.text
    assert "2 bucket(s) through the switch, 0 fell back to fp32" in lines[0], lines[0]
    assert state.stats["bytes_sent"] > 0 and f"{state.stats['bytes_sent'] / 1e3:.1f} kB" in lines[0]


class _HeldThc:
    """A THC codec whose agreement for one bucket waits until the test lets it go (a worker
    slow to hand that bucket over) and which notes the buckets it decoded."""

    def __new__(cls, n, rank, hold=None):
        from hina.worker.codecs import ThcCodec

        class Held(ThcCodec):
            def agreement(self, grad, key=0):
                if key == hold:
                    assert released.wait(30), "the test never released the held bucket"
                return super().agreement(grad, key)

            def decode(self, aggregated, agreed, key=0, meta=None):
                decoded.append(key)
                return super().decode(aggregated, agreed, key, meta)

        released, decoded = threading.Event(), []
        codec = Held(n, rank=rank)
        codec.released, codec.decoded = released, decoded
        return codec


def _thc_buckets(n_workers: int, count: int = 4):
    gen = torch.Generator().manual_seed(8)
    return [[torch.randn(300 + 200 * k, generator=gen) for k in range(count)]
            for _ in range(n_workers)]


def _sequential(program, buckets):
    """The buckets through one-lane engines (one bucket at a time): the reference."""
    n = len(buckets)
    job = LocalJob(program, n, n_slots=8)
    try:
        engines = [AggregationEngine(t, _HeldThc(n, w), group=None, lanes=1)
                   for w, t in enumerate(job.transports(min_rto=0.05))]
        futures = [[e.submit(k, b.clone()) for k, b in enumerate(buckets[w])]
                   for w, e in enumerate(engines)]
        got = [[f.wait() for f in fs] for fs in futures]
        for e in engines:     # one bucket at a time: busy exactly while a bucket is in its path
            assert 0 < e.stats["seconds"] == pytest.approx(e.stats["bucket_seconds"]), e.stats
        return got
    finally:
        for e in engines:
            e.close()
        job.close()


def test_buckets_are_on_the_wire_at_once_in_any_order_bit_equal_to_one_at_a_time(program):
    """With two lanes, worker 1 slow to hand over bucket 0: bucket 1 goes through the switch
    and is decoded on both workers meanwhile (one bucket at a time could not: it waits behind
    bucket 0), its future waits for bucket 0's vote; every result is bit-equal to the one-lane
    engine's, and the workers' are equal."""
    n = 2
    buckets = _thc_buckets(n)
    want = _sequential(program, buckets)
    job = LocalJob(program, n, n_slots=8)
    codecs = [_HeldThc(n, w, hold=0 if w == 1 else None) for w in range(n)]
    try:
        engines = [AggregationEngine(t, c, group=None)
                   for t, c in zip(job.transports(min_rto=0.05), codecs)]
        assert [e.lanes for e in engines] == [2, 2]
        t0 = time.monotonic()
        futures = [[e.submit(k, b.clone()) for k, b in enumerate(buckets[w])]
                   for w, e in enumerate(engines)]
        deadline = time.monotonic() + 20
        while not all(1 in c.decoded for c in codecs) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert all(c.decoded == [1] for c in codecs), [c.decoded for c in codecs]
        assert not any(fs[0].done() or fs[1].done() for fs in futures)
        codecs[1].released.set()
        got = [[f.wait() for f in fs] for fs in futures]
        elapsed = time.monotonic() - t0
        for e in engines:
            # bucket 1's path lay inside bucket 0's: the sum over buckets counts that time
            # twice, the engine's busy time once, and it is no more than the wall time
            assert 0 < e.stats["seconds"] < e.stats["bucket_seconds"], e.stats
            assert e.stats["seconds"] <= elapsed, (e.stats, elapsed)
    finally:
        codecs[1].released.set()
        for e in engines:
            e.close()
        job.close()
    for w in range(n):
        for k in range(len(buckets[w])):
            assert torch.equal(got[w][k], want[w][k]), (w, k)
            assert torch.equal(got[w][k], got[0][k]), (w, k)
    assert all(e.stats["hina_buckets"] == 4 and e.stats["fallback_buckets"] == 0
               for e in engines)


def test_an_error_in_one_bucket_fails_only_its_future(program):
    """A bucket whose aggregation raises (here its codec's snapshot) fails its own future; the
    buckets beside it on the other lane and the ones after it complete."""
    from hina.worker.codecs import ThcCodec

    class Broken(ThcCodec):
        def snapshot(self, key=0):
            if key == 1:
                raise RuntimeError("snapshot of bucket 1 broke")
            return super().snapshot(key)

    buckets = _thc_buckets(1, 5)
    want = _sequential(program, buckets)[0]
    job = LocalJob(program, 1, n_slots=8)
    try:
        engine = AggregationEngine(job.transports(min_rto=0.05)[0], Broken(1, rank=0),
                                   group=None)
        assert engine.lanes == 2
        futures = [engine.submit(k, b.clone()) for k, b in enumerate(buckets[0])]
        with pytest.raises(RuntimeError, match="snapshot of bucket 1 broke"):
            futures[1].wait()
        for k in (0, 2, 3, 4):
            assert torch.equal(futures[k].wait(), want[k]), k
        assert engine.stats["hina_buckets"] == 4
        engine.close()
    finally:
        job.close()


def test_lanes_need_a_codec_whose_buckets_can_be_in_flight_at_once(program):
    from hina.worker.codecs import ThcCodec
    from hina.worker.engine import default_lanes
    job = LocalJob(program, 1, n_slots=8)
    try:
        t = job.transports()[0]
        assert default_lanes(t, FixedPointCodec(1)) == 1 and default_lanes(t, ThcCodec(1)) == 2
        with pytest.raises(ValueError, match="concurrent_keys"):
            AggregationEngine(t, FixedPointCodec(1), group=None, lanes=2)
        with pytest.raises(ValueError, match="synchronous"):
            AggregationEngine(t, ThcCodec(1), group=None, synchronous=True, lanes=2)
        assert AggregationEngine(t, ThcCodec(1), group=None, synchronous=True).lanes == 1
    finally:
        job.close()


# ------------------------------------------------------------------------------------------------
# DDP through the switch, in processes (gloo)
# ------------------------------------------------------------------------------------------------
WORLD = 2


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                               torch.nn.ReLU(), torch.nn.Linear(64, 4))


def _codec(name: str, rank: int):
    """The hook's codec: "fixed", or "thc-eager+native" / "thc-eager+triton": THC on the torch
    path on rank 0 and on the native or the Triton kernels on rank 1 (two implementations in
    one job; Triton on CPU tensors under its interpreter)."""
    if name.startswith("thc-eager+"):
        other = name.split("+")[1] if rank == 1 else "eager"
        return ThcCodec(WORLD, rank=rank, seed=5, compiled=other == "native", triton=other == "triton")
    return FixedPointCodec(WORLD, rank=rank)


def _train(rank: int, init: str, seat, steps: int, join: bool, out, device: str = "cpu",
           codec: str = "fixed") -> None:
    import torch.distributed as dist
    from torch.distributed.algorithms.join import Join
    from torch.nn.parallel import DistributedDataParallel as DDP

    from hina.demo.local import connect_worker
    from hina.worker.ddp_hook import HinaState, hina_hook
    torch.set_num_threads(1)
    logging.basicConfig(level=logging.WARNING)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=WORLD)
    try:
        # small buckets: several per step, so that the hook's futures overlap
        if device == "cuda":
            # both ranks on GPU 0 (or one each): gloo carries CUDA tensors; the engine's stream
            # waits for the gradients and DDP's wait for the engine's stream
            dev = torch.device("cuda", rank % torch.cuda.device_count())
            model = DDP(_model().to(dev), device_ids=[dev], bucket_cap_mb=0.01)
        else:
            dev = torch.device("cpu")
            model = DDP(_model(), bucket_cap_mb=0.01)
        state, pending = None, []
        if seat is not None:
            state = HinaState(connect_worker(seat), _codec(codec, rank), start_iter=2)

            def hook(s, bucket):
                fut = hina_hook(s, bucket)
                pending.append(not fut.done())
                return fut
            model.register_comm_hook(state, hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        gen = torch.Generator().manual_seed(10 + rank)
        batches = steps - (2 if join and rank == 1 else 0)      # uneven inputs under join
        with Join([model]) if join else _nothing():
            for _ in range(batches):
                x, y = torch.randn(16, 32, generator=gen), torch.randint(0, 4, (16,),
                                                                          generator=gen)
                x, y = x.to(dev), y.to(dev)
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
        params = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu().numpy()
        stats = dict(state.stats) if state else None
        if state is not None:
            stats["kernels"] = dict(getattr(state.codec, "last_kernels", {}))
        if state is not None:
            state.close()
            state.transport.close()
        out.put((rank, params, stats, pending))
    finally:
        dist.destroy_process_group()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _run(seats, steps: int, join: bool, device: str = "cpu", codec: str = "fixed") -> dict:
    ctx = rank_processes()
    out = ctx.Queue()
    init = f"tcp://127.0.0.1:{free_tcp_port()}"
    procs = [ctx.Process(target=_train, args=(r, init, seats[r], steps, join, out, device, codec))
             for r in range(WORLD)]
    for p in procs:
        p.start()
    try:
        results = {rank: (params, stats, pending) for rank, params, stats, pending in
                   (out.get(timeout=180) for _ in procs)}
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    assert all(p.exitcode == 0 for p in procs)
    return results


@pytest.fixture(scope="module")
def deployment():
    from hina.demo.local import LocalDeployment
    with LocalDeployment(WORLD, words=64) as dep:
        yield dep


@pytest.mark.parametrize("device", [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                  reason="no CUDA device: the GPU variant runs "
                                                         "where torch sees one")),
])
@pytest.mark.parametrize("join", [False, True], ids=["even", "uneven-join"])
def test_ddp_through_the_asynchronous_hook_trains_as_plain_ddp(deployment, join, device):
    """The hook returns pending futures (DDP's backward goes on meanwhile), no bucket falls
    back, and the parameters end where plain (fp32) DDP takes them, to the fixed-point codec's
    precision, on both ranks; with uneven inputs under DDP's join the rank that ran out sends
    zero buckets through the hook and both ranks still agree."""
    steps = 6
    seats = deployment.create_job(job_id=1, n_slots=16)
    try:
        hooked = _run(seats, steps, join, device)
    finally:
        deployment.delete_job(1)
    _check_trains_as_plain_ddp(hooked, _plain(steps, join, device))


#: plain (fp32) DDP's parameters per (steps, join, device): one run serves every switch program
_PLAIN: dict = {}


def _plain(steps: int, join: bool, device: str) -> dict:
    key = (steps, join, device)
    if key not in _PLAIN:
        _PLAIN[key] = _run([None] * WORLD, steps, join, device)
    return _PLAIN[key]


def _check_trains_as_plain_ddp(hooked: dict, plain: dict) -> None:
    for rank in range(WORLD):
        params, stats, pending = hooked[rank]
        assert stats["fallback_buckets"] == 0 and stats["hina_buckets"] > 0, stats
        assert sum(pending) >= stats["hina_buckets"] // 2, \
            f"most hooked buckets should still be on the wire when the hook returns: {pending}"
        np.testing.assert_allclose(params, plain[rank][0], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(hooked[0][0], hooked[1][0])


@pytest.mark.parametrize("other", ["native", "triton"])
def test_workers_on_different_thc_implementations_keep_identical_replicas(deployment, other):
    """One DDP job, THC through the switch, rank 0 on the torch path and rank 1 on the native
    kernels (or the Triton kernels): the two encode with different float rounding, but decode
    the switch's sums to the same bits, so after training both ranks hold the same parameters,
    bit for bit (before, their decodes differed by ulps and the replicas drifted apart)."""
    if other == "native" and not ThcCodec(1, compiled=True).compiled:
        pytest.skip("no C++ compiler: the native kernels cannot be built here")
    if other == "triton":
        kernels = pytest.importorskip("hina.worker.codecs.thc_triton")
        if not (kernels.AVAILABLE and kernels.INTERPRET):
            pytest.skip("Triton's kernels on CPU tensors need its interpreter (TRITON_INTERPRET=1)")
    from hina.worker.codecs.thc_table import DEFAULT_TABLE
    steps = 6
    seats = deployment.create_job(job_id=2, n_slots=16, thc_table=DEFAULT_TABLE)
    try:
        hooked = _run(seats, steps, False, codec=f"thc-eager+{other}")
    finally:
        deployment.delete_job(2)
    (p0, s0, _), (p1, s1, _) = hooked[0], hooked[1]
    assert s0["fallback_buckets"] == s1["fallback_buckets"] == 0 and s0["hina_buckets"] > 0, (s0, s1)
    assert s0["kernels"]["decode"] == "eager", s0
    assert s1["kernels"]["decode"] == {"native": "native", "triton": "triton"}[other], s1
    np.testing.assert_array_equal(p0, p1)
    plain = _plain(steps, False, "cpu")[0][0]
    assert np.abs(p0 - plain).max() < 0.05  # THC's 4 bits: near plain DDP, not equal to it


def test_ddp_through_the_tna_program_trains_as_plain_ddp(tna_program):
    """The same DDP run (two gloo ranks as processes, even inputs, the asynchronous hook) with
    the switch running the TNA program (p4/tna/hina_tna.p4 on the embedded target's TNA
    dataplane, 32 lanes: the same 64 words per packet), in this process: no bucket falls back
    and the parameters end where plain fp32 DDP takes them, as on p4/hina.p4."""
    from hina.demo.local import WorkerSeat
    steps = 6
    job = LocalJob(tna_program, WORLD, n_slots=16)
    try:
        seats = []
        for w, (addr, link) in enumerate(zip(job.spec.workers, job.links)):
            seats.append(WorkerSeat(w, addr.mac, addr.ip, addr.udp_port, link.sock.getsockname(),
                                    link.tunnel_switch, job.spec.job_id, WORLD, job.spec.n_slots,
                                    job.spec.words, None))
            link.close()             # the worker process binds its tunnel address again
        hooked = _run(seats, steps, False)
    finally:
        job.close()
    _check_trains_as_plain_ddp(hooked, _plain(steps, False, "cpu"))
