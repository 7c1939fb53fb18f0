//! Compiles `proto/dingo.proto` and `proto/planner.proto` with the pure-Rust `protox` front end, so no
//! system `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/dingo.proto");
    println!("cargo:rerun-if-changed=proto/planner.proto");
    let fds = protox::compile(["dingo.proto", "planner.proto"], ["proto"])?;
    let mut rpcs = Vec::new();
    for file in &fds.file {
        for service in &file.service {
            let full = format!("{}.{}", file.package(), service.name());
            rpcs.extend(service.method.iter().map(|m| (full.clone(), format!("/{full}/{}", m.name()))));
        }
    }
    write_rpc_paths(&rpcs)?;
    tonic_prost_build::configure()
        .codec_path("crate::codec::DingoCodec")
        .bytes(".dingo.v1.WriteChunkRequest.data")
        .bytes(".dingo.v1.ReadChunkReply.data")
        .compile_fds(fds)?;
    Ok(())
}

/// Writes `rpc_paths.rs`: each service's gRPC method paths, so that tests
/// can call every RPC a service has (today's and any added later).
fn write_rpc_paths(rpcs: &[(String, String)]) -> Result<(), Box<dyn std::error::Error>> {
    let mut out = String::from("/// `(service, method path)` of every RPC in the published protos.\n");
    out.push_str("pub const RPC_PATHS: &[(&str, &str)] = &[\n");
    for (service, path) in rpcs {
        out.push_str(&format!("    ({service:?}, {path:?}),\n"));
    }
    out.push_str("];\n");
    std::fs::write(std::path::Path::new(&std::env::var("OUT_DIR")?).join("rpc_paths.rs"), out)?;
    Ok(())
}
