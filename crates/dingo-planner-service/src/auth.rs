//! Token authentication: every call carries `authorization: Bearer <token>`;
//! the token names a task client from the config, or the administrator.

use crate::config::ServiceConfig;
use std::sync::Arc;
use subtle::ConstantTimeEq;
use tonic::{Request, Status};

/// Who is calling, put into each request's extensions by [`Auth`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// A task client, by its configured name.
    Client(Arc<str>),
    Admin,
}

impl Caller {
    /// The caller of a request that passed [`Auth`].
    pub(crate) fn of<T>(req: &Request<T>) -> Result<Caller, Status> {
        req.extensions().get::<Caller>().cloned().ok_or_else(|| Status::unauthenticated("no caller identity"))
    }

    /// The task client's name; the admin token is not a task client.
    pub(crate) fn client(&self) -> Result<&str, Status> {
        match self {
            Caller::Client(name) => Ok(name),
            Caller::Admin => Err(Status::permission_denied(
                "the admin token is not a task client; use a client token from the planner's config",
            )),
        }
    }
}

/// The interceptor that checks tokens.
#[derive(Clone)]
pub struct Auth {
    tokens: Arc<Vec<(String, Caller)>>,
}

impl Auth {
    pub fn new(config: &ServiceConfig) -> Auth {
        let mut tokens: Vec<(String, Caller)> =
            config.clients.iter().map(|c| (c.token.clone(), Caller::Client(c.name.as_str().into()))).collect();
        tokens.push((config.admin_token.clone(), Caller::Admin));
        Auth { tokens: Arc::new(tokens) }
    }

    /// The caller `token` names. Every configured token is compared, each
    /// in constant time, so the time taken does not tell an attacker how
    /// much of a guess was right (only a token's length can show).
    fn caller(&self, token: &str) -> Option<Caller> {
        let mut found = None;
        for (known, caller) in self.tokens.iter() {
            if bool::from(known.as_bytes().ct_eq(token.as_bytes())) {
                found = Some(caller.clone());
            }
        }
        found
    }
}

impl tonic::service::Interceptor for Auth {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        let token = dingo_auth::bearer_token(req.metadata(), "token")?;
        let caller = self.caller(token).ok_or_else(|| Status::unauthenticated("unknown token"))?;
        req.extensions_mut().insert(caller);
        Ok(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClientEntry;
    use tonic::service::Interceptor;

    fn call(auth: &mut Auth, header: Option<&str>) -> Result<Caller, Status> {
        let mut req = Request::new(());
        if let Some(h) = header {
            req.metadata_mut().insert("authorization", h.parse().unwrap());
        }
        let req = auth.call(req)?;
        Caller::of(&req)
    }

    #[test]
    fn tokens_map_to_callers_and_anything_else_is_refused() {
        let mut cfg = ServiceConfig::new("adm");
        cfg.clients.push(ClientEntry { name: "scrubber".into(), token: "s3cret".into() });
        let mut auth = Auth::new(&cfg);
        assert_eq!(call(&mut auth, Some("Bearer s3cret")).unwrap(), Caller::Client("scrubber".into()));
        assert_eq!(call(&mut auth, Some("Bearer adm")).unwrap(), Caller::Admin);
        assert_eq!(call(&mut auth, Some("bearer s3cret")).unwrap(), Caller::Client("scrubber".into()));
        assert_eq!(call(&mut auth, Some("BEARER adm")).unwrap(), Caller::Admin);
        let near_misses = [Some("Bearer s3cre"), Some("Bearer s3crets"), Some("Bearer ad")];
        for bad in [None, Some("s3cret"), Some("Bearer nope"), Some("Basic s3cret")].into_iter().chain(near_misses) {
            assert_eq!(call(&mut auth, bad).unwrap_err().code(), tonic::Code::Unauthenticated, "{bad:?}");
        }
        assert_eq!(Caller::Admin.client().unwrap_err().code(), tonic::Code::PermissionDenied);
    }
}
