"""The test aggregate's certificates, made with the ``cryptography`` library.

A portal (CloudLab, Emulab) signs its users' certificates with its own CA and puts the user's
URN in the certificate's subjectAltName as a URI (``urn:publicid:IDN+emulab.net+user+alice``):
its services read who is calling from there. The services' own TLS certificates are signed
by the same kind of CA, not a public one, which is why netrepro's aggregates file names a CA
bundle. Here one test CA plays that part:

- :meth:`TestPKI.server` : the services' certificate for ``127.0.0.1`` (and ``localhost``);
- :meth:`TestPKI.portal_user`: a user's PEM as the portal's Download Credentials gives it
  (certificate and private key in one file, the key optionally encrypted), valid from a day
  ago for ``days`` days (negative: expired);
- :meth:`TestPKI.stranger`: the same from another CA, which the services refuse.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization as ser
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def make_cert(cn: str, issuer=None, *, ca: bool = False, sans: list | None = None, days: float = 1.0):
    """(certificate, key): self-signed, or signed by ``issuer`` = (certificate, key); valid from
    one day ago for ``days`` days from now."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = dt.datetime.now(dt.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer[0].subject if issuer else name)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - dt.timedelta(days=1 + max(0.0, -days))).not_valid_after(now + dt.timedelta(days=days))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                          data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                          crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        b = b.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    if issuer:
        b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer[1].public_key()), critical=False)
    return b.sign(issuer[1] if issuer else key, hashes.SHA256()), key


def pem(cert=None, key=None, passphrase: bytes | None = None) -> bytes:
    """PEM text of ``cert`` then ``key`` (PKCS#8, encrypted with ``passphrase`` if given)."""
    out = cert.public_bytes(ser.Encoding.PEM) if cert is not None else b""
    if key is not None:
        enc = ser.BestAvailableEncryption(passphrase) if passphrase else ser.NoEncryption()
        out += key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, enc)
    return out


class TestPKI:
    """A test CA in folder ``base``: ``ca.pem`` (what a user's aggregates file names as its
    ``ca_bundle``) and the certificates below, each written to a file of ``base``."""

    __test__ = False   # not a pytest test class

    def __init__(self, base: Path, name: str = "Test portal CA"):
        self.base = Path(base)
        self.base.mkdir(parents=True, exist_ok=True)
        self.ca = make_cert(name, ca=True, days=30)
        self.ca_file = self.base / "ca.pem"
        self.ca_file.write_bytes(pem(self.ca[0]))

    def server(self, address: str = "127.0.0.1") -> Path:
        """The services' certificate and key (one PEM) for ``address`` and localhost."""
        path = self.base / "server.pem"
        sans = [x509.IPAddress(ipaddress.ip_address(address)), x509.DNSName("localhost")]
        path.write_bytes(pem(*make_cert(address, self.ca, sans=sans, days=30)))
        return path

    def portal_user(self, urn: str, name: str = "user.pem", days: float = 365.0,
                    passphrase: bytes | None = None) -> Path:
        """A user's Download Credentials PEM: certificate (URN as a URI subjectAltName) and key."""
        path = self.base / name
        cn = urn.rsplit("+", 1)[-1]
        path.write_bytes(pem(*make_cert(cn, self.ca, sans=[x509.UniformResourceIdentifier(urn)], days=days),
                             passphrase=passphrase))
        return path

    def stranger(self, urn: str, name: str = "stranger.pem") -> Path:
        """A user's PEM signed by another CA: well-formed and current, but not this portal's."""
        other = make_cert("Another CA", ca=True, days=30)
        path = self.base / name
        path.write_bytes(pem(*make_cert(urn.rsplit("+", 1)[-1], other, sans=[x509.UniformResourceIdentifier(urn)])))
        return path
