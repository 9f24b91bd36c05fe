//! A websocket echo server and client on numa_rt, with async-tungstenite
//! over numa_rt's futures-io `TcpStream` (no tokio involved).
//!
//! ```text
//! cargo run --example websocket                 # server and client, then exit
//! cargo run --example websocket -- serve 9001   # only the server
//! ```
//!
//! Without arguments it starts the echo server on a free loopback port,
//! connects a client, sends a few messages, checks every echo, closes the
//! connection and exits (within ten seconds).

use std::time::Duration;

use async_tungstenite::tungstenite::Message;
use futures::StreamExt;
use numa_rt::net::{TcpListener, TcpStream};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Echoes text and binary messages until the client closes.
async fn echo(stream: TcpStream) -> Result<(), Error> {
    let mut ws = async_tungstenite::accept_async(stream).await?;
    while let Some(msg) = ws.next().await {
        let msg = msg?;
        if msg.is_text() || msg.is_binary() {
            ws.send(msg).await?;
        }
        // Pings are answered and closes acknowledged by tungstenite itself.
    }
    Ok(())
}

async fn serve(listener: TcpListener) {
    while let Ok((stream, peer)) = listener.accept().await {
        numa_rt::spawn(async move {
            if let Err(e) = echo(stream).await {
                eprintln!("{peer}: {e}");
            }
        });
    }
}

async fn client(port: u16) -> Result<(), Error> {
    let stream = TcpStream::connect(("127.0.0.1", port)).await?;
    let url = format!("ws://127.0.0.1:{port}/echo");
    let (mut ws, response) = async_tungstenite::client_async(url.as_str(), stream).await?;
    println!("connected to {url}: {}", response.status());
    for text in ["hello", "from", "numa_rt"] {
        ws.send(Message::text(text)).await?;
        match ws.next().await {
            Some(Ok(Message::Text(echoed))) if echoed.as_str() == text => {
                println!("echoed {:?}", echoed.as_str())
            }
            other => return Err(format!("expected the echo of {text:?}, got {other:?}").into()),
        }
    }
    ws.send(Message::binary(vec![1u8, 2, 3])).await?;
    match ws.next().await {
        Some(Ok(Message::Binary(b))) if b.as_ref() == [1, 2, 3] => println!("echoed {b:?}"),
        other => return Err(format!("expected the binary echo, got {other:?}").into()),
    }
    ws.close(None).await?;
    // Drain until the server acknowledges the close.
    while let Some(msg) = ws.next().await {
        msg?;
    }
    println!("closed");
    Ok(())
}

#[numa_rt::main]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() == Some("serve") {
        let port: u16 = match args.next() {
            Some(p) => p.parse().map_err(|e| format!("port {p:?}: {e}"))?,
            None => 9001,
        };
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        println!("websocket echo on ws://{}", listener.local_addr()?);
        serve(listener).await;
        return Ok(());
    }
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    numa_rt::spawn(serve(listener));
    numa_rt::time::timeout(Duration::from_secs(10), client(port))
        .await
        .map_err(|_| "websocket: gave up after 10 s")?
}
