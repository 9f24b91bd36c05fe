//! Child processes (tokio's `process` module): [`Command`] builds and
//! spawns one, [`Child`] waits for it, kills it and holds its pipes.
//!
//! ```
//! use numa_rt::io::{AsyncReadExt, AsyncWriteExt};
//! use numa_rt::process::Command;
//! use std::process::Stdio;
//!
//! # #[numa_rt::main(max_procs = 1)]
//! # async fn main() -> std::io::Result<()> {
//! let out = Command::new("echo").arg("hello").output().await?;
//! assert!(out.status.success());
//! assert_eq!(out.stdout, b"hello\n");
//!
//! let mut cat = Command::new("cat")
//!     .stdin(Stdio::piped())
//!     .stdout(Stdio::piped())
//!     .spawn()?;
//! let mut stdin = cat.stdin.take().unwrap();
//! stdin.write_all(b"through the pipe").await?;
//! drop(stdin); // cat reads end-of-file
//! let mut echoed = String::new();
//! cat.stdout.take().unwrap().read_to_string(&mut echoed).await?;
//! assert_eq!(echoed, "through the pipe");
//! assert!(cat.wait().await?.success());
//! # Ok(())
//! # }
//! ```
//!
//! # How it works
//!
//! `spawn` is std's `Command::spawn` (fork/exec, or posix_spawn), done on
//! the calling task: it is quick, and tokio does the same.
//!
//! **Pipes.** A piped stdin, stdout or stderr is switched to nonblocking
//! mode and registered with the io poller of the P that spawns the child,
//! like a socket ([`ChildStdin`] implements tokio's `AsyncWrite`,
//! [`ChildStdout`] and [`ChildStderr`] `AsyncRead`).
//!
//! **Exit.** The first [`Child::wait`] asks Linux for a *pidfd* of the
//! child (`pidfd_open`, Linux ≥ 5.3), which becomes readable when the child
//! exits, and registers it with the poller of the P it runs on: one
//! descriptor per waited child, no signal handler, no thread. Where
//! `pidfd_open` fails (an older kernel, a seccomp filter; or
//! `NUMA_RT_NO_PIDFD=1` in the environment), the wait listens for
//! `SIGCHLD` instead (through [`crate::signal`], whose handler then stays
//! installed for the process) and checks its child on each delivery. Either
//! way the exit status is collected with `waitpid` on that child only, so
//! children spawned by other code (std's `Command`, another library) are
//! never reaped behind its back.
//!
//! The watch is made at the first wait, on the runtime then current, so a
//! child spawned on one runtime can be waited for on another (the pipes,
//! though, stay with the runtime that spawned it).
//!
//! **No zombies.** A [`Child`] dropped before its exit was collected is
//! killed first if [`Command::kill_on_drop`] was set, then, if it has not
//! exited yet, handed to the *orphan reaper*: one process-wide thread,
//! started when the first such child appears and gone when none is left,
//! that `poll`s the orphans' pidfds (or looks every 100 ms where there are
//! none) and reaps each as it exits. tokio reaps orphans from its signal
//! driver; numa_rt's pollers have no hook for that, and a thread that only
//! exists while an orphan does costs nothing otherwise.

mod pipe;
mod reap;

pub use pipe::{ChildStderr, ChildStdin, ChildStdout};

use std::ffi::OsStr;
use std::fmt;
use std::future::{poll_fn, Future};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{ExitStatus, Output, Stdio};
use std::task::{Context, Poll};

use crate::io::AsyncReadExt;

/// Builds a child process (tokio's `process::Command`): std's builder,
/// plus [`kill_on_drop`](Command::kill_on_drop), with async
/// [`status`](Command::status) and [`output`](Command::output).
///
/// By default the child inherits this process's stdin, stdout and stderr
/// ([`output`](Command::output) pipes the latter two).
pub struct Command {
    std: std::process::Command,
    kill_on_drop: bool,
}

impl Command {
    /// A command that runs `program` (found through `PATH` when it has no
    /// `/`), with no arguments, this process's environment and working
    /// directory.
    pub fn new<S: AsRef<OsStr>>(program: S) -> Command {
        Command::from(std::process::Command::new(program))
    }

    /// The std command inside.
    pub fn as_std(&self) -> &std::process::Command {
        &self.std
    }

    /// The std command inside, mutably (for options not mirrored here).
    pub fn as_std_mut(&mut self) -> &mut std::process::Command {
        &mut self.std
    }

    /// The std command inside; `kill_on_drop` is lost.
    pub fn into_std(self) -> std::process::Command {
        self.std
    }

    /// Adds an argument.
    pub fn arg<S: AsRef<OsStr>>(&mut self, arg: S) -> &mut Command {
        self.std.arg(arg);
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.std.args(args);
        self
    }

    /// Sets an environment variable for the child.
    pub fn env<K, V>(&mut self, key: K, val: V) -> &mut Command
    where
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.std.env(key, val);
        self
    }

    /// Sets environment variables for the child.
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Command
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.std.envs(vars);
        self
    }

    /// Removes an environment variable from the child's environment.
    pub fn env_remove<K: AsRef<OsStr>>(&mut self, key: K) -> &mut Command {
        self.std.env_remove(key);
        self
    }

    /// Gives the child an empty environment (plus what `env` adds after).
    pub fn env_clear(&mut self) -> &mut Command {
        self.std.env_clear();
        self
    }

    /// The child's working directory.
    pub fn current_dir<P: AsRef<Path>>(&mut self, dir: P) -> &mut Command {
        self.std.current_dir(dir);
        self
    }

    /// The child's stdin: `Stdio::piped()` gives [`Child::stdin`].
    pub fn stdin<T: Into<Stdio>>(&mut self, cfg: T) -> &mut Command {
        self.std.stdin(cfg);
        self
    }

    /// The child's stdout: `Stdio::piped()` gives [`Child::stdout`].
    pub fn stdout<T: Into<Stdio>>(&mut self, cfg: T) -> &mut Command {
        self.std.stdout(cfg);
        self
    }

    /// The child's stderr: `Stdio::piped()` gives [`Child::stderr`].
    pub fn stderr<T: Into<Stdio>>(&mut self, cfg: T) -> &mut Command {
        self.std.stderr(cfg);
        self
    }

    /// Kill the child (`SIGKILL`) when its [`Child`] (or the future of
    /// [`status`](Command::status)/[`output`](Command::output)) is dropped
    /// before the child's exit was collected. Off by default: a dropped
    /// child runs on, and is reaped when it exits (see the
    /// [module docs](self)).
    pub fn kill_on_drop(&mut self, kill_on_drop: bool) -> &mut Command {
        self.kill_on_drop = kill_on_drop;
        self
    }

    /// Whether [`kill_on_drop`](Command::kill_on_drop) is set.
    pub fn get_kill_on_drop(&self) -> bool {
        self.kill_on_drop
    }

    /// The child's user id (`setuid`).
    pub fn uid(&mut self, id: u32) -> &mut Command {
        self.std.uid(id);
        self
    }

    /// The child's group id (`setgid`).
    pub fn gid(&mut self, id: u32) -> &mut Command {
        self.std.gid(id);
        self
    }

    /// The child's `argv[0]` (the program run is still the one given to
    /// [`new`](Command::new)).
    pub fn arg0<S: AsRef<OsStr>>(&mut self, arg: S) -> &mut Command {
        self.std.arg0(arg);
        self
    }

    /// Puts the child in process group `pgroup` (0: a new group led by the
    /// child).
    pub fn process_group(&mut self, pgroup: i32) -> &mut Command {
        self.std.process_group(pgroup);
        self
    }

    /// Runs `f` in the child after `fork`, before `exec`.
    ///
    /// # Safety
    /// As `std::os::unix::process::CommandExt::pre_exec`: `f` runs in a
    /// forked copy of a multithreaded process and may only do what is
    /// async-signal-safe (no allocation, no locks).
    pub unsafe fn pre_exec<F>(&mut self, f: F) -> &mut Command
    where
        F: FnMut() -> io::Result<()> + Send + Sync + 'static,
    {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.std.pre_exec(f) };
        self
    }

    /// The program given to [`new`](Command::new).
    pub fn get_program(&self) -> &OsStr {
        self.std.get_program()
    }

    /// The arguments (not the program).
    pub fn get_args(&self) -> std::process::CommandArgs<'_> {
        self.std.get_args()
    }

    /// The environment changes made (`None`: removed).
    pub fn get_envs(&self) -> std::process::CommandEnvs<'_> {
        self.std.get_envs()
    }

    /// The working directory set, if any.
    pub fn get_current_dir(&self) -> Option<&Path> {
        self.std.get_current_dir()
    }

    /// Starts the child.
    ///
    /// # Errors
    /// As `std::process::Command::spawn` (`NotFound` for a missing
    /// program, ...), or when a pipe cannot be registered with the
    /// runtime's poller (the child is then killed if `kill_on_drop` is set,
    /// and reaped).
    ///
    /// # Panics
    /// With a piped stdin/stdout/stderr, outside a numa_rt runtime.
    pub fn spawn(&mut self) -> io::Result<Child> {
        let mut std = self.std.spawn()?;
        let (stdin, stdout, stderr) = (std.stdin.take(), std.stdout.take(), std.stderr.take());
        let mut child = Child {
            state: State::Running(Running {
                std: Some(std),
                kill_on_drop: self.kill_on_drop,
                watch: None,
            }),
            stdin: None,
            stdout: None,
            stderr: None,
        };
        // An error here drops `child`: killed if so configured, reaped.
        child.stdin = stdin.map(ChildStdin::from_std).transpose()?;
        child.stdout = stdout.map(ChildStdout::from_std).transpose()?;
        child.stderr = stderr.map(ChildStderr::from_std).transpose()?;
        Ok(child)
    }

    /// Spawns the child (now, not at the first poll), closes any pipes
    /// set up for it, and waits for its exit. Dropping the future kills the
    /// child if [`kill_on_drop`](Command::kill_on_drop) is set.
    ///
    /// ```
    /// # #[numa_rt::main(max_procs = 1)]
    /// # async fn main() -> std::io::Result<()> {
    /// let status = numa_rt::process::Command::new("sh").args(["-c", "exit 3"]).status().await?;
    /// assert_eq!(status.code(), Some(3));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`spawn`](Command::spawn), or from the wait.
    pub fn status(&mut self) -> impl Future<Output = io::Result<ExitStatus>> {
        let child = self.spawn();
        async move {
            let mut child = child?;
            child.stdin = None;
            child.stdout = None;
            child.stderr = None;
            child.wait().await
        }
    }

    /// Spawns the child with stdout and stderr piped (stdin as configured,
    /// inherited by default, as tokio's), collects both and its exit status.
    ///
    /// # Errors
    /// As [`spawn`](Command::spawn), or from the reads and the wait.
    pub fn output(&mut self) -> impl Future<Output = io::Result<Output>> {
        self.std.stdout(Stdio::piped());
        self.std.stderr(Stdio::piped());
        let child = self.spawn();
        async move { child?.wait_with_output().await }
    }
}

impl From<std::process::Command> for Command {
    fn from(std: std::process::Command) -> Command {
        Command {
            std,
            kill_on_drop: false,
        }
    }
}

impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.std.fmt(f)?;
        if self.kill_on_drop {
            f.write_str(" (kill on drop)")?;
        }
        Ok(())
    }
}

/// A spawned child process (tokio's `process::Child`), from
/// [`Command::spawn`].
///
/// Dropping it does not kill the child unless
/// [`Command::kill_on_drop`] was set; either way the child is reaped when
/// it exits (see the [module docs](self)).
pub struct Child {
    state: State,
    /// The child's stdin, when it was `Stdio::piped()` (take it to write;
    /// drop it, or let [`wait`](Child::wait) drop it, to close it).
    pub stdin: Option<ChildStdin>,
    /// The child's stdout, when it was `Stdio::piped()`.
    pub stdout: Option<ChildStdout>,
    /// The child's stderr, when it was `Stdio::piped()`.
    pub stderr: Option<ChildStderr>,
}

enum State {
    Running(Running),
    Done(ExitStatus),
}

/// A child whose exit has not been collected.
struct Running {
    /// `None` only while dropping.
    std: Option<std::process::Child>,
    kill_on_drop: bool,
    /// Made by the first wait.
    watch: Option<reap::Watch>,
}

impl Running {
    fn std(&mut self) -> &mut std::process::Child {
        self.std.as_mut().expect("present until drop")
    }

    /// Waits for the child's exit and collects it.
    fn poll_exit(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<ExitStatus>> {
        // A watch of a runtime that has gone is replaced, once per poll.
        let mut renewed = false;
        loop {
            if let Some(status) = self.std().try_wait()? {
                return Poll::Ready(Ok(status));
            }
            let watch = match &mut self.watch {
                Some(w) => w,
                None => {
                    let pid = self.std().id();
                    self.watch.insert(reap::Watch::new(pid)?)
                }
            };
            match watch.poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(())) => continue,
                Poll::Ready(Err(e)) if renewed => return Poll::Ready(Err(e)),
                Poll::Ready(Err(_)) => {
                    renewed = true;
                    self.watch = None;
                }
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let Some(mut std) = self.std.take() else {
            return;
        };
        if self.kill_on_drop {
            let _ = std.kill();
        }
        reap::orphan(std, self.watch.take());
    }
}

impl Child {
    /// The child's process id; `None` once its exit has been collected
    /// (the id may then belong to another process).
    pub fn id(&self) -> Option<u32> {
        match &self.state {
            State::Running(r) => r.std.as_ref().map(|c| c.id()),
            State::Done(_) => None,
        }
    }

    /// Sends `SIGKILL` to the child and returns at once; [`wait`](Child::wait)
    /// collects its exit. `Ok(())` when its exit was collected already.
    ///
    /// # Errors
    /// As `std::process::Child::kill`.
    pub fn start_kill(&mut self) -> io::Result<()> {
        match &mut self.state {
            State::Running(r) => r.std().kill(),
            State::Done(_) => Ok(()),
        }
    }

    /// Kills the child (`SIGKILL`) and waits for its exit.
    ///
    /// # Errors
    /// From the kill or the wait.
    pub async fn kill(&mut self) -> io::Result<()> {
        self.start_kill()?;
        self.wait().await.map(|_| ())
    }

    /// Closes the child's stdin (if still here, so a child that reads it
    /// to the end can finish), then waits for the child's exit. Once
    /// collected, the status is kept: later calls return it at once.
    ///
    /// Cancel safe: a dropped wait leaves the child running and waitable.
    ///
    /// # Errors
    /// When the exit cannot be waited for (the runtime has shut down and
    /// no other is current, or `waitpid` fails).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.stdin = None;
        poll_fn(|cx| self.poll_wait(cx)).await
    }

    fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<ExitStatus>> {
        match &mut self.state {
            State::Done(status) => Poll::Ready(Ok(*status)),
            State::Running(r) => {
                let status = std::task::ready!(r.poll_exit(cx))?;
                self.finish(status);
                Poll::Ready(Ok(status))
            }
        }
    }

    /// Records a collected exit: nothing is left to kill or reap.
    fn finish(&mut self, status: ExitStatus) {
        if let State::Running(r) = &mut self.state {
            r.std = None;
        }
        self.state = State::Done(status);
    }

    /// The child's exit status if it has exited (collecting it), `None`
    /// if it still runs; does not close stdin.
    ///
    /// # Errors
    /// As `std::process::Child::try_wait`.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        match &mut self.state {
            State::Done(status) => Ok(Some(*status)),
            State::Running(r) => {
                let status = r.std().try_wait()?;
                if let Some(status) = status {
                    self.finish(status);
                }
                Ok(status)
            }
        }
    }

    /// Closes stdin, then reads stdout and stderr to their ends (those
    /// still here) while waiting for the exit.
    ///
    /// # Errors
    /// From a read or the wait.
    pub async fn wait_with_output(mut self) -> io::Result<Output> {
        async fn read_all<R: crate::io::AsyncRead + Unpin>(pipe: Option<R>) -> io::Result<Vec<u8>> {
            let mut out = Vec::new();
            if let Some(mut pipe) = pipe {
                pipe.read_to_end(&mut out).await?;
            }
            Ok(out)
        }
        let stdout = self.stdout.take();
        let stderr = self.stderr.take();
        let (status, stdout, stderr) =
            tokio::try_join!(self.wait(), read_all(stdout), read_all(stderr))?;
        Ok(Output {
            status,
            stdout,
            stderr,
        })
    }
}

impl fmt::Debug for Child {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Child");
        match &self.state {
            State::Running(r) => d.field("pid", &r.std.as_ref().map(|c| c.id())),
            State::Done(status) => d.field("status", status),
        };
        d.field("stdin", &self.stdin)
            .field("stdout", &self.stdout)
            .field("stderr", &self.stderr)
            .finish()
    }
}
