//! `numa_rt::process`: spawning, waiting (through a pidfd where the kernel
//! has them), the pipes on numa_rt's pollers, killing, kill_on_drop and
//! the reaping of dropped children. Only /bin/sh, cat, echo, true and false
//! are run.

use std::process::Stdio;
use std::time::{Duration, Instant};

use numa_rt::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use numa_rt::process::Command;

/// Whether process `pid` is gone (reaped): not in /proc, or in it as
/// someone else's (not our zombie and not our child any more).
fn reaped(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            // pid (comm) state ppid ...
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            let mut f = after.split(' ');
            let state = f.next().unwrap();
            let ppid: u32 = f.next().unwrap().parse().unwrap();
            ppid != std::process::id() && state != "Z"
        }
    }
}

/// Waits (really, on the wall clock: the reaper is a thread) until `pid`
/// is reaped; generous, for a loaded machine.
fn wait_reaped(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !reaped(pid) {
        assert!(Instant::now() < deadline, "child {pid} was never reaped");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[numa_rt::test]
async fn status_and_exit_codes() {
    let ok = Command::new("true").status().await.unwrap();
    assert!(ok.success());
    let bad = Command::new("false").status().await.unwrap();
    assert_eq!(bad.code(), Some(1));
    let three = Command::new("/bin/sh")
        .args(["-c", "exit 3"])
        .status()
        .await
        .unwrap();
    assert_eq!(three.code(), Some(3));
    let missing = Command::new("/no/such/program").status().await.unwrap_err();
    assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
}

#[numa_rt::test]
async fn output_env_cwd_and_arg0() {
    let out = Command::new("/bin/sh")
        .args(["-c", "echo \"$GREETING\" $0; pwd; echo oops >&2; exit 4"])
        .arg0("zero")
        .env("GREETING", "hi")
        .current_dir("/")
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "hi zero\n/\n");
    assert_eq!(out.stderr, b"oops\n");

    let mut cmd = Command::new("echo");
    cmd.arg("a")
        .args(["b", "c"])
        .env_remove("X")
        .kill_on_drop(true);
    assert!(cmd.get_kill_on_drop());
    assert_eq!(cmd.get_program(), "echo");
    assert_eq!(cmd.get_args().count(), 3);
    assert!(format!("{cmd:?}").contains("echo"));
    let out = cmd.env_clear().output().await.unwrap();
    assert_eq!(out.stdout, b"a b c\n");
}

#[numa_rt::test]
async fn wait_twice_id_and_kill_after_exit() {
    let mut child = Command::new("/bin/sh")
        .args(["-c", "exit 2"])
        .spawn()
        .unwrap();
    assert!(child.id().unwrap() > 0);
    assert_eq!(child.wait().await.unwrap().code(), Some(2));
    assert_eq!(child.wait().await.unwrap().code(), Some(2));
    assert_eq!(child.id(), None);
    assert_eq!(child.try_wait().unwrap().unwrap().code(), Some(2));
    child.start_kill().unwrap();
    child.kill().await.unwrap();
}

#[numa_rt::test]
async fn cat_round_trips_a_megabyte() {
    let mut child = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 253) as u8).collect();
    let sent = data.clone();
    // Writing all before reading would fill both pipes: run them together.
    let writer = numa_rt::spawn(async move {
        stdin.write_all(&sent).await.unwrap();
        // Dropping closes the pipe: cat reads end-of-file.
    });
    let mut back = Vec::new();
    stdout.read_to_end(&mut back).await.unwrap();
    writer.await.unwrap();
    assert!(back == data, "got {} bytes", back.len());
    assert!(child.wait().await.unwrap().success());
}

#[numa_rt::test]
async fn lines_from_a_live_child_then_pending() {
    let mut child = Command::new("/bin/sh")
        .args(["-c", "echo one; read gate; echo two; read gate"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next_line().await.unwrap().unwrap(), "one");
    // Nothing more until the child is let go.
    let mut next = Box::pin(lines.next_line());
    assert!(futures::poll!(next.as_mut()).is_pending());
    stdin.write_all(b"go\n").await.unwrap();
    assert_eq!(next.await.unwrap().unwrap(), "two");
    stdin.write_all(b"go\n").await.unwrap();
    assert_eq!(lines.next_line().await.unwrap(), None);
    assert!(child.wait().await.unwrap().success());
}

#[numa_rt::test]
async fn kill_and_try_wait() {
    let mut child = Command::new("cat").stdin(Stdio::piped()).spawn().unwrap();
    assert!(child.try_wait().unwrap().is_none());
    child.kill().await.unwrap();
    let status = child.try_wait().unwrap().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL));
}

#[numa_rt::test]
async fn wait_with_output_reads_both_pipes() {
    let child = Command::new("/bin/sh")
        .args(["-c", "echo out; echo err >&2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.wait_with_output().await.unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");
}

#[numa_rt::test]
async fn a_pipe_passed_to_another_child() {
    let mut first = Command::new("echo")
        .arg("piped along")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdio: Stdio = first.stdout.take().unwrap().try_into().unwrap();
    let out = Command::new("cat").stdin(stdio).output().await.unwrap();
    assert_eq!(out.stdout, b"piped along\n");
    assert!(first.wait().await.unwrap().success());
}

#[numa_rt::test]
async fn kill_on_drop_kills_and_reaps() {
    let mut child = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    // stdin goes with the child; cat would exit on its end-of-file anyway,
    // so keep a second writer open: only the kill can end it.
    let keep = child.stdin.take().unwrap();
    drop(child);
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
    numa_rt::task::spawn_blocking(move || wait_reaped(pid))
        .await
        .unwrap();
    drop(keep);
}

#[numa_rt::test]
async fn a_dropped_running_child_is_reaped_when_it_exits() {
    let mut child = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let stdin = child.stdin.take().unwrap();
    // Half a wait: the watch exists when the child is dropped.
    assert!(futures::poll!(Box::pin(child.wait())).is_pending());
    drop(child);
    assert!(!reaped(pid), "still running: cat waits for its stdin");
    drop(stdin); // cat ends
    numa_rt::task::spawn_blocking(move || wait_reaped(pid))
        .await
        .unwrap();
}

#[test]
fn spawned_on_one_runtime_waited_on_another() {
    let mut child = numa_rt::Runtime::new()
        .unwrap()
        .block_on(async { Command::new("true").stdin(Stdio::piped()).spawn().unwrap() });
    let status = numa_rt::Runtime::new()
        .unwrap()
        .block_on(async move { child.wait().await.unwrap() });
    assert!(status.success());
}

#[test]
fn a_wait_begun_on_a_dropped_runtime_finishes_on_another() {
    let rt = numa_rt::Builder::new().max_procs(1).build().unwrap();
    let mut child = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn_in(&rt);
    let stdin = child.stdin.take().unwrap();
    rt.block_on(async {
        assert!(futures::poll!(Box::pin(child.wait())).is_pending());
    });
    drop(rt);
    let rt2 = numa_rt::Builder::new().max_procs(1).build().unwrap();
    drop(stdin);
    let status = rt2.block_on(async { child.wait().await.unwrap() });
    assert!(status.success());
}

trait SpawnIn {
    fn spawn_in(&mut self, rt: &numa_rt::Runtime) -> numa_rt::process::Child;
}

impl SpawnIn for Command {
    fn spawn_in(&mut self, rt: &numa_rt::Runtime) -> numa_rt::process::Child {
        let _g = rt.enter();
        self.spawn().unwrap()
    }
}

/// Many children at once, from tasks on two processors.
#[test]
fn a_hundred_children_from_tasks() {
    let rt = numa_rt::Builder::new().max_procs(2).build().unwrap();
    rt.block_on(async {
        let mut set = numa_rt::task::JoinSet::new();
        for i in 0..10 {
            set.spawn(async move {
                let mut waits = Vec::new();
                for j in 0..10 {
                    let out = Command::new("echo")
                        .arg(format!("{i}-{j}"))
                        .stdin(Stdio::null())
                        .stdout(Stdio::piped())
                        .kill_on_drop(true)
                        .output();
                    waits.push(out);
                }
                for (j, w) in waits.into_iter().enumerate() {
                    let out = w.await.unwrap();
                    assert_eq!(out.stdout, format!("{i}-{j}\n").as_bytes());
                }
            });
        }
        while let Some(r) = set.join_next().await {
            r.unwrap();
        }
    });
}

#[numa_rt::test]
async fn writing_to_a_killed_child_errors_instead_of_hanging() {
    let mut child = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = numa_rt::spawn(async move {
        let data = [0u8; 8192];
        loop {
            stdin.write_all(&data).await?;
        }
        #[allow(unreachable_code)]
        std::io::Result::Ok(())
    });
    numa_rt::task::yield_now().await;
    child.kill().await.unwrap();
    let err = writer.await.unwrap().unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe);
}
