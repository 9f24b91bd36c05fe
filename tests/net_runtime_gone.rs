//! A socket polled after its runtime is dropped returns an error, as on
//! tokio, instead of panicking ("there is no reactor running"): whether it
//! was never polled before (numa_rt registers sockets at first use) or was
//! already registered, and whether it is polled outside any runtime or
//! inside another one.
//!
//! Each operation is polled once (`now_or_never`): an error must come at
//! once, not a hang. Nothing sleeps.

use std::io;

use futures::FutureExt;
use numa_rt::io::AsyncReadExt;
use numa_rt::net::{TcpListener, TcpStream};

fn rt() -> numa_rt::Runtime {
    numa_rt::Builder::new().max_procs(2).build().unwrap()
}

fn assert_runtime_gone<T: std::fmt::Debug>(r: Option<io::Result<T>>) {
    let err = r
        .expect("an error at once, not Pending")
        .expect_err("the runtime is gone");
    assert_eq!(err.kind(), io::ErrorKind::Other, "{err}");
    assert!(err.to_string().contains("shut down"), "{err}");
}

#[test]
fn a_never_polled_listener_errors_after_its_runtime_is_dropped() {
    let rt = rt();
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    drop(rt);
    assert_runtime_gone(listener.accept().now_or_never());
}

#[test]
fn a_registered_stream_errors_after_its_runtime_is_dropped() {
    let rt = rt();
    let (mut client, _server) = rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let server = listener.accept().await.unwrap();
        let mut buf = [0u8; 1];
        assert!(
            client.read(&mut buf).now_or_never().is_none(),
            "nothing sent"
        );
        (client, server)
    });
    drop(rt);
    let mut buf = [0u8; 1];
    assert_runtime_gone(client.read(&mut buf).now_or_never());
}

#[test]
fn a_socket_of_a_dropped_runtime_errors_inside_another_runtime() {
    let rt1 = rt();
    let listener = rt1.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    drop(rt1);
    rt().block_on(async {
        assert_runtime_gone(listener.accept().now_or_never());
    });
}

/// With a shut-down runtime still entered, making a socket fails with the
/// shutdown error (tokio's rule), also for a future made before.
#[test]
fn sockets_made_after_shutdown_fail_with_the_shutdown_error() {
    let rt = numa_rt::runtime::Runtime::new().unwrap();
    let _enter = rt.enter();
    let early = numa_rt::net::TcpListener::bind("127.0.0.1:0");
    rt.shutdown_timeout(std::time::Duration::from_secs(30));
    let h = numa_rt::runtime::Handle::current();
    let err = h.block_on(early).unwrap_err();
    assert!(numa_rt::runtime::is_rt_shutdown_err(&err), "{err}");
    let err = h
        .block_on(numa_rt::net::UdpSocket::bind("127.0.0.1:0"))
        .unwrap_err();
    assert!(numa_rt::runtime::is_rt_shutdown_err(&err), "{err}");
    let dir = std::env::temp_dir().join(format!("numa_rt_gone_{}", std::process::id()));
    let err = numa_rt::net::UnixListener::bind(&dir).unwrap_err();
    assert!(numa_rt::runtime::is_rt_shutdown_err(&err), "{err}");
    assert!(!dir.exists(), "no socket file left behind");
}
