//! Calling any RPC by its path, whatever its messages: for checks that must
//! hold for every method of a service (authentication refuses each one
//! before its handler runs), over [`crate::rpc_paths`].

use crate::codec::DingoCodec;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;
use tonic::{Code, Request};

/// Calls the RPC at `path` (`/package.Service/Method`) with one empty
/// request message (every field at its default), sending `authorization`
/// metadata if given, and returns the status code it ends with (`Ok` if the
/// call succeeded).
pub async fn call_with_empty_request(channel: Channel, path: &'static str, authorization: Option<&str>) -> Code {
    let mut grpc = tonic::client::Grpc::new(channel);
    if let Err(e) = grpc.ready().await {
        return tonic::Status::from_error(e.into()).code();
    }
    let mut request = Request::new(());
    if let Some(value) = authorization {
        match value.parse() {
            Ok(value) => {
                request.metadata_mut().insert("authorization", value);
            }
            Err(_) => return Code::InvalidArgument,
        }
    }
    let codec = DingoCodec::<(), ()>::default();
    match grpc.unary(request, PathAndQuery::from_static(path), codec).await {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    }
}

/// For every RPC of `service`: the codes it ends with when called without
/// credentials, with the `authorization` value `wrong`, and with `right`.
pub async fn codes_by_credentials(
    channel: Channel,
    service: &str,
    wrong: &str,
    right: &str,
) -> Vec<(&'static str, [Code; 3])> {
    let mut codes = Vec::new();
    for path in crate::rpc_paths(service) {
        let mut by = [Code::Ok; 3];
        for (code, authorization) in by.iter_mut().zip([None, Some(wrong), Some(right)]) {
            *code = call_with_empty_request(channel.clone(), path, authorization).await;
        }
        codes.push((path, by));
    }
    codes
}
