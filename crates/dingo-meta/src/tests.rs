//! The service as a whole, over gRPC: credentials and TLS.

use super::*;
use dingo_auth::{BearerCredentials, ClusterSecret, ServerSecurity};
use dingo_proto::probe::codes_by_credentials;
use dingo_proto::v1::ClusterStatusRequest;
use dingo_proto::v1::meta_client::MetaClient;
use tonic::Code;
use tonic::transport::{Channel, Endpoint};

/// Starts the service on a free loopback port in `dir`; returns its
/// address. It stops when the test's runtime ends.
async fn start(dir: &std::path::Path, security: ServerSecurity) -> String {
    let cfg = config_file::MetaSection::default()
        .meta_config(dir.to_path_buf(), Some("127.0.0.1:0".parse().unwrap()), None)
        .unwrap();
    tokio::spawn(run(cfg, security, std::future::pending()));
    let addr_file = dir.join("meta.addr");
    for _ in 0..500 {
        if let Ok(text) = std::fs::read_to_string(&addr_file) {
            return text.trim().to_string();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the metadata service did not start");
}

fn plain(addr: &str) -> Channel {
    Endpoint::from_shared(format!("http://{addr}")).unwrap().connect_lazy()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rpc_is_refused_without_the_cluster_secret() {
    let dir = tempfile::tempdir().unwrap();
    let secret = ClusterSecret::generate().unwrap();
    let addr = start(dir.path(), ServerSecurity { secret: secret.clone(), tls: None }).await;
    let channel = plain(&addr);
    let right = format!("Bearer {}", secret.expose());
    let wrong = format!("Bearer {}", ClusterSecret::generate().unwrap().expose());
    let codes = codes_by_credentials(channel.clone(), "dingo.v1.Meta", &wrong, &right).await;
    assert!(codes.len() >= 20, "every RPC of the service: {codes:?}");
    // Without the secret every call is refused; with it every call reaches
    // its handler (which may refuse the empty request on its merits)...
    for (path, [none, wrong, right]) in codes {
        assert_eq!((none, wrong), (Code::Unauthenticated, Code::Unauthenticated), "{path}");
        assert_ne!(right, Code::Unauthenticated, "{path} with the secret");
    }
    // ... and a real call succeeds.
    let mut meta = MetaClient::with_interceptor(channel, BearerCredentials::cluster(&secret));
    meta.cluster_status(ClusterStatusRequest {}).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tls_only_tls_clients_get_through() {
    let dir = tempfile::tempdir().unwrap();
    let paths =
        dingo_tls::DevCertificates::generate(&["127.0.0.1".into()]).unwrap().write(&dir.path().join("tls")).unwrap();
    let secret = ClusterSecret::generate().unwrap();
    let addr = start(dir.path(), ServerSecurity { secret: secret.clone(), tls: Some(paths.server.clone()) }).await;
    let access = dingo_auth::ClusterAccess::new(secret.clone(), Some(&paths.ca)).unwrap();
    let mut secure = MetaClient::with_interceptor(access.endpoint(&addr).unwrap().connect_lazy(), access.credentials());
    secure.cluster_status(ClusterStatusRequest {}).await.unwrap();
    let mut clear = MetaClient::with_interceptor(plain(&addr), BearerCredentials::cluster(&secret));
    let refused = clear.cluster_status(ClusterStatusRequest {}).await.unwrap_err();
    assert_ne!(refused.code(), Code::Ok);
}
