"""Certificates made for a test with the ``cryptography`` package: a CA, a broker certificate
for 127.0.0.1/localhost, and client certificates, written as the PEM files Kafka takes (a
key store holding the chain and an encrypted PKCS#8 key; a trust store of CA certificates)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

KEY_PASSWORD = "key-secret"


def _name(cn: str, ou: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COUNTRY_NAME, "DE"), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Odradek")]
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


@dataclass
class Issued:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self, password: str | None = None) -> bytes:
        enc = (
            serialization.BestAvailableEncryption(password.encode())
            if password
            else serialization.NoEncryption()
        )
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)


class TestCA:
    def __init__(self, cn: str = "Odradek Test CA"):
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(cn))
            .issuer_name(_name(cn))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )

    def issue(self, cn: str, ou: str | None = None, server: bool = False) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, ou))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        return Issued(builder.sign(self.key, hashes.SHA256()), key)

    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class TlsFiles:
    """Paths of one test's PEM files."""

    ca: Path  # trust store (CA certificate)
    broker_keystore: Path  # chain + encrypted PKCS#8 key (ssl.key.password=KEY_PASSWORD)
    client_cert: Path
    client_key: Path  # unencrypted, for clients
    client_keystore: Path  # chain + encrypted key, for Kafka-style client configs
    client_dn: str


def make_tls_files(directory: Path, client_cn: str = "alice", client_ou: str = "Users") -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    ca = TestCA()
    broker = ca.issue("localhost", server=True)
    client = ca.issue(client_cn, ou=client_ou)
    paths = TlsFiles(
        ca=directory / "ca.pem",
        broker_keystore=directory / "broker-keystore.pem",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
        client_keystore=directory / "client-keystore.pem",
        client_dn=client.cert.subject.rfc4514_string(),
    )
    paths.ca.write_bytes(ca.pem())
    paths.broker_keystore.write_bytes(broker.cert_pem() + ca.pem() + broker.key_pem(KEY_PASSWORD))
    paths.client_cert.write_bytes(client.cert_pem())
    paths.client_key.write_bytes(client.key_pem())
    paths.client_keystore.write_bytes(client.cert_pem() + client.key_pem(KEY_PASSWORD))
    return paths
