//! The clouds' own host names over TLS: one loopback listener that answers for
//! `management.azure.com`, `management.usgovcloudapi.net`, `login.microsoftonline.com` and
//! `login.microsoftonline.us` ([`crate::arm::clouds`]) with a certificate the world's CA signed, and
//! serves them with the plain port's router. The world's proxy ([`crate::proxy`]) routes each
//! `<host>:443` here, so a program that knows only Azure's real endpoints (CAPZ, whose
//! `ARMClientOptions` has no setting for another ARM URL) reaches the sim unchanged: given
//! `HTTPS_PROXY` and the world's CA (`SSL_CERT_FILE`), it dials the real name and checks the real
//! certificate. The Azure SDK for Go sends a bearer token only over TLS (`azcore` v1.22.0
//! `runtime/policy_bearer_token.go`: "authorized requests are not permitted for non-TLS protected
//! (https) endpoints"), which is why plain HTTP cannot stand in.
//!
//! Each request is marked `X-Forwarded-Proto: https` (whatever the client sent), so the URLs the
//! sim writes (long-running operations, OpenID metadata) are `https://<Host>`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::HeaderValue;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tower::ServiceExt;

/// Serves `router` over TLS on a free loopback port with the PEM certificate chain and key;
/// returns the address. Serves until the runtime stops.
pub async fn start(router: axum::Router, cert_pem: &str, key_pem: &str) -> std::io::Result<SocketAddr> {
    let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("the front's certificate: {e}")))?;
    let key =
        PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| invalid(format!("the front's key: {e}")))?;
    // Every suite and group AWS-LC has, approved or not, as the real services offer them: a FIPS
    // client must find its own among them (a FIPS build's default provider would hide that).
    let provider = rustls::crypto::CryptoProvider {
        cipher_suites: rustls::crypto::aws_lc_rs::ALL_CIPHER_SUITES.to_vec(),
        kx_groups: rustls::crypto::aws_lc_rs::ALL_KX_GROUPS.to_vec(),
        ..rustls::crypto::aws_lc_rs::default_provider()
    };
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| invalid(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            let (acceptor, router) = (acceptor.clone(), router.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(conn).await else { return };
                let service = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                    req.headers_mut().insert("x-forwarded-proto", HeaderValue::from_static("https"));
                    router.clone().oneshot(req.map(axum::body::Body::new))
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
            });
        }
    });
    Ok(addr)
}
