//! `numa_rt::io::{stdin, stdout, stderr}`: the process's descriptors 0, 1
//! and 2, read and written on the blocking pool. One test, which points
//! the descriptors at pipes of its own for a while (and puts them back).

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use numa_rt::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

fn pipe() -> (std::fs::File, std::fs::File) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both are new descriptors owned by nothing else.
    unsafe {
        (
            std::fs::File::from(OwnedFd::from_raw_fd(fds[0])),
            std::fs::File::from(OwnedFd::from_raw_fd(fds[1])),
        )
    }
}

/// Points descriptor `target` at `with` until dropped.
struct Redirect {
    target: i32,
    saved: OwnedFd,
}

impl Redirect {
    fn new(target: i32, with: &impl AsRawFd) -> Redirect {
        // SAFETY: dup of an open descriptor; the result is owned here.
        let saved = unsafe { OwnedFd::from_raw_fd(libc::dup(target)) };
        // SAFETY: dup2 between two open descriptors.
        assert!(unsafe { libc::dup2(with.as_raw_fd(), target) } >= 0);
        Redirect { target, saved }
    }
}

impl Drop for Redirect {
    fn drop(&mut self) {
        // SAFETY: dup2 between two open descriptors.
        unsafe { libc::dup2(self.saved.as_raw_fd(), self.target) };
    }
}

#[test]
fn the_standard_streams() {
    let rt = numa_rt::Builder::new().max_procs(2).build().unwrap();

    // stdout: several writes, then a flush that waits for them.
    let (mut rd, wr) = pipe();
    {
        let _r = Redirect::new(1, &wr);
        rt.block_on(async {
            let mut out = numa_rt::io::stdout();
            for i in 0..100 {
                out.write_all(format!("{i},").as_bytes()).await.unwrap();
            }
            out.flush().await.unwrap();
            assert_eq!(out.as_raw_fd(), 1);
        });
    }
    drop(wr);
    let mut got = String::new();
    rd.read_to_string(&mut got).unwrap();
    let want: String = (0..100).map(|i| format!("{i},")).collect();
    assert_eq!(got, want);

    // stderr, with shutdown (a flush).
    let (mut rd, wr) = pipe();
    {
        let _r = Redirect::new(2, &wr);
        rt.block_on(async {
            let mut err = numa_rt::io::stderr();
            err.write_all(b"to stderr").await.unwrap();
            err.shutdown().await.unwrap();
        });
    }
    drop(wr);
    let mut got = String::new();
    rd.read_to_string(&mut got).unwrap();
    assert_eq!(got, "to stderr");

    // stdin: lines from a pipe another thread writes.
    let (rd, mut wr) = pipe();
    let _r = Redirect::new(0, &rd);
    drop(rd);
    let writer = std::thread::spawn(move || {
        for i in 0..1000 {
            writeln!(wr, "line {i}").unwrap();
        }
    });
    let n = rt.block_on(async {
        let mut lines = BufReader::new(numa_rt::io::stdin()).lines();
        let mut n = 0;
        while let Some(line) = lines.next_line().await.unwrap() {
            assert_eq!(line, format!("line {n}"));
            n += 1;
        }
        n
    });
    writer.join().unwrap();
    assert_eq!(n, 1000);
}
