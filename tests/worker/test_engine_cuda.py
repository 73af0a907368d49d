"""The aggregation engine on CUDA tensors (worker.engine): the stream semantics of PyTorch's own
comm hooks. Runs only where torch sees a GPU (skipped elsewhere, with the reason); the CPU paths
of the same engine are tests/worker/test_engine.py.

* The bucket's producer may still be running when the hook is called: the engine's stream waits
  for the event recorded at submit on the producer's stream, so it reads finished gradients.
* The future is created with the bucket's device and completes on the engine's stream: a
  consumer's ``wait()`` makes its own stream wait for that work, so it reads the mean.
"""
from __future__ import annotations

import pytest
import torch

from hina.testing.switchjob import LocalJob
from hina.worker.codecs import FixedPointCodec, ThcCodec
from hina.worker.engine import AggregationEngine

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device: these tests run where torch sees one")

N = 2
SIZE = 40_000


def _engines(program, codecs, **job_args):
    job = LocalJob(program, N, n_slots=16, **job_args)
    return job, [AggregationEngine(t, c, group=None) for t, c in zip(job.transports(), codecs)]


def _close(job, engines):
    for e in engines:
        e.close()
    job.close()


def test_the_engine_waits_for_a_bucket_still_being_produced(program):
    """Each bucket is written on a side stream after a long GPU spin and handed over at once:
    without the wait on the producer's event the engine would read the buffer's old contents
    (zeros) and the mean would be wrong."""
    dev = torch.device("cuda", 0)
    job, engines = _engines(program, [FixedPointCodec(N, rank=w) for w in range(N)])
    try:
        gen = torch.Generator().manual_seed(1)
        values = [torch.randn(SIZE, generator=gen) for _ in range(N)]
        futures, buffers = [], []
        for w in range(N):
            producer = torch.cuda.Stream(dev)
            buf = torch.zeros(SIZE, device=dev)
            torch.cuda.synchronize(dev)
            with torch.cuda.stream(producer):
                torch.cuda._sleep(200_000_000)          # ~0.1 s of GPU time before the write
                buf.copy_(values[w].to(dev, non_blocking=True))
                futures.append(engines[w].submit(0, buf))   # the hook runs on this stream
            buffers.append(buf)
        want = (values[0] + values[1]) / N
        for fut, buf in zip(futures, buffers):
            consumer = torch.cuda.Stream(dev)
            with torch.cuda.stream(consumer):
                got = fut.wait()                        # this stream waits for the engine's
                assert got is buf and got.device == dev
                torch.testing.assert_close(got.cpu(), want, rtol=0, atol=1e-5)
        assert all(e.stats["hina_buckets"] == 1 and e.stats["fallback_buckets"] == 0
                   for e in engines)
    finally:
        _close(job, engines)


def test_thc_on_cuda_through_the_engine_agrees_across_workers(program):
    """THC on CUDA (the fused Triton kernels where Triton imports): every worker decodes the same
    mean, bit for bit, within THC's error of the exact mean, in several pipelined buckets."""
    dev = torch.device("cuda", 0)
    codecs = [ThcCodec(N, rank=w, seed=7) for w in range(N)]
    job, engines = _engines(program, codecs, table=tuple(codecs[0].table))
    try:
        gen = torch.Generator().manual_seed(2)
        grads = [[torch.randn(SIZE, generator=gen) for _ in range(3)] for _ in range(N)]
        futures = [[engines[w].submit(k, grads[w][k].to(dev)) for k in range(3)]
                   for w in range(N)]
        for k in range(3):
            want = (grads[0][k] + grads[1][k]) / N
            got = [futures[w][k].wait().cpu() for w in range(N)]
            torch.testing.assert_close(got[0], got[1], rtol=0, atol=0)
            nmse = float(((got[0] - want) ** 2).sum() / (want ** 2).sum())
            assert nmse < 0.3, f"bucket {k}: THC's NMSE {nmse:.4f} on CUDA"
    finally:
        _close(job, engines)
