//! Compiles `proto/dingo.proto` with the pure-Rust `protox` front end, so no
//! system `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/dingo.proto");
    let fds = protox::compile(["dingo.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .bytes(".dingo.v1.WriteChunkRequest.data")
        .bytes(".dingo.v1.ReadChunkReply.data")
        .compile_fds(fds)?;
    Ok(())
}
