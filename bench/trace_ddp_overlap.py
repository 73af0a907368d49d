"""A timeline of the asynchronous DDP hook's engine in ``bench/bench_ddp_overlap.py``: when each
bucket is handed over, when the engine starts and ends it, and the engine thread's CPU time per
bucket, against backward.

    python bench/trace_ddp_overlap.py [bench_ddp_overlap's options, e.g. --batch 64 --steps 4]

Runs ``bench_ddp_overlap`` as it is (same output), with worker 0's engine and ``backward``
timed; then prints its last two steps of the asynchronous hook, times in ms from the start of
backward. It shows what stays exposed after backward ends (docs/benchmarks.md).
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "bench_ddp_overlap", Path(__file__).resolve().parent / "bench_ddp_overlap.py")
overlap = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(overlap)
_run_worker = overlap._worker


def traced_worker(rank, n, init, seat, args, out):
    """bench_ddp_overlap's worker, with rank 0's engine and backward passes timed."""
    import torch

    from hina.worker import engine as E
    events = []
    submit, process = E.AggregationEngine.submit, E.AggregationEngine._process

    def timed_submit(self, key, tensor):
        events.append(("submit", key, time.perf_counter(), None))
        return submit(self, key, tensor)

    def timed_process(self, job):
        cpu = time.thread_time()
        events.append(("start", job[0], time.perf_counter(), None))
        process(self, job)
        events.append(("done", job[0], time.perf_counter(), time.thread_time() - cpu))

    backward = torch.Tensor.backward

    def timed_backward(self, *a, **k):
        events.append(("backward", None, time.perf_counter(), None))
        try:
            return backward(self, *a, **k)
        finally:
            events.append(("backward ends", None, time.perf_counter(), None))

    if rank == 0:
        E.AggregationEngine.submit, E.AggregationEngine._process = timed_submit, timed_process
        torch.Tensor.backward = timed_backward
    try:
        _run_worker(rank, n, init, seat, args, out)
    finally:
        if rank == 0:
            Path(os.environ["HINA_TRACE_FILE"]).write_text(json.dumps(events))


overlap._worker = traced_worker


def main(argv=None) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        os.environ["HINA_TRACE_FILE"] = str(trace)     # the spawned workers inherit it
        rc = overlap.main(argv)
        events = json.loads(trace.read_text())
    starts = [i for i, e in enumerate(events) if e[0] == "backward"]
    # the asynchronous hook's steps come last before the communication-only runs
    print("\nworker 0, the asynchronous hook's last two steps (ms from the start of backward):")
    for a, b in zip(starts[-3:-1], starts[-2:]):
        t0 = events[a][2]
        for kind, key, t, cpu in events[a:b]:
            where = "" if key is None else f" bucket {key}"
            extra = "" if cpu is None else f"   (engine CPU {1e3 * cpu:.1f} ms)"
            print(f"  {1e3 * (t - t0):8.1f}  {kind}{where}{extra}")
        print("  --")
    return rc


if __name__ == "__main__":
    sys.exit(main())
