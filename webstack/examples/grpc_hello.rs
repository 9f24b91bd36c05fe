//! tonic's hello world on numa_rt: the generated server served by
//! `numa_rt::serve`, the generated client over `numa_rt::tonic::Channel`.
//!
//! ```text
//! cargo run -p numa_rt_webstack --example grpc_hello            # serve, call itself, exit
//! cargo run -p numa_rt_webstack --example grpc_hello -- serve 50051
//! ```

use std::time::Duration;

use numa_rt_webstack::greeter::greeter_client::GreeterClient;
use numa_rt_webstack::greeter::greeter_server::GreeterServer;
use numa_rt_webstack::greeter::HelloRequest;
use numa_rt_webstack::MyGreeter;

type Error = Box<dyn std::error::Error + Send + Sync>;

#[numa_rt::main]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let serve_only = args.next().as_deref() == Some("serve");
    let port: u16 = match args.next() {
        Some(p) => p.parse().map_err(|e| format!("port {p:?}: {e}"))?,
        None => 0,
    };
    let listener = numa_rt::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    let routes = tonic::service::Routes::new(GreeterServer::new(MyGreeter));
    let server = numa_rt::serve(listener, routes);
    if serve_only {
        println!("gRPC Greeter on {addr}");
        return Ok(server.await?);
    }
    numa_rt::spawn(async move { server.await });

    let channel = numa_rt::tonic::Endpoint::from_shared(format!("http://{addr}"))?
        .timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(2))
        .connect()
        .await?;
    let mut client = GreeterClient::new(channel);
    for name in ["numa_rt", "tonic"] {
        let reply = client
            .say_hello(HelloRequest {
                name: name.into(),
                delay_ms: 0,
            })
            .await?;
        println!("{}", reply.into_inner().message);
    }
    Ok(())
}
