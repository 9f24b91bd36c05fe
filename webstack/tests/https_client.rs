//! HTTPS on numa_rt alone: hyper-util's pooled client with
//! `numa_rt::hyper::Connector::https_with_tls_config` (hyper-rustls) against
//! a TLS server (tokio-rustls over numa_rt's sockets, a certificate made by
//! rcgen for `localhost`) served by `numa_rt::serve` through a TLS listener
//! of its own: HTTP/2 and HTTP/1.1 chosen by ALPN, and a certificate the
//! client does not trust refused.

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::{StatusCode, Version};
use hyper_util::client::legacy::Client;
use numa_rt::net::{TcpListener, TcpStream};
use numa_rt_webstack::{app, tokio_runtime_present, AppConfig};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// A listener that completes each connection's TLS handshake before
/// handing it to `numa_rt::serve` (a failed handshake is skipped).
struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl numa_rt::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, SocketAddr) {
        loop {
            let (tcp, addr) = numa_rt::serve::Listener::accept(&mut self.tcp).await;
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

struct Tls {
    server: rustls::ServerConfig,
    roots: rustls::RootCertStore,
}

fn tls() -> Tls {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let der = cert.cert.der().clone();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
    let mut server = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![der.clone()], key)
        .unwrap();
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der).unwrap();
    Tls { server, roots }
}

fn client_config(roots: rustls::RootCertStore) -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth()
}

#[numa_rt::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_requests_are_served_and_answered_on_numa_rt() {
    let Tls { server, roots } = tls();
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = tcp.local_addr().unwrap().port();
    let listener = TlsListener {
        tcp,
        acceptor: TlsAcceptor::from(Arc::new(server)),
    };
    let (stop_tx, stop_rx) = numa_rt::sync::oneshot::channel::<()>();
    let served = numa_rt::spawn(
        numa_rt::serve(listener, app(Default::default(), AppConfig::default()))
            .with_graceful_shutdown(async move {
                let _ = stop_rx.await;
            })
            .into_future(),
    );

    let connector = numa_rt::hyper::Connector::new().https_with_tls_config(client_config(roots));
    let client: Client<_, Empty<Bytes>> = Client::builder(numa_rt::hyper::Executor)
        .pool_timer(numa_rt::hyper::Timer)
        .timer(numa_rt::hyper::Timer)
        .build(connector);
    let url: hyper::Uri = format!("https://localhost:{port}/plaintext")
        .parse()
        .unwrap();
    for _ in 0..3 {
        let res = client.get(url.clone()).await.expect("an HTTPS answer");
        assert_eq!(res.status(), StatusCode::OK);
        // ALPN chose HTTP/2.
        assert_eq!(res.version(), Version::HTTP_2);
        let body = res.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"Hello, World!");
    }
    assert!(!tokio_runtime_present());

    // The default roots (Mozilla's) do not trust this certificate.
    let strict: Client<_, Empty<Bytes>> =
        Client::builder(numa_rt::hyper::Executor).build(numa_rt::hyper::Connector::new().https());
    let err = strict.get(url).await.unwrap_err();
    let text = format!("{err:?}");
    assert!(
        text.contains("certificate") || text.contains("Certificate"),
        "{text}"
    );

    stop_tx.send(()).unwrap();
    drop((client, strict));
    served.await.unwrap().unwrap();
}
