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
