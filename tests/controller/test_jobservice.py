"""The job service over real gRPC: concurrent workers join, meet at barriers, leave, time out;
then aggregate through the embedded switch with what the service told them."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from hina.controller.jobs import JobManager
from hina.controller.jobservice import serve
from hina.controller.p4runtime_client import SwitchConnection
from ctlutil import SKETCHED_SGD, TEST_WORDS, free_port, join_and_allreduce, sketched_sgd_grads
from hina.worker.jobclient import TOKEN_ENV, JobClient, JobServiceError, Seat

N_WORKERS = 3
ROOT = Path(__file__).resolve().parents[2]
#: Every job of the ``service`` fixture has this token; its clients (and their ``hina-worker``
#: subprocesses) find it in ``$HINA_JOB_TOKEN``.
SERVICE_TOKEN = "test-token-of-every-job"


SHORT_LEASE_S = 1.0


@pytest.fixture(params=[30.0])
def service(request, embedded_switch, monkeypatch):
    """A job service on a free port serving the jobs of a dict (lease: the param)."""
    jobs = {}
    address = f"127.0.0.1:{free_port()}"
    monkeypatch.setenv(TOKEN_ENV, SERVICE_TOKEN)
    server = serve(lambda: jobs, address, lease_s=request.param,
                   tokens=lambda: dict.fromkeys(jobs, SERVICE_TOKEN))
    yield address, jobs, server.servicer
    server.stop(grace=None).wait(5)


def test_concurrent_workers_join_and_meet_at_barrier(service, embedded_switch):
    address, jobs, _ = service
    jobs[7] = embedded_switch.job(job_id=7, n_workers=N_WORKERS, codec="thc", rht_seed=42)

    def worker(_):
        with JobClient(address) as client:
            seat = client.join(7)
            generation = client.barrier("start", timeout=10)
            return seat, generation

    with ThreadPoolExecutor(N_WORKERS) as pool:
        results = list(pool.map(worker, range(N_WORKERS)))
    seats = sorted((s for s, _ in results), key=lambda s: s.worker_index)
    assert [s.worker_index for s in seats] == list(range(N_WORKERS))
    assert {g for _, g in results} == {1}
    s = seats[1]
    assert (s.job_id, s.n_workers, s.n_slots, s.words) == (7, N_WORKERS, 4, TEST_WORDS)
    assert s.me == ("02:00:00:00:01:01", "10.0.1.2", 40000)
    assert s.switch == ("02:00:00:00:00:fe", "10.0.0.254", 0xBEE0)
    assert s.tunnel == (("127.0.0.1", embedded_switch.worker_ports[1]),
                        ("127.0.0.1", embedded_switch.switch_ports[1]))
    assert s.codec_params.name == "thc" and s.codec_params.lane_op == "LUT_SUM"
    assert s.codec_params.rht_seed == 42 and len(s.codec_params.thc_table) == 16


def test_join_refusals(service, embedded_switch):
    address, jobs, _ = service
    jobs[1] = embedded_switch.job(job_id=1, n_workers=1)
    with JobClient(address) as a, JobClient(address) as b:
        with pytest.raises(JobServiceError, match="job 9 does not exist") as err:
            a.join(9)
        assert err.value.code == "NOT_FOUND"
        with pytest.raises(JobServiceError, match="has no worker 10.9.9.9:1"):
            a.join(1, ip="10.9.9.9", udp_port=1)
        a.join(1, ip="10.0.1.1", udp_port=40000)
        with pytest.raises(JobServiceError, match="joined already"):
            b.join(1, ip="10.0.1.1", udp_port=40000)
        with pytest.raises(JobServiceError, match="all 1 seats are taken"):
            b.join(1)
    with pytest.raises(JobServiceError, match="cannot reach the job service"):
        JobClient(f"127.0.0.1:{free_port()}", timeout=0.3)


@pytest.mark.parametrize("service", [SHORT_LEASE_S], indirect=True)
def test_barrier_timeout_leave_and_lease(service, embedded_switch):
    address, jobs, _ = service
    jobs[2] = embedded_switch.job(job_id=2, n_workers=2)
    with JobClient(address, heartbeat=False) as a, JobClient(address) as b:
        a.join(2)
        with pytest.raises(JobServiceError,
                           match=r"timed out after 0.3s waiting for workers \[1\]"):
            a.barrier("start", timeout=0.3)
        b.join(2)
        # b leaves while a waits: a's barrier is broken, not left hanging
        waiting = threading.Thread(target=lambda: (time.sleep(0.3), b.leave()))
        waiting.start()
        with pytest.raises(JobServiceError, match="broken: worker 1 left") as err:
            a.barrier("start", timeout=10)
        assert err.value.code == "ABORTED"
        waiting.join()
        # a sends nothing for longer than the lease (1 s): its seat goes to the next joiner
        time.sleep(1.3)
        assert b.join(2).worker_index == 0
        with pytest.raises(JobServiceError, match="not joined"):
            a.barrier("start", timeout=1)


def test_workers_aggregate_with_what_the_service_gave_them(service, embedded_switch,
                                                           embedded_pipeline):
    """End to end: job installed by the controller, parameters from the service, allreduce."""
    from hina.worker.collective import allreduce
    address, jobs, _ = service
    with SwitchConnection(embedded_switch.address) as conn:
        conn.set_pipeline(*embedded_pipeline.build())
        config = JobManager(conn).create_job(embedded_switch.job(job_id=3, n_workers=N_WORKERS,
                                                                 codec="fixed"))
    jobs[3] = config
    grads = [torch.randn(3 * TEST_WORDS, generator=torch.Generator().manual_seed(i))
             for i in range(N_WORKERS)]

    def worker(_):
        with JobClient(address) as client:
            seat = client.join(3)
            client.barrier("start", timeout=10)
            transport = seat.transport(give_up_s=5.0)
            try:
                return allreduce(grads[seat.worker_index].clone(), seat.codec(), transport)
            finally:
                transport.close()

    with ThreadPoolExecutor(N_WORKERS) as pool:
        results = list(pool.map(worker, range(N_WORKERS)))
    expected = sum(grads) / N_WORKERS
    for mean in results:
        assert torch.allclose(mean, expected, atol=1e-4)


def test_sketched_sgd_workers_aggregate_like_the_reference(service, embedded_switch,
                                                          embedded_pipeline):
    """A sketched_sgd job (k as a fraction of the bucket): every worker gets a SketchedSgdCodec
    with the job's parameters, and both rounds through the switch give, step after step (hash
    rotation, error feedback), exactly what reference_allreduce gives fresh codecs."""
    from hina.worker.codecs import SketchedSgdCodec, reference_allreduce
    address, jobs, _ = service
    with SwitchConnection(embedded_switch.address) as conn:
        conn.set_pipeline(*embedded_pipeline.build())
        config = JobManager(conn).create_job(embedded_switch.job(
            job_id=5, n_workers=N_WORKERS, codec="sketched_sgd", sketch_k_fraction=0.1,
            **SKETCHED_SGD))
    jobs[5] = config
    steps = sketched_sgd_grads(N_WORKERS, steps=3)
    seats, codecs, means = join_and_allreduce(address, 5, steps)

    c = seats[0].codec_params
    assert (c.name, c.lane_op, c.sketch_k, c.sketch_k_fraction) == ("sketched_sgd", "SUM", 0, 0.1)
    assert (c.sketch_rows, c.sketch_columns, c.sketch_seed, c.sketch_bits, c.value_bits,
            c.value_blocks, c.sketch_rotate) == (3, 128, 11, 10, 6, 120, 8)
    for codec in codecs:
        assert isinstance(codec, SketchedSgdCodec)
        assert (codec.k, codec.cs.rows, codec.cs.columns, codec.cs.seed, codec.sketch_bits,
                codec.value_bits, codec.value_blocks, codec.rotate, codec.momentum) == \
            (0.1, 3, 128, 11, 10, 6, 120, 8, 0.0)
    ref = [SketchedSgdCodec(N_WORKERS, rows=3, columns=128, k=0.1, seed=11, rotate=8,
                            sketch_bits=10, value_bits=6, value_blocks=120)
           for _ in range(N_WORKERS)]
    for t, grads in enumerate(steps):
        want = reference_allreduce(ref, grads)
        for w in range(N_WORKERS):
            assert torch.equal(means[w][t], want[w]), (t, w)
        assert int((want[0] != 0).sum()) <= 100           # k = 10% of 1000: a sparse update

    # the seat survives its JSON form (HINA_SEAT); a seat written before sketched_sgd loads
    assert Seat.from_json(json.loads(json.dumps(seats[1].to_json()))) == seats[1]
    old = seats[1].to_json()
    for key in ("sketch_k", "sketch_k_fraction", "sketch_bits", "value_bits", "value_blocks",
                "sketch_rotate"):
        del old["codec_params"][key]
    assert Seat.from_json(old).codec_params.sketch_rotate == 0


def test_sketched_sgd_seat_needs_its_parameters(service, embedded_switch):
    """A seat without k (a controller older than sketched_sgd's fields) is one clear error."""
    address, jobs, _ = service
    jobs[6] = embedded_switch.job(job_id=6, n_workers=1, codec="sketched_sgd", sketch_k=64)
    with JobClient(address) as client:
        seat = client.join(6)
    assert (seat.codec_params.sketch_k, seat.codec_params.sketch_k_fraction) == (64, 0.0)
    assert seat.codec().k == 64
    params = dataclasses.replace(seat.codec_params, sketch_k=0)
    with pytest.raises(JobServiceError, match="exactly one must be set") as err:
        dataclasses.replace(seat, codec_params=params).codec()
    assert err.value.code == "FAILED_PRECONDITION"


def test_an_adaptive_seat_carries_the_jobs_declared_codecs(service, embedded_switch):
    """The job's adaptive_choices reach the worker in its seat (and its JSON form), and the
    codec the seat builds chooses only among them."""
    address, jobs, _ = service
    jobs[7] = embedded_switch.job(job_id=7, n_workers=1, codec="adaptive",
                                  adaptive_choices=("block_sparse", "thc"))
    with JobClient(address) as client:
        seat = client.join(7)
    assert seat.codec_params.adaptive_choices == ("block_sparse", "thc")
    assert Seat.from_json(json.loads(json.dumps(seat.to_json()))) == seat
    assert seat.codec().choices == ("block_sparse", "thc")


def test_a_saturating_switchs_seat_says_so(service, embedded_switch):
    """A job on a switch whose SUM saturates (the TNA program) reaches its workers so (seat,
    its JSON form, the transport's JobParams), so their transport reads a SUM word at an int32
    bound as the overflow; a job on the v1model program does not."""
    import dataclasses
    address, jobs, _ = service
    jobs[8] = dataclasses.replace(embedded_switch.job(job_id=8, n_workers=2, codec="fixed"),
                                  sum_saturates=True)
    jobs[9] = embedded_switch.job(job_id=9, n_workers=2, codec="fixed")
    with JobClient(address) as client:
        seat, plain = client.join(8), client.join(9)
    assert seat.sum_saturates and not plain.sum_saturates
    assert Seat.from_json(json.loads(json.dumps(seat.to_json()))) == seat
    params = seat.job_params()
    assert params.sum_saturates
    assert not plain.job_params().sum_saturates


def _hina_worker(address: str, job_id: int, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hina.worker.cli", "join", "--controller", address,
                             "--job", str(job_id), "--barrier-timeout", "30", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


def test_hina_worker_bench_and_run(service, embedded_switch, embedded_pipeline):
    address, jobs, _ = service
    with SwitchConnection(embedded_switch.address) as conn:
        conn.set_pipeline(*embedded_pipeline.build())
        jobs[4] = JobManager(conn).create_job(embedded_switch.job(job_id=4, n_workers=2,
                                                                  codec="fixed"))
    procs = [_hina_worker(address, 4, "bench", "--codec", "fixed", "--size", "500",
                          "--rounds", "2", "--json") for _ in range(2)]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        reports.append(json.loads(out))
    assert sorted(r["worker_index"] for r in reports) == [0, 1]
    assert all(r["max_rel_error"] < 1e-3 and len(r["seconds"]) == 2 for r in reports)

    # run: the command sees its seat; its exit status is the agent's
    jobs[8] = embedded_switch.job(job_id=8, n_workers=1)
    proc = _hina_worker(address, 8, "run", "--", sys.executable, "-c",
                        "import os, sys; print(os.environ['HINA_WORKER_INDEX'], "
                        "os.environ['HINA_N_WORKERS']); sys.exit(3)")
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out.split()) == (3, ["0", "1"]), err
    proc = _hina_worker(address, 99, "info")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and err.strip() == \
        "hina-worker: error: join job 99: job 99 does not exist"


# ------------------------------------------------------------------------------------------------
# Incarnations: the seat history survives a restart of the service (the state file's records)
# ------------------------------------------------------------------------------------------------
class PersistedService:
    """A job service on the jobs of a state file (whose seat records it keeps), with a bumper
    that moves the job's generation in the file as ``SwitchKeeper.bump`` does (no switch)."""

    def __init__(self, path, config, lease_s: float):
        from hina.controller.state import ControllerState
        self.path, self.lease_s = path, lease_s
        ControllerState(None, {config.job_id: config}).save(path)
        self.address = f"127.0.0.1:{free_port()}"
        self.bumps: list[str] = []
        self.server = None
        self.start()

    def bump(self, job_id: int, cause: str) -> int:
        from hina.controller.state import ControllerState
        state = ControllerState.load(self.path)
        job = state.jobs[job_id]
        state.jobs[job_id] = job.replace(generation=job.generation + 1, generation_cause=cause)
        state.save(self.path)
        self.bumps.append(cause)
        return job.generation + 1

    def start(self) -> None:
        from hina.controller.jobservice import StateFileJobs
        self.server = serve(StateFileJobs(self.path), self.address, lease_s=self.lease_s,
                            tokens=lambda: {1: SERVICE_TOKEN}, generation_bumper=self.bump)

    def restart(self) -> None:
        self.server.stop(grace=None).wait(5)
        self.start()

    def generation(self) -> int:
        from hina.controller.state import ControllerState
        return ControllerState.load(self.path).jobs[1].generation

    def close(self) -> None:
        self.server.stop(grace=None).wait(5)


@pytest.fixture
def persisted(tmp_path, embedded_switch, monkeypatch):
    monkeypatch.setenv(TOKEN_ENV, SERVICE_TOKEN)
    svc = PersistedService(tmp_path / "ctl.json", embedded_switch.job(job_id=1, n_workers=3),
                           lease_s=SHORT_LEASE_S)
    clients: list[JobClient] = []

    def client(**kwargs) -> JobClient:
        kwargs.setdefault("heartbeat", False)
        c = JobClient(svc.address, **kwargs)
        clients.append(c)
        return c

    svc.client = client
    try:
        yield svc
    finally:
        for c in clients:             # as a killed process: no Leave
            c._stop.set()
            c._channel.close()
        svc.close()


def _address(seat) -> dict:
    return {"ip": seat.me[1], "udp_port": seat.me[2]}


def test_a_restarted_service_tells_the_same_worker_from_a_new_process(persisted):
    """The service restarts while worker 2 is dead. Workers 0 and 1 join again as the same
    incarnations: same seats, no new generation. Worker 2's seat is kept for its incarnation
    for one lease (a new process is refused meanwhile), then freed; the new process's Join
    moves the job to generation 2, and the cause names the worker."""
    a, b, c = (persisted.client() for _ in range(3))
    seats = [x.join(1) for x in (a, b, c)]
    assert [s.worker_index for s in seats] == [0, 1, 2]
    persisted.restart()
    started = time.monotonic()
    assert a.refresh().worker_index == 0 and b.refresh().worker_index == 1
    assert persisted.bumps == [] and a.seat.generation == b.seat.generation == 1
    c2 = persisted.client()
    assert c2.incarnation != c.incarnation
    with pytest.raises(JobServiceError, match="has joined already") as err:
        c2.join(1, **_address(seats[2]))
    assert err.value.code == "ALREADY_EXISTS"
    seat = c2.join(1, **_address(seats[2]), wait_s=10)
    waited = time.monotonic() - started
    assert seat.worker_index == 2 and seat.generation == 2
    assert SHORT_LEASE_S <= waited < SHORT_LEASE_S + 3, waited
    assert len(persisted.bumps) == 1 and persisted.generation() == 2
    assert "worker 2 restarted" in persisted.bumps[0] and \
        "did not join again within" in persisted.bumps[0], persisted.bumps
    # the old incarnation of worker 2 is no one's now; the survivors' seats are theirs still
    assert a.refresh().generation == 2 and b.refresh().generation == 2
    assert len(persisted.bumps) == 1


def test_the_same_worker_after_its_lease_ran_out_keeps_the_generation(persisted):
    """A worker silent past its lease (alive: its transport where the others expect it) joins
    again as the same incarnation: no new generation. After a Leave, its next Join is a new
    start (a new generation), as is any Join of a client without an incarnation."""
    a, b = persisted.client(), persisted.client()
    a.join(1)
    b.join(1)
    time.sleep(SHORT_LEASE_S + 0.3)
    assert a.refresh().generation == 1 and persisted.bumps == []      # same worker again
    assert b.refresh().generation == 1 and persisted.bumps == []
    b.leave()
    assert b.join(1).generation == 2 and len(persisted.bumps) == 1    # left: a new start
    legacy = persisted.client(incarnation="")                          # an older client
    legacy.join(1)
    persisted.restart()
    time.sleep(SHORT_LEASE_S + 0.3)          # its restored seat is freed (nobody can take it)
    assert legacy.refresh().generation == 3 and len(persisted.bumps) == 2
    assert "worker 2 restarted" in persisted.bumps[-1]


def test_a_restarted_worker_passes_a_barrier_the_others_passed(persisted):
    """The job's workers passed the start barrier; one is killed and comes back as a new process
    (after a restart of the service, too): its start barrier releases it at once, the others
    never calling it again. A job run again by all new processes still waits for all."""
    first = [persisted.client(heartbeat=i < 2) for i in range(3)]      # worker 2 dies
    for x in first:
        x.join(1)
    with ThreadPoolExecutor(3) as pool:
        assert set(pool.map(lambda x: x.barrier("start", timeout=10), first)) == {1}
    persisted.restart()
    back = persisted.client(heartbeat=True)
    back.join(1, **_address(first[2].seat), wait_s=10)
    started = time.monotonic()
    assert back.barrier("start", timeout=5) == 1
    assert time.monotonic() - started < 2.5            # at once, not after the 5 s timeout
    # a barrier not passed by the others yet holds it as before
    with pytest.raises(JobServiceError, match=r"waiting for workers \[0, 1\]"):
        back.barrier("other", timeout=0.3)
    assert len(persisted.bumps) == 1 and "whole job" not in persisted.bumps[0]
    for x in first[:2] + [back]:
        x.leave()
    rerun = [persisted.client(heartbeat=True) for _ in range(3)]
    for x in rerun:
        x.join(1)
    with pytest.raises(JobServiceError, match=r"waiting for workers \[1, 2\]"):
        rerun[0].barrier("start", timeout=0.3)
    with ThreadPoolExecutor(3) as pool:
        assert set(pool.map(lambda x: x.barrier("start", timeout=10), rerun)) == {1}


def test_seat_records_survive_other_writers_of_the_state_file(persisted):
    """A ``hina-ctl`` command that loaded the state file before a Join and saves it after keeps
    the Join's record; a deleted job's records go with it."""
    from hina.controller.state import ControllerState
    loaded = ControllerState.load(persisted.path)
    a = persisted.client()
    a.join(1)
    loaded.save(persisted.path)
    record = ControllerState.load(persisted.path).seats[1]
    assert record.generation == 1 and record.holders[0].incarnation == a.incarnation
    loaded.jobs.clear()
    loaded.save(persisted.path)
    assert ControllerState.load(persisted.path).seats == {}


def test_bad_incarnation_refused(persisted):
    with pytest.raises(JobServiceError, match="incarnation") as err:
        persisted.client(incarnation="not one").join(1)
    assert err.value.code == "INVALID_ARGUMENT"
