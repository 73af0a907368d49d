"""A timeline of the asynchronous DDP hook's engine in ``bench/bench_ddp_overlap.py``: when each
bucket is handed over, when the engine starts and ends it, its phases (the switch rounds, the
codec's agreement, encode and decode, the vote) and the engine's CPU time, against backward.

    python bench/trace_ddp_overlap.py [bench_ddp_overlap's options, e.g. --batch 64 --steps 4]

Runs ``bench_ddp_overlap`` as it is (same output), with worker 0's engine and ``backward``
timed; then prints its last two steps of the asynchronous hook, times in ms from the start of
backward (a phase: its start, [lane,] wall and engine-thread CPU time), when the other workers
handed over and finished each bucket, and the switch process's CPU time over those steps.
``--lanes 1`` shows the engine taking one bucket at a time. It shows what stays exposed after
backward ends (docs/benchmarks.md).
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "bench_ddp_overlap", Path(__file__).resolve().parent / "bench_ddp_overlap.py")
overlap = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(overlap)
_run_worker = overlap._worker
_SWITCH_PID = "HINA_TRACE_SWITCH_PID"


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def traced_worker(rank, n, init, seat, args, out):
    """bench_ddp_overlap's worker, with the engines, codecs and backward passes timed."""
    import torch

    from hina.demo import digits
    from hina.worker import engine as E
    from hina.worker import transport as T
    events = []
    switch = int(os.environ[_SWITCH_PID])

    def phase(name, fn):
        """``fn`` timed as a phase of the bucket the calling thread is on."""
        def timed(*a, **k):
            t0, cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                lane = threading.current_thread().name.rpartition("-")[2]
                where = f"[{lane}] " if lane.isdigit() else ""
                events.append(("phase", where + name, t0, (time.perf_counter() - t0,
                                                           time.thread_time() - cpu)))
        return timed

    submit, process = E.AggregationEngine.submit, E.AggregationEngine._process
    reduce, vote = T.Transport.reduce, E.AggregationEngine._vote
    make_codec = digits.make_codec

    def timed_submit(self, key, tensor):
        events.append(("submit", key, time.perf_counter(), None))
        return submit(self, key, tensor)

    def timed_process(self, lane, job):
        cpu = time.thread_time()
        events.append(("start", job[1], time.perf_counter(), lane))
        process(self, lane, job)
        events.append(("done", job[1], time.perf_counter(), time.thread_time() - cpu))

    def timed_reduce(self, op, data):
        return phase(f"{T.P.Op(op).name} round, {data.size} values", reduce)(self, op, data)

    def timed_codec(*a, **k):
        codec = make_codec(*a, **k)
        for name in ("agreement", "encode", "decode"):
            setattr(codec, name, phase(name, getattr(codec, name)))
        return codec

    backward = torch.Tensor.backward

    def timed_backward(self, *a, **k):
        events.append(("backward", None, time.perf_counter(), _cpu_of(switch)))
        try:
            return backward(self, *a, **k)
        finally:
            events.append(("backward ends", None, time.perf_counter(), None))

    E.AggregationEngine.submit, E.AggregationEngine._process = timed_submit, timed_process
    T.Transport.reduce, E.AggregationEngine._vote = timed_reduce, phase("vote", vote)
    digits.make_codec = timed_codec
    torch.Tensor.backward = timed_backward
    try:
        _run_worker(rank, n, init, seat, args, out)
    finally:
        Path(os.environ["HINA_TRACE_FILE"] + f".{rank}").write_text(json.dumps(events))


overlap._worker = traced_worker


def main(argv=None) -> int:
    from hina.demo import local
    deployment_init = local.LocalDeployment.__init__

    def noted_init(self, *a, **k):
        deployment_init(self, *a, **k)
        os.environ[_SWITCH_PID] = str(self.proc.pid)     # the spawned workers inherit it

    local.LocalDeployment.__init__ = noted_init
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        os.environ["HINA_TRACE_FILE"] = str(trace)     # the spawned workers inherit it
        rc = overlap.main(argv)
        events = json.loads(Path(f"{trace}.0").read_text())
        others = [json.loads(p.read_text()) for p in sorted(Path(tmp).glob("trace.json.*"))[1:]]
    starts = [i for i, e in enumerate(events) if e[0] == "backward"]
    # the asynchronous hook's steps come last before the communication-only runs
    print("\nworker 0, the asynchronous hook's last two steps (ms from the start of backward; "
          "a phase: start, wall ms, engine-thread CPU ms):")
    for a, b in zip(starts[-3:-1], starts[-2:]):
        t0 = events[a][2]
        for kind, key, t, extra in events[a:b]:
            if kind == "phase":
                print(f"  {1e3 * (t - t0):8.1f}      {key:<34} {1e3 * extra[0]:7.1f} "
                      f"{1e3 * extra[1]:6.1f}")
                continue
            where = "" if key is None else f" bucket {key}"
            where += f" on lane {extra}" if kind == "start" else ""
            cpu = f"   (engine CPU {1e3 * extra:.1f} ms)" if kind == "done" else ""
            print(f"  {1e3 * (t - t0):8.1f}  {kind}{where}{cpu}")
        for w, other in enumerate(others, 1):
            shown = [f"{kind} {key} at {1e3 * (t - t0):.1f}" for kind, key, t, _ in other
                     if kind in ("submit", "done") and t0 <= t < events[b][2]]
            print(f"  worker {w}: " + ", ".join(shown))
        print(f"  -- the switch process used {1e3 * (events[b][3] - events[a][3]):.0f} ms of "
              f"CPU in this step ({1e3 * (events[b][2] - t0):.0f} ms from backward to the next)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
