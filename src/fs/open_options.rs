//! [`OpenOptions`]: std's builder, with an async `open`.

use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::{asyncify, File};

/// How to open a file (tokio's `fs::OpenOptions`): `std::fs::OpenOptions`'s
/// builder, whose [`open`](OpenOptions::open) runs on the blocking pool and
/// returns a numa_rt [`File`].
///
/// ```
/// use numa_rt::fs::OpenOptions;
/// use numa_rt::io::AsyncWriteExt;
///
/// # #[numa_rt::main(max_procs = 1)]
/// # async fn main() -> std::io::Result<()> {
/// # let path = std::env::temp_dir().join(format!("numa_rt-oo-doc-{}", std::process::id()));
/// let mut log = OpenOptions::new().create(true).append(true).open(&path).await?;
/// log.write_all(b"one line\n").await?;
/// log.flush().await?;
/// # numa_rt::fs::remove_file(&path).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct OpenOptions(std::fs::OpenOptions);

impl OpenOptions {
    /// Every option off: set at least one of read, write or append.
    pub fn new() -> OpenOptions {
        OpenOptions(std::fs::OpenOptions::new())
    }

    /// Open for reading.
    pub fn read(&mut self, read: bool) -> &mut OpenOptions {
        self.0.read(read);
        self
    }

    /// Open for writing.
    pub fn write(&mut self, write: bool) -> &mut OpenOptions {
        self.0.write(write);
        self
    }

    /// Open for appending: every write goes to the end of the file.
    pub fn append(&mut self, append: bool) -> &mut OpenOptions {
        self.0.append(append);
        self
    }

    /// Truncate the file to nothing when it is opened (needs write).
    pub fn truncate(&mut self, truncate: bool) -> &mut OpenOptions {
        self.0.truncate(truncate);
        self
    }

    /// Create the file if it does not exist (needs write or append).
    pub fn create(&mut self, create: bool) -> &mut OpenOptions {
        self.0.create(create);
        self
    }

    /// Create the file, failing with `AlreadyExists` if it exists
    /// (atomically; `create` and `truncate` are then ignored).
    pub fn create_new(&mut self, create_new: bool) -> &mut OpenOptions {
        self.0.create_new(create_new);
        self
    }

    /// The permission bits a created file gets (before the umask); 0o666 by
    /// default. (`std::os::unix::fs::OpenOptionsExt::mode`.)
    pub fn mode(&mut self, mode: u32) -> &mut OpenOptions {
        self.0.mode(mode);
        self
    }

    /// Extra `open(2)` flags, such as `O_NOFOLLOW`; the access mode bits
    /// are masked out. (`std::os::unix::fs::OpenOptionsExt::custom_flags`.)
    pub fn custom_flags(&mut self, flags: i32) -> &mut OpenOptions {
        self.0.custom_flags(flags);
        self
    }

    /// Opens `path` with these options, on the blocking pool.
    ///
    /// # Errors
    /// As `std::fs::OpenOptions::open`: `NotFound`, `PermissionDenied`,
    /// `AlreadyExists` (with `create_new`), `InvalidInput` for an invalid
    /// combination of options, ...
    pub async fn open(&self, path: impl AsRef<Path>) -> io::Result<File> {
        let path = path.as_ref().to_owned();
        let opts = self.0.clone();
        let std = asyncify(move || opts.open(path)).await?;
        Ok(File::from_std(std))
    }
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions::new()
    }
}

impl From<std::fs::OpenOptions> for OpenOptions {
    fn from(options: std::fs::OpenOptions) -> OpenOptions {
        OpenOptions(options)
    }
}
