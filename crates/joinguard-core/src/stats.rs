//! Statistics: turns the samples of one (target, probe) into a [`Summary`].
//!
//! This module owns the definitions of every figure a check judges: nearest-rank quantiles, the
//! trimmed ("robust") p99 and jitter, and the Wilson bound on loss. It must not judge (that is
//! `check`), decide how many samples to take (`sampling`) or format anything (`report`). It does
//! no I/O.
//!
//! The rule it serves (the checks' thresholds, docs/preflight.md): a single outlier never fails a check, and a real
//! degradation is never averaged away. So checks never use a mean of RTTs, and never the raw
//! maximum: they use high quantiles after discarding the top tenth of the samples (at least one).
//! One spike is discarded; a shift that affects a fifth of the samples is not.
//! The definitions are documented for operators in `docs/preflight.md`.

use std::time::Duration;

use serde::Serialize;

use crate::sample::{ProbeFailure, ProbeKind, Sample};
use crate::target::Target;

/// How many of the highest values the robust figures discard out of `n`: a tenth, at least one,
/// and never all of them.
///
/// A tenth, not a hundredth: at 1% packet loss each way about 2% of request/response samples wait
/// for a TCP retransmission (up to hundreds of ms). With the sampler's 60-sample cap and only one
/// discarded, two such samples (probability about 0.34) would lift the "p99" past the
/// peer-latency error limit, and a healthy link with 1% loss must give no false errors.
/// Discarding a tenth needs seven retransmissions among 60 samples (probability about 0.0003)
/// and still shows a shift that affects 20% of the samples.
pub(crate) fn trim_count(n: usize) -> usize {
    if n < 2 {
        return 0;
    }
    (n / 10).clamp(1, n - 1)
}

/// How many of the highest values to discard out of `n` when the path loses round trips as
/// `loss` measured them (the host's ICMP echo stream, which `PacketLoss` judges on its own).
///
/// A request/response on a kept-alive TCP connection (the peer probe, Status, a quorum read) is
/// two segments, as an echo is, so about the echo loss ratio `q` of the samples wait for a
/// retransmission: at least the 200 ms minimum RTO, enough to lift a 20 ms path past the
/// peer-latency error limit. The base [`trim_count`] covers about 1% loss each way; beyond that,
/// discard the expected number of delayed samples `n q` plus three standard deviations of the
/// difference between the samples' count and that estimate (binomial, with the echo stream's
/// own sampling error: variance `n q (1 - q) (1 + n / m)` for `m` echoes). So loss the join sweep
/// showed to be harmless (5% each way: about 10% of samples delayed; joins held and stayed
/// stable) is judged once, by `PacketLoss`, and not again as latency.
///
/// Never more than a quarter of the samples: the robust p99 stays at or above the p75, so a path
/// slow for a third of its samples fails whatever the loss.
pub(crate) fn loss_trim_count(n: usize, loss: &LossEstimate) -> usize {
    let base = trim_count(n);
    let q = loss.ratio();
    if n < 2 || loss.attempts == 0 || q <= 0.0 {
        return base;
    }
    let (nf, m) = (n as f64, f64::from(loss.attempts));
    let sd = (nf * q * (1.0 - q) * (1.0 + nf / m)).sqrt();
    let cap = (n / 4).max(base);
    ((nf * q + 3.0 * sd).ceil() as usize).clamp(base, cap)
}

/// Nearest-rank quantile `q` (0 < q <= 1) of an ascending slice: the value at rank
/// `ceil(q * n)`. Nearest rank returns a value that was actually measured, never an interpolation.
pub(crate) fn nearest_rank(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    // The small epsilon keeps 0.9 * 10 at rank 9 despite binary floating point.
    let rank = ((q * n as f64) - 1e-9).ceil().clamp(1.0, n as f64) as usize;
    Some(sorted[rank - 1])
}

/// Latency figures of the successful samples of one (target, probe), in milliseconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Latency {
    /// Successful samples these figures are computed from.
    pub n: usize,
    pub min_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Mean absolute difference of consecutive RTTs (RFC 3550 section 6.4.1 style, without the
    /// 1/16 smoothing, so it does not depend on sample order history).
    pub jitter_ms: f64,
    /// Nearest-rank p99 after discarding the [`trim_count`] highest RTTs. With fewer than 100
    /// samples this is the (t+1)-th largest RTT.
    pub robust_p99_ms: f64,
    /// Jitter after discarding the `2 * trim_count` largest consecutive differences: one spike
    /// makes two large differences (up and down), so both go.
    pub robust_jitter_ms: f64,
    /// How many of the highest RTTs the robust figures discarded: [`trim_count`], or
    /// [`loss_trim_count`] when the figures account for the path's loss.
    pub discarded: usize,
}

impl Latency {
    /// Figures from RTTs in milliseconds, in the order they were measured (jitter depends on
    /// order). `None` when there are none.
    pub(crate) fn from_rtts_ms(rtts: &[f64]) -> Option<Latency> {
        Latency::trimmed(rtts, trim_count(rtts.len()))
    }

    /// Figures as [`Latency::from_rtts_ms`], the robust ones discarding the
    /// [`loss_trim_count`] highest RTTs for a path with the round-trip `loss` measured.
    pub(crate) fn from_rtts_ms_with_loss(rtts: &[f64], loss: &LossEstimate) -> Option<Latency> {
        Latency::trimmed(rtts, loss_trim_count(rtts.len(), loss))
    }

    fn trimmed(rtts: &[f64], t: usize) -> Option<Latency> {
        if rtts.is_empty() {
            return None;
        }
        let n = rtts.len();
        let mut sorted = rtts.to_vec();
        sort_total(&mut sorted);
        let t = t.min(n - 1);
        let kept = &sorted[..n - t];

        let mut diffs: Vec<f64> = rtts.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
        let jitter_ms = mean(&diffs);
        sort_total(&mut diffs);
        // May discard every difference when there are very few samples (n <= 3); no check judges
        // so few, and a spike must never survive as jitter.
        let dt = (2 * t).min(diffs.len());
        let robust_jitter_ms = mean(&diffs[..diffs.len() - dt]);

        Some(Latency {
            n,
            min_ms: sorted[0],
            p50_ms: nearest_rank(&sorted, 0.50).unwrap_or(sorted[0]),
            p90_ms: nearest_rank(&sorted, 0.90).unwrap_or(sorted[0]),
            p99_ms: nearest_rank(&sorted, 0.99).unwrap_or(sorted[0]),
            max_ms: sorted[n - 1],
            jitter_ms,
            robust_p99_ms: nearest_rank(kept, 0.99).unwrap_or(sorted[0]),
            robust_jitter_ms,
            discarded: t,
        })
    }

    /// Effective RTT as the peer-latency check judges it: robust p99 plus robust jitter. OpenShift's
    /// etcd guidance judges "RTT + jitter"; using the p99 rather than the mean keeps a real tail.
    pub(crate) fn effective_rtt_ms(&self) -> f64 {
        self.robust_p99_ms + self.robust_jitter_ms
    }

    /// The untrimmed counterpart of [`Latency::effective_rtt_ms`]: max plus raw jitter. The
    /// sampler stops early only when even this is far below a limit, so trimming can never end
    /// sampling before a degradation had the chance to show.
    pub(crate) fn raw_effective_ms(&self) -> f64 {
        self.max_ms + self.jitter_ms
    }
}

/// Sorts as `sort_by(f64::total_cmp)` does, in fewer instructions where it can: values whose
/// sign bit is clear (every RTT and every absolute difference) order as their bit patterns do, so
/// they are sorted as integers; anything else takes `total_cmp`. Equal values are identical bit
/// patterns, so the unstable sort gives the same slice. The monitor sorts two windows per target
/// each second; this halves their cost (docs/monitor.md).
fn sort_total(v: &mut [f64]) {
    if v.iter().all(|x| x.is_sign_positive()) {
        v.sort_unstable_by_key(|x| x.to_bits());
    } else {
        v.sort_by(f64::total_cmp);
    }
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// Lost versus attempted probes, and confidence bounds on the loss ratio.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LossEstimate {
    pub lost: u32,
    pub attempts: u32,
}

impl LossEstimate {
    /// Observed loss ratio (0 when nothing was attempted).
    pub fn ratio(&self) -> f64 {
        if self.attempts == 0 {
            0.0
        } else {
            f64::from(self.lost) / f64::from(self.attempts)
        }
    }

    /// Wilson score interval for the true loss ratio at `z` standard deviations (z = 1.645 is a
    /// one-sided 95% bound on each side). Wilson, unlike the normal approximation, behaves at 0
    /// losses and small n: with 0 of n lost the upper bound is z^2 / (n + z^2), so "below 1%"
    /// needs n > 99 z^2 samples, which is why 10 samples cannot show it.
    pub(crate) fn wilson(&self, z: f64) -> (f64, f64) {
        if self.attempts == 0 {
            return (0.0, 1.0);
        }
        let n = f64::from(self.attempts);
        let p = self.ratio();
        let z2 = z * z;
        let denom = 1.0 + z2 / n;
        let centre = (p + z2 / (2.0 * n)) / denom;
        let half = z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
        ((centre - half).max(0.0), (centre + half).min(1.0))
    }

    pub fn lower(&self, z: f64) -> f64 {
        self.wilson(z).0
    }

    pub fn upper(&self, z: f64) -> f64 {
        self.wilson(z).1
    }
}

/// The figures of one (target, probe).
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub target: Target,
    pub probe: ProbeKind,
    /// Probes attempted.
    pub samples: u32,
    /// Attempts that produced no latency (timeouts, refusals, errors).
    pub lost: u32,
    /// `None` when every attempt failed.
    pub latency: Option<Latency>,
    /// The most recent failure, for messages ("timed out after 2000 ms").
    pub last_failure: Option<ProbeFailure>,
    /// The successful RTTs in milliseconds, in the order measured (to recompute `latency` with
    /// a different trim, see [`Summary::with_loss`]).
    pub rtts_ms: Vec<f64>,
}

impl Summary {
    /// Summarises samples given in the order they were taken.
    pub(crate) fn from_samples(target: &Target, probe: ProbeKind, samples: &[Sample]) -> Summary {
        // Sized once: collected from a filter, the vector would grow (and copy) three times on
        // the way to a 30-sample window, 10,000 windows a second in the monitor.
        let mut rtts: Vec<f64> = Vec::with_capacity(samples.len());
        rtts.extend(
            samples
                .iter()
                .filter_map(|s| s.result.as_ref().ok().map(|d| duration_ms(*d))),
        );
        let last_failure = samples
            .iter()
            .rev()
            .find_map(|s| s.result.as_ref().err().cloned());
        let attempts = samples.len();
        Summary {
            target: target.clone(),
            probe,
            samples: u32::try_from(attempts).unwrap_or(u32::MAX),
            lost: u32::try_from(attempts - rtts.len()).unwrap_or(u32::MAX),
            latency: Latency::from_rtts_ms(&rtts),
            last_failure,
            rtts_ms: rtts,
        }
    }

    /// This summary with its robust figures recomputed for a path with the round-trip `loss`
    /// measured (see [`loss_trim_count`]); unchanged when that discards no more than before.
    pub fn with_loss(&self, loss: &LossEstimate) -> Summary {
        let mut s = self.clone();
        if loss_trim_count(self.rtts_ms.len(), loss) > trim_count(self.rtts_ms.len()) {
            s.latency = Latency::from_rtts_ms_with_loss(&self.rtts_ms, loss);
        }
        s
    }

    pub fn loss(&self) -> LossEstimate {
        LossEstimate {
            lost: self.lost,
            attempts: self.samples,
        }
    }

    /// Whether at least one attempt succeeded.
    pub fn reached(&self) -> bool {
        self.latency.is_some()
    }
}

/// A duration in milliseconds, with sub-millisecond precision.
pub(crate) fn duration_ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::TargetKind;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// The integer sort gives exactly `total_cmp`'s order, bit for bit, for RTT-like values
        /// (repeats included, as a steady window has) and for any others (negative, -0.0, NaN,
        /// infinities), which take the fallback.
        #[test]
        fn sort_total_is_total_cmp(
            v in proptest::collection::vec(
                proptest::prop_oneof![
                    8 => 0.0f64..5000.0,
                    1 => proptest::strategy::Just(1.5f64),
                    1 => proptest::sample::select(vec![
                        0.0,
                        -0.0,
                        f64::INFINITY,
                        f64::NEG_INFINITY,
                        f64::NAN,
                        -f64::NAN,
                        1e-300,
                        -3.0,
                    ]),
                ],
                0..40,
            )
        ) {
            let mut want = v.clone();
            want.sort_by(f64::total_cmp);
            let mut got = v.clone();
            sort_total(&mut got);
            let bits = |xs: &[f64]| xs.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            proptest::prop_assert_eq!(bits(&got), bits(&want), "{:?}", v);
        }
    }

    fn peer() -> Target {
        Target {
            kind: TargetKind::EtcdPeer,
            endpoint: "198.18.0.3:2380".into(),
            host: "198.18.0.3".into(),
            port: 2380,
            tls: true,
            member: Some("m2".into()),
        }
    }

    fn ok(ms: f64) -> Sample {
        Sample {
            result: Ok(Duration::from_secs_f64(ms / 1000.0)),
        }
    }

    /// The peer-latency limits at the default 100 ms heartbeat (docs/preflight.md, the threshold table).
    const WARN: f64 = 100.0 / 3.0;
    const ERROR: f64 = 200.0 / 3.0;

    #[test]
    fn nearest_rank_picks_measured_values() {
        let xs: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(nearest_rank(&xs, 0.5), Some(5.0));
        assert_eq!(nearest_rank(&xs, 0.9), Some(9.0));
        assert_eq!(nearest_rank(&xs, 0.99), Some(10.0));
        assert_eq!(nearest_rank(&xs, 0.01), Some(1.0));
        assert_eq!(nearest_rank(&[], 0.5), None);
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(nearest_rank(&hundred, 0.99), Some(99.0));
    }

    #[test]
    fn trim_count_is_a_tenth_at_least_one_never_all() {
        assert_eq!(trim_count(0), 0);
        assert_eq!(trim_count(1), 0);
        assert_eq!(trim_count(2), 1);
        assert_eq!(trim_count(19), 1);
        assert_eq!(trim_count(20), 2);
        assert_eq!(trim_count(60), 6);
    }

    fn echoes(lost: u32, attempts: u32) -> LossEstimate {
        LossEstimate { lost, attempts }
    }

    #[test]
    fn loss_trim_adds_what_the_loss_explains_and_stops_at_a_quarter() {
        // No loss, or loss the base trim already covers (1% each way): the base tenth.
        assert_eq!(loss_trim_count(60, &echoes(0, 400)), 6);
        assert_eq!(loss_trim_count(60, &echoes(8, 400)), 6);
        assert_eq!(loss_trim_count(60, &echoes(0, 0)), 6);
        // 5% each way (39 of 400 echoes lost): 5.85 expected plus 3 sd (2.46) = 13.2.
        assert_eq!(loss_trim_count(60, &echoes(39, 400)), 14);
        // Fewer echoes, a less certain estimate, a wider margin.
        assert_eq!(loss_trim_count(60, &echoes(10, 100)), 15);
        // Past PacketLoss's error limit the cap holds: the robust p99 stays at or above the p75.
        assert_eq!(loss_trim_count(60, &echoes(76, 400)), 15);
        assert_eq!(loss_trim_count(60, &echoes(400, 400)), 15);
        assert_eq!(loss_trim_count(20, &echoes(40, 400)), 5);
        // Never below the base, never all.
        assert_eq!(loss_trim_count(2, &echoes(200, 400)), 1);
        assert_eq!(loss_trim_count(1, &echoes(200, 400)), 0);
    }

    #[test]
    fn with_loss_discards_retransmission_delays_only_as_many_as_the_loss_explains() {
        // 20 ms path, 8 of 60 samples delayed by a 200 ms RTO: more than the base tenth.
        let mut rtts = vec![20.0; 60];
        for i in [3, 9, 17, 25, 33, 41, 49, 57] {
            rtts[i] = 245.0;
        }
        let samples: Vec<Sample> = rtts.iter().map(|&ms| ok(ms)).collect();
        let s = Summary::from_samples(&peer(), ProbeKind::EtcdPeerProbe, &samples);
        let plain = s.latency.as_ref().unwrap();
        assert_eq!((plain.discarded, plain.robust_p99_ms), (6, 245.0));
        // The host lost 39 of 400 echoes: 14 discarded, the delays go.
        let net = s.with_loss(&echoes(39, 400));
        let l = net.latency.as_ref().unwrap();
        assert_eq!(
            (l.discarded, l.robust_p99_ms, l.robust_jitter_ms),
            (14, 20.0, 0.0)
        );
        // The raw figures are untouched, and no loss changes nothing.
        assert_eq!((l.p99_ms, l.max_ms), (245.0, 245.0));
        assert_eq!(s.with_loss(&echoes(0, 400)), s);
    }

    #[test]
    fn single_500ms_spike_does_not_move_robust_figures() {
        let mut rtts = vec![2.0; 20];
        rtts[7] = 500.0;
        let l = Latency::from_rtts_ms(&rtts).unwrap();
        // The raw figures show the spike, as they should in the table...
        assert_eq!(l.max_ms, 500.0);
        assert_eq!(l.p99_ms, 500.0);
        assert!(l.jitter_ms > 40.0, "raw jitter {}", l.jitter_ms);
        // ...but the figures checks judge do not.
        assert_eq!(l.robust_p99_ms, 2.0);
        assert_eq!(l.robust_jitter_ms, 0.0);
        assert!(l.effective_rtt_ms() < WARN);
    }

    #[test]
    fn single_spike_at_minimum_sample_count_is_discarded() {
        for n in 2..=12 {
            let mut rtts = vec![2.0; n];
            rtts[n / 2] = 500.0;
            let l = Latency::from_rtts_ms(&rtts).unwrap();
            assert!(l.effective_rtt_ms() < WARN, "n={n}: {l:?}");
        }
    }

    #[test]
    fn persistent_shift_of_a_fifth_of_samples_shows() {
        // 20% of samples at 80 ms among 2 ms ones: a path that is bad a fifth of the time.
        let rtts: Vec<f64> = (0..40)
            .map(|i| if i % 5 == 0 { 80.0 } else { 2.0 })
            .collect();
        let l = Latency::from_rtts_ms(&rtts).unwrap();
        assert_eq!(l.robust_p99_ms, 80.0);
        assert!(l.robust_jitter_ms > 10.0, "{l:?}");
        assert!(l.effective_rtt_ms() > ERROR, "{l:?}");
        // And the median, which a mean-free check could use, does not hide it either way.
        assert_eq!(l.p50_ms, 2.0);
    }

    #[test]
    fn persistent_shift_shows_with_random_placement() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut errors = 0;
        for _ in 0..200 {
            // Exactly 20% slow (8 of 40), shuffled.
            let mut rtts: Vec<f64> = (0..40).map(|i| if i < 8 { 90.0 } else { 2.0 }).collect();
            for i in (1..rtts.len()).rev() {
                let j = rng.random_range(0..=i);
                rtts.swap(i, j);
            }
            let l = Latency::from_rtts_ms(&rtts).unwrap();
            if l.effective_rtt_ms() > ERROR {
                errors += 1;
            }
        }
        assert_eq!(errors, 200);
    }

    #[test]
    fn uniform_slow_link_is_not_trimmed_away() {
        let rtts: Vec<f64> = (0..20).map(|i| 80.0 + f64::from(i % 3)).collect();
        let l = Latency::from_rtts_ms(&rtts).unwrap();
        assert!(l.robust_p99_ms >= 81.0);
        assert!(l.effective_rtt_ms() > ERROR);
    }

    #[test]
    fn jitter_is_mean_absolute_consecutive_difference() {
        let l = Latency::from_rtts_ms(&[10.0, 12.0, 10.0, 14.0]).unwrap();
        assert!((l.jitter_ms - (2.0 + 2.0 + 4.0) / 3.0).abs() < 1e-9);
        let one = Latency::from_rtts_ms(&[3.0]).unwrap();
        assert_eq!(one.jitter_ms, 0.0);
        assert_eq!(one.robust_jitter_ms, 0.0);
        assert_eq!(one.robust_p99_ms, 3.0);
    }

    #[test]
    fn summary_counts_losses_and_keeps_last_failure() {
        let samples = vec![
            ok(2.0),
            Sample {
                result: Err(ProbeFailure::Timeout(2000)),
            },
            ok(3.0),
            Sample {
                result: Err(ProbeFailure::Refused),
            },
        ];
        let s = Summary::from_samples(&peer(), ProbeKind::TcpConnect, &samples);
        assert_eq!(s.samples, 4);
        assert_eq!(s.lost, 2);
        assert_eq!(s.last_failure, Some(ProbeFailure::Refused));
        let l = s.latency.unwrap();
        assert_eq!(l.n, 2);
        assert!((l.min_ms - 2.0).abs() < 1e-6);
        assert!((l.max_ms - 3.0).abs() < 1e-6);
    }

    #[test]
    fn all_lost_has_no_latency() {
        let samples = vec![
            Sample {
                result: Err(ProbeFailure::Timeout(2000))
            };
            3
        ];
        let s = Summary::from_samples(&peer(), ProbeKind::EtcdPeerProbe, &samples);
        assert!(!s.reached());
        assert_eq!(s.loss().ratio(), 1.0);
    }

    #[test]
    fn wilson_bounds() {
        let none = LossEstimate {
            lost: 0,
            attempts: 10,
        };
        // 0 of 10 cannot show loss below 1%.
        assert!(none.upper(1.645) > 0.2);
        let many = LossEstimate {
            lost: 0,
            attempts: 400,
        };
        assert!(many.upper(1.3) < 0.01);
        let tenth = LossEstimate {
            lost: 40,
            attempts: 400,
        };
        let (lo, hi) = tenth.wilson(1.96);
        assert!(lo > 0.07 && lo < 0.1 && hi > 0.1 && hi < 0.14, "{lo} {hi}");
        assert_eq!(
            LossEstimate {
                lost: 0,
                attempts: 0
            }
            .wilson(2.0),
            (0.0, 1.0)
        );
    }
}
