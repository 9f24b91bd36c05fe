//! Generates the gRPC service from proto/helloworld.proto with tonic's code
//! generator. The .proto is parsed by protox (a protobuf compiler in Rust),
//! so no `protoc` needs to be installed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/helloworld.proto");
    let fds = protox::compile(["proto/helloworld.proto"], ["proto"])?;
    tonic_prost_build::configure().compile_fds(fds)?;
    Ok(())
}
