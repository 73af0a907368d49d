"""A throwaway PKI for the TLS tests (``pki`` fixture in ``conftest.py``).

:func:`make_pki` writes, with ``cryptography``, a CA, a server certificate for 127.0.0.1 and
localhost, a client certificate the CA signed, and a second CA nobody trusts with a client
certificate of its own (a stranger). Keys are ECDSA P-256, valid for a day.
"""
from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Pki", "make_pki"]


@dataclass(frozen=True)
class Pki:
    ca: str                 # the CA of the servers' and the clients' certificates
    server_cert: str        # 127.0.0.1 and localhost
    server_key: str
    client_cert: str        # signed by ca
    client_key: str
    other_ca: str           # a CA nobody here trusts
    stranger_cert: str      # a client certificate other_ca signed
    stranger_key: str


def make_pki(folder: Path) -> Pki:
    """Write the PKI's PEM files into ``folder``; their paths."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder = Path(folder)
    now = datetime.datetime.now(datetime.timezone.utc)

    def cert(name, key, issuer_name, issuer_key, ca=False, server=False):
        b = (x509.CertificateBuilder()
             .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
             .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_name)]))
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(minutes=5))
             .not_valid_after(now + datetime.timedelta(days=1))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if not ca:
            b = b.add_extension(x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False)
        if server:
            b = b.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
        return b.sign(issuer_key, hashes.SHA256())

    def write(name, key, crt):
        (folder / f"{name}.key").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))
        (folder / f"{name}.crt").write_bytes(crt.public_bytes(serialization.Encoding.PEM))
        return str(folder / f"{name}.crt"), str(folder / f"{name}.key")

    keys = {n: ec.generate_private_key(ec.SECP256R1())
            for n in ("ca", "other", "server", "client", "stranger")}
    ca, _ = write("ca", keys["ca"], cert("hina test CA", keys["ca"], "hina test CA", keys["ca"],
                                         ca=True))
    other, _ = write("other", keys["other"], cert("other CA", keys["other"], "other CA",
                                                  keys["other"], ca=True))
    server = write("server", keys["server"], cert("switch", keys["server"], "hina test CA",
                                                  keys["ca"], server=True))
    client = write("client", keys["client"], cert("worker", keys["client"], "hina test CA",
                                                  keys["ca"]))
    stranger = write("stranger", keys["stranger"], cert("stranger", keys["stranger"],
                                                        "other CA", keys["other"]))
    return Pki(ca, *server, *client, other, *stranger)
