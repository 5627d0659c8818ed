//! Kubernetes error answers: status code, `Retry-After` and the `Status` body, through the
//! retry classifier. Input: 2 bytes status, 1 byte header length, the header, then the body.
#![no_main]
use joinguard_core::retry::{ApiCallError, ApiError, Classify};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let status = u16::from_be_bytes([data[0], data[1]]);
    let hlen = usize::from(data[2]).min(data.len() - 3);
    let header = std::str::from_utf8(&data[3..3 + hlen]).ok();
    let body = &data[3 + hlen..];
    let e = ApiError::from_response(status, header, body);
    let _ = e.status_line();
    let _ = e.to_string();
    let call = ApiCallError::Status(e);
    let class = call.classify();
    let _ = format!("{class:?}");
    if let Some(h) = header {
        let _ = joinguard_core::retry::parse_retry_after(h, std::time::SystemTime::now());
    }
    // etcd's gRPC errors go through the same classifier.
    if let Ok(msg) = std::str::from_utf8(body) {
        let s = tonic::Status::new(tonic::Code::from(i32::from(data[0] % 20)), msg);
        let _ = joinguard_core::retry::classify_grpc(&s);
    }
});
