"""Restarts on real BMv2 (docs/reliability.md "Restarts"): what ``test_restarts.py`` checks on the
embedded switch, with ``simple_switch_grpc`` on veth pairs.

The job service runs in this process with what ``hina-ctl serve`` wires into it
(:class:`controller.restarts.SwitchKeeper` with BMv2's Thrift port, behind a
:class:`controller.primary.PrimaryHold`); workers are threads with their own
:class:`worker.jobclient.JobClient`, whose frames go in and out on raw sockets of the veth ends
(:class:`controller.faultsuite_procs.VethFrameLink`). One test runs a real ``hina-ctl serve``
process against BMv2 with mutual TLS.

* a job run twice by two sets of workers aggregates exactly both times (one bump: a MODIFY of
  BMv2's admission entries);
* a crashed worker restarts: the survivors get BMv2's NOTICE and follow the new generation;
* ``simple_switch_grpc`` gets SIGKILL and starts again on the same ports and interfaces (a fresh
  device without a pipeline): serve re-pushes pipeline and job, the next allreduce is exact;
  the recovery time is measured and bounded;
* the same with ``hina-ctl serve`` as a process and BMv2 serving P4Runtime over mutual TLS:
  serve re-installs the restarted switch over TLS.

Needs root (veths, raw sockets) and the BMv2 toolchain; skips with the reason otherwise.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from hina.controller.config import JobConfig
from hina.controller.jobs import JobManager
from hina.controller.jobservice import StateFileJobs, serve
from hina.controller.p4runtime_client import SwitchConnection
from hina.controller.primary import PrimaryHold
from hina.controller.restarts import SwitchKeeper
from hina.controller.state import ControllerState
from hina.controller.target import register_access
from hina.controller.tokens import TokenStore, tokens_path
from ctlutil import TEST_WORDS, bmv2_ports_missing, free_port, wait_for
from hina.tls import ClientTls, ServerTls
from hina.worker.agent import allreduce_following
from hina.worker.jobclient import JobClient
from hina.worker.link import Endpoint

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "bmv2-restart-test-token"
JOB = 1
N_WORKERS = 3
LEASE_S = 1.0
#: Aggregating again within 2 s of a Join (the bound test_restarts.py asserts on the embedded
#: switch, docs/reliability.md "Restarts").
RECOVERY_S = 2.0
#: From the SIGKILL of simple_switch_grpc to the first exact allreduce after it: BMv2's start
#: (about 0.3 s), the primary hold's retry (0.2 s here), the push of the compiled JSON, the job's
#: entries and register zeroing over Thrift, and the workers' retransmission back-off (max_rto
#: 1 s). Measured about 2 s on the loaded 2-core machine.
SWITCH_RECOVERY_S = 6.0
#: The same with a real hina-ctl serve, whose primary hold retries every 2 s.
SERVE_SWITCH_RECOVERY_S = 8.0
GIVE_UP_S = 15.0
CLI_TIMEOUT_S = 120


def _grads(step: int, n: int = N_WORKERS, numel: int = 300) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(200 + step)
    return [torch.randn(numel, generator=gen) for _ in range(n)]


def _exact(step: int, n: int = N_WORKERS) -> torch.Tensor:
    return sum(_grads(step, n)) / n


@pytest.fixture
def bmv2_ports(tmp_path):
    """simple_switch_grpc with a veth pair per worker port, restartable on the same ports."""
    reason = bmv2_ports_missing()
    if reason:
        pytest.skip(reason)
    from hina.controller.faultsuite_procs import Bmv2SwitchProcess
    sw = Bmv2SwitchProcess(N_WORKERS, tmp_path)
    try:
        yield sw
    finally:
        sw.stop()


def _install(sw, pipeline, state_path: Path, tls=None) -> None:
    """Pipeline and job on the switch; the state file that serve re-installs them from."""
    with SwitchConnection(sw.address, tls=tls, timeout=10) as conn:
        conn.set_pipeline(*pipeline.build())
        registers = register_access("bmv2", conn, sw.thrift_port)
        try:
            config = JobManager(conn, registers=registers, target="bmv2").create_job(
                JobConfig(job_id=JOB, codec="fixed", n_slots=4, words=TEST_WORDS,
                          workers=tuple(sw.worker_config(w) for w in range(N_WORKERS))))
        finally:
            registers.close()
    ControllerState(pipeline, {JOB: config}).save(state_path)


class Controller:
    """The switch side of ``hina-ctl serve`` in this process, on BMv2."""

    def __init__(self, sw, pipeline, state_path: Path):
        self.switch, self.state_path = sw, state_path
        _install(sw, pipeline, state_path)
        self.keeper = SwitchKeeper(state_path, thrift_port=sw.thrift_port)
        self.hold = PrimaryHold(lambda: SwitchConnection(sw.address, timeout=3),
                                retry_s=0.2, on_primary=self.keeper.attach)
        self.hold.start()
        self.address = f"127.0.0.1:{free_port()}"
        self.server = serve(StateFileJobs(state_path), self.address, lease_s=LEASE_S,
                            tokens=lambda: {JOB: TOKEN}, generation_bumper=self.keeper.bump)

    def job(self):
        return ControllerState.load(self.state_path).jobs[JOB]

    def close(self) -> None:
        self.server.stop(grace=None).wait(5)
        self.hold.stop()


@pytest.fixture
def controller(bmv2_ports, bmv2_pipeline, tmp_path):
    ctl = Controller(bmv2_ports, bmv2_pipeline, tmp_path / "ctl.json")
    try:
        yield ctl
    finally:
        ctl.close()


class Worker:
    """One worker thread's client, seat and transport; frames on its port's veth end."""

    def __init__(self, address: str, sw, heartbeat: bool = True, token: str = TOKEN,
                 timeout: float = 30.0):
        from hina.controller.faultsuite_procs import VethFrameLink
        from hina.worker.transport import Transport
        self.client = JobClient(address, token=token, heartbeat=heartbeat, timeout=5)
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
        link = VethFrameLink(Endpoint.make(*self.seat.me), Endpoint.make(*self.seat.switch),
                             sw.iface_map()[self.seat.me[1]])
        self.transport = Transport(link, self.seat.job_params(), give_up_s=GIVE_UP_S)

    @property
    def index(self) -> int:
        return self.seat.worker_index

    def step(self, step: int) -> torch.Tensor:
        mine = _grads(step)[self.index]
        return allreduce_following(self.client, mine.clone(), self.codec, self.transport,
                                   call_id=step)

    def crash(self) -> None:
        """Stop as a killed process would: no Leave, no more requests, its socket gone."""
        self.transport.close()
        self.client._stop.set()
        self.client.seat = None
        self.client._channel.close()

    def close(self) -> None:
        self.transport.close()
        self.client.close()


def _join_all(address: str, sw, token: str = TOKEN) -> list[Worker]:
    with ThreadPoolExecutor(N_WORKERS) as pool:
        workers = list(pool.map(lambda _: Worker(address, sw, token=token), range(N_WORKERS)))
    return sorted(workers, key=lambda w: w.index)


def _step_all(workers: list[Worker], step: int) -> list[float]:
    """Every worker all-reduces its gradient of ``step``; each result must be the exact mean.
    Returns when each finished (monotonic)."""
    def run(w):
        mean = w.step(step)
        return mean, time.monotonic()
    with ThreadPoolExecutor(len(workers)) as pool:
        out = list(pool.map(run, workers))
    for w, (mean, _) in zip(workers, out):
        assert torch.allclose(mean, _exact(step), atol=1e-4), f"worker {w.index}, step {step}"
    return [t for _, t in out]


def _close(workers) -> None:
    for w in workers:
        try:
            w.close()
        except Exception:  # noqa: BLE001 - teardown goes on
            pass


# ------------------------------------------------------------------------------------------------
def test_a_job_run_twice_aggregates_both_times_on_bmv2(controller, bmv2_ports):
    for run, steps in enumerate(([0, 1], [2, 3]), start=1):
        workers = _join_all(controller.address, bmv2_ports)
        try:
            for step in steps:
                finished = _step_all(workers, step)
                if step == steps[0]:
                    first = max(finished) - max(w.joined for w in workers)
            assert all(w.seat.generation == run and w.transport.job.generation == run
                       for w in workers)
        finally:
            _close(workers)
        assert first < RECOVERY_S, f"run {run}: first result {first:.2f}s after the last join"
    job = controller.job()
    assert job.generation == 2            # one bump for N workers, not N
    assert "whole job runs again" in job.generation_cause


def test_a_crashed_worker_restarts_and_survivors_follow_on_bmv2(controller, bmv2_ports):
    workers = [Worker(controller.address, bmv2_ports, heartbeat=(i < N_WORKERS - 1))
               for i in range(N_WORKERS)]
    workers.sort(key=lambda w: w.index)
    crashed, survivors = workers[-1], workers[:-1]
    restarted = None
    try:
        _step_all(workers, 0)
        crashed.crash()
        with ThreadPoolExecutor(N_WORKERS) as pool:
            waiting = [pool.submit(w.step, 1) for w in survivors]
            time.sleep(LEASE_S + 0.3)      # its lease runs out
            restarted = Worker(controller.address, bmv2_ports)
            assert restarted.index == crashed.index and restarted.seat.generation == 2
            mine = restarted.step(1)
            took = time.monotonic() - restarted.joined
            results = [f.result(timeout=60) for f in waiting]
        assert took < RECOVERY_S, f"restarted worker aggregated {took:.2f}s after its join"
        for mean in results + [mine]:        # never a wrong sum
            assert torch.allclose(mean, _exact(1), atol=1e-4)
        for w in survivors:                  # BMv2's NOTICE made them follow
            assert w.transport.job.generation == 2 and w.client.seat.generation == 2
        _step_all(survivors + [restarted], 2)
    finally:
        _close(survivors + ([restarted] if restarted else []))
        try:
            crashed.transport.close()
        except Exception:  # noqa: BLE001
            pass
    assert controller.job().generation == 2


def test_a_killed_bmv2_gets_pipeline_and_jobs_again(controller, bmv2_ports):
    workers = _join_all(controller.address, bmv2_ports)
    try:
        _step_all(workers, 0)
        for kill, step in enumerate((1, 2), start=1):
            resyncs, pid = controller.keeper.resyncs, bmv2_ports.process.pid
            killed_at = bmv2_ports.kill()                 # SIGKILL: no clean-up of any kind
            bmv2_ports.restart()                          # same ports, same veths, no pipeline
            up = time.monotonic() - killed_at
            assert bmv2_ports.process.pid != pid
            assert wait_for(lambda: controller.keeper.resyncs, lambda n: n > resyncs,
                            timeout=30) > resyncs, "serve did not re-install the killed switch"
            installed = time.monotonic() - killed_at
            finished = _step_all(workers, step)
            took = max(finished) - killed_at
            print(f"BMv2 kill {kill}: up again after {up:.2f}s, pipeline and job re-installed "
                  f"after {installed:.2f}s, aggregating (exact) after {took:.2f}s")
            assert took < SWITCH_RECOVERY_S, f"kill {kill}: exact again only {took:.2f}s after"
        # each re-install moves the job on (the switch lost its slots): the workers' packets of
        # the old generation meet a NOTICE at once, and they follow
        job = controller.job()
        assert job.generation == 3 and "switch restarted" in job.generation_cause, job
    finally:
        _close(workers)


def test_hina_ctl_serve_reinstalls_a_killed_bmv2_over_mutual_tls(pki, bmv2_pipeline, tmp_path):
    """serve as a process, BMv2 with --grpc-server-ssl and client authentication: after a
    SIGKILL and a restart (the same TLS flags), serve takes the role back and re-installs pipeline
    and job over TLS; the next allreduce is exact."""
    reason = bmv2_ports_missing()
    if reason:
        pytest.skip(reason)
    from hina.controller.faultsuite_procs import Bmv2SwitchProcess
    sw = Bmv2SwitchProcess(N_WORKERS, tmp_path, tls=ServerTls(pki.server_cert, pki.server_key,
                                                              client_ca=pki.ca))
    client = ClientTls(pki.ca, pki.client_cert, pki.client_key)
    state = tmp_path / "ctl.json"
    proc = None
    workers = []
    try:
        _install(sw, bmv2_pipeline, state, tls=client)
        token = TokenStore(tokens_path(state)).issue(JOB)
        listen = f"127.0.0.1:{free_port()}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "hina.controller.cli", "--switch", sw.address, "--state",
             str(state), "--timeout", "5", "--target", "bmv2", "--thrift-port",
             str(sw.thrift_port), "--tls-ca", pki.ca, "--tls-client-cert", pki.client_cert,
             "--tls-client-key", pki.client_key, "serve", "--listen", listen, "--lease", "2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        line = proc.stdout.readline()
        assert "listening" in line, line + proc.stderr.read()
        workers = _join_all(listen, sw, token=token)
        _step_all(workers, 0)
        killed_at = sw.kill()
        sw.restart()
        finished = _step_all(workers, 1)
        took = max(finished) - killed_at
        log = state.with_name(state.name + ".log").read_text()
        assert "pipeline re-pushed; 1 job(s) re-installed" in log, log[-2000:]
        print(f"BMv2 (mutual TLS) kill: aggregating (exact) after {took:.2f}s with hina-ctl serve")
        assert took < SERVE_SWITCH_RECOVERY_S, f"exact again only {took:.2f}s after the kill"
        # the restarted switch still refuses a client without a certificate
        with pytest.raises(Exception, match="wants a client certificate"):
            SwitchConnection(sw.address, tls=ClientTls(pki.ca), timeout=5)
    finally:
        _close(workers)
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
            for stream in (proc.stdout, proc.stderr):
                stream.close()
        sw.stop()
