//! etcd `Maintenance.Status` and `Cluster.MemberList` answers, decoded from protobuf bytes as
//! tonic would, then turned into the facts and the targets preflight uses.
#![no_main]
use etcd_client::proto::{PbMemberListResponse, PbStatusResponse};
use etcd_client::{MemberListResponse, StatusResponse};
use joinguard_core::probe::etcd::{MemberInfo, MemberStatus};
use libfuzzer_sys::fuzz_target;
use prost::Message as _;

fuzz_target!(|data: &[u8]| {
    if let Ok(pb) = PbStatusResponse::decode(data) {
        let s = MemberStatus::from_response(&StatusResponse(pb));
        let _ = serde_json::to_string(&s);
    }
    if let Ok(pb) = PbMemberListResponse::decode(data) {
        for m in MemberInfo::from_response(&MemberListResponse(pb)) {
            let (client, peer) = m.targets();
            for t in client.iter().chain(peer.iter()) {
                // A target from a member URL must print and round-trip as a URL.
                let url = t.url();
                let again = joinguard_core::target::Target::parse_url(t.kind, &url)
                    .unwrap_or_else(|e| panic!("{url}: {e}"));
                assert_eq!(again.endpoint, t.endpoint, "{url}");
            }
        }
    }
});
