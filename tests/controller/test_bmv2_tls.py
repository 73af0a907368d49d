"""TLS and mutual TLS on real BMv2's P4Runtime server (``simple_switch_grpc --grpc-server-ssl``).

:class:`controller.bmv2.Bmv2Process` starts BMv2 with ``tls=ServerTls(cert, key[, client_ca])``
(its ``--grpc-server-ssl --grpc-server-cert --grpc-server-key [--grpc-server-cacert
--grpc-server-with-client-auth]`` flags). The controller library and ``hina-ctl`` reach it with
``--tls-ca`` (and ``--tls-client-cert/--tls-client-key``); a plaintext client, a client that
trusts another CA, a client without a certificate (mutual TLS) and one with a certificate another
CA signed are refused before any RPC, each with one line that says why. ``hina-ctl serve`` holds
the primary role over mutual TLS. The PKI is the throwaway one of ``pkiutil.py`` (``pki``).
"""
from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hina.controller.p4runtime_client import NotPrimaryError, P4RuntimeClientError, SwitchConnection
from hina.controller.state import ControllerState
from ctlutil import TEST_WORDS, free_port
from hina.tls import ClientTls, ServerTls

ROOT = Path(__file__).resolve().parents[2]
CLI_TIMEOUT_S = 120


def _bmv2(tls: ServerTls):
    from hina.controller.bmv2 import Bmv2Process, missing
    reason = missing()
    if reason:
        pytest.skip(reason)
    return Bmv2Process({}, tls=tls)


@pytest.fixture
def tls_bmv2(pki):
    """BMv2 whose P4Runtime server speaks TLS (no client certificates asked for)."""
    with _bmv2(ServerTls(pki.server_cert, pki.server_key)) as sw:
        yield sw


@pytest.fixture
def mtls_bmv2(pki):
    """BMv2 whose P4Runtime server wants a client certificate signed by ``pki.ca``."""
    with _bmv2(ServerTls(pki.server_cert, pki.server_key, client_ca=pki.ca)) as sw:
        yield sw


def _refused(address: str, tls, text: str) -> None:
    with pytest.raises(P4RuntimeClientError, match=text) as err:
        SwitchConnection(address, tls=tls, timeout=5)
    assert err.value.code == "UNAVAILABLE"
    assert len(str(err.value).splitlines()) == 1


def test_bmv2_speaks_tls(pki, tls_bmv2, bmv2_pipeline):
    assert "--grpc-server-ssl" in tls_bmv2.proc.args and \
        "--grpc-server-with-client-auth" not in tls_bmv2.proc.args
    port = tls_bmv2.grpc_port
    for host in ("127.0.0.1", "localhost"):        # both names are in the certificate
        with SwitchConnection(f"{host}:{port}", tls=ClientTls(pki.ca), timeout=5) as conn:
            assert conn.is_primary
            conn.set_pipeline(*bmv2_pipeline.build())      # a write through the TLS channel
            assert conn.fetch_pipeline() is not None      # and a read
    _refused(tls_bmv2.address, None, "speaks TLS and this client does not")
    _refused(tls_bmv2.address, ClientTls(pki.other_ca), "is not trusted")
    # without client authentication a client certificate is neither needed nor harmful
    with SwitchConnection(tls_bmv2.address, tls=ClientTls(pki.ca, pki.client_cert,
                                                          pki.client_key), timeout=5) as conn:
        assert conn.fetch_pipeline() is not None


def test_bmv2_mutual_tls(pki, mtls_bmv2, bmv2_pipeline):
    assert "--grpc-server-with-client-auth" in mtls_bmv2.proc.args
    good = ClientTls(pki.ca, pki.client_cert, pki.client_key)
    with SwitchConnection(mtls_bmv2.address, tls=good, timeout=5) as conn:
        assert conn.is_primary
        conn.set_pipeline(*bmv2_pipeline.build())
        assert conn.fetch_pipeline() is not None
    for tls, text in [(None, "speaks TLS and this client does not"),
                      (ClientTls(pki.ca), "wants a client certificate"),
                      (ClientTls(pki.ca, pki.stranger_cert, pki.stranger_key),
                       "refused this client's certificate"),
                      (ClientTls(pki.other_ca, pki.client_cert, pki.client_key),
                       "is not trusted")]:
        _refused(mtls_bmv2.address, tls, text)
    # the switch still serves the right client after the refusals
    with SwitchConnection(mtls_bmv2.address, tls=good, timeout=5) as conn:
        assert conn.fetch_pipeline() is not None


def test_tls_survives_a_restart_on_the_same_ports(pki, mtls_bmv2):
    """Bmv2Process.restart: the same ports and the same TLS flags after a SIGKILL."""
    address, thrift, pid = mtls_bmv2.address, mtls_bmv2.thrift_port, mtls_bmv2.pid
    mtls_bmv2.kill()
    assert not mtls_bmv2.alive()
    mtls_bmv2.restart()
    assert (mtls_bmv2.address, mtls_bmv2.thrift_port) == (address, thrift)
    assert mtls_bmv2.pid != pid
    with SwitchConnection(address, tls=ClientTls(pki.ca, pki.client_cert, pki.client_key),
                          timeout=5) as conn:
        assert conn.fetch_pipeline() is None          # a fresh device
    _refused(address, ClientTls(pki.ca), "wants a client certificate")


# ------------------------------------------------------------------------------------------------
# hina-ctl
# ------------------------------------------------------------------------------------------------
def _ctl(sw, state: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "hina.controller.cli", "--switch", sw.address, "--state",
            str(state), "--timeout", "5", "--target", "bmv2", "--thrift-port",
            str(sw.thrift_port), *args]


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=CLI_TIMEOUT_S)


#: A log line of gRPC's C core (``I1125 20:52:19.535188 10846 ssl_transport_security.cc:2563]
#: Handshake failed ...``): grpcio 1.85 logs a failed certificate check at info level to stderr
#: by itself, outside hina-ctl's control; hina-ctl's own error is the one ``hina-ctl: error:`` line.
_GRPC_CORE_LOG = re.compile(r"^[IWE]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w.]+:\d+\] ")


def _one_line(proc: subprocess.CompletedProcess, text: str) -> None:
    lines = [line for line in proc.stderr.strip().splitlines()
             if not _GRPC_CORE_LOG.match(line)]
    assert proc.returncode == 1 and len(lines) == 1 and text in lines[0], proc.stderr
    assert lines[0].startswith("hina-ctl: error: "), proc.stderr


def test_hina_ctl_drives_bmv2_over_mutual_tls(pki, mtls_bmv2, bmv2_pipeline, tmp_path):
    state = tmp_path / "ctl.json"
    client = ["--tls-ca", pki.ca, "--tls-client-cert", pki.client_cert,
              "--tls-client-key", pki.client_key]
    ctl = lambda *a: _ctl(mtls_bmv2, state, *a)        # noqa: E731
    push = ["pipeline", "push", "-D", f"HINA_WORDS={TEST_WORDS}"]
    # the wrong credentials: one line each, nothing pushed
    _one_line(_run(ctl(*push)), "speaks TLS and this client does not")
    _one_line(_run(ctl("--tls-ca", pki.ca, *push)), "wants a client certificate")
    _one_line(_run(ctl("--tls-ca", pki.ca, "--tls-client-cert", pki.stranger_cert,
                       "--tls-client-key", pki.stranger_key, *push)),
              "refused this client's certificate")
    _one_line(_run(ctl("--tls-ca", pki.other_ca, "--tls-client-cert", pki.client_cert,
                       "--tls-client-key", pki.client_key, *push)), "is not trusted")
    assert ControllerState.load(state).pipeline is None
    # the right ones: push, a job, its state and the counters (P4Runtime and Thrift)
    done = _run(ctl(*client, *push))
    assert done.returncode == 0, done.stderr
    done = _run(ctl(*client, "job", "create", "--id", "1", "--codec", "fixed", "--slots",
                    "4", "--worker", "10.0.1.1:40000,port=1", "--worker",
                    "10.0.1.2:40000,port=2"))
    assert done.returncode == 0, done.stderr
    done = _run(ctl(*client, "state", "--job", "1", "--slot", "0", "--json"))
    assert done.returncode == 0 and '"in_use": false' in done.stdout, done.stderr
    with SwitchConnection(mtls_bmv2.address, tls=ClientTls(pki.ca, pki.client_cert,
                                                           pki.client_key), timeout=5) as conn:
        assert conn.fetch_pipeline() is not None
    # serve holds the primary role over mutual TLS: a lower election id cannot take it
    proc = subprocess.Popen(ctl(*client, "--election-id", "5", "serve", "--listen",
                                f"127.0.0.1:{free_port()}"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        line = proc.stdout.readline()
        assert "listening" in line, line + proc.stderr.read()
        with pytest.raises(NotPrimaryError):
            SwitchConnection(mtls_bmv2.address, election_id=3, timeout=5,
                             tls=ClientTls(pki.ca, pki.client_cert, pki.client_key))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=15) == 0, proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
