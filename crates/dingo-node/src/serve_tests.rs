//! The `Node` service as served over gRPC: credentials.

use super::*;
use dingo_auth::ClusterSecret;
use dingo_proto::probe::codes_by_credentials;
use dingo_proto::v1::NodeStatsRequest;
use dingo_proto::v1::node_client::NodeClient;
use tonic::Code;
use tonic::transport::Endpoint;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rpc_is_refused_without_the_cluster_secret() {
    let dir = tempfile::tempdir().unwrap();
    let spec = DiskSpec { path: dir.path().join("d0"), capacity: None, hdd: None, io: IoSettings::default() };
    let store = Arc::new(Store::open(&[spec], 0, 0).unwrap());
    store.disks[0].set_id(DiskId(0));
    let secret = ClusterSecret::generate().unwrap();
    let security = ServerSecurity { secret: secret.clone(), tls: None };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = service::NodeService { store, fault_injection: true };
    let server = security.server(addr, "node").unwrap();
    tokio::spawn(async move { serve(server, listener, service, &security, std::future::pending()).await });

    let channel = Endpoint::from_shared(format!("http://{addr}")).unwrap().connect_lazy();
    let right = format!("Bearer {}", secret.expose());
    let wrong = format!("Bearer {}", ClusterSecret::generate().unwrap().expose());
    let codes = codes_by_credentials(channel.clone(), "dingo.v1.Node", &wrong, &right).await;
    assert!(codes.len() >= 8, "every RPC of the service: {codes:?}");
    // Without the secret every call is refused; with it every call reaches
    // its handler (which may refuse the empty request on its merits)...
    for (path, [none, wrong, right]) in codes {
        assert_eq!((none, wrong), (Code::Unauthenticated, Code::Unauthenticated), "{path}");
        assert_ne!(right, Code::Unauthenticated, "{path} with the secret");
    }
    // ... and a real call succeeds.
    let mut node = NodeClient::with_interceptor(channel, BearerCredentials::cluster(&secret));
    node.node_stats(NodeStatsRequest {}).await.unwrap();
}

/// A metadata service killed during the registration call (the connection
/// breaks mid-request) is unreachable, not a refusal: the node keeps
/// trying. Found by `dingo chaos`, where such a node exited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_survives_a_metadata_service_dying_mid_call() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    tokio::spawn(async move {
        // Takes each connection's first bytes (the request on its way),
        // then drops it: a crash mid-call.
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buf = [0u8; 256];
            let _ = socket.read(&mut buf).await;
            seen.fetch_add(1, Ordering::Relaxed);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let spec = DiskSpec { path: dir.path().join("d0"), capacity: None, hdd: None, io: IoSettings::default() };
    let store = Store::open(&[spec], 0, 0).unwrap();
    let access = dingo_auth::ClusterAccess::new(ClusterSecret::generate().unwrap(), None).unwrap();
    let meta = MetaClient::with_interceptor(access.endpoint(&addr).unwrap().connect_lazy(), access.credentials());
    let outcome = tokio::time::timeout(Duration::from_secs(3), register(&meta, &addr, "127.0.0.1:1", &store)).await;
    assert!(outcome.is_err(), "registration gave up: {:?}", outcome.map(|r| r.map_err(|e| e.to_string())));
    assert!(calls.load(Ordering::Relaxed) >= 2, "the node tried again");
}

#[test]
fn only_unreachable_services_are_retried() {
    assert!(meta_unreachable(&tonic::Status::unavailable("connection refused")));
    assert!(!meta_unreachable(&tonic::Status::unknown("a handler's own unknown error")));
    assert!(!meta_unreachable(&tonic::Status::invalid_argument("no disks")));
    assert!(!meta_unreachable(&tonic::Status::unauthenticated("wrong secret")));
}
