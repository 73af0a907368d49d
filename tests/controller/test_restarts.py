"""Restarts need no manual step (issue 13 part 1, docs/reliability.md "Restarts").

The job service runs in this process with what ``hina-ctl serve`` wires into it
(:class:`controller.restarts.SwitchKeeper` as the generation bumper, behind a
:class:`controller.primary.PrimaryHold`), on the embedded switch; workers are threads with their
own :class:`worker.jobclient.JobClient`. One test runs a real ``hina-ctl serve`` process.

* a job run twice by two sets of workers aggregates exactly both times (one bump);
* a worker whose session is abandoned (a crash: no Leave, its lease runs out) and that starts
  again: the job moves to a new generation, the survivors follow it and never get a wrong sum,
  and ``hina-ctl job show`` names the worker and the cause;
* the job service restarted: workers join again with their token and carry on;
* the switch restarted on the same address: pipeline and jobs re-installed, the next allreduce
  is exact.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from controller.jobs import JobManager
from controller.jobservice import StateFileJobs, serve
from controller.p4runtime_client import SwitchConnection
from controller.primary import PrimaryHold
from controller.restarts import SwitchKeeper
from controller.state import ControllerState
from ctlutil import free_port, wait_for
from worker.agent import allreduce_following
from worker.jobclient import JobClient

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "restart-test-token"
JOB = 1
N_WORKERS = 3
LEASE_S = 1.0
RECOVERY_S = 2.0          # the bound of issue 13: aggregating again within 2 s of a Join
CLI_TIMEOUT_S = 60


def _grads(step: int, n: int = N_WORKERS, numel: int = 300) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(100 + step)
    return [torch.randn(numel, generator=gen) for _ in range(n)]


def _exact(step: int, n: int = N_WORKERS) -> torch.Tensor:
    return sum(_grads(step, n)) / n


class Controller:
    """The switch side of ``hina-ctl serve`` in this process: a state file, the primary hold
    with its keeper, and the job service (``restart_service`` starts a fresh one)."""

    def __init__(self, switch, pipeline, state_path: Path, n_workers: int = N_WORKERS,
                 lease_s: float = LEASE_S):
        self.switch, self.state_path, self.lease_s = switch, state_path, lease_s
        with SwitchConnection(switch.address) as conn:
            conn.set_pipeline(*pipeline.build())
            config = JobManager(conn).create_job(switch.job(job_id=JOB, n_workers=n_workers,
                                                            n_slots=4))
        ControllerState(pipeline, {JOB: config}).save(state_path)
        self.keeper = SwitchKeeper(state_path)
        self.hold = PrimaryHold(lambda: SwitchConnection(switch.address, timeout=3),
                                retry_s=0.2, on_primary=self.keeper.attach)
        self.hold.start()
        self.address = f"127.0.0.1:{free_port()}"
        self.server = None
        self.start_service()

    def start_service(self) -> None:
        self.server = serve(StateFileJobs(self.state_path), self.address, lease_s=self.lease_s,
                            tokens=lambda: {JOB: TOKEN}, generation_bumper=self.keeper.bump)

    def restart_service(self) -> None:
        self.server.stop(grace=None).wait(5)
        self.start_service()

    def job(self):
        return ControllerState.load(self.state_path).jobs[JOB]

    def close(self) -> None:
        if self.server is not None:
            self.server.stop(grace=None).wait(5)
        self.hold.stop()


@pytest.fixture
def controller(embedded_switch, embedded_pipeline, tmp_path):
    ctl = Controller(embedded_switch, embedded_pipeline, tmp_path / "ctl.json")
    try:
        yield ctl
    finally:
        ctl.close()


class Worker:
    """One worker: its client, seat and transport (a thread runs its steps)."""

    def __init__(self, address: str, heartbeat: bool = True, give_up_s: float = 10.0,
                 timeout: float = 30.0):
        self.client = JobClient(address, token=TOKEN, heartbeat=heartbeat, timeout=5)
        deadline = time.monotonic() + timeout
        while True:           # the seat of a crashed worker is free once its lease ran out
            try:
                self.seat = self.client.join(JOB)
                break
            except Exception as exc:
                if getattr(exc, "code", "") != "RESOURCE_EXHAUSTED" or \
                        time.monotonic() > deadline:
                    self.client.close()
                    raise
                time.sleep(0.05)
        self.joined = time.monotonic()
        self.codec = self.seat.codec()
        self.transport = self.seat.transport(give_up_s=give_up_s)

    @property
    def index(self) -> int:
        return self.seat.worker_index

    def step(self, step: int) -> torch.Tensor:
        mine = _grads(step)[self.index]
        return allreduce_following(self.client, mine.clone(), self.codec, self.transport)

    def crash(self) -> None:
        """Stop as a killed process would: no Leave, no more requests, its socket gone."""
        self.transport.close()
        self.client._stop.set()
        self.client.seat = None
        self.client._channel.close()

    def close(self) -> None:
        self.transport.close()
        self.client.close()


def _run_workers(address: str, steps: list[int]) -> list[tuple[Worker, list, float]]:
    """N_WORKERS threads join, meet, run ``steps``; (worker, means, seconds from join to the
    first result) each, by worker index."""
    def run(_):
        w = Worker(address)
        try:
            w.client.barrier("start", timeout=10)
            means, first = [], None
            for s in steps:
                means.append(w.step(s))
                first = first or time.monotonic() - w.joined
            return w, means, first
        finally:
            w.close()
    with ThreadPoolExecutor(N_WORKERS) as pool:
        out = list(pool.map(run, range(N_WORKERS)))
    return sorted(out, key=lambda r: r[0].index)


def test_a_job_run_twice_aggregates_both_times(controller):
    first = _run_workers(controller.address, [0, 1])
    for _, means, _ in first:
        assert all(torch.allclose(m, _exact(s), atol=1e-4) for s, m in zip([0, 1], means))
    assert controller.job().generation == 1
    # the same job, new worker processes, no reset: one bump, and aggregation at once
    second = _run_workers(controller.address, [2, 3])
    for w, means, first_s in second:
        assert all(torch.allclose(m, _exact(s), atol=1e-4) for s, m in zip([2, 3], means))
        assert first_s < RECOVERY_S, f"worker {w.index}: first result {first_s:.2f}s after join"
        assert w.seat.generation == 2 and w.transport.job.generation == 2
    job = controller.job()
    assert job.generation == 2            # one bump for N workers, not N
    assert "whole job runs again" in job.generation_cause and "left" in job.generation_cause


def test_a_crashed_worker_restarts_and_survivors_follow(controller):
    workers = [Worker(controller.address, heartbeat=(i < N_WORKERS - 1))
               for i in range(N_WORKERS)]
    workers.sort(key=lambda w: w.index)
    crashed = workers[-1]
    survivors = workers[:-1]
    try:
        with ThreadPoolExecutor(N_WORKERS) as pool:
            for means in pool.map(lambda w: w.step(0), workers):
                assert torch.allclose(means, _exact(0), atol=1e-4)
        crashed.crash()
        # the survivors go on with step 1 and wait for the missing worker (bounded: give_up_s)
        with ThreadPoolExecutor(N_WORKERS) as pool:
            waiting = [pool.submit(w.step, 1) for w in survivors]
            time.sleep(LEASE_S + 0.3)      # its lease runs out
            restarted = Worker(controller.address)
            assert restarted.index == crashed.index and restarted.seat.generation == 2
            mine = restarted.step(1)
            took = time.monotonic() - restarted.joined
            results = [f.result(timeout=30) for f in waiting]
        assert took < RECOVERY_S, f"restarted worker aggregated {took:.2f}s after its join"
        for mean in results + [mine]:        # never a wrong sum
            assert torch.allclose(mean, _exact(1), atol=1e-4)
        for w in survivors:                  # they learned the new generation
            assert w.transport.job.generation == 2 and w.client.seat.generation == 2
        workers[-1] = restarted
        with ThreadPoolExecutor(N_WORKERS) as pool:     # and all go on together
            for means in pool.map(lambda w: w.step(2), workers):
                assert torch.allclose(means, _exact(2), atol=1e-4)
    finally:
        for w in workers + survivors:
            try:
                w.close()
            except Exception:
                pass
    assert controller.job().generation == 2
    shown = subprocess.run([sys.executable, "-m", "controller.cli", "--switch",
                            controller.switch.address, "--state", str(controller.state_path),
                            "job", "show", str(JOB), "--json"], capture_output=True, text=True,
                           cwd=ROOT, timeout=CLI_TIMEOUT_S)
    data = json.loads(shown.stdout)
    assert data["generation"] == 2
    cause = data["generation_cause"]
    assert f"worker {crashed.index} restarted" in cause and "timed out" in cause, cause
    text = subprocess.run([sys.executable, "-m", "controller.cli", "--state",
                           str(controller.state_path), "job", "show", str(JOB)],
                          capture_output=True, text=True, cwd=ROOT, timeout=CLI_TIMEOUT_S)
    assert "generation cause" in text.stdout and "timed out" in text.stdout


def test_workers_carry_on_when_the_job_service_restarts(controller):
    workers = [Worker(controller.address) for _ in range(N_WORKERS)]
    try:
        with ThreadPoolExecutor(N_WORKERS) as pool:
            for mean in pool.map(lambda w: w.step(0), workers):
                assert torch.allclose(mean, _exact(0), atol=1e-4)
        sessions = [w.client.seat.session for w in workers]
        controller.restart_service()
        # heartbeats are refused (the new service never saw the sessions): each joins again
        rejoined = wait_for(lambda: [w.client.seat.session for w in workers],
                            lambda now: all(a != b for a, b in zip(now, sessions)), timeout=10)
        assert all(a != b for a, b in zip(rejoined, sessions)), "workers did not join again"
        assert [w.client.seat.worker_index for w in workers] == [w.index for w in workers]
        with ThreadPoolExecutor(N_WORKERS) as pool:
            assert set(pool.map(lambda w: w.client.barrier("after", timeout=10),
                                workers)) == {1}
            for mean in pool.map(lambda w: w.step(1), workers):
                assert torch.allclose(mean, _exact(1), atol=1e-4)
        assert controller.job().generation == 1      # the same workers: no new generation
    finally:
        for w in workers:
            w.close()


def test_a_restarted_switch_gets_pipeline_and_jobs_again(controller):
    workers = [Worker(controller.address) for _ in range(N_WORKERS)]
    try:
        with ThreadPoolExecutor(N_WORKERS) as pool:
            for mean in pool.map(lambda w: w.step(0), workers):
                assert torch.allclose(mean, _exact(0), atol=1e-4)
        resyncs = controller.keeper.resyncs
        controller.switch.restart()
        started = time.monotonic()
        assert wait_for(lambda: controller.keeper.resyncs, lambda n: n > resyncs, timeout=15) \
            > resyncs, "serve did not re-install the restarted switch"
        with ThreadPoolExecutor(N_WORKERS) as pool:
            for mean in pool.map(lambda w: w.step(1), workers):
                assert torch.allclose(mean, _exact(1), atol=1e-4)
        print(f"switch restart: aggregating again after {time.monotonic() - started:.2f}s")
    finally:
        for w in workers:
            w.close()


# ------------------------------------------------------------------------------------------------
# A real hina-ctl serve
# ------------------------------------------------------------------------------------------------
def test_hina_ctl_serve_bumps_a_rerun_job(embedded_switch, embedded_pipeline, tmp_path):
    state = tmp_path / "ctl.json"
    with SwitchConnection(embedded_switch.address) as conn:
        conn.set_pipeline(*embedded_pipeline.build())
        config = JobManager(conn).create_job(embedded_switch.job(job_id=JOB,
                                                                 n_workers=N_WORKERS))
    ControllerState(embedded_pipeline, {JOB: config}).save(state)
    ctl = [sys.executable, "-m", "controller.cli", "--switch", embedded_switch.address,
           "--state", str(state), "--timeout", "3"]
    token = tmp_path / "token"
    subprocess.run(ctl + ["job", "token", str(JOB), "--token-file", str(token)], check=True,
                   cwd=ROOT, timeout=CLI_TIMEOUT_S, capture_output=True)
    global TOKEN
    address = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen(ctl + ["serve", "--listen", address, "--lease", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    saved = TOKEN
    try:
        assert "listening" in proc.stdout.readline(), proc.stderr.read()
        TOKEN = token.read_text().strip()
        for run, steps in enumerate(([0], [1]), start=1):
            for w, means, first_s in _run_workers(address, steps):
                assert torch.allclose(means[0], _exact(steps[0]), atol=1e-4)
                assert w.seat.generation == run
                assert first_s < RECOVERY_S
        job = ControllerState.load(state).jobs[JOB]
        assert job.generation == 2 and "runs again" in job.generation_cause
    finally:
        TOKEN = saved
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
