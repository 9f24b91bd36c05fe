//! tokio-stream's wrappers and timed combinators on numa_rt (feature
//! `tokio-stream`).
#![cfg(feature = "tokio-stream")]

use numa_rt::time::{interval, sleep, Duration, Instant};
use numa_rt_util::stream::wrappers::{
    IntervalStream, JoinSetStream, ReadDirStream, ReceiverStream, SignalStream, TcpListenerStream,
    UnixListenerStream,
};
// numa_rt_util's StreamExt alone: this workspace's builds turn on
// tokio-stream's `time` feature (tokio-test and console-subscriber do), and
// the calls below must not be ambiguous or reach tokio's timer then.
use numa_rt_util::stream::{Elapsed, StreamExt, StreamMap};
use tokio::sync::mpsc;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn assert_no_tokio() {
    assert!(tokio::runtime::Handle::try_current().is_err());
}

#[numa_rt::test]
async fn tcp_listener_stream_yields_accepted_connections() {
    assert_no_tokio();
    let listener = numa_rt::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let mut incoming = TcpListenerStream::new(listener);
    let clients = numa_rt::spawn(async move {
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(numa_rt::net::TcpStream::connect(addr).await.unwrap());
        }
        held
    });
    for _ in 0..3 {
        let stream = incoming.next().await.unwrap().unwrap();
        assert_eq!(stream.local_addr().unwrap(), addr);
    }
    assert_eq!(clients.await.unwrap().len(), 3);
    assert_eq!(incoming.as_ref().local_addr().unwrap(), addr);
}

#[numa_rt::test]
async fn unix_listener_stream_yields_accepted_connections() {
    assert_no_tokio();
    let dir = std::env::temp_dir().join(format!("numa_rt_util_uls_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.sock");
    let listener = numa_rt::net::UnixListener::bind(&path).unwrap();
    let mut incoming = UnixListenerStream::new(listener);
    let client = {
        let path = path.clone();
        numa_rt::spawn(async move { numa_rt::net::UnixStream::connect(path).await.unwrap() })
    };
    assert!(incoming.next().await.unwrap().is_ok());
    drop(client.await.unwrap());
    drop(incoming.into_inner());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[numa_rt::test(start_paused = true)]
async fn interval_stream_ticks_each_period() {
    assert_no_tokio();
    let start = Instant::now();
    let ticks: Vec<Duration> = IntervalStream::new(interval(ms(100)))
        .take(4)
        .map(|at| at - start)
        .collect()
        .await;
    assert_eq!(ticks, [ms(0), ms(100), ms(200), ms(300)]);
}

#[numa_rt::test]
async fn signal_stream_yields_once_per_delivery() {
    assert_no_tokio();
    use numa_rt::signal::unix::{signal, SignalKind};
    let mut signals = SignalStream::new(signal(SignalKind::user_defined2()).unwrap());
    // SAFETY: kill(2) on our own pid with a signal numa_rt now handles;
    // no memory is involved.
    let rc = unsafe { libc::kill(libc::getpid(), libc::SIGUSR2) };
    assert_eq!(rc, 0);
    assert_eq!(signals.next().await, Some(()));
}

#[numa_rt::test(start_paused = true)]
async fn timeout_yields_one_elapsed_per_gap() {
    assert_no_tokio();
    let (tx, rx) = mpsc::channel(8);
    let mut items = ReceiverStream::new(rx).timeout(ms(100));
    tx.send(1).await.unwrap();
    assert_eq!(items.next().await, Some(Ok(1)));
    // Nothing comes: one Elapsed at the deadline, then no deadline.
    let before = Instant::now();
    let err: Elapsed = items.next().await.unwrap().unwrap_err();
    assert_eq!(err.to_string(), "deadline has elapsed");
    assert_eq!(before.elapsed(), ms(100));
    let sender = numa_rt::spawn(async move {
        sleep(ms(500)).await;
        tx.send(2).await.unwrap();
    });
    assert_eq!(items.next().await, Some(Ok(2)));
    sender.await.unwrap();
    assert_eq!(items.next().await, None);
}

#[numa_rt::test(start_paused = true)]
async fn timeout_repeating_yields_elapsed_at_each_tick() {
    assert_no_tokio();
    let start = Instant::now();
    let mut items = numa_rt_util::stream::pending::<u8>()
        .timeout_repeating(numa_rt::time::interval_at(start + ms(50), ms(50)));
    for n in 1..=3u64 {
        assert!(items.next().await.unwrap().is_err());
        assert_eq!(start.elapsed(), ms(50 * n));
    }
}

#[numa_rt::test(start_paused = true)]
async fn throttle_spaces_items_by_the_period() {
    assert_no_tokio();
    let start = Instant::now();
    let at: Vec<Duration> = numa_rt_util::stream::iter(0..4)
        .throttle(ms(100))
        .map(|_| start.elapsed())
        .collect()
        .await;
    assert_eq!(at, [ms(0), ms(100), ms(200), ms(300)]);
}

#[numa_rt::test(start_paused = true)]
async fn chunks_timeout_yields_full_or_timed_out_batches() {
    assert_no_tokio();
    let (tx, rx) = mpsc::channel(16);
    let mut chunks = Box::pin(ReceiverStream::new(rx).chunks_timeout(3, ms(100)));
    for i in 0..4 {
        tx.send(i).await.unwrap();
    }
    // Full at once.
    let start = Instant::now();
    assert_eq!(chunks.next().await, Some(vec![0, 1, 2]));
    assert_eq!(start.elapsed(), ms(0));
    // The partial batch waits for its deadline.
    assert_eq!(chunks.next().await, Some(vec![3]));
    assert_eq!(start.elapsed(), ms(100));
    tx.send(9).await.unwrap();
    drop(tx);
    // The stream's end flushes the last batch.
    assert_eq!(chunks.next().await, Some(vec![9]));
    assert_eq!(chunks.next().await, None);
}

#[numa_rt::test]
async fn the_runtime_free_reexports_are_tokio_streams() {
    assert_no_tokio();
    let mut map = StreamMap::new();
    map.insert("a", numa_rt_util::stream::iter([1, 2]));
    map.insert("b", numa_rt_util::stream::iter([3, 4]));
    let mut got: Vec<i32> = map.map(|(_, v)| v).collect().await;
    got.sort();
    assert_eq!(got, [1, 2, 3, 4]);
    let (tx, rx) = tokio::sync::broadcast::channel(4);
    tx.send(5).unwrap();
    drop(tx);
    let got: Vec<_> = numa_rt_util::stream::wrappers::BroadcastStream::new(rx)
        .collect()
        .await;
    assert_eq!(got.len(), 1);
}

#[numa_rt::test(max_procs = 2)]
async fn join_set_stream_yields_each_result_then_ends() {
    assert_no_tokio();
    let mut set = numa_rt::task::JoinSet::new();
    for i in 0..5u32 {
        set.spawn(async move { i * 10 });
    }
    let stream = JoinSetStream::new(set);
    assert_eq!(
        numa_rt_util::stream::Stream::size_hint(&stream),
        (5, Some(5))
    );
    let mut got: Vec<u32> = stream.map(|r| r.unwrap()).collect().await;
    got.sort();
    assert_eq!(got, [0, 10, 20, 30, 40]);
}

#[numa_rt::test]
async fn read_dir_stream_lists_a_directory() {
    assert_no_tokio();
    let dir = std::env::temp_dir().join(format!("numa_rt_util_rds_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["a", "b", "c"] {
        std::fs::write(dir.join(name), name).unwrap();
    }
    let entries = ReadDirStream::new(numa_rt::fs::read_dir(&dir).await.unwrap());
    let mut names: Vec<String> = entries
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
        .await;
    names.sort();
    assert_eq!(names, ["a", "b", "c"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every method of `StreamExt` that is tokio-stream's own, in a spawned
/// task (so the futures `next`, `all`, `fold`, `collect`… return are `Send`
/// for a `Send` stream).
#[numa_rt::test]
async fn stream_ext_has_tokio_streams_methods_in_a_send_task() {
    use numa_rt_util::stream::iter;
    let task = numa_rt::spawn(async {
        let mut s = iter(1..=10)
            .map(|x| x * 2)
            .filter(|x| x % 4 != 0)
            .filter_map(|x| (x != 2).then_some(x))
            .chain(iter([100, 200]))
            .skip(1)
            .take(4)
            .fuse();
        let mut got = Vec::new();
        while let Some(x) = s.next().await {
            got.push(x);
        }
        assert_eq!(got, [10, 14, 18, 100]);

        let mut evens = iter([2, 4, 6]);
        assert!(evens.all(|x| x % 2 == 0).await);
        let mut some = iter([1, 3, 4]);
        assert!(some.any(|x| x == 4).await);
        assert_eq!(iter(1..=4).fold(0, |a, x| a + x).await, 10);
        let v: Vec<i32> = iter([3, 1, 2]).collect().await;
        assert_eq!(v, [3, 1, 2]);
        let r: Result<Vec<i32>, u8> = iter([Ok(1), Err(7), Ok(3)]).collect().await;
        assert_eq!(r, Err(7));

        let mut results = iter([Ok::<_, u8>(1), Err(9)]);
        assert_eq!(results.try_next().await, Ok(Some(1)));
        assert_eq!(results.try_next().await, Err(9));

        let w: Vec<_> = iter(1..10).take_while(|x| *x < 4).collect().await;
        assert_eq!(w, [1, 2, 3]);
        let w: Vec<_> = iter(1..6).skip_while(|x| *x < 4).collect().await;
        assert_eq!(w, [4, 5]);
        let w: Vec<_> = iter([Some(1), Some(2), None, Some(4)])
            .map_while(|x| x)
            .collect()
            .await;
        assert_eq!(w, [1, 2]);
        let w: Vec<_> = iter([1, 2]).then(|x| async move { x + 1 }).collect().await;
        assert_eq!(w, [2, 3]);
        let mut m: Vec<_> = iter([1, 2]).merge(iter([3])).collect().await;
        m.sort();
        assert_eq!(m, [1, 2, 3]);
        let mut p = iter([7, 8]).peekable();
        assert_eq!(p.peek().await, Some(&7));
        assert_eq!(p.next().await, Some(7));
    });
    task.await.unwrap();
}
