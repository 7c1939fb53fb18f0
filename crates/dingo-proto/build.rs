//! Compiles `proto/dingo.proto` and `proto/planner.proto` with the pure-Rust `protox` front end, so no
//! system `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/dingo.proto");
    println!("cargo:rerun-if-changed=proto/planner.proto");
    let fds = protox::compile(["dingo.proto", "planner.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .codec_path("crate::codec::DingoCodec")
        .bytes(".dingo.v1.WriteChunkRequest.data")
        .bytes(".dingo.v1.ReadChunkReply.data")
        .compile_fds(fds)?;
    Ok(())
}
