"""A tiny HTTP(S) server for the tests: serves a folder on 127.0.0.1 (a free port) and
honours ``Range: bytes=a-b`` (206 Partial Content), as object stores and CDNs do; it records
every request (method, path, Range header, bytes sent). With ``tls`` it speaks HTTPS with a
certificate made by :func:`make_certificates` (a test CA and a leaf for 127.0.0.1). Started
and stopped by the test; it never talks to another address."""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from s3_server import HOST, free_port

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


@dataclass
class Served:
    """What the server answered: ``(method, path, range header, status, body bytes)``."""

    requests: list[tuple[str, str, str, int, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def make_certificates(folder: Path) -> tuple[Path, Path, Path]:
    """``(ca.pem, cert.pem, key.pem)`` in ``folder``: a test CA (to trust, e.g. through
    ``SSL_CERT_FILE``) and a server certificate for 127.0.0.1 it signed (one day)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "corpus_audit test CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(HOST))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    paths = (folder / "ca.pem", folder / "cert.pem", folder / "key.pem")
    paths[0].write_bytes(ca.public_bytes(pem))
    paths[1].write_bytes(leaf.public_bytes(pem))
    paths[2].write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


class RangeServer:
    """``http(s)://127.0.0.1:<port>/<name>`` for every file of ``root`` (no listing);
    ``tls``: ``(cert.pem, key.pem)`` to serve HTTPS."""

    def __init__(self, root: Path, tls: tuple[Path, Path] | None = None) -> None:
        self.root = root.resolve()
        self.port = free_port()
        self.url = f"{'https' if tls else 'http'}://{HOST}:{self.port}"
        self.served = Served()
        self.server = ThreadingHTTPServer((HOST, self.port), self._handler())
        if tls:
            import ssl

            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(tls[0]), str(tls[1]))
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                return

            def _answer(self, body: bool) -> None:
                file = (outer.root / self.path.lstrip("/").split("?")[0]).resolve()
                if outer.root not in file.parents or not file.is_file():
                    self._send(404, b"", body, {})
                    return
                data = file.read_bytes()
                headers = {
                    "Accept-Ranges": "bytes",
                    "ETag": f'"{hashlib.md5(data).hexdigest()}"',  # noqa: S324 - an ETag
                    "Content-Type": "application/octet-stream",
                }
                wanted = self.headers.get("Range", "")
                m = _RANGE.match(wanted)
                if m and (m.group(1) or m.group(2)):
                    if m.group(1):
                        start = int(m.group(1))
                        end = min(int(m.group(2)), len(data) - 1) if m.group(2) else len(data) - 1
                    else:  # the last N bytes
                        start, end = max(0, len(data) - int(m.group(2))), len(data) - 1
                    if start >= len(data) or start > end:
                        headers["Content-Range"] = f"bytes */{len(data)}"
                        self._send(416, b"", body, headers)
                        return
                    headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
                    self._send(206, data[start : end + 1], body, headers)
                    return
                self._send(200, data, body, headers)

            def _send(self, status: int, data: bytes, body: bool, headers: dict) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data)
                with outer.served.lock:
                    outer.served.requests.append(
                        (
                            self.command,
                            self.path,
                            self.headers.get("Range", ""),
                            status,
                            len(data) if body else 0,
                        )
                    )

            def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
                self._answer(body=False)

            def do_GET(self) -> None:  # noqa: N802
                self._answer(body=True)

        return Handler

    def __enter__(self) -> RangeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
