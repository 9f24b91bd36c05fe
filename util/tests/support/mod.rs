//! Real database servers for the client tests: each started by the test
//! in a temporary directory on a free loopback port, and stopped (killed
//! and waited for) when its guard drops, even when the test fails.
//!
//! Where a server's binary is missing, `start` prints `skipped: <why>` to
//! stderr and returns `None`; the test then returns.

// Each test file uses one of the servers.
#![allow(dead_code)]

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a server may take to start (initdb included for PostgreSQL).
const START_LIMIT: Duration = Duration::from_secs(60);

/// Skips the test with a reason.
pub fn skip(why: &str) {
    eprintln!("skipped: {why}");
}

/// A loopback port nobody listens on (free when this returns; the server
/// binds it right after).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().unwrap().port()
}

/// A fresh, empty temporary directory. `shared`: one another user can
/// reach (under /tmp, whatever TMPDIR says, which may be private to us).
fn temp_dir(what: &str, shared: bool) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let base = if shared {
        PathBuf::from("/tmp")
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("numa_rt_util_{what}_{}_{n}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("create the server's temporary directory");
    dir
}

fn find_binary(name: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    dirs.iter()
        .cloned()
        .chain(std::env::split_paths(&path))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// A child server process and its directory; dropping it stops the server
/// (SIGINT, then SIGKILL if it lingers), waits for it, and removes the
/// directory.
struct Server {
    child: Child,
    dir: PathBuf,
}

impl Server {
    /// The server's log, for a failure message.
    fn log(&self) -> String {
        fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Panics (with the log) if the server has exited.
    fn check_alive(&mut self, what: &str) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("{what} exited while starting ({status}):\n{}", self.log());
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) on our own child, which has not been waited for
        // yet (so the pid is still ours); no memory is involved.
        unsafe { libc::kill(pid, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A running PostgreSQL server (user `postgres`, trust authentication).
pub struct Postgres {
    server: Server,
    /// The loopback TCP port it listens on.
    pub port: u16,
}

impl Postgres {
    /// Starts a server, or prints why not and returns `None`.
    pub fn start() -> Option<Postgres> {
        let mut dirs: Vec<PathBuf> = fs::read_dir("/usr/lib/postgresql")
            .map(|entries| entries.flatten().map(|e| e.path().join("bin")).collect())
            .unwrap_or_default();
        dirs.sort();
        dirs.reverse(); // the newest version first
        let (Some(initdb), Some(postgres)) =
            (find_binary("initdb", &dirs), find_binary("postgres", &dirs))
        else {
            skip("PostgreSQL's initdb/postgres not found (apt-get install postgresql)");
            return None;
        };
        // PostgreSQL refuses to run as root: run it as the `postgres` user
        // then (the child's uid and gid are set before exec, so the
        // process we kill is the server itself).
        // SAFETY: geteuid(2) has no preconditions.
        let as_user = if unsafe { libc::geteuid() } == 0 {
            match passwd_ids("postgres") {
                Some(ids) => Some(ids),
                None => {
                    skip("running as root and there is no `postgres` user to run the server as");
                    return None;
                }
            }
        } else {
            None
        };
        let dir = temp_dir("pg", as_user.is_some());
        let data = dir.join("data");
        if let Some((uid, gid)) = as_user {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).expect("chown the directory");
        }
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        let command = |program: &Path| {
            let mut command = Command::new(program);
            command
                .current_dir(&dir)
                .env("LC_ALL", "C")
                .stdin(Stdio::null());
            if let Some((uid, gid)) = as_user {
                // std drops root's supplementary groups when it sets the uid.
                command.uid(uid).gid(gid);
            }
            command
        };
        let init = command(&initdb)
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"])
            .arg("--no-sync")
            .output()
            .expect("run initdb");
        if !init.status.success() {
            let _ = fs::remove_dir_all(&dir);
            panic!(
                "initdb failed: {}\n{}",
                String::from_utf8_lossy(&init.stdout),
                String::from_utf8_lossy(&init.stderr)
            );
        }
        let port = free_port();
        let log = fs::File::create(dir.join("server.log")).unwrap();
        let child = command(&postgres)
            .arg("-D")
            .arg(&data)
            .arg("-p")
            .arg(port.to_string())
            .arg("-k")
            .arg(&dir)
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-c", "fsync=off", "-c", "shared_buffers=16MB"])
            .args(["-c", "max_connections=40"])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start postgres");
        let mut pg = Postgres {
            server: Server { child, dir },
            port,
        };
        // postmaster.pid's last line says "ready" once the server accepts
        // connections.
        let pid_file = data.join("postmaster.pid");
        let deadline = Instant::now() + START_LIMIT;
        loop {
            pg.server.check_alive("postgres");
            let status = fs::read_to_string(&pid_file).unwrap_or_default();
            if status.lines().any(|l| l.trim() == "ready") {
                return Some(pg);
            }
            assert!(
                Instant::now() < deadline,
                "postgres not ready after {START_LIMIT:?}:\n{}",
                pg.server.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The directory of its Unix socket.
    pub fn socket_dir(&self) -> &Path {
        &self.server.dir
    }
}

/// The uid and gid of a user, from /etc/passwd.
fn passwd_ids(user: &str) -> Option<(u32, u32)> {
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.len() > 3 && fields[0] == user {
            Some((fields[2].parse().ok()?, fields[3].parse().ok()?))
        } else {
            None
        }
    })
}

/// A running redis-server (no persistence).
pub struct Redis {
    server: Server,
    /// The loopback TCP port it listens on.
    pub port: u16,
}

impl Redis {
    /// Starts a server, or prints why not and returns `None`.
    pub fn start() -> Option<Redis> {
        let Some(binary) = find_binary("redis-server", &[PathBuf::from("/usr/bin")]) else {
            skip("redis-server not found (apt-get install redis-server)");
            return None;
        };
        let dir = temp_dir("redis", false);
        let port = free_port();
        let log = fs::File::create(dir.join("server.log")).unwrap();
        let child = Command::new(binary)
            .current_dir(&dir)
            .arg("--port")
            .arg(port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--daemonize", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&dir)
            .arg("--unixsocket")
            .arg(dir.join("redis.sock"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start redis-server");
        let mut redis = Redis {
            server: Server { child, dir },
            port,
        };
        let deadline = Instant::now() + START_LIMIT;
        while !pong(port) {
            redis.server.check_alive("redis-server");
            assert!(
                Instant::now() < deadline,
                "redis-server not ready after {START_LIMIT:?}:\n{}",
                redis.server.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(redis)
    }

    /// `redis://127.0.0.1:port/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Its Unix socket.
    pub fn socket(&self) -> PathBuf {
        self.server.dir.join("redis.sock")
    }
}

/// Whether a server on `port` answers PING (blocking; for start-up only).
fn pong(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut reply = [0u8; 7];
    stream.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
}
