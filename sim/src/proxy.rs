//! The world's name service for programs that cannot be told where things are: an HTTP `CONNECT`
//! proxy on loopback (RFC 9110 §9.3.6) that carries a TLS connection to a host name of the world
//! (`api-int.<cluster domain>:6443`, what a kubeconfig secret names) to the loopback port that
//! serves it. Given to an upstream program as `HTTPS_PROXY` (Go's `net/http` sends every `https`
//! request but loopback ones through it), so the program dials the real name and checks the real
//! certificate, and nothing of it is changed. A name the world does not serve is answered
//! `502 Bad Gateway`, as a proxy answers a name it cannot resolve.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// Where each `host:port` of the world is served.
#[derive(Debug, Clone, Default)]
pub struct Routes(Arc<Mutex<BTreeMap<String, SocketAddr>>>);

impl Routes {
    /// Serves `host:port` (host compared without case) from `to`.
    pub fn add(&self, host: &str, port: u16, to: SocketAddr) {
        self.0.lock().expect("routes lock").insert(format!("{}:{port}", host.to_ascii_lowercase()), to);
    }

    /// Stops serving every name routed to `to`.
    pub fn remove_to(&self, to: SocketAddr) {
        self.0.lock().expect("routes lock").retain(|_, a| *a != to);
    }

    fn get(&self, authority: &str) -> Option<SocketAddr> {
        self.0.lock().expect("routes lock").get(&authority.to_ascii_lowercase()).copied()
    }
}

/// A running proxy: its address and routes.
#[derive(Debug, Clone)]
pub struct Proxy {
    pub addr: SocketAddr,
    pub routes: Routes,
}

impl Proxy {
    /// Listens on a free loopback port; serves until the runtime stops.
    pub async fn start() -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let routes = Routes::default();
        let r = routes.clone();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let r = r.clone();
                tokio::spawn(async move {
                    let _ = serve(conn, r).await;
                });
            }
        });
        Ok(Proxy { addr, routes })
    }

    /// `http://127.0.0.1:<port>`, for `HTTPS_PROXY`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

async fn serve(conn: TcpStream, routes: Routes) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn);
    let mut request = String::new();
    reader.read_line(&mut request).await?;
    // The header lines end at an empty line; a CONNECT carries no body.
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
    }
    let mut parts = request.split_whitespace();
    let (method, authority) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    if method != "CONNECT" {
        reader.get_mut().write_all(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n").await?;
        return Ok(());
    }
    let Some(to) = routes.get(authority) else {
        reader.get_mut().write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n").await?;
        return Ok(());
    };
    let mut upstream = TcpStream::connect(to).await?;
    reader.get_mut().write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await?;
    // What the client sent after the request line and headers (its TLS hello, if it did not wait).
    let buffered = reader.buffer().to_vec();
    let mut conn = reader.into_inner();
    upstream.write_all(&buffered).await?;
    tokio::io::copy_bidirectional(&mut conn, &mut upstream).await?;
    Ok(())
}
