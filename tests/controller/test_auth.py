"""Authentication: job tokens, TLS and mutual TLS on both gRPC services, and the primary role
``hina-ctl serve`` holds on the switch.

* Job service: every RPC needs its job's token (``authorization: Bearer TOKEN``): missing, wrong,
  another job's, or garbage metadata is UNAUTHENTICATED; an unknown job is NOT_FOUND; malformed
  requests get a status, never crash the server, which serves on afterwards. ``hina-ctl`` issues,
  prints, rotates and deletes tokens (files 0600); ``hina-worker`` takes ``--token-file``,
  ``--token`` and ``$HINA_JOB_TOKEN``.
* TLS: a throwaway CA (``pkiutil.py``) signs certificates for 127.0.0.1 and
  localhost. Job service and the embedded P4Runtime server: TLS works; a plaintext client, a TLS
  client at a plaintext server and a client trusting another CA fail with one clear line; with a
  client CA, a client without a certificate or with one another CA signed is refused, one with a
  certificate the CA signed is served. ``hina-ctl``, ``hina-worker`` and ``softswitch`` flags.
* Primary: while ``hina-ctl serve`` runs, other clients' Writes are PERMISSION_DENIED and a
  controller with a lower or equal election id cannot become primary; one with a higher id writes
  beside it and hands the role back; after serve stops, writes work again (embedded and BMv2).
"""
from __future__ import annotations

import math
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hina.controller.jobservice import serve
from hina.controller.p4runtime_client import NotPrimaryError, P4RuntimeClientError, SwitchConnection
from hina.controller.state import ControllerState
from hina.controller import tokens as tokens_module
from hina.controller.tokens import TokenStore, new_token, tokens_path
from ctlutil import free_port, wait_for
from hina.generated import jobservice_pb2 as pb
from hina.generated import jobservice_pb2_grpc as pb_grpc
from hina.tls import ClientTls, ServerTls
from hina.worker.jobclient import TOKEN_ENV, JobClient, JobServiceError

ROOT = Path(__file__).resolve().parents[2]
CLI_TIMEOUT_S = 60
TOKEN = "right-token-of-job-1"
OTHER_TOKEN = "right-token-of-job-2"
SERVICE = "/hina.jobservice.v1.JobService/"
#: Codes a refused or malformed request may get; UNKNOWN would be an exception in the servicer.
REFUSALS = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.NOT_FOUND,
            grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION,
            grpc.StatusCode.INTERNAL, grpc.StatusCode.ALREADY_EXISTS,
            grpc.StatusCode.RESOURCE_EXHAUSTED}


# ------------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------------
@pytest.fixture
def service(embedded_switch, monkeypatch):
    """A plaintext job service with jobs 1 (one seat) and 2, tokens TOKEN and OTHER_TOKEN; no
    ``$HINA_JOB_TOKEN`` unless a test sets it."""
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    jobs = {1: embedded_switch.job(job_id=1, n_workers=1),
            2: embedded_switch.job(job_id=2, n_workers=2)}
    tokens = {1: TOKEN, 2: OTHER_TOKEN}
    address = f"127.0.0.1:{free_port()}"
    server = serve(lambda: jobs, address, tokens=lambda: tokens)
    yield address
    server.stop(grace=None).wait(5)


def _rpc(address: str, method: str, request, metadata=(), timeout: float = 5.0):
    """``method`` of the job service with ``metadata``; the reply or the grpc.RpcError."""
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.JobServiceStub(channel)
        try:
            return getattr(stub, method)(request, metadata=metadata, timeout=timeout)
        except grpc.RpcError as exc:
            return exc


def _bearer(token: str) -> tuple:
    return (("authorization", f"Bearer {token}"),)


def _still_serves(address: str) -> None:
    """A worker with the right token still gets a seat (and gives it back)."""
    with JobClient(address, token=OTHER_TOKEN, timeout=5) as client:
        assert client.join(2).job_id == 2


def _ctl(switch: str, state: Path, *args: str, bmv2=None) -> list[str]:
    extra = [] if bmv2 is None else ["--target", "bmv2", "--thrift-port", str(bmv2.thrift_port)]
    return [sys.executable, "-m", "hina.controller.cli", "--switch", switch, "--state", str(state),
            "--timeout", "3", *extra, *args]


def _run(cmd: list[str], env=None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=CLI_TIMEOUT_S,
                          env=env)


def _one_line(proc: subprocess.CompletedProcess, text: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and text in lines[0], proc.stderr


def _start_serve(cmd: list[str]) -> subprocess.Popen:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    line = proc.stdout.readline()
    if "listening" not in line:
        proc.kill()
        raise AssertionError(f"hina-ctl serve did not start: {line} {proc.stderr.read()}")
    return proc


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0, proc.stderr.read()


# ------------------------------------------------------------------------------------------------
# Tokens
# ------------------------------------------------------------------------------------------------
def test_join_needs_the_jobs_token(service):
    code = grpc.StatusCode
    # no token, a wrong one, the token of another job: refused, and told why
    for metadata, why in [((), "no token"), (_bearer("guess"), "wrong token"),
                          (_bearer(OTHER_TOKEN), "wrong token")]:
        err = _rpc(service, "Join", pb.JoinRequest(job_id=1), metadata)
        assert err.code() == code.UNAUTHENTICATED and why in err.details(), metadata
    # an unknown job is NOT_FOUND, as before
    err = _rpc(service, "Join", pb.JoinRequest(job_id=9), _bearer(TOKEN))
    assert err.code() == code.NOT_FOUND and "job 9 does not exist" in err.details()
    # the refused attempts took no seat: job 1's only seat is still free
    with JobClient(service, token=TOKEN) as client:
        assert client.join(1).worker_index == 0
    with JobClient(service) as client:
        with pytest.raises(JobServiceError, match="job 1: no token") as err:
            client.join(1)
        assert err.value.code == "UNAUTHENTICATED"


def test_every_rpc_needs_the_token(service):
    """A stranger who learnt a session cannot beat, wait at a barrier or give the seat away."""
    with JobClient(service, token=TOKEN, heartbeat=False) as worker:
        seat = worker.join(1)
        requests = {"Heartbeat": pb.HeartbeatRequest(job_id=1, session=seat.session),
                    "Barrier": pb.BarrierRequest(job_id=1, session=seat.session, name="s",
                                                 timeout_s=1),
                    "Leave": pb.LeaveRequest(job_id=1, session=seat.session)}
        for method, request in requests.items():
            for metadata in ((), _bearer("guess"), _bearer(OTHER_TOKEN)):
                err = _rpc(service, method, request, metadata)
                assert err.code() == grpc.StatusCode.UNAUTHENTICATED, (method, metadata)
        # the seat is still the worker's: its own requests go through
        assert _rpc(service, "Heartbeat", requests["Heartbeat"], _bearer(TOKEN)) == \
            pb.HeartbeatReply(generation=1)
        assert worker.barrier("s", timeout=5) == 1


@pytest.fixture
def hypothesis_service(embedded_switch):
    jobs = {1: embedded_switch.job(job_id=1, n_workers=1),
            2: embedded_switch.job(job_id=2, n_workers=2)}
    address = f"127.0.0.1:{free_port()}"
    server = serve(lambda: jobs, address, tokens=lambda: {1: TOKEN, 2: OTHER_TOKEN})
    yield address
    server.stop(grace=None).wait(5)


_METADATA_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=200)


def test_garbage_credentials_are_refused_and_the_service_serves_on(hypothesis_service):
    address = hypothesis_service
    channel = grpc.insecure_channel(address)
    join = channel.unary_unary(SERVICE + "Join", pb.JoinRequest.SerializeToString,
                               pb.JoinReply.FromString)

    @settings(max_examples=150, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(values=st.lists(st.one_of(_METADATA_TEXT, _METADATA_TEXT.map(lambda t: "Bearer " + t),
                                     st.just("Bearer " + OTHER_TOKEN),
                                     st.just("bearer  " + TOKEN + " x"),
                                     st.just("Basic " + TOKEN)), max_size=3),
           other=st.lists(st.tuples(st.sampled_from(["x-token", "authorization-bin", "token"]),
                                    _METADATA_TEXT), max_size=2),
           job_id=st.sampled_from([1, 1, 2 ** 32 - 1]))
    def check(values, other, job_id):
        metadata = [("authorization", v) for v in values]
        metadata += [(k, v.encode() if k.endswith("-bin") else v.strip() or "v")
                     for k, v in other]
        try:
            join(pb.JoinRequest(job_id=job_id), metadata=metadata, timeout=5)
        except grpc.RpcError as exc:
            want = grpc.StatusCode.NOT_FOUND if job_id != 1 else grpc.StatusCode.UNAUTHENTICATED
            assert exc.code() == want, (exc.code(), exc.details(), metadata)
        else:
            pytest.fail(f"joined with {metadata}")

    try:
        check()
        # the right token, once, amid the garbage: served
        assert join(pb.JoinRequest(job_id=1), metadata=_bearer(TOKEN), timeout=5).job_id == 1
    finally:
        channel.close()
    with JobClient(address, token=OTHER_TOKEN) as client:
        assert client.join(2).job_id == 2


def test_malformed_requests_get_a_status_and_the_service_serves_on(hypothesis_service):
    address = hypothesis_service
    channel = grpc.insecure_channel(address)
    raw = {m: channel.unary_unary(SERVICE + m) for m in ("Join", "Barrier", "Leave", "Heartbeat")}
    with JobClient(address, token=OTHER_TOKEN, heartbeat=False) as worker:
        seat = worker.join(2)           # a real seat: malformed requests may name it

        @settings(max_examples=150, deadline=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture])
        @given(method=st.sampled_from(sorted(raw)), body=st.binary(max_size=64),
               token=st.sampled_from([TOKEN, OTHER_TOKEN, ""]))
        def bytes_on_the_wire(method, body, token):
            try:
                raw[method](body, metadata=_bearer(token) if token else (), timeout=5)
            except grpc.RpcError as exc:
                assert exc.code() in REFUSALS, (method, body, exc.code(), exc.details())

        @settings(max_examples=150, deadline=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture])
        @given(job_id=st.sampled_from([0, 1, 2, 3, 2 ** 32 - 1]),
               session=st.one_of(st.text(max_size=40), st.just(seat.session)),
               name=st.text(max_size=300),
               timeout_s=st.floats(allow_nan=True, allow_infinity=True),
               ip=st.text(max_size=20), port=st.integers(0, 2 ** 32 - 1))
        def fields(job_id, session, name, timeout_s, ip, port):
            metadata = _bearer(OTHER_TOKEN if job_id == 2 else TOKEN)
            for method, request in (
                    ("Barrier", pb.BarrierRequest(job_id=job_id, session=session, name=name,
                                                  timeout_s=timeout_s)),
                    ("Heartbeat", pb.HeartbeatRequest(job_id=job_id, session=session)),
                    ("Join", pb.JoinRequest(job_id=job_id, ip=ip, udp_port=port, name=name))):
                if method == "Barrier" and (job_id, session) == (2, seat.session) and \
                        (timeout_s == 0 or math.isfinite(timeout_s) and timeout_s >= 0.5):
                    continue         # a valid long wait (0: the default 60 s) for worker 1
                err = _rpc(address, method, request, metadata)
                if isinstance(err, grpc.RpcError):
                    timed_out = err.code() == grpc.StatusCode.DEADLINE_EXCEEDED and \
                        "timed out after" in err.details()        # the barrier's, not ours
                    assert err.code() in REFUSALS or timed_out, \
                        (method, request, err.code(), err.details())
                elif method == "Join":       # a seat of job 2 taken: give it back
                    assert _rpc(address, "Leave", pb.LeaveRequest(job_id=job_id,
                                                                  session=err.session),
                                metadata) == pb.LeaveReply()

        try:
            bytes_on_the_wire()
            fields()
        finally:
            channel.close()
        # the worker's seat survived it all
        assert worker.seat is not None and _rpc(address, "Heartbeat", pb.HeartbeatRequest(
            job_id=2, session=seat.session), _bearer(OTHER_TOKEN)) == \
            pb.HeartbeatReply(generation=1)
    _still_serves(address)


def test_barrier_timeout_must_be_finite(service):
    with JobClient(service, token=TOKEN, heartbeat=False) as worker:
        seat = worker.join(1)
        for timeout_s in (float("nan"), float("inf"), -1.0):
            err = _rpc(service, "Barrier", pb.BarrierRequest(
                job_id=1, session=seat.session, name="s", timeout_s=timeout_s), _bearer(TOKEN),
                timeout=5)
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, timeout_s
            assert "must be a finite number of seconds" in err.details()


def test_hina_ctl_issues_prints_rotates_and_deletes_tokens(embedded_switch, embedded_pipeline,
                                                           tmp_path):
    state = tmp_path / "ctl.json"
    ctl = lambda *a: _ctl(embedded_switch.address, state, *a)        # noqa: E731
    assert _run(ctl("pipeline", "push", "-D", "HINA_WORDS=64")).returncode == 0
    token_file = tmp_path / "job1.token"
    create = _run(ctl("job", "create", "--id", "1", "--codec", "fixed", "--slots", "4",
                      "--worker", embedded_switch.worker_arg(0), "--token-file", str(token_file)))
    assert create.returncode == 0 and f"token in {token_file}" in create.stdout
    token = token_file.read_text().strip()
    assert len(token) >= 43 and token not in create.stdout
    # owner-only files: the token handed out and the tokens beside the state
    for path in (token_file, tokens_path(state)):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert token not in state.read_text()        # the state file holds nothing secret
    assert _run(ctl("job", "token", "1")).stdout.strip() == token
    rotated = _run(ctl("job", "token", "1", "--rotate", "--token-file", str(token_file)))
    assert "new token written" in rotated.stdout
    new = token_file.read_text().strip()
    assert new != token and TokenStore(tokens_path(state))() == {1: new}
    _one_line(_run(ctl("job", "token", "7")), "job 7 does not exist")
    assert _run(ctl("job", "delete", "1")).returncode == 0
    assert TokenStore(tokens_path(state))() == {}


def test_hina_worker_token_sources(service, tmp_path):
    token_file = tmp_path / "t"
    token_file.write_text(TOKEN + "\n")
    base = [sys.executable, "-m", "hina.worker.cli", "join", "--controller", service, "--job", "1"]
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    for extra, extra_env in [(["--token-file", str(token_file)], {}), (["--token", TOKEN], {}),
                             ([], {TOKEN_ENV: TOKEN})]:
        proc = _run(base + extra + ["info"], env={**env, **extra_env})
        assert proc.returncode == 0 and "job 1: worker 0 of 1" in proc.stdout, proc.stderr
    _one_line(_run(base + ["info"], env=env), "join job 1: job 1: no token")
    _one_line(_run(base + ["--token", "guess", "info"], env=env), "job 1: wrong token")
    _one_line(_run(base + ["--token-file", str(tmp_path / "none"), "info"], env=env),
              "No such file or directory")
    usage = _run(base + ["--token", "a", "--token-file", str(token_file), "info"], env=env)
    assert usage.returncode == 2 and "not allowed with argument" in usage.stderr
    # argparse reads a value that starts with '-' as an option: the usage line says how
    dash = _run(base + ["--token", "-t", "info"], env=env)
    assert dash.returncode == 2 and "goes as --token=VALUE" in dash.stderr, dash.stderr
    _one_line(_run(base + ["--token=-t", "info"], env=env), "job 1: wrong token")


def test_issued_tokens_never_start_with_a_dash(monkeypatch, tmp_path):
    """One url-safe token in 64 starts with '-', which ``--token TOKEN`` would read as an option
    (CI met one): such draws are thrown away."""
    draws = iter(["-first", "-second", "third", "-fourth", "fifth"])
    monkeypatch.setattr(tokens_module.secrets, "token_urlsafe", lambda n: next(draws))
    assert new_token() == "third"
    store = TokenStore(tmp_path / "ctl.json.tokens")
    assert store.issue(1) == "fifth"
    monkeypatch.undo()
    assert not any(new_token().startswith("-") for _ in range(2000))


# ------------------------------------------------------------------------------------------------
# TLS
# ------------------------------------------------------------------------------------------------
def _tls_service(embedded_switch, tls):
    jobs = {1: embedded_switch.job(job_id=1, n_workers=2)}
    address = f"127.0.0.1:{free_port()}"
    return address, serve(lambda: jobs, address, tokens=lambda: {1: TOKEN}, tls=tls)


def test_job_service_over_tls(pki, embedded_switch):
    address, server = _tls_service(embedded_switch, ServerTls(pki.server_cert, pki.server_key))
    try:
        for host in ("127.0.0.1", "localhost"):
            with JobClient(f"{host}:{address.rpartition(':')[2]}", token=TOKEN,
                           tls=ClientTls(pki.ca)) as client:
                assert client.join(1).job_id == 1
        started = time.monotonic()
        with pytest.raises(JobServiceError, match="speaks TLS and this client does not"):
            JobClient(address, token=TOKEN)
        assert time.monotonic() - started < 5          # told at once, not after the timeout
        with pytest.raises(JobServiceError, match="is not trusted: .*is --tls-ca the CA"):
            JobClient(address, token=TOKEN, tls=ClientTls(pki.other_ca))
        # the token still counts under TLS
        with JobClient(address, tls=ClientTls(pki.ca)) as client:
            with pytest.raises(JobServiceError, match="no token"):
                client.join(1)
    finally:
        server.stop(grace=None).wait(5)
    address, server = _tls_service(embedded_switch, None)
    try:
        with pytest.raises(JobServiceError, match="is the server plaintext"):
            JobClient(address, token=TOKEN, tls=ClientTls(pki.ca))
    finally:
        server.stop(grace=None).wait(5)


def test_job_service_mutual_tls(pki, embedded_switch):
    address, server = _tls_service(embedded_switch, ServerTls(pki.server_cert, pki.server_key,
                                                              client_ca=pki.ca))
    try:
        with pytest.raises(JobServiceError, match="wants a client certificate"):
            JobClient(address, token=TOKEN, tls=ClientTls(pki.ca), timeout=5)
        with pytest.raises(JobServiceError, match="refused this client's certificate"):
            JobClient(address, token=TOKEN, tls=ClientTls(pki.ca, pki.stranger_cert,
                                                          pki.stranger_key), timeout=5)
        with pytest.raises(JobServiceError, match="speaks TLS"):
            JobClient(address, token=TOKEN, timeout=5)
        with JobClient(address, token=TOKEN,
                       tls=ClientTls(pki.ca, pki.client_cert, pki.client_key)) as client:
            assert client.join(1).job_id == 1
    finally:
        server.stop(grace=None).wait(5)


def test_tls_files_are_checked_when_loaded(pki, tmp_path):
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(ValueError, match="--tls-key .* does not go with --tls-cert"):
        ServerTls(pki.server_cert, pki.client_key)
    with pytest.raises(ValueError, match="needs both --tls-cert and --tls-key"):
        ServerTls.from_args(pki.server_cert, None)
    with pytest.raises(ValueError, match="--tls-client-ca alone does not turn TLS on"):
        ServerTls.from_args(None, None, pki.ca)
    with pytest.raises(ValueError, match="needs both --tls-client-cert and --tls-client-key"):
        ClientTls(pki.ca, pki.client_cert)
    with pytest.raises(ValueError, match="junk.pem: not a PEM file"):
        ClientTls(str(tmp_path / "junk.pem"))
    with pytest.raises(ValueError, match="--tls-ca .*missing.pem: No such file"):
        ClientTls(str(tmp_path / "missing.pem"))
    assert ClientTls.from_args(None) is None and ServerTls.from_args(None, None) is None


@pytest.fixture
def tls_switch(pki):
    """The embedded switch behind a mutual-TLS P4Runtime server (clients: pki.client_*)."""
    from hina.softswitch.p4runtime_server import serve as serve_p4runtime
    from hina.softswitch.p4runtime_server import server_credentials
    from hina.softswitch.switch import Switch
    switch = Switch(device_id=0)
    address = f"127.0.0.1:{free_port()}"
    server = serve_p4runtime(switch, address, credentials=server_credentials(
        pki.server_cert, pki.server_key, client_ca=pki.ca))
    yield address
    server.stop(grace=None).wait(5)
    server.servicer.close()
    switch.close()


def test_p4runtime_mutual_tls(pki, tls_switch):
    good = ClientTls(pki.ca, pki.client_cert, pki.client_key)
    with SwitchConnection(tls_switch, tls=good, timeout=5) as conn:
        assert conn.is_primary
        assert conn.fetch_pipeline() is None          # a request through the TLS channel
    for tls, text in [(None, "speaks TLS and this client does not"),
                      (ClientTls(pki.ca), "wants a client certificate"),
                      (ClientTls(pki.ca, pki.stranger_cert, pki.stranger_key),
                       "refused this client's certificate"),
                      (ClientTls(pki.other_ca, pki.client_cert, pki.client_key),
                       "is not trusted")]:
        with pytest.raises(P4RuntimeClientError, match=text) as err:
            SwitchConnection(tls_switch, tls=tls, timeout=5)
        assert err.value.code == "UNAVAILABLE"


def test_cli_flags_tls_end_to_end(pki, tls_switch, embedded_switch, tmp_path):
    """hina-ctl reaches the switch with --tls-*, serves mutual TLS; hina-worker joins with
    --tls-*; the wrong flags are one line."""
    state = tmp_path / "ctl.json"
    ControllerState(jobs={1: embedded_switch.job(job_id=1, n_workers=1)}).save(state)
    client = ["--tls-ca", pki.ca, "--tls-client-cert", pki.client_cert,
              "--tls-client-key", pki.client_key]
    _one_line(_run(_ctl(tls_switch, state, "serve")),
              f"the server at {tls_switch} speaks TLS and this client does not")
    listen = f"127.0.0.1:{free_port()}"
    proc = _start_serve(_ctl(tls_switch, state, *client, "serve", "--listen", listen,
                             "--tls-cert", pki.server_cert, "--tls-key", pki.server_key,
                             "--tls-client-ca", pki.ca))
    try:
        token = TokenStore(tokens_path(state))()[1]
        worker = [sys.executable, "-m", "hina.worker.cli", "join", "--controller", listen, "--job",
                  "1", "--token", token]
        ok = _run(worker + client + ["info"])
        assert ok.returncode == 0 and "job 1: worker 0 of 1" in ok.stdout, ok.stderr
        _one_line(_run(worker + ["--tls-ca", pki.ca, "info"]), "wants a client certificate")
        _one_line(_run(worker + ["--tls-ca", pki.ca, "--tls-client-cert", pki.client_cert,
                                 "info"]), "needs both --tls-client-cert and --tls-client-key")
    finally:
        _stop(proc)
    _one_line(_run(_ctl(tls_switch, state, *client, "serve", "--tls-cert", pki.server_cert)),
              "needs both --tls-cert and --tls-key")


def test_softswitch_serves_mutual_tls(pki, tmp_path):
    address = f"127.0.0.1:{free_port()}"
    cmd = [sys.executable, "-m", "hina.softswitch", "--no-p4", "--grpc-server-addr", address,
           "--tls-cert", pki.server_cert, "--tls-key", pki.server_key]
    proc = subprocess.Popen(cmd + ["--tls-client-ca", pki.ca], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert "ready" in proc.stdout.readline()
        with SwitchConnection(address, tls=ClientTls(pki.ca, pki.client_cert, pki.client_key),
                              timeout=5) as conn:
            assert conn.is_primary
        with pytest.raises(P4RuntimeClientError, match="wants a client certificate"):
            SwitchConnection(address, tls=ClientTls(pki.ca), timeout=5)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    bad = _run(cmd[:-2] + ["--tls-key", pki.client_key])
    assert bad.returncode == 1 and "does not go with --tls-cert" in bad.stderr, bad.stderr


# ------------------------------------------------------------------------------------------------
# The primary role of hina-ctl serve
# ------------------------------------------------------------------------------------------------
@pytest.fixture(params=["embedded", "bmv2"])
def any_switch(request):
    """A switch with the HINA pipeline pushed, on each target: (address, bmv2 process or None)."""
    pipeline = request.getfixturevalue(f"{request.param}_pipeline")
    sw = request.getfixturevalue("embedded_switch" if request.param == "embedded"
                                 else "bmv2_switch")
    with SwitchConnection(sw.address, election_id=1) as conn:
        conn.set_pipeline(*pipeline.build())
    return sw.address, (sw if request.param == "bmv2" else None)


def _write_group(address: str, group: int, election_id: int, primary: bool) -> None:
    with SwitchConnection(address, election_id=election_id, primary=primary, timeout=5) as conn:
        conn.write([conn.multicast_update("INSERT", group, [(1, 1)])])


def test_serve_holds_the_primary_role(any_switch, tmp_path):
    address, bmv2 = any_switch
    state = tmp_path / "ctl.json"
    proc = _start_serve(_ctl(address, state, "--election-id", "5", "serve", "--listen",
                             f"127.0.0.1:{free_port()}", bmv2=bmv2))
    try:
        # another client's Write: unarbitrated (election id 0) or with its own id
        for election_id in (0, 3):
            with pytest.raises(P4RuntimeClientError, match="write") as err:
                _write_group(address, 100 + election_id, election_id, primary=False)
            assert err.value.code == "PERMISSION_DENIED"
        # a second controller with a lower or equal election id cannot become primary
        for election_id in (3, 5):
            with pytest.raises(NotPrimaryError):
                SwitchConnection(address, election_id=election_id, timeout=5)
        # hina-ctl's one-shot commands say what to do
        _one_line(_run(_ctl(address, state, "job", "create", "--id", "1", "--codec",
                            "fixed", "--worker", "10.0.1.1:1", bmv2=bmv2)),
                  "holds the primary role: write beside it with a higher --election-id")
        # a higher election id takes over, writes, and hands the role back when it leaves: then
        # writes with serve's election id are the primary's again (the id is no secret: only
        # TLS with client certificates keeps strangers off the switch)
        _write_group(address, 106, 6, primary=True)
        assert wait_for(lambda: _write_ok(address, 107, election_id=5), bool)
    finally:
        _stop(proc)
    # serve gone: the role is free again
    _write_group(address, 103, 3, primary=True)


def _write_ok(address: str, group: int, election_id: int) -> bool:
    try:
        _write_group(address, group, election_id, primary=False)
        return True
    except P4RuntimeClientError as exc:
        assert exc.code == "PERMISSION_DENIED", exc
        return False


def test_serve_refuses_to_start_beside_a_higher_primary(embedded_switch, tmp_path):
    with SwitchConnection(embedded_switch.address, election_id=9):
        _one_line(_run(_ctl(embedded_switch.address, tmp_path / "ctl.json", "serve",
                            "--listen", f"127.0.0.1:{free_port()}")),
                  "another controller is primary for device 0 (election id 1 is lower than "
                  "its 9)")


def test_serve_takes_the_role_back_after_a_switch_restart(embedded_switch, tmp_path):
    address = embedded_switch.address
    proc = _start_serve(_ctl(address, tmp_path / "ctl.json", "--election-id", "5", "serve",
                             "--listen", f"127.0.0.1:{free_port()}"))
    try:
        embedded_switch.restart()          # a fresh device: no arbitration stream is open
        refused = wait_for(lambda: _try_primary(address, 3), lambda r: r is not None,
                           timeout=15)
        assert isinstance(refused, NotPrimaryError), "serve did not take the role back"
    finally:
        _stop(proc)


def _try_primary(address: str, election_id: int):
    """The refusal of a controller with ``election_id``; ``None`` when it became primary."""
    try:
        SwitchConnection(address, election_id=election_id, timeout=5).close()
        return None
    except NotPrimaryError as exc:
        return exc
