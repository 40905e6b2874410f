//! Every TLS client the product makes, driven at a local listener that reads its ClientHello:
//! in the FIPS build each offers only what the module approves; and a server that offers only a
//! suite FIPS does not approve is refused with an error that names FIPS.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use rustls::{CipherSuite, NamedGroup};
use xcsp_crypto::{FIPS, Peer};

/// What a client offered.
#[derive(Debug)]
struct Hello {
    suites: Vec<CipherSuite>,
    groups: Vec<NamedGroup>,
}

/// A listener that reads each connection's ClientHello (through rustls' `Acceptor`), reports it
/// and hangs up: no certificate is needed to see what a client offers.
fn hello_reader() -> (SocketAddr, mpsc::Receiver<Hello>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let mut acceptor = rustls::server::Acceptor::default();
            loop {
                match acceptor.read_tls(&mut stream) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                match acceptor.accept() {
                    Ok(Some(accepted)) => {
                        let hello = accepted.client_hello();
                        let _ = tx.send(Hello {
                            suites: hello.cipher_suites().to_vec(),
                            groups: hello.named_groups().unwrap_or_default().to_vec(),
                        });
                        break;
                    }
                    Ok(None) => continue,
                    Err(_) => break,
                }
            }
        }
    });
    (addr, rx)
}

/// The TLS 1.2 and 1.3 suites FIPS 140-3 approves that the module offers (AES-GCM), and the
/// signalling value rustls adds to every TLS 1.2 ClientHello.
const APPROVED_SUITES: [CipherSuite; 7] = [
    CipherSuite::TLS13_AES_128_GCM_SHA256,
    CipherSuite::TLS13_AES_256_GCM_SHA384,
    CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    CipherSuite::TLS_EMPTY_RENEGOTIATION_INFO_SCSV,
];

/// The NIST curves (SP 800-56A) and ML-KEM hybrids (SP 800-56C rev 2 with FIPS 203's ML-KEM).
const APPROVED_GROUPS: [NamedGroup; 5] = [
    NamedGroup::secp256r1,
    NamedGroup::secp384r1,
    NamedGroup::secp521r1,
    NamedGroup::X25519MLKEM768,
    NamedGroup::secp256r1MLKEM768,
];

async fn azure_get(peer: Peer, url: &str) {
    let http = xcsp_crypto::AzureHttp::for_peer(peer).unwrap();
    let request = azure_core::Request::new(url.parse().unwrap(), azure_core::Method::Get);
    let _ = http.execute_request(&request).await;
}

/// Drives `peer`'s client, exactly as the product builds it, at `url`.
async fn connect(peer: Peer, url: &str) {
    match peer {
        Peer::AzureResourceManager | Peer::Entra | Peer::AzureBlob => azure_get(peer, url).await,
        Peer::OidcIssuer => {
            let client = xcsp_crypto::reqwest_client(peer, reqwest::Client::builder()).unwrap().build().unwrap();
            let _ = client.get(url).send().await;
        }
        Peer::Aws => {
            let shared = aws_config::defaults(aws_config::BehaviorVersion::latest())
                .http_client(xcsp_crypto::aws_http_client())
                .endpoint_url(url)
                .region(aws_config::Region::new("us-gov-west-1"))
                .retry_config(aws_config::retry::RetryConfig::disabled())
                .credentials_provider(aws_sdk_s3::config::Credentials::new("AKID", "secret", None, None, "test"))
                .load()
                .await;
            let _ = aws_sdk_s3::Client::new(&shared).list_buckets().send().await;
        }
        Peer::Kubernetes => {
            xcsp_crypto::install().unwrap();
            let config = kube::Config::new(url.parse().unwrap());
            use kube::client::ConfigExt;
            let tls = config.rustls_client_config().unwrap();
            xcsp_crypto::check(Peer::Kubernetes, &tls).unwrap();
            assert_eq!(tls.fips(), FIPS, "the configuration kube makes for a kubeconfig");
            let client = kube::Client::try_from(config).unwrap();
            let _ = client.apiserver_version().await;
        }
    }
}

#[tokio::test]
async fn every_tls_client_the_product_makes_offers_only_what_the_module_approves() {
    let (addr, hellos) = hello_reader();
    let url = format!("https://localhost:{}/", addr.port());
    for peer in Peer::ALL {
        connect(peer, &url).await;
        let hello = hellos.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| panic!("{peer}: no ClientHello"));
        assert!(!hello.suites.is_empty() && !hello.groups.is_empty(), "{peer}: {hello:?}");
        let chacha = hello.suites.iter().any(|s| format!("{s:?}").contains("CHACHA20"));
        if FIPS {
            let suites: Vec<_> = hello.suites.iter().filter(|s| !APPROVED_SUITES.contains(s)).collect();
            let groups: Vec<_> = hello.groups.iter().filter(|g| !APPROVED_GROUPS.contains(g)).collect();
            assert!(
                suites.is_empty() && groups.is_empty(),
                "{peer} offers what FIPS does not approve: {suites:?} {groups:?}"
            );
        } else {
            // The ordinary build offers ChaCha20 too: what this test tells apart.
            assert!(chacha, "{peer}: {hello:?}");
        }
    }
    let client = xcsp_crypto::client_config(Peer::OidcIssuer).unwrap();
    assert_eq!(client.fips(), FIPS);
    assert!(xcsp_crypto::module().contains(if FIPS { "FIPS 140-3" } else { "not a FIPS build" }));
}

/// A TLS server with an ECDSA certificate that offers only ChaCha20-Poly1305.
async fn chacha_only_server() -> SocketAddr {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = rustls::pki_types::CertificateDer::from(certified.cert.der().to_vec());
    let key = rustls::pki_types::PrivateKeyDer::try_from(certified.signing_key.serialize_der()).unwrap();
    let config = xcsp_crypto::chacha_only_server_config(cert, key).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let _ = acceptor.accept(stream).await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn a_server_offering_only_chacha20_is_refused_with_an_error_naming_fips() {
    let addr = chacha_only_server().await;
    let url = format!("https://localhost:{}/", addr.port());

    let client = xcsp_crypto::reqwest_client(Peer::OidcIssuer, reqwest::Client::builder()).unwrap().build().unwrap();
    let err = client.get(&url).send().await.unwrap_err();
    xcsp_crypto::install().unwrap();
    let kube_err =
        kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap().apiserver_version().await.unwrap_err();
    let azure = xcsp_crypto::AzureHttp::for_peer(Peer::AzureResourceManager).unwrap();
    let azure_err = azure
        .execute_request(&azure_core::Request::new(url.parse().unwrap(), azure_core::Method::Get))
        .await
        .unwrap_err();
    if FIPS {
        let said = xcsp_crypto::explain(&err).unwrap_or_else(|| panic!("not told apart: {err:?}"));
        assert!(said.contains("FIPS build") && said.contains("AES-GCM"), "{said}");
        assert!(xcsp_crypto::explain(&kube_err).is_some(), "{kube_err:?}");
        // azure_core's error carries the sentence itself, as the provider's message will.
        assert!(format!("{azure_err}").contains("FIPS build"), "{azure_err}");
    } else {
        // Without FIPS the handshake goes on and stops at the unknown certificate instead.
        assert!(xcsp_crypto::explain(&err).is_none(), "{err:?}");
        assert!(format!("{err:?}").contains("Certificate") || format!("{err:?}").contains("certificate"), "{err:?}");
    }
}
