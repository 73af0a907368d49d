"""The DDP hook's fp32 fallback: with the switch unreachable, every bucket after warm-up falls back
to gloo's all-reduce, loudly, and training goes on exactly as plain DDP would."""
from __future__ import annotations

import logging
import socket

import pytest
import torch

from hina.loopback import free_tcp_port
from hina.procs import rank_processes

WORLD = 2
STEPS = 4


def _collect_warnings() -> list:
    """The messages of warnings the worker logs from now on, in a list that fills as they come."""
    warnings = []

    class Collect(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.WARNING:
                warnings.append(record.getMessage())

    logging.getLogger("hina.worker").addHandler(Collect())
    return warnings


def _dead_udp_address() -> tuple[str, int]:
    """A loopback UDP port nobody listens on (bound, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()


def _train(rank: int, init: str, switch: tuple[str, int], use_hook: bool, out) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from hina.worker.codecs import ThcCodec
    from hina.worker.ddp_hook import HinaState, hina_hook
    from hina.worker.link import Endpoint, FrameLink
    from hina.worker.transport import JobParams, Transport

    torch.set_num_threads(1)
    warnings = _collect_warnings()
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=WORLD)
    try:
        torch.manual_seed(0)
        model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                        torch.nn.Linear(32, 4)))
        state = None
        if use_hook:
            link = FrameLink(Endpoint.make("02:00:00:00:01:00", f"10.0.1.{rank + 1}", 40000),
                             Endpoint.make("02:00:00:00:00:fe", "10.0.0.254", 48864),
                             ("127.0.0.1", 0), switch)
            transport = Transport(link, JobParams(1, WORLD, 4, 64), min_rto=0.05, max_rto=0.1,
                                  give_up_s=0.5)
            state = HinaState(transport, ThcCodec(WORLD, rank=rank), start_iter=1)
            model.register_comm_hook(state, hina_hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        gen = torch.Generator().manual_seed(rank)
        for _ in range(STEPS):
            x, y = torch.randn(8, 16, generator=gen), torch.randint(0, 4, (8,), generator=gen)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        params = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()  # not shared memory
        out.put((rank, use_hook, params, dict(state.stats) if state else None, warnings))
    finally:
        dist.destroy_process_group()


def _run(use_hook: bool, switch) -> dict:
    ctx = rank_processes()
    out = ctx.Queue()
    init = f"tcp://127.0.0.1:{free_tcp_port()}"
    procs = [ctx.Process(target=_train, args=(r, init, switch, use_hook, out)) for r in range(WORLD)]
    for p in procs:
        p.start()
    results = {}
    for _ in range(WORLD):
        rank, _, params, stats, warnings = out.get(timeout=120)
        results[rank] = (torch.from_numpy(params), stats, warnings)
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    return results


def test_unreachable_switch_falls_back_to_fp32_allreduce_loudly():
    switch = _dead_udp_address()
    plain = _run(False, switch)
    hooked = _run(True, switch)
    for rank in range(WORLD):
        params, stats, warnings = hooked[rank]
        # the first iteration is the warm-up all-reduce; every later bucket fell back
        assert stats["hina_buckets"] == 0 and stats["fallback_buckets"] >= STEPS - 1, stats
        assert any("falls back to fp32 all-reduce" in w for w in warnings), warnings
        # the same training as plain DDP (DDP pre-divides, the fallback divides after the sum)
        torch.testing.assert_close(params, plain[rank][0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(hooked[0][0], hooked[1][0], rtol=0, atol=0)


class _NoticeLink:
    """A stand-in for the switch after a restart without this worker: every request is answered
    by a NOTICE (STALE_GENERATION, job generation 7); ``silent`` answers nothing instead."""

    def __init__(self, silent: bool):
        self.silent, self.queue = silent, []

    def send(self, message):
        import numpy as np

        from hina import protocol as P
        from hina.worker.packetizer import HEADER_DTYPE
        if self.silent:
            return
        h = np.frombuffer(bytes(message)[:P.HEADER_BYTES], dtype=HEADER_DTYPE).copy()
        h["ver_type"] = (P.VERSION << 4) | int(P.MsgType.NOTICE)
        h["op"], h["generation"] = int(P.DropReason.STALE_GENERATION), 7
        self.queue.append(h.tobytes())

    def recv(self, timeout):
        return self.queue.pop(0) if self.queue else None

    def close(self):
        pass


def _train_stale(rank: int, init: str, out) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from hina.worker.codecs import ThcCodec
    from hina.worker.ddp_hook import HinaState, hina_hook
    from hina.worker.transport import JobParams, Transport

    torch.set_num_threads(1)
    warnings = _collect_warnings()
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=WORLD)
    try:
        model = DDP(torch.nn.Linear(8, 2))
        transport = Transport(_NoticeLink(silent=rank == 1), JobParams(1, WORLD, 4, 64),
                              min_rto=0.05, max_rto=0.1, give_up_s=0.3)
        state = HinaState(transport, ThcCodec(WORLD, rank=rank), start_iter=1)
        model.register_comm_hook(state, hina_hook)
        for _ in range(2):
            model(torch.randn(4, 8)).sum().backward()
        out.put((rank, dict(state.stats, generation=state.transport.job.generation), warnings))
    finally:
        dist.destroy_process_group()


def test_fallback_after_a_restart_names_the_generation_on_every_worker():
    """Worker 0 gets a NOTICE (the job was restarted in generation 7), worker 1 only a timeout:
    both warnings name the reason and the generation, worker 0 falls back at once, and both
    continue in generation 7."""
    ctx = rank_processes()
    out = ctx.Queue()
    init = f"tcp://127.0.0.1:{free_tcp_port()}"
    procs = [ctx.Process(target=_train_stale, args=(r, init, out)) for r in range(WORLD)]
    for p in procs:
        p.start()
    results = dict((rank, (stats, warnings)) for rank, stats, warnings in
                   (out.get(timeout=120) for _ in range(WORLD)))
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    for rank, (stats, warnings) in results.items():
        assert stats["fallback_buckets"] >= 1 and stats["generation_changes"] >= 1, stats
        assert stats["generation"] == 7, stats      # the next buckets go in the new generation
        fallbacks = [w for w in warnings if "falls back to fp32 all-reduce" in w]
        assert fallbacks and all("STALE_GENERATION" in w and "generation 7" in w
                                 for w in fallbacks), warnings
    assert all("this worker sends generation 1" in w for w in results[0][1] if "falls back" in w)
    assert all("no result" in w for w in results[1][1] if "falls back" in w)


# ------------------------------------------------------------------------------------------------
# A bucket that falls back leaves every worker's codec as it was
# ------------------------------------------------------------------------------------------------
class _DeafToResults:
    """A worker link that loses every result after the agreement round (results of another op
    than MAX): this worker sends all its contributions, so the other worker's call completes,
    while this one times out."""

    def __init__(self, link):
        self.link = link

    def send(self, message):
        self.link.send(message)

    def recv(self, timeout):
        import time

        from hina import protocol as P
        from hina.worker.packetizer import parse_header
        deadline = time.monotonic() + timeout
        while True:
            message = self.link.recv(max(0.0, deadline - time.monotonic()))
            if message is None:
                return None
            header = parse_header(message)
            if header["ver_type"] & 0xF == P.MsgType.RESULT and header["op"] != P.Op.MAX:
                continue
            return message

    def close(self):
        self.link.close()


def _codec(name: str, rank: int):
    from hina.worker.codecs import SketchCodec, ThcCodec
    return ThcCodec(WORLD, rank=rank) if name == "thc" else \
        SketchCodec(WORLD, rows=3, columns=64, k=16)


def _train_one_deaf(rank: int, init: str, link_args, params, codec_name: str, out) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from hina.worker.ddp_hook import HinaState, hina_hook
    from hina.worker.link import FrameLink
    from hina.worker.transport import Transport

    torch.set_num_threads(1)
    warnings = _collect_warnings()
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=WORLD)
    try:
        torch.manual_seed(0)
        model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                        torch.nn.Linear(32, 4)))
        link = FrameLink(*link_args)
        transport = Transport(link if rank == 0 else _DeafToResults(link), params,
                              min_rto=0.05, max_rto=0.1, give_up_s=0.5)
        state = HinaState(transport, _codec(codec_name, rank), start_iter=1)
        model.register_comm_hook(state, hina_hook)
        gen = torch.Generator().manual_seed(rank)
        for _ in range(STEPS):
            x, y = torch.randn(8, 16, generator=gen), torch.randint(0, 4, (8,), generator=gen)
            torch.nn.functional.cross_entropy(model(x), y).backward()
        out.put((rank, dict(state.stats), sorted(state.codec.states),
                 transport.total.results, warnings))
        transport.close()
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("codec_name", ["thc", "fetchsgd"])
def test_a_fallen_back_bucket_leaves_the_codec_as_it_was_on_every_worker(program, codec_name):
    """Through the embedded switch: worker 0's call of every hooked bucket completes (decode
    ran, error feedback moved on), worker 1 loses its results and times out, so the vote makes
    both fall back to fp32. Both codecs must then hold what they held before each bucket:
    nothing, here (the buckets never went through the switch as far as training is concerned);
    FetchSGD's sketches, which every worker must hold alike, stay alike."""
    from hina.testing.switchjob import LocalJob
    job = LocalJob(program, WORLD, n_slots=16)    # a window that holds a bucket's whole stream
    ctx = rank_processes()
    out = ctx.Queue()
    procs = []
    try:
        links = []
        for link in job.links:                 # the workers' tunnel sockets: in the children
            links.append((link.me, link.switch, link.sock.getsockname(), link.tunnel_switch))
            link.close()
        init = f"tcp://127.0.0.1:{free_tcp_port()}"
        procs = [ctx.Process(target=_train_one_deaf,
                             args=(r, init, links[r], job.params, codec_name, out))
                 for r in range(WORLD)]
        for p in procs:
            p.start()
        results = {}
        for _ in range(WORLD):
            rank, stats, keys, n_results, warnings = out.get(timeout=120)
            results[rank] = (stats, keys, n_results, warnings)
        for p in procs:
            p.join(timeout=30)
            assert p.exitcode == 0
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
        job.close()
    hooked = STEPS - 1
    for rank, (stats, keys, _, warnings) in results.items():
        assert stats["hina_buckets"] == 0 and stats["fallback_buckets"] == hooked, stats
        assert any("falls back to fp32 all-reduce" in w for w in warnings), warnings
        assert keys == [], f"worker {rank}'s codec kept state of fallen-back buckets: {keys}"
    # worker 0 really completed its calls (agreement and main streams), worker 1 only agreed
    assert results[0][2] > results[1][2] > 0, (results[0][2], results[1][2])
