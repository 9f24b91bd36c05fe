//! `numa_rt::fs`'s functions, `ReadDir`/`DirEntry`, `DirBuilder` and
//! `OpenOptions`: std's behaviour, on the blocking pool.

use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use numa_rt::fs;

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
async fn read_write_copy_rename_remove() {
    let dir = TempDir::new("fs-basic");
    let a = dir.join("a.txt");
    fs::write(&a, "alpha").await.unwrap();
    assert_eq!(fs::read(&a).await.unwrap(), b"alpha");
    assert_eq!(fs::read_to_string(&a).await.unwrap(), "alpha");

    let b = dir.join("b.txt");
    assert_eq!(fs::copy(&a, &b).await.unwrap(), 5);
    let c = dir.join("c.txt");
    fs::rename(&b, &c).await.unwrap();
    assert!(!fs::try_exists(&b).await.unwrap());
    assert!(fs::try_exists(&c).await.unwrap());
    fs::remove_file(&c).await.unwrap();
    assert_eq!(
        fs::remove_file(&c).await.unwrap_err().kind(),
        ErrorKind::NotFound
    );

    std::fs::write(dir.join("bad"), [0xff, 0xfe]).unwrap();
    assert_eq!(
        fs::read_to_string(dir.join("bad"))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidData
    );
}

#[numa_rt::test]
async fn directories_and_listing() {
    let dir = TempDir::new("fs-dirs");
    let deep = dir.join("x/y/z");
    fs::create_dir_all(&deep).await.unwrap();
    assert!(fs::metadata(&deep).await.unwrap().is_dir());
    assert_eq!(
        fs::create_dir(&deep).await.unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    fs::create_dir(dir.join("x/w")).await.unwrap();
    assert!(fs::remove_dir(dir.join("x")).await.is_err(), "not empty");
    fs::remove_dir(dir.join("x/w")).await.unwrap();
    fs::remove_dir_all(dir.join("x")).await.unwrap();
    assert!(!fs::try_exists(dir.join("x")).await.unwrap());

    // More entries than one batch of the listing.
    let list = dir.join("list");
    fs::create_dir(&list).await.unwrap();
    for i in 0..100 {
        fs::write(list.join(format!("f{i:03}")), [i as u8])
            .await
            .unwrap();
    }
    fs::create_dir(list.join("sub")).await.unwrap();
    let mut rd = fs::read_dir(&list).await.unwrap();
    let mut names = Vec::new();
    let mut dirs = 0;
    while let Some(e) = rd.next_entry().await.unwrap() {
        assert_eq!(e.path(), list.join(e.file_name()));
        assert!(e.ino() > 0);
        if e.file_type().await.unwrap().is_dir() {
            dirs += 1;
        } else {
            assert_eq!(e.metadata().await.unwrap().len(), 1);
            names.push(e.file_name().into_string().unwrap());
        }
    }
    // Finished listings stay finished.
    assert!(rd.next_entry().await.unwrap().is_none());
    names.sort();
    let want: Vec<String> = (0..100).map(|i| format!("f{i:03}")).collect();
    assert_eq!(names, want);
    assert_eq!(dirs, 1);
    assert_eq!(
        fs::read_dir(dir.join("nope")).await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

#[numa_rt::test]
async fn links_canonical_paths_and_permissions() {
    let dir = TempDir::new("fs-links");
    let target = dir.join("target");
    fs::write(&target, "t").await.unwrap();
    let hard = dir.join("hard");
    fs::hard_link(&target, &hard).await.unwrap();
    assert_eq!(fs::read_to_string(&hard).await.unwrap(), "t");

    let soft = dir.join("soft");
    fs::symlink(&target, &soft).await.unwrap();
    assert_eq!(fs::read_link(&soft).await.unwrap(), target);
    assert!(fs::symlink_metadata(&soft)
        .await
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(fs::metadata(&soft).await.unwrap().is_file());
    let canon = fs::canonicalize(dir.join("./soft")).await.unwrap();
    assert_eq!(canon, std::fs::canonicalize(&target).unwrap());

    // A dangling link: does not "exist", and that is no error.
    let dangling = dir.join("dangling");
    fs::symlink(dir.join("gone"), &dangling).await.unwrap();
    assert!(!fs::try_exists(&dangling).await.unwrap());

    fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640))
        .await
        .unwrap();
    let mode = fs::metadata(&target).await.unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o640);
}

#[numa_rt::test]
async fn dir_builder() {
    let dir = TempDir::new("fs-builder");
    let nested = dir.join("a/b");
    assert_eq!(
        fs::DirBuilder::new()
            .create(&nested)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    let mut b = fs::DirBuilder::new();
    b.recursive(true).mode(0o700);
    b.create(&nested).await.unwrap();
    b.create(&nested).await.unwrap(); // recursive: existing is fine
    let mode = fs::metadata(&nested).await.unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[numa_rt::test]
async fn open_options_from_std() {
    let dir = TempDir::new("fs-oo");
    let path = dir.join("o");
    let mut std_opts = std::fs::OpenOptions::new();
    std_opts.write(true).create(true);
    let opts = fs::OpenOptions::from(std_opts);
    drop(opts.open(&path).await.unwrap());
    assert!(fs::try_exists(&path).await.unwrap());
    // No access mode: std's InvalidInput.
    let err = fs::OpenOptions::new().open(&path).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
}

/// The types cross threads as tokio's do.
#[test]
fn send_and_sync() {
    fn both<T: Send + Sync>() {}
    both::<fs::File>();
    both::<fs::ReadDir>();
    both::<fs::DirEntry>();
    both::<fs::OpenOptions>();
    both::<fs::DirBuilder>();
    both::<numa_rt::io::Stdin>();
    both::<numa_rt::io::Stdout>();
    both::<numa_rt::io::Stderr>();
    both::<numa_rt::process::Command>();
    both::<numa_rt::process::Child>();
    both::<numa_rt::process::ChildStdin>();
    both::<numa_rt::process::ChildStdout>();
    both::<numa_rt::process::ChildStderr>();
    // The futures can be spawned (checked, never run).
    fn send<T: Send>(_: T) {}
    let _ = |c: &mut numa_rt::process::Command, child: &mut numa_rt::process::Child| {
        send(c.output());
        send(c.status());
        send(child.wait());
        send(fs::read("x"));
        send(fs::File::open("x"));
    };
}

/// After shutdown (the runtime still entered) a file operation fails with
/// tokio's "background task failed", the task's JoinError as its source.
#[test]
fn an_operation_after_shutdown_is_a_background_task_failure() {
    let rt = numa_rt::runtime::Runtime::new().unwrap();
    let _enter = rt.enter();
    rt.shutdown_timeout(std::time::Duration::from_secs(30));
    let err = numa_rt::runtime::Handle::current()
        .block_on(numa_rt::fs::read_to_string("Cargo.toml"))
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::Other);
    let inner = err.get_ref().expect("an inner error");
    assert_eq!(inner.to_string(), "background task failed");
    let cause = std::error::Error::source(inner).expect("the JoinError as source");
    assert!(cause.to_string().contains("cancelled"), "{cause}");
}
