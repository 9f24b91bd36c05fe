//! `numa_rt::process` without pidfds (`NUMA_RT_NO_PIDFD=1`, as on a
//! kernel before 5.3 or under a seccomp filter): waits listen for
//! `SIGCHLD`, and the orphan reaper looks periodically. One test, so the
//! variable is set before any child is spawned in this binary.

use std::process::Stdio;
use std::time::{Duration, Instant};

use numa_rt::io::{AsyncReadExt, AsyncWriteExt};
use numa_rt::process::Command;

fn zombie_or_ours(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            let mut f = after.split(' ');
            let state = f.next().unwrap();
            let ppid: u32 = f.next().unwrap().parse().unwrap();
            state == "Z" || ppid == std::process::id()
        }
    }
}

#[test]
fn children_on_sigchld() {
    std::env::set_var("NUMA_RT_NO_PIDFD", "1");
    let rt = numa_rt::Builder::new().max_procs(2).build().unwrap();
    rt.block_on(async {
        let status = Command::new("/bin/sh")
            .args(["-c", "exit 5"])
            .status()
            .await
            .unwrap();
        assert_eq!(status.code(), Some(5));

        // Several children whose exits may share one SIGCHLD.
        let mut set = numa_rt::task::JoinSet::new();
        for i in 0..20 {
            set.spawn(async move {
                let out = Command::new("echo")
                    .arg(i.to_string())
                    .output()
                    .await
                    .unwrap();
                assert_eq!(out.stdout, format!("{i}\n").as_bytes());
            });
        }
        while let Some(r) = set.join_next().await {
            r.unwrap();
        }

        let mut cat = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = cat.stdin.take().unwrap();
        stdin.write_all(b"via sigchld").await.unwrap();
        drop(stdin);
        let mut s = String::new();
        cat.stdout
            .take()
            .unwrap()
            .read_to_string(&mut s)
            .await
            .unwrap();
        assert_eq!(s, "via sigchld");
        assert!(cat.wait().await.unwrap().success());

        let mut sleeper = Command::new("cat").stdin(Stdio::piped()).spawn().unwrap();
        sleeper.kill().await.unwrap();

        // A dropped child, reaped by the reaper's periodic look.
        let mut orphan = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = orphan.id().unwrap();
        let keep = orphan.stdin.take();
        drop(orphan);
        numa_rt::task::spawn_blocking(move || {
            let deadline = Instant::now() + Duration::from_secs(30);
            while zombie_or_ours(pid) {
                assert!(Instant::now() < deadline, "child {pid} was never reaped");
                std::thread::sleep(Duration::from_millis(10));
            }
        })
        .await
        .unwrap();
        drop(keep);
    });
}
