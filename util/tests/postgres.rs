//! tokio-postgres on numa_rt against a real PostgreSQL server (feature
//! `tokio-postgres`). The server is started by the test; where PostgreSQL
//! is not installed the server tests print "skipped: …" and pass.
#![cfg(feature = "tokio-postgres")]

mod support;

use numa_rt::time::{Duration, Instant};
use numa_rt_util::postgres::{connect, NoTls};
use std::sync::Arc;
use support::Postgres;
use tokio_postgres::Config;

fn assert_no_tokio() {
    assert!(tokio::runtime::Handle::try_current().is_err());
}

fn tcp_config(port: u16) -> Config {
    let mut config = Config::new();
    config
        .host("127.0.0.1")
        .port(port)
        .user("postgres")
        .dbname("postgres")
        .connect_timeout(Duration::from_secs(10));
    config
}

#[numa_rt::test(max_procs = 2)]
async fn queries_round_trip_against_a_real_server() {
    assert_no_tokio();
    let Some(pg) = Postgres::start() else { return };
    let (client, connection) = connect(&tcp_config(pg.port), NoTls).await.unwrap();

    client
        .batch_execute("CREATE TABLE items (id INT PRIMARY KEY, name TEXT NOT NULL)")
        .await
        .unwrap();
    let insert = client
        .prepare("INSERT INTO items (id, name) VALUES ($1, $2)")
        .await
        .unwrap();
    for (id, name) in [(1, "one"), (2, "two"), (3, "three")] {
        assert_eq!(client.execute(&insert, &[&id, &name]).await.unwrap(), 1);
    }
    let rows = client
        .query(
            "SELECT id, name FROM items WHERE id >= $1 ORDER BY id",
            &[&2i32],
        )
        .await
        .unwrap();
    let got: Vec<(i32, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(got, [(2, "two".to_owned()), (3, "three".to_owned())]);

    // A server-side error comes back as an error, and the client goes on.
    let err = client.execute(&insert, &[&1i32, &"dup"]).await.unwrap_err();
    assert!(err.as_db_error().is_some(), "{err}");
    let one: i64 = client
        .query_one("SELECT count(*) FROM items", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(one, 3);

    // Dropping the client ends the connection task cleanly.
    drop(insert);
    drop(client);
    connection.await.unwrap().unwrap();
}

#[numa_rt::test(max_procs = 2)]
async fn many_concurrent_queries_share_one_connection() {
    assert_no_tokio();
    let Some(pg) = Postgres::start() else { return };
    let (client, _connection) = connect(&tcp_config(pg.port), NoTls).await.unwrap();
    let client = Arc::new(client);
    let mut tasks = Vec::new();
    for i in 0..200i64 {
        let client = client.clone();
        tasks.push(numa_rt::spawn(async move {
            assert_no_tokio();
            let row = client
                .query_one("SELECT $1::BIGINT * 2", &[&i])
                .await
                .unwrap();
            row.get::<_, i64>(0)
        }));
    }
    for (i, task) in tasks.into_iter().enumerate() {
        assert_eq!(task.await.unwrap(), i as i64 * 2);
    }
}

/// A long query cancelled from another task over a fresh connection: the
/// query fails with `query_canceled` and the client goes on.
#[numa_rt::test(max_procs = 2)]
async fn cancel_query_cancels_a_running_query() {
    assert_no_tokio();
    let Some(pg) = Postgres::start() else { return };
    let config = tcp_config(pg.port);
    let (client, _connection) = connect(&config, NoTls).await.unwrap();
    let client = Arc::new(client);
    let token = client.cancel_token();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let running = {
        let client = client.clone();
        numa_rt::spawn(async move {
            // The statement is sent before this task yields back here, and
            // the server runs it until cancelled.
            let query = client.batch_execute("SELECT pg_sleep(60)");
            let mut query = std::pin::pin!(query);
            assert!(futures::poll!(query.as_mut()).is_pending());
            started_tx.send(()).unwrap();
            query.await
        })
    };
    started_rx.await.unwrap();
    // Cancel once the server shows the query running (a cancel that came
    // before would find nothing to cancel), watched from a second session.
    let (watcher, _watching) = connect(&config, NoTls).await.unwrap();
    let start = Instant::now();
    loop {
        let active: i64 = watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE query = 'SELECT pg_sleep(60)' AND state = 'active'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if active == 1 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the query never started"
        );
        numa_rt::task::yield_now().await;
    }
    numa_rt_util::postgres::cancel_query(&token, &config, NoTls)
        .await
        .unwrap();
    let err = running.await.unwrap().unwrap_err();
    assert_eq!(
        err.code(),
        Some(&tokio_postgres::error::SqlState::QUERY_CANCELED),
        "{err}"
    );
    let n: i32 = client.query_one("SELECT 2", &[]).await.unwrap().get(0);
    assert_eq!(n, 2);
}

#[numa_rt::test]
async fn connects_over_the_unix_socket() {
    assert_no_tokio();
    let Some(pg) = Postgres::start() else { return };
    let mut config = Config::new();
    config
        .host_path(pg.socket_dir())
        .port(pg.port)
        .user("postgres")
        .dbname("postgres");
    let (client, _connection) = connect(&config, NoTls).await.unwrap();
    let row = client
        .query_one("SELECT 'over unix'::TEXT", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, &str>(0), "over unix");
}

#[numa_rt::test]
async fn tries_each_host_in_turn() {
    assert_no_tokio();
    let Some(pg) = Postgres::start() else { return };
    let refused = support::free_port();
    let config: Config = format!(
        "host=127.0.0.1,localhost,127.0.0.1 port={refused},{refused},{} user=postgres \
         keepalives_idle=30 tcp_user_timeout=10",
        pg.port
    )
    .parse()
    .unwrap();
    let (client, _connection) = connect(&config, NoTls).await.unwrap();
    let n: i32 = client.query_one("SELECT 1", &[]).await.unwrap().get(0);
    assert_eq!(n, 1);
}

#[numa_rt::test]
async fn a_refused_connection_is_an_error_naming_the_host() {
    assert_no_tokio();
    let port = support::free_port();
    let err = connect(&tcp_config(port), NoTls).await.unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains(&format!("127.0.0.1 port {port}")),
        "{message}"
    );
    assert_eq!(err.host(), Some(format!("127.0.0.1 port {port}").as_str()));
    assert!(!err.is_timeout(), "{message}");
}

/// A server that accepts the connection and never answers the startup
/// message: the connect timeout (on numa_rt's timer) must end the attempt.
#[numa_rt::test(start_paused = true)]
async fn connect_timeout_ends_a_silent_server_with_an_error() {
    assert_no_tokio();
    let listener = numa_rt::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let silent = numa_rt::spawn(async move {
        let (held, _) = listener.accept().await.unwrap();
        std::future::pending::<()>().await;
        drop(held);
    });
    let mut config = tcp_config(port);
    config.connect_timeout(Duration::from_secs(3));
    let start = Instant::now();
    let err = connect(&config, NoTls).await.unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(err.to_string().contains("timed out"), "{err}");
    assert_eq!(start.elapsed(), Duration::from_secs(3));
    silent.abort();
}

/// A non-routable address: the SYN goes nowhere (or the network is
/// unreachable at once). Either way an error comes back, not a hang.
#[numa_rt::test]
async fn connect_to_a_blackhole_address_answers_with_an_error() {
    assert_no_tokio();
    let mut config = Config::new();
    config
        .hostaddr("10.255.255.1".parse().unwrap())
        .port(5432)
        .user("postgres")
        .connect_timeout(Duration::from_millis(300));
    let err = numa_rt::time::timeout(Duration::from_secs(30), connect(&config, NoTls))
        .await
        .expect("connect hung past its connect_timeout")
        .unwrap_err();
    assert!(err.to_string().contains("10.255.255.1"), "{err}");
}

#[numa_rt::test]
async fn a_config_without_hosts_is_an_error() {
    assert_no_tokio();
    let err = connect(&Config::new(), NoTls).await.unwrap_err();
    assert!(err.host().is_none());
    assert!(err.to_string().contains("no host"), "{err}");
}
