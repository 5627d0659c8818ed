//! ICMP echo series on a real lab link: a queue stall is latency, not loss.
//!
//! Needs root and /dev/net/tun, like every lab test.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use joinguard_core::probe::icmp::Pinger;
use netlab::{Impairment, Lab};

fn ms(d: u64) -> Duration {
    Duration::from_millis(d)
}

#[test]
fn replies_held_past_their_batch_count_once_they_arrive() {
    let lab = Lab::builder().hosts(["a", "b"]).build().expect("lab");
    let (a, b) = (lab.host("a"), lab.host("b"));
    // 300 ms from b back to a: every reply misses its batch's 20 ms wait.
    lab.net().set(b, a, Impairment::delay(ms(300)));
    let dst = IpAddr::V4(b.addr());
    let (after_batch, after_next, after_drain, outstanding) = a
        .block_on(move || async move {
            let mut p = Pinger::open(dst).expect("raw socket (root)");
            p.series(10, ms(2), ms(20)).await;
            let after_batch = p.samples();
            let outstanding = p.outstanding();
            // The next batch's wait is long enough for the first batch's replies.
            p.series(10, ms(2), ms(400)).await;
            let after_next = p.samples();
            p.drain(Instant::now() + ms(2000)).await;
            (after_batch, after_next, p.samples(), outstanding)
        })
        .expect("run in host a");
    assert_eq!(after_batch.len(), 10);
    assert!(
        after_batch.iter().all(|s| s.result.is_err()),
        "{after_batch:?}"
    );
    assert_eq!(
        outstanding, 10,
        "unanswered, but younger than the late limit"
    );
    assert_eq!(after_next.len(), 20);
    let late: Vec<Duration> = after_next[..10]
        .iter()
        .map(|s| *s.result.as_ref().expect("a late reply counts"))
        .collect();
    assert!(late.iter().all(|d| *d >= ms(300)), "{late:?}");
    assert!(
        after_drain.iter().all(|s| s.result.is_ok()),
        "{after_drain:?}"
    );
}

#[test]
fn a_reply_later_than_the_late_limit_is_lost_and_drain_stops_there() {
    let lab = Lab::builder().hosts(["a", "b"]).build().expect("lab");
    let (a, b) = (lab.host("a"), lab.host("b"));
    lab.net().set(b, a, Impairment::delay(ms(400)));
    let dst = IpAddr::V4(b.addr());
    let (samples, drained_in, outstanding) = a
        .block_on(move || async move {
            let mut p = Pinger::open(dst).expect("raw socket (root)");
            p.set_late_limit(ms(150));
            p.series(5, ms(2), ms(10)).await;
            let t = Instant::now();
            p.drain(t + ms(5000)).await;
            let drained_in = t.elapsed();
            // Let the replies arrive: they must not be counted.
            tokio::time::sleep(ms(500)).await;
            p.drain(Instant::now() + ms(50)).await;
            (p.samples(), drained_in, p.outstanding())
        })
        .expect("run in host a");
    assert!(samples.iter().all(|s| s.result.is_err()), "{samples:?}");
    assert_eq!(outstanding, 0);
    assert!(
        drained_in < ms(1000),
        "drain returns when the last echo passes the late limit, took {drained_in:?}"
    );
}
