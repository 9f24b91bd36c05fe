//! `numa_rt::fs::File`: tokio's semantics on the blocking pool — buffered
//! writes flushed by `flush`/`sync_all`, reads that keep what the caller's
//! buffer could not take, seeks that account for it, one operation in
//! flight, write errors reported later.

use std::io::SeekFrom;
use std::path::PathBuf;
use std::pin::Pin;

use numa_rt::fs::{self, File, OpenOptions};
use numa_rt::io::{AsyncReadExt, AsyncSeek, AsyncSeekExt, AsyncWriteExt};

/// A fresh directory for one test, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("numa_rt-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn join(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[numa_rt::test]
async fn write_flush_then_read_back() {
    let dir = TempDir::new("file-rw");
    let path = dir.join("a");
    let mut f = File::create(&path).await.unwrap();
    for i in 0..100u32 {
        f.write_all(format!("line {i}\n").as_bytes()).await.unwrap();
    }
    f.flush().await.unwrap();
    let expect: String = (0..100).map(|i| format!("line {i}\n")).collect();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), expect);

    let mut text = String::new();
    File::open(&path)
        .await
        .unwrap()
        .read_to_string(&mut text)
        .await
        .unwrap();
    assert_eq!(text, expect);
}

#[numa_rt::test]
async fn large_write_and_read_in_small_max_buf_chunks() {
    let dir = TempDir::new("file-big");
    let path = dir.join("big");
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let mut f = File::create(&path).await.unwrap();
    f.set_max_buf_size(64 * 1024);
    assert_eq!(f.max_buf_size(), 64 * 1024);
    f.write_all(&data).await.unwrap();
    f.sync_all().await.unwrap();
    drop(f);

    let mut f = File::open(&path).await.unwrap();
    f.set_max_buf_size(10_000);
    let mut back = Vec::new();
    f.read_to_end(&mut back).await.unwrap();
    assert!(back == data, "read back {} bytes", back.len());
}

#[numa_rt::test]
async fn seek_after_a_partial_read_counts_the_unread_rest() {
    let dir = TempDir::new("file-seek");
    let path = dir.join("s");
    std::fs::write(&path, b"0123456789abcdef").unwrap();
    let mut f = File::open(&path).await.unwrap();
    // The blocking read fetches all 16 bytes; the caller takes 4.
    let mut four = [0u8; 4];
    f.read_exact(&mut four).await.unwrap();
    assert_eq!(&four, b"0123");
    // Relative to where the reader is, not where the OS offset is.
    assert_eq!(f.seek(SeekFrom::Current(2)).await.unwrap(), 6);
    f.read_exact(&mut four).await.unwrap();
    assert_eq!(&four, b"6789");
    assert_eq!(f.stream_position().await.unwrap(), 10);
    assert_eq!(f.seek(SeekFrom::End(-2)).await.unwrap(), 14);
    let mut rest = Vec::new();
    f.read_to_end(&mut rest).await.unwrap();
    assert_eq!(rest, b"ef");
    assert_eq!(f.seek(SeekFrom::Start(1)).await.unwrap(), 1);
    f.read_exact(&mut four).await.unwrap();
    assert_eq!(&four, b"1234");
}

#[numa_rt::test]
async fn write_after_a_partial_read_lands_where_the_reader_is() {
    let dir = TempDir::new("file-rw-mix");
    let path = dir.join("m");
    std::fs::write(&path, b"aaaaaaaaaa").unwrap();
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .await
        .unwrap();
    let mut three = [0u8; 3];
    f.read_exact(&mut three).await.unwrap();
    f.write_all(b"XY").await.unwrap();
    f.flush().await.unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"aaaXYaaaaa");
    // And reading goes on after the write.
    let mut rest = Vec::new();
    f.read_to_end(&mut rest).await.unwrap();
    assert_eq!(rest, b"aaaaa");
}

#[numa_rt::test]
async fn start_seek_with_a_write_in_flight_is_refused() {
    let dir = TempDir::new("file-busy");
    let mut f = File::create(dir.join("b")).await.unwrap();
    f.write_all(b"pending").await.unwrap();
    // The write runs in the background: a raw start_seek must wait.
    let refused = Pin::new(&mut f).start_seek(SeekFrom::Start(0));
    if let Err(e) = refused {
        assert!(e.to_string().contains("in flight"), "{e}");
    } else {
        // The write had already been collected? It cannot: nothing polled
        // the file since write_all returned.
        panic!("start_seek accepted while a write was in flight");
    }
    // seek() polls the write to completion first.
    assert_eq!(f.seek(SeekFrom::Start(0)).await.unwrap(), 0);
}

#[numa_rt::test]
async fn set_len_metadata_clone_and_into_std() {
    let dir = TempDir::new("file-meta");
    let path = dir.join("m");
    let mut f = File::create(&path).await.unwrap();
    f.write_all(b"0123456789").await.unwrap();
    // set_len waits for the write in flight.
    f.set_len(4).await.unwrap();
    assert_eq!(f.metadata().await.unwrap().len(), 4);
    f.set_len(6).await.unwrap();
    f.sync_data().await.unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"0123\0\0");

    let clone = f.try_clone().await.unwrap();
    assert_eq!(clone.metadata().await.unwrap().len(), 6);
    let t = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    clone.set_modified(t).await.unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), t);
    let mut perm = clone.metadata().await.unwrap().permissions();
    perm.set_readonly(true);
    clone.set_permissions(perm).await.unwrap();
    assert!(std::fs::metadata(&path).unwrap().permissions().readonly());

    let std_file = f.into_std().await;
    assert_eq!(std_file.metadata().unwrap().len(), 6);
    let f = File::from_std(std_file);
    assert!(f.try_into_std().is_ok());
    assert!(format!("{clone:?}").contains("File"));
}

#[numa_rt::test]
async fn write_errors_surface_on_flush() {
    let dir = TempDir::new("file-err");
    let path = dir.join("ro");
    std::fs::write(&path, b"x").unwrap();
    // Opened for reading only: the background write fails with EBADF.
    let mut f = File::open(&path).await.unwrap();
    let n = f.write(b"hello").await.unwrap();
    assert_eq!(n, 5, "the write is accepted into the buffer");
    let err = f.flush().await.unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EBADF), "{err}");
    // Reported once.
    f.flush().await.unwrap();
}

#[numa_rt::test]
async fn open_errors_and_create_new() {
    let dir = TempDir::new("file-open");
    let err = File::open(dir.join("missing")).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    let path = dir.join("new");
    let mut f = File::create_new(&path).await.unwrap();
    f.write_all(b"once").await.unwrap();
    f.shutdown().await.unwrap();
    let err = File::create_new(&path).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
    assert_eq!(fs::read(&path).await.unwrap(), b"once");
    let mut f = File::options()
        .append(true)
        .mode(0o600)
        .open(&path)
        .await
        .unwrap();
    f.write_all(b" more").await.unwrap();
    f.flush().await.unwrap();
    assert_eq!(fs::read_to_string(&path).await.unwrap(), "once more");
}

/// Many tasks on several processors, each with its own file.
#[test]
fn files_from_many_tasks_on_two_processors() {
    let rt = numa_rt::Builder::new().max_procs(2).build().unwrap();
    let dir = TempDir::new("file-many");
    let base = dir.0.clone();
    rt.block_on(async move {
        let mut set = numa_rt::task::JoinSet::new();
        for i in 0..32 {
            let path = base.join(format!("f{i}"));
            set.spawn(async move {
                let mut f = File::create(&path).await?;
                for _ in 0..50 {
                    f.write_all(format!("{i};").as_bytes()).await?;
                }
                f.flush().await?;
                let s = fs::read_to_string(&path).await?;
                assert_eq!(s, format!("{i};").repeat(50));
                std::io::Result::Ok(())
            });
        }
        while let Some(r) = set.join_next().await {
            r.unwrap().unwrap();
        }
    });
}

/// A write accepted before the `File` is dropped still reaches the file
/// (the blocking pool runs it): tokio's behaviour, though flushing first is
/// the way to know.
#[numa_rt::test]
async fn a_write_in_flight_completes_after_the_file_is_dropped() {
    let dir = TempDir::new("file-drop");
    let path = dir.join("d");
    let mut f = File::create(&path).await.unwrap();
    f.write_all(b"kept").await.unwrap();
    drop(f);
    let p = path.clone();
    numa_rt::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::fs::read(&p).unwrap() != b"kept" {
            assert!(
                std::time::Instant::now() < deadline,
                "the write never landed"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    })
    .await
    .unwrap();
}
