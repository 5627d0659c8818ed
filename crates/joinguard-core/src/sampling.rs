//! Adaptive sampling: after each sample of one (target, probe), decide whether the evidence is
//! enough for a verdict or more samples are needed.
//!
//! This module owns the stopping rules and the loss verdict that depends on how sure the evidence
//! is. It must not sleep, pace or do I/O (the sampler in `probe` does), and it does not name
//! checks or format messages (`check` and `report` do). The rules and the numbers behind them are
//! in `docs/preflight.md`, section "Adaptive sampling".
//!
//! The rules, per limit that applies to the stream:
//! - **Latency.** After at least `latency_min` successful samples, a limit is *resolved* when
//!   even the untrimmed figure (max + raw jitter, or raw p90) is below `(1 - m(n))` of it, or
//!   when the median is above it (then more than half the samples are beyond the limit, which no
//!   outlier explains). `m(n) = clamp(1/sqrt(n), 0.15, 0.5)` shrinks as evidence grows. Otherwise
//!   sample on, up to `latency_cap` attempts, and judge the trimmed figure.
//! - **Loss.** After at least `loss_min` attempts, a limit is resolved when the Wilson interval
//!   lies wholly on one side of it: z = 1.3 around the warning limit (advisory), z = 3 around the
//!   error limit (blocking, and looked at after every sample, so it must be strict). Otherwise
//!   sample on, up to `loss_cap` attempts.
//!   A stream whose median is beyond the error limit stops after `latency_min_failing` samples.
//! - **Unreachable.** After `give_up_after` attempts without a single success, stop: more
//!   timeouts only delay the verdict (a dark member must fail within `--timeout`).

use serde::Serialize;

use crate::probe::Sample;
use crate::stats::{duration_ms, Latency, LossEstimate};

/// Whether to keep sampling one (target, probe).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The verdict would not change with more samples (or the cap is reached).
    Enough,
    /// Near a limit, or too few samples yet.
    More,
}

/// Which latency figure a check judges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LatencyFigure {
    /// Robust p99 + robust jitter (`EtcdPeerLatency`).
    EffectiveRtt,
    /// Robust p99 (`EtcdClientLatency`, `EtcdQuorumReadLatency`).
    RobustP99,
    /// Nearest-rank p90 (`APIServerLatency`, per the threshold table in docs/preflight.md). A single outlier cannot move
    /// a p90 once there are 10 samples, so it needs no trimming.
    P90,
}

impl LatencyFigure {
    /// The value a check compares with its limits.
    pub fn value(self, l: &Latency) -> f64 {
        match self {
            LatencyFigure::EffectiveRtt => l.effective_rtt_ms(),
            LatencyFigure::RobustP99 => l.robust_p99_ms,
            LatencyFigure::P90 => l.p90_ms,
        }
    }

    /// The untrimmed upper figure used to stop early: never below [`LatencyFigure::value`].
    pub(crate) fn raw_value(self, l: &Latency) -> f64 {
        match self {
            LatencyFigure::EffectiveRtt => l.raw_effective_ms(),
            LatencyFigure::RobustP99 => l.max_ms,
            LatencyFigure::P90 => l.p90_ms,
        }
    }
}

/// A limit that applies to one stream of samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// Latency limits in milliseconds on `figure`.
    Latency {
        figure: LatencyFigure,
        warn_ms: f64,
        error_ms: f64,
    },
    /// Loss ratio limits (0..=1).
    Loss { warn: f64, error: f64 },
}

/// Where a figure falls relative to a warning and an error limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Band {
    Ok,
    Warning,
    Error,
}

/// The stopping rules' parameters. The defaults are justified in `docs/preflight.md`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplingPolicy {
    /// Successful samples before any latency decision. 20, because early stopping below a limit
    /// needs every sample to be fast: a path slow 20% of the time shows in 20 samples with
    /// probability 1 - 0.8^20 = 0.99.
    pub latency_min: usize,
    /// Successful samples after which a stream whose *median* is beyond the error limit stops:
    /// at least half the samples are beyond it, which no outlier explains, and on a slow path
    /// every further sample costs a full slow round trip (8 x 133 ms instead of 20 x 133 ms).
    pub latency_min_failing: usize,
    /// Attempts after which a latency stream is judged as it stands.
    pub latency_cap: usize,
    /// Attempts before any loss decision.
    pub loss_min: usize,
    /// Attempts after which a loss stream is judged as it stands once its error limit is
    /// resolved (only the warning limit is still in doubt).
    pub loss_cap: usize,
    /// Attempts after which a loss stream is judged as it stands even with its error limit in
    /// doubt: near the error limit, 400 echoes cannot tell a path that joins (10% round trip in
    /// the sweep) from one that breaks (13.5%); 1000 can (docs/preflight.md, "Loss streams").
    pub loss_cap_error: usize,
    /// Attempts without any success after which a stream stops (unreachable).
    pub give_up_after: usize,
    /// Wilson z around the loss warning limit.
    pub loss_z_warn: f64,
    /// Wilson z around the loss error limit, for stopping early and for an error before the cap.
    pub loss_z_error: f64,
    /// Wilson z for an error at the cap: the lower bound must still be above the limit, so an
    /// observed 5.2% of a true 3% is a warning, not an error.
    pub loss_z_final: f64,
}

impl Default for SamplingPolicy {
    fn default() -> Self {
        SamplingPolicy {
            latency_min: 20,
            latency_min_failing: 8,
            latency_cap: 60,
            loss_min: 30,
            loss_cap: 400,
            loss_cap_error: 1000,
            give_up_after: 3,
            loss_z_warn: 1.3,
            loss_z_error: 3.0,
            loss_z_final: 0.5,
        }
    }
}

impl SamplingPolicy {
    /// Decides for samples given in the order taken, against every limit that applies.
    pub fn decide(&self, samples: &[Sample], limits: &[Limit]) -> Decision {
        let attempts = samples.len();
        let successes = samples.iter().filter(|s| s.result.is_ok()).count();
        if successes == 0 {
            return if attempts >= self.give_up_after {
                Decision::Enough
            } else {
                Decision::More
            };
        }
        // Loss-only streams (hundreds of samples) need no sorting.
        let wants_latency = limits.iter().any(|l| matches!(l, Limit::Latency { .. }));
        let latency = if wants_latency {
            let ok_ms: Vec<f64> = samples
                .iter()
                .filter_map(|s| s.result.as_ref().ok().map(|d| duration_ms(*d)))
                .collect();
            Latency::from_rtts_ms(&ok_ms)
        } else {
            None
        };
        let loss = LossEstimate {
            lost: u32::try_from(attempts - successes).unwrap_or(u32::MAX),
            attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
        };
        let enough = limits.iter().all(|limit| match *limit {
            Limit::Latency {
                figure,
                warn_ms,
                error_ms,
            } => {
                attempts >= self.latency_cap
                    || latency.as_ref().is_some_and(|l| {
                        (l.n >= self.latency_min
                            && self.latency_resolved(l, figure, warn_ms)
                            && self.latency_resolved(l, figure, error_ms))
                            || (l.n >= self.latency_min_failing && l.p50_ms > error_ms)
                    })
            }
            Limit::Loss { warn, error } => {
                let error_resolved = loss_resolved(&loss, error, self.loss_z_error);
                attempts >= self.loss_cap_error
                    || (attempts >= self.loss_cap && error_resolved)
                    || (attempts >= self.loss_min
                        && loss_resolved(&loss, warn, self.loss_z_warn)
                        && error_resolved)
            }
        });
        if enough {
            Decision::Enough
        } else {
            Decision::More
        }
    }

    /// Whether more samples could move `figure` across `limit_ms`.
    pub(crate) fn latency_resolved(
        &self,
        l: &Latency,
        figure: LatencyFigure,
        limit_ms: f64,
    ) -> bool {
        let below = figure.raw_value(l) <= (1.0 - margin(l.n)) * limit_ms;
        let above = l.p50_ms > limit_ms;
        below || above
    }

    /// The band of a loss estimate. An error needs evidence, not just an observed ratio above the
    /// limit: the Wilson lower bound must exceed it (strictly before the cap, loosely at it).
    /// Observed above the error limit without that evidence is a warning.
    pub(crate) fn loss_band(&self, loss: &LossEstimate, warn: f64, error: f64) -> Band {
        let at_cap = loss.attempts as usize >= self.loss_cap_error;
        if loss.lower(self.loss_z_error) > error
            || (at_cap && loss.lower(self.loss_z_final) > error)
        {
            Band::Error
        } else if loss.ratio() > warn {
            Band::Warning
        } else {
            Band::Ok
        }
    }
}

/// The band of a latency figure: strictly above a limit crosses it (the threshold rule: "warn > x").
pub(crate) fn latency_band(
    l: &Latency,
    figure: LatencyFigure,
    warn_ms: f64,
    error_ms: f64,
) -> Band {
    let v = figure.value(l);
    if v > error_ms {
        Band::Error
    } else if v > warn_ms {
        Band::Warning
    } else {
        Band::Ok
    }
}

/// The early-stopping margin: half the limit at 4 samples, 22% at 20, 15% from 45 on. The figure
/// that must clear it is a maximum, which only grows with n, so the margin may shrink.
pub fn margin(n: usize) -> f64 {
    if n == 0 {
        return 0.5;
    }
    (1.0 / (n as f64).sqrt()).clamp(0.15, 0.5)
}

fn loss_resolved(loss: &LossEstimate, limit: f64, z: f64) -> bool {
    let (lo, hi) = loss.wilson(z);
    lo > limit || hi <= limit
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    use super::*;
    use crate::probe::ProbeFailure;

    const PEER: Limit = Limit::Latency {
        figure: LatencyFigure::EffectiveRtt,
        warn_ms: 100.0 / 3.0,
        error_ms: 200.0 / 3.0,
    };
    const LOSS: Limit = Limit::Loss {
        warn: 0.01,
        error: 0.05,
    };

    fn ok(ms: f64) -> Sample {
        Sample {
            result: Ok(Duration::from_secs_f64(ms / 1000.0)),
        }
    }

    fn lost() -> Sample {
        Sample {
            result: Err(ProbeFailure::Timeout(500)),
        }
    }

    /// Runs the sampling loop to its end with `next` producing samples; returns the samples.
    fn run(
        policy: &SamplingPolicy,
        limits: &[Limit],
        rng: &mut StdRng,
        mut next: impl FnMut(&mut StdRng, usize) -> Sample,
    ) -> Vec<Sample> {
        let mut samples = Vec::new();
        // The bound is a safety net for the test; the policy must stop long before.
        for i in 0..10_000 {
            samples.push(next(rng, i));
            if policy.decide(&samples, limits) == Decision::Enough {
                return samples;
            }
        }
        panic!("sampling did not stop");
    }

    fn peer_band(samples: &[Sample]) -> Band {
        let ms: Vec<f64> = samples
            .iter()
            .filter_map(|s| s.result.as_ref().ok().map(|d| duration_ms(*d)))
            .collect();
        let l = Latency::from_rtts_ms(&ms).expect("some successes");
        latency_band(&l, LatencyFigure::EffectiveRtt, 100.0 / 3.0, 200.0 / 3.0)
    }

    /// RTT `base` with +-20% uniform jitter, as in the acceptance runs.
    fn jittered(rng: &mut StdRng, base: f64) -> f64 {
        base * (1.0 + rng.random_range(-0.2..0.2))
    }

    #[test]
    fn healthy_link_stops_at_the_minimum() {
        let p = SamplingPolicy::default();
        let mut rng = StdRng::seed_from_u64(1);
        let s = run(&p, &[PEER], &mut rng, |r, _| ok(jittered(r, 2.0)));
        assert_eq!(s.len(), p.latency_min);
        assert_eq!(peer_band(&s), Band::Ok);
    }

    #[test]
    fn fewer_than_minimum_is_never_enough() {
        let p = SamplingPolicy::default();
        let s: Vec<Sample> = (0..p.latency_min - 1).map(|_| ok(2.0)).collect();
        assert_eq!(p.decide(&s, &[PEER]), Decision::More);
    }

    #[test]
    fn one_500ms_spike_keeps_sampling_but_never_errors() {
        let p = SamplingPolicy::default();
        let mut rng = StdRng::seed_from_u64(2);
        for spike_at in [0, 3, 10, 19] {
            let s = run(&p, &[PEER], &mut rng, |r, i| {
                ok(if i == spike_at {
                    500.0
                } else {
                    jittered(r, 2.0)
                })
            });
            // The untrimmed figure saw the spike, so sampling went on to the cap...
            assert_eq!(s.len(), p.latency_cap, "spike at {spike_at}");
            // ...and the verdict discards it.
            assert_eq!(peer_band(&s), Band::Ok, "spike at {spike_at}");
        }
        // A spike after the evidence settled is never seen.
        let s = run(&p, &[PEER], &mut rng, |r, i| {
            ok(if i == 25 { 500.0 } else { jittered(r, 2.0) })
        });
        assert_eq!(s.len(), p.latency_min);
    }

    #[test]
    fn link_at_twice_the_error_limit_errors_every_time_and_quickly() {
        let p = SamplingPolicy::default();
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..200 {
            let s = run(&p, &[PEER], &mut rng, |r, _| {
                ok(jittered(r, 2.0 * 200.0 / 3.0))
            });
            assert_eq!(s.len(), p.latency_min_failing);
            assert_eq!(peer_band(&s), Band::Error);
        }
    }

    #[test]
    fn one_slow_member_at_80ms_errors() {
        let p = SamplingPolicy::default();
        let mut rng = StdRng::seed_from_u64(4);
        for _ in 0..200 {
            let s = run(&p, &[PEER], &mut rng, |r, _| ok(jittered(r, 80.0)));
            assert_eq!(peer_band(&s), Band::Error);
        }
    }

    /// 1% loss each way: about 2% of request/response samples wait for a retransmission, modelled
    /// pessimistically as +200..1000 ms (a TCP RTO rather than a tail-loss probe).
    #[test]
    fn retransmission_outliers_at_1pct_loss_give_no_false_errors() {
        let p = SamplingPolicy::default();
        let mut rng = StdRng::seed_from_u64(5);
        let runs = 2000;
        let mut errors = 0;
        let mut total = 0;
        for _ in 0..runs {
            let s = run(&p, &[PEER], &mut rng, |r, _| {
                let mut ms = jittered(r, 2.0);
                if r.random::<f64>() < 0.02 {
                    ms += r.random_range(200.0..1000.0);
                }
                ok(ms)
            });
            total += s.len();
            if peer_band(&s) == Band::Error {
                errors += 1;
            }
        }
        // Simulation at 20,000 runs gives about 3.5e-4 per stream under this model.
        assert!(errors <= 2, "{errors} false errors in {runs} runs");
        assert!(total / runs < 40, "mean samples {}", total / runs);
    }

    #[test]
    fn a_fifth_of_slow_samples_is_caught() {
        let p = SamplingPolicy::default();
        let mut rng = StdRng::seed_from_u64(6);
        let runs = 1000;
        let mut caught = 0;
        for _ in 0..runs {
            let s = run(&p, &[PEER], &mut rng, |r, _| {
                ok(if r.random::<f64>() < 0.2 {
                    jittered(r, 100.0)
                } else {
                    jittered(r, 2.0)
                })
            });
            if peer_band(&s) == Band::Error {
                caught += 1;
            }
        }
        assert!(caught >= 950, "caught {caught} of {runs}");
    }

    /// The peer limits at etcd's defaults since the join sweep (docs/thresholds.md).
    const PEER_SWEEP: (f64, f64) = (100.0, 250.0);

    /// `runs` peer streams on a 20 ms path losing `each_way` of its packets each way, a fraction
    /// `slow` of the samples at 300 ms besides: a lost request or response waits for an RTO
    /// (200 ms minimum plus the RTT, doubled once in ten). The host's loss comes from a simulated
    /// echo stream of 300 probes, as PacketLoss measures it. Returns the error counts with the
    /// plain trim and with the loss trim.
    fn lossy_peer_errors(each_way: f64, slow: f64, runs: usize, seed: u64) -> (usize, usize) {
        let p = SamplingPolicy::default();
        let (warn_ms, error_ms) = PEER_SWEEP;
        let limit = Limit::Latency {
            figure: LatencyFigure::EffectiveRtt,
            warn_ms,
            error_ms,
        };
        let hit = 1.0 - (1.0 - each_way) * (1.0 - each_way);
        let mut rng = StdRng::seed_from_u64(seed);
        let (mut plain, mut net) = (0, 0);
        for _ in 0..runs {
            let s = run(&p, &[limit], &mut rng, |r, _| {
                let mut ms = if r.random::<f64>() < slow {
                    jittered(r, 300.0)
                } else {
                    jittered(r, 20.0)
                };
                if r.random::<f64>() < hit {
                    let rto = if r.random::<f64>() < 0.1 {
                        460.0
                    } else {
                        225.0
                    };
                    ms += rto * (1.0 + r.random_range(0.0..0.1));
                }
                ok(ms)
            });
            let echoes = LossEstimate {
                lost: (0..300).filter(|_| rng.random::<f64>() < hit).count() as u32,
                attempts: 300,
            };
            let ms: Vec<f64> = s
                .iter()
                .filter_map(|s| s.result.as_ref().ok().map(|d| duration_ms(*d)))
                .collect();
            let error = |l: Option<Latency>| {
                latency_band(&l.unwrap(), LatencyFigure::EffectiveRtt, warn_ms, error_ms)
                    == Band::Error
            };
            plain += usize::from(error(Latency::from_rtts_ms(&ms)));
            net += usize::from(error(Latency::from_rtts_ms_with_loss(&ms, &echoes)));
        }
        (plain, net)
    }

    #[test]
    fn loss_the_join_sweep_found_harmless_is_not_judged_again_as_peer_latency() {
        // 3% and 5% each way on a 20 ms path: joins held and stayed stable (docs/thresholds.md),
        // yet the plain trim failed them (in the sweep, and here).
        let (plain, net) = lossy_peer_errors(0.03, 0.0, 1000, 40);
        assert!(plain >= 30, "plain trim: {plain} errors in 1000");
        assert!(net <= 3, "loss trim: {net} errors in 1000");
        let (plain, net) = lossy_peer_errors(0.05, 0.0, 1000, 41);
        assert!(plain >= 200, "plain trim: {plain} errors in 1000");
        assert!(net <= 5, "loss trim: {net} errors in 1000");
    }

    #[test]
    fn a_slow_third_is_caught_on_a_lossy_path() {
        // A third of the samples at 300 ms, past the 250 ms limit, and 5% loss each way: the
        // loss trim discards at most a quarter, so the slow third shows.
        // (Simulated at 10,000 runs: 98.6%; the misses are slow samples jittered under 250 ms.)
        let (_, net) = lossy_peer_errors(0.05, 1.0 / 3.0, 1000, 42);
        assert!(net >= 970, "caught {net} of 1000");
        // Without loss, a slow fifth is caught as before, with either trim.
        let (plain, net) = lossy_peer_errors(0.0, 0.2, 1000, 43);
        assert!(plain >= 950 && net >= 950, "caught {plain} / {net} of 1000");
    }

    /// The trade-off in docs/preflight.md: `cargo test -p joinguard-core --lib lossy_peer_table
    /// -- --ignored --nocapture`.
    #[test]
    #[ignore = "prints the docs table; slow"]
    #[allow(clippy::print_stdout)]
    fn lossy_peer_table() {
        for each_way in [0.0, 0.01, 0.03, 0.05, 0.07] {
            for slow in [0.0, 0.2, 1.0 / 3.0] {
                let (plain, net) = lossy_peer_errors(each_way, slow, 10_000, 50);
                println!(
                    "| {:.0}% | {:.0}% | {}% | {}% |",
                    each_way * 100.0,
                    slow * 100.0,
                    plain as f64 / 100.0,
                    net as f64 / 100.0
                );
            }
        }
    }

    #[test]
    fn dark_target_gives_up_after_three_attempts() {
        let p = SamplingPolicy::default();
        let s = vec![lost(), lost()];
        assert_eq!(p.decide(&s, &[PEER, LOSS]), Decision::More);
        let s = vec![lost(), lost(), lost()];
        assert_eq!(p.decide(&s, &[PEER, LOSS]), Decision::Enough);
    }

    /// Runs a loss stream with true loss `q` and returns the band counts and mean samples.
    fn loss_runs(q: f64, runs: usize, seed: u64) -> ([usize; 3], usize) {
        loss_runs_at((0.01, 0.05), q, runs, seed)
    }

    /// `runs` simulated loss streams at true loss `q`, judged against `(warn, error)`: the
    /// count of runs per band (ok, warning, error) and the mean number of samples.
    fn loss_runs_at(limits: (f64, f64), q: f64, runs: usize, seed: u64) -> ([usize; 3], usize) {
        let p = SamplingPolicy::default();
        let limit = Limit::Loss {
            warn: limits.0,
            error: limits.1,
        };
        let mut rng = StdRng::seed_from_u64(seed);
        let mut bands = [0; 3];
        let mut total = 0;
        for _ in 0..runs {
            let s = run(&p, &[limit], &mut rng, |r, _| {
                if r.random::<f64>() < q {
                    lost()
                } else {
                    ok(2.0)
                }
            });
            total += s.len();
            let lost = s.iter().filter(|s| s.result.is_err()).count();
            let est = LossEstimate {
                lost: lost as u32,
                attempts: s.len() as u32,
            };
            bands[p.loss_band(&est, limits.0, limits.1) as usize] += 1;
        }
        (bands, total / runs)
    }

    /// The default limits since the join sweeps (docs/thresholds.md): warning 1%, error 12%.
    const SWEEP_LIMITS: (f64, f64) = (0.01, 0.12);

    #[test]
    fn at_the_sweep_limit_what_held_warns_and_what_broke_errs() {
        // 5% each way (9.75% round trip) held in every sweep run: an error at most 1 run in 100
        // (at the 1000-echo cap, the z = 0.5 lower bound can pass 12% by chance).
        let ([ok, warn, err], _) = loss_runs_at(SWEEP_LIMITS, 0.0975, 1000, 21);
        assert!(err <= 10 && warn >= 990, "ok {ok} warn {warn} err {err}");
        // 7% each way (13.5%) broke 2 of 6 runs: an error most times.
        let ([ok, warn, err], _) = loss_runs_at(SWEEP_LIMITS, 0.135, 1000, 23);
        assert!(err >= 750, "ok {ok} warn {warn} err {err}");
        // 10% each way (19%) broke it in 4 of 6 runs: an error every time, and quickly.
        let ([ok, warn, err], mean) = loss_runs_at(SWEEP_LIMITS, 0.19, 1000, 22);
        assert!(err >= 995, "ok {ok} warn {warn} err {err}");
        assert!(mean < 300, "mean {mean}");
    }

    /// The table in docs/preflight.md ("Loss streams"): `cargo test -p joinguard-core --lib
    /// loss_table -- --ignored --nocapture`.
    #[test]
    #[ignore = "prints the docs table; slow"]
    #[allow(clippy::print_stdout)]
    fn loss_table() {
        for q in [0.0, 0.01, 0.02, 0.03, 0.05, 0.0975, 0.12, 0.135, 0.19] {
            let ([ok, warn, err], mean) = loss_runs_at(SWEEP_LIMITS, q, 20_000, 30);
            let pct = |n: usize| n as f64 / 200.0;
            println!(
                "| {}% | {}% | {}% | {}% | {mean} |",
                q * 100.0,
                pct(ok),
                pct(warn),
                pct(err)
            );
        }
    }

    #[test]
    fn no_loss_is_ok_before_the_cap() {
        let ([ok, warn, err], mean) = loss_runs(0.0, 50, 10);
        assert_eq!((ok, warn, err), (50, 0, 0));
        // 0 of n lost shows "below 1%" at z = 1.3 once n > 99 * 1.69.
        assert!(mean < 200, "mean {mean}");
    }

    #[test]
    fn one_percent_loss_never_errors() {
        let ([_, _, err], _) = loss_runs(0.01, 1000, 11);
        assert_eq!(err, 0);
        // Round-trip loss of a probe is about twice a symmetric per-direction loss.
        let ([_, _, err], _) = loss_runs(0.02, 1000, 12);
        assert!(err <= 2, "{err} errors at 2%");
    }

    #[test]
    fn three_percent_loss_is_a_warning() {
        // Simulation at 20,000 runs: 98.6% warning, 1.1% ok, 0.35% error.
        let ([ok, warn, err], _) = loss_runs(0.03, 1000, 13);
        assert!(warn >= 970, "ok {ok} warn {warn} err {err}");
        assert!(err <= 10, "ok {ok} warn {warn} err {err}");
    }

    #[test]
    fn ten_percent_loss_is_an_error() {
        let ([ok, warn, err], mean) = loss_runs(0.10, 2000, 14);
        assert!(err >= 1994, "ok {ok} warn {warn} err {err}");
        assert!(mean < 250, "mean {mean}");
    }

    #[test]
    fn loss_band_needs_evidence_for_an_error() {
        let p = SamplingPolicy::default();
        // 2 of 20 is 10% observed, but far from proof of more than 5%.
        let small = LossEstimate {
            lost: 2,
            attempts: 20,
        };
        assert_eq!(p.loss_band(&small, 0.01, 0.05), Band::Warning);
        // 40 of 400 is.
        let big = LossEstimate {
            lost: 40,
            attempts: 400,
        };
        assert_eq!(p.loss_band(&big, 0.01, 0.05), Band::Error);
        let none = LossEstimate {
            lost: 0,
            attempts: 400,
        };
        assert_eq!(p.loss_band(&none, 0.01, 0.05), Band::Ok);
    }

    #[test]
    fn margin_shrinks_with_evidence() {
        assert_eq!(margin(4), 0.5);
        assert!((margin(25) - 0.2).abs() < 1e-9);
        assert_eq!(margin(100), 0.15);
    }
}
