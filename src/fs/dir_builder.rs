//! [`DirBuilder`]: std's builder, with an async `create`.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use super::asyncify;

/// Creates directories with options (tokio's `fs::DirBuilder`).
///
/// ```
/// # #[numa_rt::main(max_procs = 1)]
/// # async fn main() -> std::io::Result<()> {
/// # let base = std::env::temp_dir().join(format!("numa_rt-db-doc-{}", std::process::id()));
/// numa_rt::fs::DirBuilder::new()
///     .recursive(true)
///     .mode(0o750)
///     .create(base.join("a/b/c"))
///     .await?;
/// # numa_rt::fs::remove_dir_all(&base).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Default)]
pub struct DirBuilder {
    recursive: bool,
    mode: Option<u32>,
}

impl DirBuilder {
    /// Not recursive, default permissions (0o777 before the umask).
    pub fn new() -> Self {
        DirBuilder::default()
    }

    /// Create missing parents too, and succeed if the directory exists.
    pub fn recursive(&mut self, recursive: bool) -> &mut Self {
        self.recursive = recursive;
        self
    }

    /// The permission bits of the directories created (before the umask).
    pub fn mode(&mut self, mode: u32) -> &mut Self {
        self.mode = Some(mode);
        self
    }

    /// Creates `path` with these options, on the blocking pool.
    ///
    /// # Errors
    /// As `std::fs::DirBuilder::create`.
    pub async fn create(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let path = path.as_ref().to_owned();
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(self.recursive);
        if let Some(mode) = self.mode {
            builder.mode(mode);
        }
        asyncify(move || builder.create(path)).await
    }
}
