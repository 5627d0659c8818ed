use super::*;
use crate::input::tests::named;

fn endpoints() -> Named {
    named(Input::EtcdEndpoints)
}

#[test]
fn endpoints_parse_to_host_port() {
    let t = parse_endpoint(
        endpoints(),
        "https://10.0.0.11:2379",
        TargetKind::EtcdClient,
        true,
    )
    .unwrap();
    assert_eq!((t.endpoint.as_str(), t.tls), ("10.0.0.11:2379", true));
    let t = parse_endpoint(endpoints(), "10.0.0.11", TargetKind::EtcdClient, true).unwrap();
    assert_eq!(t.endpoint, "10.0.0.11:2379");
    let t = parse_endpoint(
        endpoints(),
        "http://[fd00::1]:2380",
        TargetKind::EtcdPeer,
        true,
    )
    .unwrap();
    assert_eq!((t.endpoint.as_str(), t.tls), ("[fd00::1]:2380", false));
    let t = parse_endpoint(
        endpoints(),
        "api.example.com:6443",
        TargetKind::ApiServer,
        true,
    )
    .unwrap();
    assert_eq!(t.host, "api.example.com");
}

#[test]
fn malformed_endpoints_name_the_flag() {
    for bad in [
        "https://",
        "ftp://10.0.0.1:21",
        "https://10.0.0.1:99999",
        "https://h:1/path",
        "https://u:p@h:1",
    ] {
        let e = parse_endpoint(endpoints(), bad, TargetKind::EtcdClient, true).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("--etcd-endpoints"), "{bad}: {msg}");
        assert!(!msg.contains("u:p@"), "credentials leaked: {msg}");
    }
}
