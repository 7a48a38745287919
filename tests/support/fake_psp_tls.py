"""The fake PSP's certificates: a throwaway CA, a server certificate for 127.0.0.1, a client
certificate for Tucano, and a stranger's client certificate from another CA, as PEM files.

Real PSPs require mutual TLS on the API Pix: the receiving user's client presents a certificate
the PSP issued. The keys are P-256 (fast to make); every certificate carries the extensions a
strict verifier wants (key identifiers, key usage, extended key usage).
"""

from __future__ import annotations

import ipaddress
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVER_NAME = "127.0.0.1"
CLIENT_NAME = "tucano-pix-client"


@dataclass(frozen=True)
class PspCertificates:
    """Paths of PEM files; keys are unencrypted and readable by their owner only."""

    ca_file: Path
    server_cert_file: Path
    server_key_file: Path
    client_cert_file: Path
    client_key_file: Path
    # A client certificate the PSP did not issue (another CA): the handshake must fail with it.
    stranger_cert_file: Path
    stranger_key_file: Path

    def server_context(self) -> ssl.SSLContext:
        """The PSP's side: its certificate, and a client certificate from its CA required."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(self.ca_file))
        context.load_cert_chain(self.server_cert_file, self.server_key_file)
        context.verify_mode = ssl.CERT_REQUIRED
        return context

    def client_context(self, *, certificate: bool = True, stranger: bool = False) -> ssl.SSLContext:
        """A client's side: trusts the PSP's CA; presents Tucano's certificate (or the
        stranger's, or none)."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        if stranger:
            context.load_cert_chain(self.stranger_cert_file, self.stranger_key_file)
        elif certificate:
            context.load_cert_chain(self.client_cert_file, self.client_key_file)
        return context


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Fake PSP (tests)"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _authority(common_name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    common_name: str,
    *,
    server: bool,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    public = key.public_key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca.subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address(SERVER_NAME)), x509.DNSName("localhost")]
            ),
            critical=False,
        )
    return builder.sign(ca_key, hashes.SHA256()), key


def make_certificates(directory: Path) -> PspCertificates:
    """Write a new CA, server, client and stranger certificate with their keys in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = _authority("Fake PSP CA")
    server, server_key = _leaf(ca, ca_key, SERVER_NAME, server=True)
    client, client_key = _leaf(ca, ca_key, CLIENT_NAME, server=False)
    other_ca, other_ca_key = _authority("Somebody else's CA")
    stranger, stranger_key = _leaf(other_ca, other_ca_key, "stranger", server=False)
    certificates = PspCertificates(
        ca_file=directory / "psp-ca.pem",
        server_cert_file=directory / "psp-server.pem",
        server_key_file=directory / "psp-server.key",
        client_cert_file=directory / "psp-client.pem",
        client_key_file=directory / "psp-client.key",
        stranger_cert_file=directory / "stranger-client.pem",
        stranger_key_file=directory / "stranger-client.key",
    )
    _write_cert(certificates.ca_file, ca)
    _write_cert(certificates.server_cert_file, server)
    _write_key(certificates.server_key_file, server_key)
    _write_cert(certificates.client_cert_file, client)
    _write_key(certificates.client_key_file, client_key)
    _write_cert(certificates.stranger_cert_file, stranger)
    _write_key(certificates.stranger_key_file, stranger_key)
    return certificates
