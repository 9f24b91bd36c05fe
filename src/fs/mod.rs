//! Files and directories (tokio's `fs` module): the same functions and
//! types, run on numa_rt's blocking pool.
//!
//! Each function here is `std::fs`'s, handed to [`spawn_blocking`](crate::spawn_blocking): the
//! call runs on a thread that holds no processor, and the task awaiting it
//! yields its processor meanwhile. [`File`] does the same for each read,
//! write, seek and flush, with tokio's semantics: one operation in flight
//! at a time, a write returns as soon as its bytes are copied into the
//! file's buffer (so an error shows on the next write, on
//! [`flush`](crate::io::AsyncWriteExt::flush) or on
//! [`sync_all`](File::sync_all)), and data written is only known to be in
//! the file after `flush` (or `sync_all`/`sync_data`, which also wait for
//! it). A `File` dropped with a write in flight still completes the write,
//! also when the runtime shuts down meanwhile (the blocking pool runs the
//! closures queued before shutdown, as tokio's). Flush before dropping to
//! see its error.
//!
//! ```
//! use numa_rt::fs;
//! use numa_rt::io::{AsyncReadExt, AsyncWriteExt};
//!
//! # #[numa_rt::main(max_procs = 1)]
//! # async fn main() -> std::io::Result<()> {
//! let dir = std::env::temp_dir().join(format!("numa_rt-fs-doc-{}", std::process::id()));
//! fs::create_dir_all(&dir).await?;
//! let path = dir.join("greeting.txt");
//!
//! let mut file = fs::File::create(&path).await?;
//! file.write_all(b"hello, ").await?;
//! file.write_all(b"world").await?;
//! file.flush().await?; // the bytes are in the file from here on
//!
//! let mut text = String::new();
//! fs::File::open(&path).await?.read_to_string(&mut text).await?;
//! assert_eq!(text, "hello, world");
//! assert_eq!(fs::read_to_string(&path).await?, "hello, world");
//!
//! fs::remove_dir_all(&dir).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Why the blocking pool (and not io_uring, yet)
//!
//! Regular files are always "ready" to epoll (registering one fails with
//! `EPERM`), so the per-P pollers that serve sockets cannot tell when a
//! read of a file would block; the portable answer, tokio's and Go's, is a
//! thread that may block. numa_rt's blocking pool is exactly that: its
//! threads hold no P, so a slow disk holds up no task.
//!
//! io_uring would take the thread hop out of each operation (and submit
//! many at once), and it is the better design on Linux ≥ 5.6 for file-heavy
//! services. It is not here now because it needs a second kind of event
//! source in every per-P driver (a ring per P whose completions wake the
//! parked M, beside its epoll and eventfd), buffers owned by the kernel
//! while an operation is in flight (so a dropped future must leak or
//! park its buffer until the completion arrives), and a fallback to this
//! pool anyway where io_uring is disabled (containers often forbid it with
//! seccomp, and `kernel.io_uring_disabled` exists for that). tokio itself
//! ships io_uring only behind `tokio_unstable`. The blocking pool gives the
//! same API and semantics today; a ring can replace the hop under it later
//! without changing a signature.

mod dir_builder;
mod file;
mod open_options;
mod read_dir;

pub use dir_builder::DirBuilder;
pub use file::File;
pub use open_options::OpenOptions;
pub use read_dir::{read_dir, DirEntry, ReadDir};
/// Timestamps for [`File::set_times`]: std's type (tokio has its own with
/// the same builder methods, `new`, `set_accessed`, `set_modified`).
pub use std::fs::FileTimes;

use std::io;
use std::path::{Path, PathBuf};

/// Runs `f` on the blocking pool and returns its result; a closure that
/// could not run (the runtime shut down and dropped it, or it panicked)
/// gives an error, as tokio's "background task failed".
pub(crate) async fn asyncify<F, T>(f: F) -> io::Result<T>
where
    F: FnOnce() -> io::Result<T> + Send + 'static,
    T: Send + 'static,
{
    match crate::spawn_blocking(f).await {
        Ok(res) => res,
        Err(e) => Err(background_failed(e)),
    }
}

/// The error of a blocking operation that never returned: tokio's words
/// ("background task failed", which callers match on), the cause (the
/// task's `JoinError`) as its `source`.
pub(crate) fn background_failed(e: crate::JoinError) -> io::Error {
    io::Error::other(BackgroundFailed(e))
}

#[derive(Debug)]
struct BackgroundFailed(crate::JoinError);

impl std::fmt::Display for BackgroundFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("background task failed")
    }
}

impl std::error::Error for BackgroundFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Reads a whole file into a vector (`std::fs::read` on the blocking
/// pool).
///
/// # Errors
/// As `std::fs::read`: the file does not exist, cannot be read, ...
pub async fn read(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::read(path)).await
}

/// Reads a whole file into a string (`std::fs::read_to_string`).
///
/// # Errors
/// As `std::fs::read_to_string`; `InvalidData` when the file is not UTF-8.
pub async fn read_to_string(path: impl AsRef<Path>) -> io::Result<String> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::read_to_string(path)).await
}

/// Creates (or truncates) a file and writes `contents` into it
/// (`std::fs::write`). The bytes are copied first, so the caller keeps its
/// buffer.
///
/// # Errors
/// As `std::fs::write`.
pub async fn write(path: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    let contents = contents.as_ref().to_owned();
    asyncify(move || std::fs::write(path, contents)).await
}

/// Creates a directory (`std::fs::create_dir`); its parent must exist.
///
/// # Errors
/// As `std::fs::create_dir`: `AlreadyExists`, `NotFound` (no parent), ...
pub async fn create_dir(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::create_dir(path)).await
}

/// Creates a directory and every missing parent (`std::fs::create_dir_all`).
///
/// # Errors
/// As `std::fs::create_dir_all`.
pub async fn create_dir_all(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::create_dir_all(path)).await
}

/// Removes an empty directory (`std::fs::remove_dir`).
///
/// # Errors
/// As `std::fs::remove_dir`: not empty, not found, ...
pub async fn remove_dir(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::remove_dir(path)).await
}

/// Removes a directory and everything in it (`std::fs::remove_dir_all`).
///
/// # Errors
/// As `std::fs::remove_dir_all`.
pub async fn remove_dir_all(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::remove_dir_all(path)).await
}

/// Removes a file (`std::fs::remove_file`).
///
/// # Errors
/// As `std::fs::remove_file`.
pub async fn remove_file(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::remove_file(path)).await
}

/// Renames a file or directory, replacing `to` if it is a file
/// (`std::fs::rename`).
///
/// # Errors
/// As `std::fs::rename`.
pub async fn rename(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
    let from = from.as_ref().to_owned();
    let to = to.as_ref().to_owned();
    asyncify(move || std::fs::rename(from, to)).await
}

/// Copies a file's contents and permissions; returns the bytes copied
/// (`std::fs::copy`).
///
/// # Errors
/// As `std::fs::copy`.
pub async fn copy(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<u64> {
    let from = from.as_ref().to_owned();
    let to = to.as_ref().to_owned();
    asyncify(move || std::fs::copy(from, to)).await
}

/// Makes `link` a hard link to `original` (`std::fs::hard_link`).
///
/// # Errors
/// As `std::fs::hard_link`.
pub async fn hard_link(original: impl AsRef<Path>, link: impl AsRef<Path>) -> io::Result<()> {
    let original = original.as_ref().to_owned();
    let link = link.as_ref().to_owned();
    asyncify(move || std::fs::hard_link(original, link)).await
}

/// Makes `link` a symbolic link to `original`
/// (`std::os::unix::fs::symlink`).
///
/// # Errors
/// As `std::os::unix::fs::symlink`.
pub async fn symlink(original: impl AsRef<Path>, link: impl AsRef<Path>) -> io::Result<()> {
    let original = original.as_ref().to_owned();
    let link = link.as_ref().to_owned();
    asyncify(move || std::os::unix::fs::symlink(original, link)).await
}

/// The absolute path with every symbolic link and `.`/`..` resolved
/// (`std::fs::canonicalize`).
///
/// # Errors
/// As `std::fs::canonicalize`: a missing component, ...
pub async fn canonicalize(path: impl AsRef<Path>) -> io::Result<PathBuf> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::canonicalize(path)).await
}

/// Where a symbolic link points (`std::fs::read_link`).
///
/// # Errors
/// As `std::fs::read_link`: not a link, not found, ...
pub async fn read_link(path: impl AsRef<Path>) -> io::Result<PathBuf> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::read_link(path)).await
}

/// A path's metadata, following symbolic links (`std::fs::metadata`).
///
/// # Errors
/// As `std::fs::metadata`.
pub async fn metadata(path: impl AsRef<Path>) -> io::Result<std::fs::Metadata> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::metadata(path)).await
}

/// A path's metadata, not following a final symbolic link
/// (`std::fs::symlink_metadata`).
///
/// # Errors
/// As `std::fs::symlink_metadata`.
pub async fn symlink_metadata(path: impl AsRef<Path>) -> io::Result<std::fs::Metadata> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::symlink_metadata(path)).await
}

/// Sets a path's permissions (`std::fs::set_permissions`).
///
/// # Errors
/// As `std::fs::set_permissions`.
pub async fn set_permissions(path: impl AsRef<Path>, perm: std::fs::Permissions) -> io::Result<()> {
    let path = path.as_ref().to_owned();
    asyncify(move || std::fs::set_permissions(path, perm)).await
}

/// Whether `path` exists: `Ok(false)` when it does not (a broken symbolic
/// link included), an error when that cannot be told, say for lack of
/// permission (`std::fs::exists`).
///
/// # Errors
/// When existence can be neither confirmed nor denied.
pub async fn try_exists(path: impl AsRef<Path>) -> io::Result<bool> {
    let path = path.as_ref().to_owned();
    asyncify(move || path.try_exists()).await
}
