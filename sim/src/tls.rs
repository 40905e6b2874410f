//! The Kubernetes API's TLS: a CA and a server certificate for `127.0.0.1` and `localhost` made at
//! start (rcgen over ring), and the listener that serves the Kubernetes API over rustls (ring) on
//! a port of its own, as a real API server serves only TLS. A plain HTTP request to that port is
//! answered as Go's HTTP server answers it; every other failed handshake just closes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How long a client may take from connecting to a finished handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What Go's `net/http` server writes, and then closes, when the first bytes on a TLS port are
/// a plain HTTP request (golang/go `src/net/http/server.go`, `conn.serve`); kube-apiserver is
/// such a server.
pub const PLAIN_HTTP_ANSWER: &str = "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// Errors making the certificates or the TLS configuration.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot make the Kubernetes API's certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("cannot configure TLS for the Kubernetes API: {0}")]
    Config(#[from] rustls::Error),
}

/// A CA made at start and the server certificate it signed, ready to serve.
pub struct Certificates {
    /// The CA's certificate, PEM: what a kubeconfig carries (base64) as `certificate-authority-data`.
    pub ca_pem: String,
    config: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for Certificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificates").finish_non_exhaustive()
    }
}

impl Certificates {
    /// A new CA (ECDSA P-256, valid from an hour ago for a year) and a server certificate it
    /// signs with the subject alternative names IP `127.0.0.1` and DNS `localhost`.
    pub fn generate() -> Result<Certificates, TlsError> {
        let now = time::OffsetDateTime::now_utc();
        let (not_before, not_after) = (now - time::Duration::hours(1), now + time::Duration::days(365));

        let mut ca = CertificateParams::new(Vec::new())?;
        ca.distinguished_name.push(DnType::CommonName, "xcsp-sim-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        (ca.not_before, ca.not_after) = (not_before, not_after);
        let ca_key = KeyPair::generate()?;
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);

        let mut server = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])?;
        server.distinguished_name.push(DnType::CommonName, "xcsp-sim");
        server.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        server.use_authority_key_identifier_extension = true;
        (server.not_before, server.not_after) = (not_before, not_after);
        let server_key = KeyPair::generate()?;
        let server_cert = server.signed_by(&server_key, &issuer)?;

        let key = rustls::pki_types::PrivatePkcs8KeyDer::from(server_key.serialize_der());
        let mut config =
            rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()?
                .with_no_client_auth()
                .with_single_cert(vec![server_cert.der().clone()], key.into())?;
        // axum serves HTTP/1.1 only; saying so lets a client that offers h2 (Go, curl) pick it.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Certificates { ca_pem: ca_cert.pem(), config: Arc::new(config) })
    }
}

/// The Kubernetes API's listener for axum: accepts TCP connections, runs each TLS handshake on a
/// task of its own (so a slow or silent client holds up no other), and yields the finished ones.
pub struct TlsListener {
    accepted: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Starts accepting on `tcp`; must be called inside the runtime that will serve.
    pub fn new(tcp: TcpListener, certificates: &Certificates) -> std::io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let acceptor = TlsAcceptor::from(certificates.config.clone());
        let (tx, accepted) = mpsc::channel(64);
        tokio::spawn(async move {
            while !tx.is_closed() {
                let (stream, peer) = match tcp.accept().await {
                    Ok(c) => c,
                    Err(_) => {
                        // Out of file descriptors and the like: wait, as axum's own listener does.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    if let Ok(Some(tls)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&acceptor, stream)).await {
                        let _ = tx.send((tls, peer)).await;
                    }
                });
            }
        });
        Ok(TlsListener { accepted, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.accepted.recv().await {
            Some(c) => c,
            // The accepting task is gone (the runtime is shutting down): nothing more will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

/// The TLS handshake, or `None` when there is none: the client spoke plain HTTP (answered as
/// Go's server answers it), closed, or failed the handshake (an untrusted certificate, say).
async fn handshake(acceptor: &TlsAcceptor, mut stream: TcpStream) -> Option<TlsStream<TcpStream>> {
    if looks_like_http(&record_header(&stream).await?) {
        let _ = stream.write_all(PLAIN_HTTP_ANSWER.as_bytes()).await;
        let _ = stream.shutdown().await;
        // Read what the client sent before closing, so that it gets the answer and not a reset.
        let mut sink = [0u8; 4096];
        let drain = async { while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {} };
        let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
        return None;
    }
    acceptor.accept(stream).await.ok()
}

/// The first five bytes (a TLS record header) without consuming them; fewer when the client
/// stops sending before five, `None` when it closed without sending anything.
async fn record_header(stream: &TcpStream) -> Option<Vec<u8>> {
    let mut header = [0u8; 5];
    let mut seen = 0;
    for _ in 0..200 {
        seen = stream.peek(&mut header).await.ok()?;
        if seen == 0 {
            return None;
        }
        if seen == header.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Some(header[..seen].to_vec())
}

/// Go's `tlsRecordHeaderLooksLikeHTTP` (golang/go `src/net/http/server.go`): only these five-byte
/// starts count as a misdirected plain HTTP request.
fn looks_like_http(header: &[u8]) -> bool {
    matches!(header, b"GET /" | b"HEAD " | b"POST " | b"PUT /" | b"OPTIO")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_gos_five_request_starts_count_as_plain_http() {
        for h in [&b"GET /"[..], b"HEAD ", b"POST ", b"PUT /", b"OPTIO"] {
            assert!(looks_like_http(h), "{h:?}");
        }
        // A TLS handshake record, other methods (as in Go: they fail at the TLS layer), short reads.
        for h in [&[0x16, 0x03, 0x01, 0x02, 0x00][..], b"PATCH", b"DELET", b"GET", b""] {
            assert!(!looks_like_http(h), "{h:?}");
        }
    }

    #[test]
    fn the_ca_is_pem_and_each_start_makes_a_new_one() {
        let a = Certificates::generate().unwrap();
        let b = Certificates::generate().unwrap();
        assert!(a.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"), "{}", a.ca_pem);
        assert_ne!(a.ca_pem, b.ca_pem);
    }
}
