//! `numa_rt::serve` out of file descriptors: the accept fails with EMFILE,
//! numa_rt's listener backs off (10 ms at a time, the error never reaches
//! the accept loop) and goes on; the connection that waited in the backlog
//! is served once descriptors are back. Alone in its binary: it lowers the
//! process's descriptor limit.

use std::future::IntoFuture;
use std::os::fd::AsRawFd;
use std::time::Duration;

use axum::{routing::get, Router};
use numa_rt::io::{AsyncReadExt, AsyncWriteExt};
use numa_rt::net::{TcpListener, TcpStream};

fn nofile() -> libc::rlimit {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out-pointer to an rlimit.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    lim
}

fn set_nofile(lim: libc::rlimit) {
    // SAFETY: a valid pointer to an rlimit; lowering the soft limit (or
    // restoring it, at most the hard limit) is always allowed.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
}

/// The descriptor number the next `open`/`socket`/`accept` would get.
fn lowest_free_fd() -> libc::c_int {
    let stdin = std::io::stdin();
    // SAFETY: dup of a descriptor this process holds; the copy is closed at
    // once.
    let fd = unsafe { libc::dup(stdin.as_raw_fd()) };
    assert!(fd >= 0);
    // SAFETY: `fd` was just made by dup and is closed once.
    unsafe { libc::close(fd) };
    fd
}

#[numa_rt::test(start_paused = true)]
async fn an_accept_out_of_descriptors_backs_off_and_goes_on() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route("/", get(|| async { "served" }));
    let server = numa_rt::spawn(numa_rt::serve(listener, app).into_future());
    numa_rt::task::yield_now().await;

    // Room for the client's socket and nothing more: the server's accept
    // of it fails with EMFILE.
    let saved = nofile();
    let free = lowest_free_fd();
    set_nofile(libc::rlimit {
        rlim_cur: free as libc::rlim_t + 1,
        rlim_max: saved.rlim_max,
    });
    let start = numa_rt::time::Instant::now();
    let mut client = TcpStream::connect(addr).await.unwrap();
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();

    // Half a second later (paused clock: no real wait) the descriptors are
    // back; until then every accept fails.
    numa_rt::time::sleep(Duration::from_millis(500)).await;
    set_nofile(saved);

    let mut answer = String::new();
    client.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("served"), "{answer}");
    // Not before the limit was lifted: the accepts did fail meanwhile.
    assert!(
        start.elapsed() >= Duration::from_millis(500),
        "answered after {:?}, with the descriptor limit still low",
        start.elapsed()
    );
    // And the server is still serving.
    let mut again = TcpStream::connect(addr).await.unwrap();
    again
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    again.read_to_string(&mut answer).await.unwrap();
    assert!(answer.ends_with("served"), "{answer}");
    server.abort();
}
