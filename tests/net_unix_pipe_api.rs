//! `numa_rt::net::unix::pipe`: anonymous pipes and FIFOs as tokio's
//! `Sender`/`Receiver`, the checks on files and descriptors handed in, and
//! the descriptors handed back. Every test body runs under a generous
//! `timeout` so a lost wake-up fails instead of hanging; nothing sleeps to
//! synchronise.

use std::ffi::CString;
use std::future::{poll_fn, Future};
use std::io::ErrorKind;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use numa_rt::io::{AsyncReadExt, AsyncWriteExt, Interest};
use numa_rt::net::unix::pipe;
use numa_rt::time::timeout;

const GUARD: Duration = Duration::from_secs(60);

/// A fresh FIFO, removed when dropped.
struct Fifo(PathBuf);

impl Fifo {
    fn new(name: &str) -> Fifo {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!(
            "numa_rt_pipe_api_{}_{name}_{n}.fifo",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&p);
        let c = CString::new(p.as_os_str().as_bytes()).unwrap();
        // SAFETY: `c` is a NUL-terminated path that lives across the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        Fifo(p)
    }
}

impl Drop for Fifo {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn is_nonblocking(fd: &impl AsFd) -> bool {
    // SAFETY: the descriptor is open (borrowed) for the call.
    let flags = unsafe { libc::fcntl(fd.as_fd().as_raw_fd(), libc::F_GETFL) };
    assert!(flags >= 0);
    flags & libc::O_NONBLOCK != 0
}

/// An anonymous pipe carries bytes; the reader sees end of file once the
/// sender is dropped; a fresh receiver is not readable.
#[numa_rt::test(max_procs = 2)]
async fn anonymous_pipe_round_trip_and_eof() {
    timeout(GUARD, async {
        let (mut tx, mut rx) = pipe::pipe().unwrap();
        {
            let mut read = pin!(rx.ready(Interest::READABLE));
            let first = poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx).is_pending())).await;
            assert!(first, "a fresh receiver was readable");
        }
        tx.write_all(b"through the pipe").await.unwrap();
        drop(tx);
        let mut got = String::new();
        rx.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "through the pipe");
        assert_eq!(rx.try_read(&mut [0; 4]).unwrap(), 0);
    })
    .await
    .unwrap();
}

/// `try_write`/`try_read` and their vectored and `BufMut` forms, waiting
/// with `writable`/`readable` after `WouldBlock`; a full pipe is
/// `WouldBlock` for the writer until the reader drains it.
#[numa_rt::test(max_procs = 2)]
async fn try_forms_fill_and_drain_the_pipe() {
    timeout(GUARD, async {
        let (tx, rx) = pipe::pipe().unwrap();
        let chunk = [9u8; 4096];
        let mut written = 0;
        loop {
            tx.writable().await.unwrap();
            match tx.try_write(&chunk) {
                Ok(n) => written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert!(written >= 4096, "the pipe took {written} bytes");
        let mut read = Vec::with_capacity(written);
        while read.len() < written {
            rx.readable().await.unwrap();
            let mut a = [0u8; 1000];
            let mut b = [0u8; 1000];
            match rx.try_read_vectored(&mut [
                std::io::IoSliceMut::new(&mut a),
                std::io::IoSliceMut::new(&mut b),
            ]) {
                Ok(n) => {
                    read.extend_from_slice(&a[..n.min(1000)]);
                    read.extend_from_slice(&b[..n.saturating_sub(1000)]);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
            match rx.try_read_buf(&mut read) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(read.len(), written);
        assert!(read.iter().all(|&b| b == 9));
        let n = loop {
            tx.writable().await.unwrap();
            match tx
                .try_write_vectored(&[std::io::IoSlice::new(b"ab"), std::io::IoSlice::new(b"cd")])
            {
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                r => break r.unwrap(),
            }
        };
        assert_eq!(n, 4);
    })
    .await
    .unwrap();
}

/// A FIFO: opening the sender with no reader is `ENXIO`; with a receiver
/// open it works; `read_write` opens a sender with no reader.
#[numa_rt::test(max_procs = 2)]
async fn fifo_open_options() {
    timeout(GUARD, async {
        let fifo = Fifo::new("open");
        let err = pipe::OpenOptions::new().open_sender(&fifo.0).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENXIO));
        let mut rx = pipe::OpenOptions::new().open_receiver(&fifo.0).unwrap();
        let mut tx = pipe::OpenOptions::new().open_sender(&fifo.0).unwrap();
        tx.write_all(b"fifo").await.unwrap();
        let mut buf = [0; 4];
        rx.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"fifo");

        let other = Fifo::new("rw");
        let tx = pipe::OpenOptions::new()
            .read_write(true)
            .open_sender(&other.0)
            .unwrap();
        assert!(is_nonblocking(&tx));
    })
    .await
    .unwrap();
}

/// A regular file is refused (`InvalidInput`) by `OpenOptions` and
/// `from_file`, unless `unchecked`; a FIFO opened for the wrong direction
/// is refused by `from_file`.
#[numa_rt::test(max_procs = 2)]
async fn files_that_are_not_the_right_pipe_end_are_refused() {
    let path =
        std::env::temp_dir().join(format!("numa_rt_pipe_api_{}_regular", std::process::id()));
    std::fs::write(&path, b"x").unwrap();
    let err = pipe::OpenOptions::new().open_receiver(&path).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let file = std::fs::File::open(&path).unwrap();
    assert_eq!(
        pipe::Receiver::from_file(file).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    std::fs::remove_file(&path).unwrap();

    let fifo = Fifo::new("mode");
    let rx = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags_nonblock()
        .open(&fifo.0)
        .unwrap();
    let wx = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags_nonblock()
        .open(&fifo.0)
        .unwrap();
    let rx2 = rx.try_clone().unwrap();
    let wx2 = wx.try_clone().unwrap();
    assert_eq!(
        pipe::Sender::from_file(rx).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        pipe::Receiver::from_file(wx).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert!(pipe::Receiver::from_file(rx2).is_ok());
    assert!(pipe::Sender::from_file(wx2).is_ok());
}

/// Opens nonblocking (a FIFO's open would otherwise wait for the peer).
trait NonblockOpen {
    fn custom_flags_nonblock(&mut self) -> &mut Self;
}

impl NonblockOpen for std::fs::OpenOptions {
    fn custom_flags_nonblock(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NONBLOCK)
    }
}

/// `from_file` switches a blocking descriptor to nonblocking;
/// `into_blocking_fd` and `into_nonblocking_fd` hand it back in the mode
/// they name.
#[numa_rt::test(max_procs = 2)]
async fn descriptors_in_and_out() {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: pipe(2) just opened both descriptors; nothing else owns them.
    let (r, w) = unsafe {
        use std::os::fd::FromRawFd;
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    };
    assert!(!is_nonblocking(&r));
    let rx = pipe::Receiver::from_owned_fd(r).unwrap();
    assert!(is_nonblocking(&rx));
    let tx = pipe::Sender::from_owned_fd(w).unwrap();
    assert!(is_nonblocking(&tx));
    let r = rx.into_blocking_fd().unwrap();
    assert!(!is_nonblocking(&r));
    let w = tx.into_nonblocking_fd().unwrap();
    assert!(is_nonblocking(&w));
}

/// `async_io` runs the caller's own `read(2)` once the receiver is
/// readable.
#[numa_rt::test(max_procs = 2)]
async fn receiver_async_io() {
    timeout(GUARD, async {
        let (mut tx, rx) = pipe::pipe().unwrap();
        let fd = rx.as_raw_fd();
        tx.write_all(b"raw").await.unwrap();
        let got = rx
            .async_io(|| {
                let mut buf = [0u8; 8];
                // SAFETY: `buf` is valid for writes of its length.
                let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
                if n < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(buf[..n as usize].to_vec())
            })
            .await
            .unwrap();
        assert_eq!(got, b"raw");
    })
    .await
    .unwrap();
}

/// `ready(Interest::ERROR)` on a sender whose reader is gone resolves
/// (EPOLLERR), as on the sockets; it used to wait for ever.
#[numa_rt::test]
async fn a_sender_sees_error_readiness_once_the_reader_is_gone() {
    let (tx, rx) = pipe::pipe().unwrap();
    drop(rx);
    let ready = timeout(GUARD, tx.ready(Interest::ERROR))
        .await
        .expect("ERROR readiness reported")
        .unwrap();
    assert!(ready.is_error(), "{ready:?}");
}
