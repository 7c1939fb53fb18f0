//! `authorization: Bearer <token>` metadata: reading it on the server,
//! checking it against the cluster secret, attaching it on the caller.

use crate::ClusterSecret;
use tonic::metadata::{Ascii, MetadataMap, MetadataValue};
use tonic::{Request, Status};

/// The token of a call's `authorization: Bearer <token>` metadata;
/// `credential` names what the token should be, for the refusal. The
/// scheme is case-insensitive (RFC 7235 §2.1): gRPC libraries' per-call
/// credentials send `bearer` as often as `Bearer`.
pub fn bearer_token<'a>(metadata: &'a MetadataMap, credential: &str) -> Result<&'a str, Status> {
    let value = metadata
        .get("authorization")
        .ok_or_else(|| Status::unauthenticated(format!("missing `authorization: Bearer <{credential}>` metadata")))?;
    value
        .to_str()
        .ok()
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .ok_or_else(|| Status::unauthenticated(format!("the authorization metadata must be `Bearer <{credential}>`")))
}

/// The server-side check of the storage services: every call must carry
/// the cluster secret, or it is refused with `UNAUTHENTICATED` before any
/// handler runs.
#[derive(Clone, Debug)]
pub struct RequireSecret {
    secret: ClusterSecret,
}

impl RequireSecret {
    pub fn new(secret: ClusterSecret) -> RequireSecret {
        RequireSecret { secret }
    }
}

impl tonic::service::Interceptor for RequireSecret {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        let token = bearer_token(req.metadata(), "cluster secret").map_err(|s| {
            Status::unauthenticated(format!("this storage service requires the cluster secret: {}", s.message()))
        })?;
        if !self.secret.matches(token) {
            return Err(Status::unauthenticated(
                "wrong cluster secret: the `authorization: Bearer` token is not this cluster's secret",
            ));
        }
        Ok(req)
    }
}

/// The caller side: attaches `authorization: Bearer <token>` to every call
/// of a client built with it (`XClient::with_interceptor`).
#[derive(Clone, Debug)]
pub struct BearerCredentials {
    header: MetadataValue<Ascii>,
}

impl BearerCredentials {
    /// Credentials sending `token`; `None` if it cannot be a header value
    /// (not visible ASCII).
    pub fn new(token: &str) -> Option<BearerCredentials> {
        format!("Bearer {token}").parse().ok().map(|header| BearerCredentials { header })
    }

    /// Credentials sending the cluster secret (always a valid header value).
    pub fn cluster(secret: &ClusterSecret) -> BearerCredentials {
        BearerCredentials::new(secret.expose()).expect("a ClusterSecret is visible ASCII")
    }
}

impl tonic::service::Interceptor for BearerCredentials {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        req.metadata_mut().insert("authorization", self.header.clone());
        Ok(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::service::Interceptor;

    fn call(check: &mut RequireSecret, header: Option<&str>) -> Result<(), Status> {
        let mut req = Request::new(());
        if let Some(h) = header {
            req.metadata_mut().insert("authorization", h.parse().unwrap());
        }
        check.call(req).map(drop)
    }

    #[test]
    fn only_the_cluster_secret_passes_and_refusals_say_why() {
        let secret = ClusterSecret::new("0123456789abcdef", "test").unwrap();
        let mut check = RequireSecret::new(secret.clone());
        for ok in ["Bearer 0123456789abcdef", "bearer 0123456789abcdef", "BEARER  0123456789abcdef "] {
            call(&mut check, Some(ok)).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        let missing = call(&mut check, None).unwrap_err();
        assert_eq!(missing.code(), tonic::Code::Unauthenticated);
        assert!(missing.message().contains("requires the cluster secret") && missing.message().contains("missing"));
        let malformed = call(&mut check, Some("Basic 0123456789abcdef")).unwrap_err();
        assert!(malformed.message().contains("must be `Bearer <cluster secret>`"), "{}", malformed.message());
        for wrong in ["Bearer 0123456789abcde", "Bearer 0123456789abcdeg", "Bearer ", "0123456789abcdef"] {
            let e = call(&mut check, Some(wrong)).unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{wrong}");
        }
        let e = call(&mut check, Some("Bearer 0123456789abcdeX")).unwrap_err();
        assert!(e.message().contains("wrong cluster secret"), "{}", e.message());

        // What the caller side attaches passes the check.
        let req = BearerCredentials::cluster(&secret).call(Request::new(())).unwrap();
        check.call(req).unwrap();
        assert!(BearerCredentials::new("line\nbreak").is_none());
    }
}
