//! The product's cryptography, from one module: every TLS client configuration it makes, its
//! random bytes and its key derivation.
//!
//! In the `fips` build (the binaries' default) the module is AWS-LC's FIPS module
//! (`aws-lc-fips-sys`, FIPS 140-3), reached through rustls' FIPS provider
//! ([`rustls::crypto::default_fips_provider`]): TLS 1.2 and 1.3 with AES-GCM suites only, ECDHE on
//! the NIST curves (and the X25519MLKEM768 hybrid rustls counts as approved), signatures the
//! module validates. Built without it, the same code runs on AWS-LC's ordinary build.
//!
//! There is no other way to a TLS client in the product:
//! - reqwest (Azure Resource Manager, Entra, the blob service, OIDC discovery) takes
//!   [`client_config`] through [`reqwest_client`], and azure_core takes that client through
//!   [`AzureHttp`];
//! - the AWS SDKs take [`aws_http_client`], whose rustls configuration aws-smithy builds from the
//!   FIPS provider (and checks with `fips()`) when this crate is built with `fips`;
//! - kube builds its configuration from the process-wide provider, which [`install`] sets and
//!   checks.
//!
//! [`Peer`] names each of them; a test walks all of them.

use std::sync::{Arc, LazyLock};

use rustls::ClientConfig;
use rustls::crypto::CryptoProvider;

/// Whether this is the FIPS build.
pub const FIPS: bool = cfg!(feature = "fips");

/// What `xcsp --version` says about the module.
pub fn module() -> String {
    if FIPS {
        let version = aws_lc_rs::fips_version().map(|v| format!(" {v}")).unwrap_or_default();
        format!("FIPS build: AWS-LC FIPS module{version} (aws-lc-fips-sys, FIPS 140-3) through rustls' FIPS provider")
    } else {
        "not a FIPS build: AWS-LC (aws-lc-sys, not the validated module); build with the default features for FIPS"
            .into()
    }
}

/// Everything the product talks TLS to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// Azure Resource Manager (every `azure_mgmt_*` client and our long-running-operation polls).
    AzureResourceManager,
    /// Entra ID's token endpoint, and the managed identity endpoint.
    Entra,
    /// The storage account's blob service (the boot image's copy).
    AzureBlob,
    /// The cluster's service account issuer (OIDC discovery and its keys).
    OidcIssuer,
    /// EC2, Route 53 Resolver, S3 (the state backend), STS and SSO: every AWS SDK client.
    Aws,
    /// The Kubernetes API server (the provider, the state backend, the controller).
    Kubernetes,
}

impl Peer {
    pub const ALL: [Peer; 6] =
        [Peer::AzureResourceManager, Peer::Entra, Peer::AzureBlob, Peer::OidcIssuer, Peer::Aws, Peer::Kubernetes];
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Peer::AzureResourceManager => "Azure Resource Manager",
            Peer::Entra => "Entra ID",
            Peer::AzureBlob => "the Azure blob service",
            Peer::OidcIssuer => "the cluster's OIDC issuer",
            Peer::Aws => "the AWS APIs",
            Peer::Kubernetes => "the Kubernetes API server",
        })
    }
}

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum CryptoError {
    #[error("the TLS configuration for {peer} is not FIPS-approved, and this is a FIPS build")]
    #[diagnostic(
        code(xcsp::fips::config),
        help("a provider other than the FIPS one was installed first; this is a defect of xcsp, please report it")
    )]
    NotFips { peer: Peer },
    #[error("the FIPS module refused to start: {0}")]
    #[diagnostic(
        code(xcsp::fips::module),
        help("the module's power-on self-tests failed; the build or the machine is broken")
    )]
    Module(String),
    #[error("no TLS configuration for {peer}: {message}")]
    #[diagnostic(code(xcsp::fips::config))]
    Config { peer: Peer, message: String },
    #[error("the module's random generator failed")]
    #[diagnostic(code(xcsp::fips::random))]
    Random,
}

/// The crypto provider of every TLS configuration the product makes.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(the_provider())
}

fn the_provider() -> CryptoProvider {
    #[cfg(feature = "fips")]
    return rustls::crypto::default_fips_provider();
    #[cfg(not(feature = "fips"))]
    return rustls::crypto::aws_lc_rs::default_provider();
}

/// Makes [`provider`] the process-wide default (kube's and reqwest's fallback), once, and in the
/// FIPS build checks that the module runs in FIPS mode and that the installed provider is FIPS.
/// Every binary calls it before its first connection; calling it again is harmless.
pub fn install() -> Result<(), CryptoError> {
    #[cfg(feature = "fips")]
    aws_lc_rs::try_fips_mode().map_err(|e| CryptoError::Module(e.to_string()))?;
    let _ = the_provider().install_default();
    match CryptoProvider::get_default() {
        Some(installed) if FIPS && !installed.fips() => Err(CryptoError::NotFips { peer: Peer::Kubernetes }),
        _ => Ok(()),
    }
}

/// The trust anchors: the machine's (which honour `SSL_CERT_FILE`, as an agency's own roots need),
/// then Mozilla's; read once per process, however many clients are made.
static ROOTS: LazyLock<Arc<rustls::RootCertStore>> = LazyLock::new(|| {
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for e in &native.errors {
        tracing::debug!("a native root certificate was not loaded: {e}");
    }
    let (added, _) = roots.add_parsable_certificates(native.certs);
    tracing::debug!("{added} native root certificates");
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    Arc::new(roots)
});

/// Refuses a configuration that is not FIPS in the FIPS build.
pub fn check(peer: Peer, config: &ClientConfig) -> Result<(), CryptoError> {
    if FIPS && !config.fips() { Err(CryptoError::NotFips { peer }) } else { Ok(()) }
}

/// The TLS client configuration for `peer`, trusting the machine's roots and Mozilla's.
pub fn client_config(peer: Peer) -> Result<ClientConfig, CryptoError> {
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| CryptoError::Config { peer, message: e.to_string() })?
        .with_root_certificates(ROOTS.clone())
        .with_no_client_auth();
    check(peer, &config)?;
    Ok(config)
}

/// `builder` with the TLS of [`client_config`] for `peer`: the only way the product builds a
/// reqwest client.
pub fn reqwest_client(peer: Peer, builder: reqwest::ClientBuilder) -> Result<reqwest::ClientBuilder, CryptoError> {
    Ok(builder.use_preconfigured_tls(client_config(peer)?))
}

/// The AWS SDKs' HTTP client: rustls on the FIPS provider in the FIPS build (aws-smithy builds
/// it from `default_fips_provider()`, asserts `fips()` and keeps AES-GCM suites only), trusting
/// the machine's roots.
pub fn aws_http_client() -> aws_smithy_runtime_api::client::http::SharedHttpClient {
    use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
    #[cfg(feature = "fips")]
    let mode = CryptoMode::AwsLcFips;
    #[cfg(not(feature = "fips"))]
    let mode = CryptoMode::AwsLc;
    aws_smithy_http_client::Builder::new().tls_provider(Provider::Rustls(mode)).build_https()
}

/// `buf` filled from the module's generator (its DRBG in the FIPS build).
pub fn fill_random(buf: &mut [u8]) -> Result<(), CryptoError> {
    aws_lc_rs::rand::fill(buf).map_err(|_| CryptoError::Random)
}

/// `n` random bytes from the module.
pub fn random_bytes<const N: usize>() -> Result<[u8; N], CryptoError> {
    let mut out = [0u8; N];
    fill_random(&mut out)?;
    Ok(out)
}

pub mod sealing;

/// What a TLS failure means when the build is FIPS: a sentence to add to an error whose chain holds
/// a rustls error that a peer without FIPS-approved parameters causes.
pub fn explain(error: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    std::iter::successors(Some(error), |e| e.source()).find_map(|e| explain_text(&e.to_string()))
}

/// [`explain`] for an error that reached us as text (a provider's message, a rendered chain):
/// rustls' words for a handshake with nothing in common (its `PeerIncompatible` errors, and the
/// peer's `HandshakeFailure`, `InsufficientSecurity` and `ProtocolVersion` alerts).
pub fn explain_text(text: &str) -> Option<&'static str> {
    let refused =
        ["HandshakeFailure", "InsufficientSecurity", "ProtocolVersion", "PeerIncompatible", "peer is incompatible"];
    (FIPS && refused.iter().any(|w| text.contains(w)) && !text.contains(FIPS_REFUSED)).then_some(FIPS_REFUSED)
}

/// For tests: a TLS server configuration that offers only ChaCha20-Poly1305 (TLS 1.3 and 1.2's
/// ECDSA suite), which FIPS 140 does not approve: what a FIPS build must refuse by name.
#[doc(hidden)]
pub fn chacha_only_server_config(
    cert: rustls::pki_types::CertificateDer<'static>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
) -> Result<rustls::ServerConfig, rustls::Error> {
    use rustls::crypto::aws_lc_rs::{ALL_KX_GROUPS, cipher_suite, default_provider};
    let provider = CryptoProvider {
        cipher_suites: vec![
            cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
            cipher_suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        ],
        kx_groups: ALL_KX_GROUPS.to_vec(),
        ..default_provider()
    };
    rustls::ServerConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
}

/// The sentence [`explain`] adds.
pub const FIPS_REFUSED: &str = "this xcsp is a FIPS build: it offers only FIPS-approved TLS (1.2 or 1.3, AES-GCM, ECDHE on P-256/P-384), and the server accepted none of it; a FIPS-approved endpoint (the clouds' and OpenShift's are) or a non-FIPS build of xcsp is needed";

/// azure_core's HTTP over a reqwest client built by [`reqwest_client`]: azure_core's own reqwest
/// binding would pull reqwest's ring provider in.
#[derive(Debug, Clone)]
pub struct AzureHttp(pub reqwest::Client);

impl AzureHttp {
    /// The client for `peer`.
    pub fn for_peer(peer: Peer) -> Result<Arc<dyn azure_core::HttpClient>, CryptoError> {
        let client = reqwest_client(peer, reqwest::Client::builder().pool_max_idle_per_host(0))?
            .build()
            .map_err(|e| CryptoError::Config { peer, message: e.to_string() })?;
        Ok(Arc::new(AzureHttp(client)))
    }

    /// [`AzureHttp::for_peer`] as the transport of an SDK client's options.
    pub fn transport(peer: Peer) -> Result<azure_core::TransportOptions, CryptoError> {
        Ok(azure_core::TransportOptions::new(AzureHttp::for_peer(peer)?))
    }
}

#[async_trait::async_trait]
impl azure_core::HttpClient for AzureHttp {
    async fn execute_request(&self, request: &azure_core::Request) -> azure_core::Result<azure_core::Response> {
        use azure_core::error::{Error, ErrorKind};
        use futures::TryStreamExt;
        let method = reqwest::Method::from_bytes(request.method().as_ref().as_bytes())
            .map_err(|e| Error::full(ErrorKind::Other, e, "an HTTP method reqwest does not know"))?;
        let mut req = self.0.request(method, request.url().clone());
        for (name, value) in request.headers().iter() {
            req = req.header(name.as_str(), value.as_str());
        }
        let req = match request.body().clone() {
            azure_core::Body::Bytes(bytes) => req.body(bytes),
            azure_core::Body::SeekableStream(stream) => req.body(reqwest::Body::wrap_stream(stream)),
        };
        let response = req.send().await.map_err(|e| {
            let hint = explain(&e).map(|h| format!(" ({h})")).unwrap_or_default();
            Error::full(ErrorKind::Io, e, format!("the request failed{hint}"))
        })?;
        let status = azure_core::StatusCode::try_from(response.status().as_u16())
            .map_err(|_| Error::message(ErrorKind::DataConversion, "an HTTP status azure_core does not know"))?;
        let mut headers = azure_core::headers::Headers::new();
        for (name, value) in response.headers() {
            if let Ok(value) = value.to_str() {
                headers.insert(name.as_str().to_owned(), value.to_owned());
            }
        }
        let body = response.bytes_stream().map_err(|e| Error::full(ErrorKind::Io, e, "the response body was cut off"));
        Ok(azure_core::Response::new(status, headers, Box::pin(body)))
    }
}
