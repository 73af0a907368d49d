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

from controller.jobs import JobManager
from controller.jobservice import serve
from controller.p4runtime_client import SwitchConnection
from ctlutil import SKETCHED_SGD, TEST_WORDS, free_port, join_and_allreduce, sketched_sgd_grads
from worker.jobclient import TOKEN_ENV, JobClient, JobServiceError, Seat

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
    from worker.transport import allreduce
    address, jobs, _ = service
    with SwitchConnection(embedded_switch.address) as conn:
        conn.set_pipeline(*embedded_pipeline.build())
        config = JobManager(conn).create_job(embedded_switch.job(job_id=3, n_workers=N_WORKERS,
                                                                 codec="fixedpoint"))
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
    from worker.codecs import SketchedSgdCodec, reference_allreduce
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


def _hina_worker(address: str, job_id: int, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "worker.cli", "join", "--controller", address,
                             "--job", str(job_id), "--barrier-timeout", "30", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


def test_hina_worker_bench_and_run(service, embedded_switch, embedded_pipeline):
    address, jobs, _ = service
    with SwitchConnection(embedded_switch.address) as conn:
        conn.set_pipeline(*embedded_pipeline.build())
        jobs[4] = JobManager(conn).create_job(embedded_switch.job(job_id=4, n_workers=2,
                                                                  codec="fixedpoint"))
    procs = [_hina_worker(address, 4, "bench", "--codec", "fixedpoint", "--size", "500",
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
