"""gRPC TLS for the job service (``hina-ctl serve``) and for the controller's P4Runtime client.

Plaintext stays the default (the demo and the tests run on loopback); on a shared network both
services must run with TLS, and with client certificates (mTLS) where the peers are known, as
Stratum does: the server holds a certificate and key, and with a client CA it refuses every
client whose certificate that CA did not sign. The flags are the same in every tool:

======  ======================================================================================
server  ``--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]`` (:class:`ServerTls`)
client  ``--tls-ca FILE [--tls-client-cert FILE --tls-client-key FILE]`` (:class:`ClientTls`;
        ``--tls-ca``: the CA that signed the server's certificate)
======  ======================================================================================

Files are PEM. Each is checked when it is loaded (:class:`ssl.SSLContext`), so a key that does
not match its certificate is one clear error at start-up, not a failed handshake later. When a
connection does not come up, :func:`wait_ready` tells why in one line where it can: a plaintext
client at a TLS server, a TLS client at a plaintext server, a server certificate the CA did not
sign, a client certificate the server refused.

Example::

    >>> tls = ClientTls(ca="ca.crt", cert="worker.crt", key="worker.key")    # doctest: +SKIP
    >>> channel = open_channel("10.0.0.1:50051", tls)                        # doctest: +SKIP
    >>> problem = wait_ready(channel, "10.0.0.1:50051", tls, timeout=10.0)   # doctest: +SKIP
"""
from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import grpc

__all__ = ["ClientTls", "ServerTls", "open_channel", "wait_ready", "diagnose", "is_loopback",
           "split_address"]

_PROBE_TIMEOUT_S = 2.0         # the diagnosis's own connection
_READY_TICK_S = 0.25           # how often wait_ready looks at a failing channel
# A client's first HTTP/2 bytes (RFC 9113 3.4): the preface, then an empty SETTINGS frame. Sent
# after a TLS 1.3 handshake, they draw the server's verdict on our certificate.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def _read_pem(path: str, flag: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"{flag} {path}: {exc.strerror or exc}") from None
    if b"-----BEGIN " not in data:
        raise ValueError(f"{flag} {path}: not a PEM file")
    return data


def _check_chain(cert: str, key: str, cert_flag: str, key_flag: str) -> None:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        raise ValueError(f"{key_flag} {key} does not go with {cert_flag} {cert} "
                         f"({exc.reason or exc})") from None


def _check_ca(path: str, flag: str) -> None:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=path)
    except ssl.SSLError as exc:
        raise ValueError(f"{flag} {path}: no CA certificate in it ({exc.reason or exc})") from None


@dataclass(frozen=True)
class ServerTls:
    """A TLS server's certificate and key, and the CA of its clients' certificates (mTLS).

    Args:
        cert: PEM certificate (chain) of the server (``--tls-cert``).
        key: its PEM private key (``--tls-key``).
        client_ca: PEM CA certificate(s); when given, clients must present a certificate signed
            by it (``--tls-client-ca``).

    Raises:
        ValueError: a file is missing, not PEM, or the key does not match the certificate.
    """
    cert: str
    key: str
    client_ca: Optional[str] = None

    def __post_init__(self):
        _read_pem(self.cert, "--tls-cert")
        _read_pem(self.key, "--tls-key")
        _check_chain(self.cert, self.key, "--tls-cert", "--tls-key")
        if self.client_ca:
            _read_pem(self.client_ca, "--tls-client-ca")
            _check_ca(self.client_ca, "--tls-client-ca")

    @classmethod
    def from_args(cls, cert: Optional[str], key: Optional[str],
                  client_ca: Optional[str] = None) -> Optional["ServerTls"]:
        """The server's TLS from its flags; ``None`` (plaintext) when none is given.

        Raises:
            ValueError: one of ``--tls-cert``/``--tls-key`` without the other, or
                ``--tls-client-ca`` without them.
        """
        if not (cert or key or client_ca):
            return None
        if not (cert and key):
            raise ValueError("TLS needs both --tls-cert and --tls-key"
                             + (" (--tls-client-ca alone does not turn TLS on)"
                                if client_ca and not (cert or key) else ""))
        return cls(cert, key, client_ca)

    @property
    def mutual(self) -> bool:
        return bool(self.client_ca)

    def credentials(self) -> grpc.ServerCredentials:
        ca = _read_pem(self.client_ca, "--tls-client-ca") if self.client_ca else None
        return grpc.ssl_server_credentials(
            [(_read_pem(self.key, "--tls-key"), _read_pem(self.cert, "--tls-cert"))],
            root_certificates=ca, require_client_auth=ca is not None)


@dataclass(frozen=True)
class ClientTls:
    """What a TLS client trusts and, for mTLS, the certificate it shows.

    Args:
        ca: PEM CA certificate(s) that signed the server's certificate (``--tls-ca``); ``None``:
            the system's CAs.
        cert: PEM client certificate (``--tls-client-cert``), for a server with a client CA.
        key: its PEM private key (``--tls-client-key``).

    Raises:
        ValueError: a file is missing or not PEM, ``cert`` without ``key`` (or the reverse), or
            a key that does not match its certificate.
    """
    ca: Optional[str] = None
    cert: Optional[str] = None
    key: Optional[str] = None

    def __post_init__(self):
        if bool(self.cert) != bool(self.key):
            raise ValueError("a client certificate needs both --tls-client-cert and "
                             "--tls-client-key")
        if self.ca:
            _read_pem(self.ca, "--tls-ca")
            _check_ca(self.ca, "--tls-ca")
        if self.cert:
            _read_pem(self.cert, "--tls-client-cert")
            _read_pem(self.key, "--tls-client-key")
            _check_chain(self.cert, self.key, "--tls-client-cert", "--tls-client-key")

    @classmethod
    def from_args(cls, ca: Optional[str], cert: Optional[str] = None,
                  key: Optional[str] = None) -> Optional["ClientTls"]:
        """The client's TLS from its flags; ``None`` (plaintext) when none is given."""
        if not (ca or cert or key):
            return None
        return cls(ca or None, cert or None, key or None)

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=_read_pem(self.ca, "--tls-ca") if self.ca else None,
            private_key=_read_pem(self.key, "--tls-client-key") if self.key else None,
            certificate_chain=_read_pem(self.cert, "--tls-client-cert") if self.cert else None)

    def ssl_context(self) -> ssl.SSLContext:
        """The same trust as an :class:`ssl.SSLContext` (for :func:`diagnose`)."""
        ctx = ssl.create_default_context(cafile=self.ca)
        if self.cert:
            ctx.load_cert_chain(self.cert, self.key)
        ctx.set_alpn_protocols(["h2"])
        return ctx


def split_address(address: str) -> tuple[str, int]:
    """``(host, port)`` of ``host:port`` or ``[v6]:port``.

    Raises:
        ValueError: no port, or a port that is not a number in 0..65535.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 0xFFFF:
        raise ValueError(f"{address!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def is_loopback(address: str) -> bool:
    """Whether ``host:port`` is only reachable from this machine (127.0.0.0/8, ::1, localhost)."""
    host = split_address(address)[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def open_channel(address: str, tls: Optional[ClientTls],
                 options: Sequence[tuple[str, object]] = ()) -> grpc.Channel:
    """A channel to ``address``: TLS with ``tls``, plaintext without."""
    if tls is None:
        return grpc.insecure_channel(address, options=list(options))
    return grpc.secure_channel(address, tls.credentials(), options=list(options))


def diagnose(address: str, tls: Optional[ClientTls],
             timeout: float = _PROBE_TIMEOUT_S) -> Optional[str]:
    """Why a gRPC channel to ``address`` with ``tls`` does not come up, when TLS is the reason.

    Connects once itself: a plaintext client is told the server speaks TLS; a TLS client is told
    the server speaks plaintext, or that its certificate is not trusted, or that the server
    refused the client's certificate.

    Returns:
        one line, or ``None`` when nothing answers or the handshake is fine (not a TLS problem).
    """
    try:
        host, port = split_address(address)
        sock = socket.create_connection((host, port), timeout=timeout)
    except (OSError, ValueError):
        return None
    with sock:
        if tls is None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            try:
                with ctx.wrap_socket(sock, server_hostname=host):
                    pass
            except (ssl.SSLError, OSError) as exc:
                if "alert" not in str(exc).lower():
                    return None               # no TLS there either: not ours to explain
            return (f"the server at {address} speaks TLS and this client does not: connect with "
                    "TLS (--tls-ca FILE, the CA that signed the server's certificate)")
        refused = (f"the server at {address} refused this client's certificate"
                   if tls.cert else f"the server at {address} wants a client certificate")
        refused += (" (--tls-client-cert and --tls-client-key, signed by the server's client "
                    "CA)")
        try:
            with tls.ssl_context().wrap_socket(sock, server_hostname=host) as conn:
                # TLS 1.3: the server judges our certificate after the handshake, and a gRPC
                # server that refuses it closes the connection without a word
                conn.sendall(_H2_PREFACE)
                if not conn.recv(1):
                    return refused
        except ssl.SSLCertVerificationError as exc:
            return (f"the certificate of the server at {address} is not trusted: "
                    f"{exc.verify_message} (is --tls-ca the CA that signed it?)")
        except ssl.SSLError as exc:
            text = f"{exc.reason or exc}".lower()
            if "certificate" in text or "unknown_ca" in text:        # TLS 1.2 alerts
                return f"{refused}: {exc.reason}"
            return (f"TLS handshake with {address} failed ({exc.reason or exc}): is the server "
                    "plaintext? (then connect without --tls-ca)")
        except OSError as exc:
            if isinstance(exc, (socket.timeout, TimeoutError)):
                return None
            return (f"TLS handshake with {address} failed ({exc.strerror or exc}): is the "
                    "server plaintext? (then connect without --tls-ca)")
    return None


def wait_ready(channel: grpc.Channel, address: str, tls: Optional[ClientTls],
               timeout: float) -> Optional[str]:
    """Wait until ``channel`` is connected.

    A channel that fails while something answers at ``address`` is diagnosed at once
    (:func:`diagnose`): a TLS mismatch ends the wait early, anything else (nothing listening
    yet) waits on until ``timeout``.

    Returns:
        ``None`` when connected, else why not, in one line.
    """
    failed = threading.Event()

    def watch(state: grpc.ChannelConnectivity) -> None:
        if state == grpc.ChannelConnectivity.TRANSIENT_FAILURE:
            failed.set()

    ready = grpc.channel_ready_future(channel)
    channel.subscribe(watch)          # the ready future asks to connect
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            try:
                ready.result(timeout=max(0.0, min(left, _READY_TICK_S)))
                return None
            except grpc.FutureTimeoutError:
                pass
            if failed.is_set():
                failed.clear()
                problem = diagnose(address, tls, timeout=min(_PROBE_TIMEOUT_S, max(left, 0.1)))
                if problem:
                    return problem
            if left <= 0:
                return f"no answer within {timeout:g}s"
    finally:
        channel.unsubscribe(watch)
        ready.cancel()
