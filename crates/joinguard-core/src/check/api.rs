//! `APIServerReady`: whether `/readyz` answered ok through the API endpoint.

use super::model::{CheckName, CheckResult, Status};
use super::wording::describe;
use super::Checker;
use crate::probe::ProbeFailure;
use crate::stats::Summary;

impl Checker {
    /// `APIServerReady`: `/readyz` answered ok at least once. A stream with some not-ready
    /// answers is a warning (a load balancer in rotation, a restarting server).
    pub(crate) fn api_server_ready(&self, s: &Summary) -> CheckResult {
        let ok = s.samples - s.lost;
        let why = s
            .last_failure
            .as_ref()
            .map_or_else(|| "no answer".to_string(), ToString::to_string);
        let (status, message) = if ok == 0 {
            (
                Status::Error,
                format!(
                    "{} is not ready: {why} ({} of {} /readyz probes failed); kubeadm join would \
                     fail at its first API call. Check the API server and the load balancer",
                    describe(&s.target),
                    s.lost,
                    s.samples
                ),
            )
        } else if s.lost > 0 && matches!(s.last_failure, Some(ProbeFailure::Protocol(_))) {
            (
                Status::Warning,
                format!(
                    "{}: /readyz failed in {} of {} probes (last: {why}); some backends may not \
                     be ready",
                    describe(&s.target),
                    s.lost,
                    s.samples
                ),
            )
        } else {
            (
                Status::Ok,
                format!(
                    "{}: /readyz answered ok in {ok} of {} probes",
                    describe(&s.target),
                    s.samples
                ),
            )
        };
        CheckResult {
            name: CheckName::ApiServerReady,
            target: s.target.endpoint.clone(),
            status,
            message,
            measured: None,
            threshold: None,
        }
    }
}
