//! [`read_dir`]: a directory's entries, fetched in chunks on the blocking
//! pool.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::{FileType, Metadata};
use std::future::{poll_fn, Future};
use std::io;
use std::os::unix::fs::DirEntryExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use super::{asyncify, background_failed};
use crate::JoinHandle;

/// Entries fetched per trip to the blocking pool.
const CHUNK: usize = 32;

/// Opens a directory for listing (`std::fs::read_dir`; the first chunk of
/// entries is read at once).
///
/// ```
/// # #[numa_rt::main(max_procs = 1)]
/// # async fn main() -> std::io::Result<()> {
/// let mut entries = numa_rt::fs::read_dir(".").await?;
/// while let Some(entry) = entries.next_entry().await? {
///     let _ = (entry.file_name(), entry.file_type().await?);
/// }
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// As `std::fs::read_dir`: not found, not a directory, no permission.
pub async fn read_dir(path: impl AsRef<Path>) -> io::Result<ReadDir> {
    let path = path.as_ref().to_owned();
    asyncify(move || {
        let mut iter = std::fs::read_dir(path)?;
        let chunk = Chunk::fetch(&mut iter);
        Ok(ReadDir(State::Idle(Some((chunk, iter)))))
    })
    .await
}

/// A chunk of entries and whether the directory has more.
struct Chunk {
    entries: VecDeque<io::Result<DirEntry>>,
    more: bool,
}

impl Chunk {
    fn fetch(iter: &mut std::fs::ReadDir) -> Chunk {
        let mut entries = VecDeque::with_capacity(CHUNK);
        while entries.len() < CHUNK {
            match iter.next() {
                None => {
                    return Chunk {
                        entries,
                        more: false,
                    }
                }
                Some(Ok(e)) => entries.push_back(Ok(DirEntry {
                    file_type: e.file_type().ok(),
                    std: Arc::new(e),
                })),
                // An error ends the chunk; the next one tries again.
                Some(Err(e)) => {
                    entries.push_back(Err(e));
                    break;
                }
            }
        }
        Chunk {
            entries,
            more: true,
        }
    }
}

enum State {
    Idle(Option<(Chunk, std::fs::ReadDir)>),
    Busy(JoinHandle<(Chunk, std::fs::ReadDir)>),
}

/// The entries of a directory (tokio's `fs::ReadDir`), from [`read_dir`].
/// `.` and `..` are not listed; the order is the file system's.
#[must_use = "a ReadDir lists nothing until next_entry is awaited"]
pub struct ReadDir(State);

impl ReadDir {
    /// The next entry; `None` at the end.
    ///
    /// Cancel safe: an entry is only taken by the call that returns it.
    ///
    /// # Errors
    /// An I/O error reading the directory (the listing may go on after it).
    pub async fn next_entry(&mut self) -> io::Result<Option<DirEntry>> {
        poll_fn(|cx| self.poll_next_entry(cx)).await
    }

    /// The poll behind [`next_entry`](ReadDir::next_entry).
    ///
    /// # Errors
    /// As [`next_entry`](ReadDir::next_entry).
    pub fn poll_next_entry(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<DirEntry>>> {
        loop {
            match &mut self.0 {
                State::Idle(slot) => {
                    let Some((chunk, _)) = slot.as_mut() else {
                        return Poll::Ready(Ok(None));
                    };
                    if let Some(entry) = chunk.entries.pop_front() {
                        return Poll::Ready(entry.map(Some));
                    }
                    if !chunk.more {
                        return Poll::Ready(Ok(None));
                    }
                    let (_, mut iter) = slot.take().expect("checked above");
                    self.0 = State::Busy(crate::spawn_blocking(move || {
                        let chunk = Chunk::fetch(&mut iter);
                        (chunk, iter)
                    }));
                }
                State::Busy(handle) => {
                    let res = ready!(Pin::new(handle).poll(cx));
                    match res {
                        Ok(next) => self.0 = State::Idle(Some(next)),
                        Err(e) => {
                            // The listing is lost with the closure.
                            self.0 = State::Idle(None);
                            return Poll::Ready(Err(background_failed(e)));
                        }
                    }
                }
            }
        }
    }
}

impl std::fmt::Debug for ReadDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadDir").finish_non_exhaustive()
    }
}

/// One entry of a [`ReadDir`] (tokio's `fs::DirEntry`).
#[derive(Debug)]
pub struct DirEntry {
    /// Known from the listing itself on most file systems (`d_type`).
    file_type: Option<FileType>,
    std: Arc<std::fs::DirEntry>,
}

impl DirEntry {
    /// The full path: the directory given to [`read_dir`] joined with the
    /// entry's name.
    pub fn path(&self) -> PathBuf {
        self.std.path()
    }

    /// The entry's name, without its directory.
    pub fn file_name(&self) -> OsString {
        self.std.file_name()
    }

    /// The entry's inode number.
    pub fn ino(&self) -> u64 {
        self.std.ino()
    }

    /// The entry's metadata, not following a symbolic link.
    ///
    /// # Errors
    /// As `std::fs::DirEntry::metadata` (say, the entry was removed).
    pub async fn metadata(&self) -> io::Result<Metadata> {
        let std = self.std.clone();
        asyncify(move || std.metadata()).await
    }

    /// The entry's type, not following a symbolic link: at once when the
    /// listing said it, otherwise from the blocking pool.
    ///
    /// # Errors
    /// As `std::fs::DirEntry::file_type`.
    pub async fn file_type(&self) -> io::Result<FileType> {
        if let Some(t) = self.file_type {
            return Ok(t);
        }
        let std = self.std.clone();
        asyncify(move || std.file_type()).await
    }
}
