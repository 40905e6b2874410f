"""A TLS-terminating reverse proxy in front of the sim, for clients that refuse plain http.

azure-identity (through MSAL) accepts only an https authority, and azure-core sends bearer tokens
only over https. Real Entra and ARM are https; the sim serves plain http. This front plays the TLS
terminator: a self-signed certificate for 127.0.0.1 (made here with `cryptography`, which
azure-identity already depends on), every request forwarded to the sim with its Host header kept
and `X-Forwarded-Proto: https` added, so the URLs the sim writes (OpenID metadata, long-running
operation headers) point back at the front.
"""

import datetime
import http.client
import http.server
import ipaddress
import os
import ssl
import tempfile
import threading
import urllib.parse

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


def self_signed(directory):
    """Writes a certificate and key for 127.0.0.1; returns (cert path, key path)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "xcsp-sim peer-clients front")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path = os.path.join(directory, "front.pem")
    key_path = os.path.join(directory, "front.key")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    return cert_path, key_path


def start(sim_url):
    """Starts the front on a free port; returns (https base URL, CA bundle path to trust)."""
    target = urllib.parse.urlsplit(sim_url)
    directory = tempfile.mkdtemp(prefix="xcsp-peers-tls-")
    cert_path, key_path = self_signed(directory)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def forward(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            headers["X-Forwarded-Proto"] = "https"
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            finally:
                conn.close()

        do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = do_HEAD = forward

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_path, key_path)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"https://127.0.0.1:{server.server_address[1]}", cert_path
