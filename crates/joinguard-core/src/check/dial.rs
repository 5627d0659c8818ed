//! `EtcdDialTime`: how long it took to connect to each etcd member (TCP, TLS, HTTP/2) and read
//! its first Status, against kubeadm's blocking 2 s dial.
//!
//! kubeadm dials etcd once before member add and once before promote, each time blocking for up
//! to `etcdTimeout` (2 s) and syncing the member list (`cmd/kubeadm/app/util/etcd/etcd.go`); the
//! dial is outside the retry loop, so one slow dial fails the join ("context deadline exceeded"
//! 2 s after "Adding etcd member", CAPZ #5687). The join sweep (`docs/thresholds.md`) found this
//! to be where long paths first break a join: the latency checks see slow round trips, this check
//! sees the handful of them a dial needs.

use super::etcd_health::EtcdMemberHealth;
use super::model::{CheckName, CheckResult, Status};
use super::wording::{fmt_duration, fmt_ms};
use super::Checker;

impl Checker {
    /// One result per member that was dialled: ok, warning or error by the time the connection
    /// and the first Status took; an error when the port answered TCP but the connection did not
    /// complete at all. Members whose port never answered are `EtcdClientReachable` errors.
    pub(crate) fn etcd_dial_time(&self, members: &[EtcdMemberHealth]) -> Vec<CheckResult> {
        let t = &self.thresholds.etcd_dial_time;
        let budget = fmt_duration(self.thresholds.etcd_dial_budget);
        let consequence = format!(
            "kubeadm dials etcd once, with a {budget} deadline, before member add and again \
             before promote, so a dial this slow fails the join (\"context deadline exceeded\"). \
             Fix the path to this member"
        );
        let mut out = Vec::new();
        for m in members {
            let result = |status, message, measured: Option<f64>, threshold| CheckResult {
                name: CheckName::EtcdDialTime,
                target: m.endpoint.clone(),
                status,
                message,
                measured,
                threshold,
            };
            let head = format!("etcd member {}", m.client_label());
            if let Some(d) = m.dial {
                let ms = d.as_secs_f64() * 1000.0;
                let of = if m.dials > 1 {
                    format!(" (the fastest of {} dials)", m.dials)
                } else {
                    String::new()
                };
                let took = format!(
                    "connected (TCP, TLS, HTTP/2) and answered Status in {}{of}",
                    fmt_ms(ms)
                );
                let (status, limit, basis, verb, tail) = if ms > t.error {
                    (
                        Status::Error,
                        t.error,
                        &t.error_basis,
                        "above",
                        consequence.as_str(),
                    )
                } else if ms > t.warn {
                    let tail = "the join's dials have little margin";
                    (Status::Warning, t.warn, &t.warn_basis, "above", tail)
                } else {
                    (Status::Ok, t.warn, &t.warn_basis, "within", "")
                };
                let tail = if tail.is_empty() {
                    String::new()
                } else {
                    format!("; {tail}")
                };
                out.push(result(
                    status,
                    format!("{head}: {took}, {verb} {} ({basis}){tail}", fmt_ms(limit)),
                    Some(ms),
                    Some(limit),
                ));
            } else if let (Some(tcp), Some(why)) = (m.dial_tcp, &m.failure) {
                out.push(result(
                    Status::Error,
                    format!(
                        "{head}: the port answers (TCP connect in {}), but the etcd connection \
                         over it did not complete ({why}); {consequence}",
                        fmt_duration(tcp)
                    ),
                    None,
                    Some(t.error),
                ));
            }
        }
        out
    }
}
