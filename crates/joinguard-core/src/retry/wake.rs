//! Wake-on-connect: end a backoff sleep as soon as a blacked-out endpoint accepts TCP again.
//!
//! This file owns the cheap TCP-connect watcher the runner races against its sleep after a
//! connection-class failure. It must not send any request: it connects and closes at once. It
//! wakes only on a down-to-up transition it saw itself during this sleep, so an endpoint that
//! accepts TCP but then resets (a load balancer with no healthy backend) cannot turn the backoff
//! into a tight loop.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;

/// Time between connect probes. 150 ms bounds the wake latency near the retry layer's rule "do not wait for
/// the backoff step" intent while costing at most ~7 SYNs a second.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(150);

/// One probe's connect timeout. A loopback or LAN SYN/SYN-ACK takes well under a millisecond; a
/// blackout (packets dropped) shows as this timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_millis(200);

/// The watcher for one endpoint (the API server, its load balancer, or an etcd member).
#[derive(Clone, Debug)]
pub struct WakeOnConnect {
    addr: SocketAddr,
    interval: Duration,
    connect_timeout: Duration,
}

/// How a watched sleep ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sleep {
    /// The full step elapsed.
    Full,
    /// The endpoint came back; the sleep ended early after this long.
    Woken(Duration),
}

impl WakeOnConnect {
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            interval: DEFAULT_INTERVAL,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        }
    }

    /// Per-probe connect timeout; clamped to 10 ms ..= 2 s.
    pub fn with_connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = t.clamp(Duration::from_millis(10), Duration::from_secs(2));
        self
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sleeps for `step`, or less if the endpoint goes from refusing (or not answering) to
    /// accepting during it. The watcher's probe count is bounded by `step / interval + 1`.
    pub async fn sleep(&self, step: Duration) -> Sleep {
        let start = Instant::now();
        tokio::select! {
            _ = tokio::time::sleep(step) => Sleep::Full,
            () = self.watch(start + step) => Sleep::Woken(start.elapsed()),
        }
    }

    /// Waits `grace`, then resolves when the endpoint is seen to go from not answering to
    /// accepting before `until`. Pends forever when the endpoint answers the first probe (the
    /// attempt is slow for another reason, e.g. a stalled server) or never comes back.
    pub async fn outage_over(&self, grace: Duration, until: Instant) {
        tokio::time::sleep(grace).await;
        self.watch(until).await
    }

    /// Resolves when a connect succeeds after at least one failed; pends forever otherwise (the
    /// sleep arm of the select ends it).
    async fn watch(&self, until: Instant) {
        let mut seen_down = false;
        while Instant::now() < until {
            let probe_start = Instant::now();
            let up = matches!(
                tokio::time::timeout(self.connect_timeout, TcpStream::connect(self.addr)).await,
                Ok(Ok(_))
            );
            if up && seen_down {
                return;
            }
            if up {
                // Up on the first look: the failure was not a blackout of this endpoint. Stop
                // probing and let the backoff step run in full.
                break;
            }
            seen_down = true;
            tokio::time::sleep_until(probe_start + self.interval).await;
        }
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    async fn free_port() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap()
        // Dropped here: the port is free (and refuses) until rebound.
    }

    #[tokio::test]
    async fn wakes_when_listener_appears() {
        let addr = free_port().await;
        let w = WakeOnConnect::new(addr);
        let opener = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(400)).await;
            TcpListener::bind(addr).await.unwrap()
        });
        let t = std::time::Instant::now();
        let out = w.sleep(Duration::from_secs(5)).await;
        assert!(matches!(out, Sleep::Woken(_)), "{out:?}");
        assert!(
            t.elapsed() < Duration::from_millis(1000),
            "{:?}",
            t.elapsed()
        );
        drop(opener.await.unwrap());
    }

    #[tokio::test]
    async fn an_outage_during_an_attempt_ends_when_the_endpoint_is_back() {
        let addr = free_port().await;
        let w = WakeOnConnect::new(addr);
        let opener = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            TcpListener::bind(addr).await.unwrap()
        });
        let t = std::time::Instant::now();
        let until = Instant::now() + Duration::from_secs(5);
        tokio::time::timeout(
            Duration::from_secs(3),
            w.outage_over(Duration::from_millis(100), until),
        )
        .await
        .expect("resolves once the listener is back");
        assert!(t.elapsed() >= Duration::from_millis(500));
        drop(opener.await.unwrap());

        // Up at the first look: a slow attempt for another reason is left alone.
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let w = WakeOnConnect::new(l.local_addr().unwrap());
        let until = Instant::now() + Duration::from_secs(5);
        let r = tokio::time::timeout(
            Duration::from_millis(600),
            w.outage_over(Duration::from_millis(100), until),
        )
        .await;
        assert!(r.is_err(), "must not resolve while the endpoint stays up");
    }

    #[tokio::test]
    async fn no_wake_when_up_from_the_start() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let w = WakeOnConnect::new(l.local_addr().unwrap());
        let t = std::time::Instant::now();
        assert_eq!(w.sleep(Duration::from_millis(300)).await, Sleep::Full);
        assert!(t.elapsed() >= Duration::from_millis(300));
    }
}
