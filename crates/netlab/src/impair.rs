//! Impairments: what the forwarder does to the packets of one direction of one host pair.
//!
//! This module owns the description of an impairment and its text form (`delay=20ms,loss=1%`),
//! and the per-packet decisions that need state (burst loss). It does no I/O and no timing; the
//! forwarder applies the decisions.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rand::{Rng, RngExt};
use serde::{Deserialize, Serialize};

/// How the jitter added to each packet's delay is distributed.
///
/// Jitter never reorders packets within one direction of a pair: a packet is released no earlier
/// than the one before it (as netem does when combined with a rate). So the distribution is that
/// of the *added* delay before this ordering clamp, truncated at zero total delay.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Jitter {
    /// Normal with standard deviation sigma, truncated at +-3 sigma.
    Normal(Duration),
    /// Uniform on [-half_width, +half_width].
    Uniform(Duration),
}

/// Packet loss model.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Loss {
    /// Each packet is dropped independently with this probability (0..=1).
    Random(f64),
    /// Gilbert model: the link alternates between a good state (no loss) and a bad state (all
    /// lost). `rate` is the long-run loss probability and `mean_burst` the mean number of
    /// consecutive packets lost per burst (>= 1).
    Burst { rate: f64, mean_burst: f64 },
}

/// The impairment of one direction between two hosts. The default is a clean link.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Impairment {
    /// Fixed one-way delay added to every packet.
    pub delay: Duration,
    /// Random variation around `delay`.
    pub jitter: Option<Jitter>,
    /// Loss model.
    pub loss: Option<Loss>,
    /// Rate limit in bits per second, with a tail-drop queue of `queue_bytes`.
    pub rate_bps: Option<u64>,
    /// Queue size for the rate limit; packets that do not fit are dropped.
    pub queue_bytes: usize,
    /// Drop every packet.
    pub blackout: bool,
    /// Drop every IPv4 packet longer than this many bytes (header included), as a path whose
    /// MTU is below the hosts' interfaces (1500) does. netlab never fragments.
    #[serde(default)]
    pub mtu: Option<usize>,
    /// With `mtu`: answer each dropped packet that has DF set with ICMP "fragmentation needed"
    /// (type 3, code 4) carrying the MTU, as a router does (RFC 1191). Without it the drop is
    /// silent: a path MTU blackhole, as behind a firewall that eats ICMP.
    #[serde(default)]
    pub mtu_icmp: bool,
    /// Lower the MSS option of every TCP SYN crossing the link to this many bytes, as a router
    /// with `iptables -j TCPMSS --set-mss` (or `--clamp-mss-to-pmtu`) does: TCP then sends
    /// segments that fit a smaller path MTU while other protocols' large packets do not.
    #[serde(default)]
    pub mss: Option<u16>,
    /// Drop ICMP and ICMPv6 echo requests and replies (types 8 and 0, 128 and 129), as a
    /// firewall that drops pings does; every other packet, ICMP errors included, crosses.
    #[serde(default)]
    pub drop_ping: bool,
}

/// Default queue for a rate-limited link: 256 KiB, enough for a few TCP windows without
/// adding seconds of bufferbloat at modest rates.
pub const DEFAULT_QUEUE_BYTES: usize = 256 * 1024;

impl Impairment {
    /// A clean link.
    pub fn none() -> Self {
        Self::default()
    }

    /// A fixed one-way delay.
    pub fn delay(d: Duration) -> Self {
        Impairment {
            delay: d,
            ..Self::default()
        }
    }

    /// Drop everything.
    pub fn blackout() -> Self {
        Impairment {
            blackout: true,
            ..Self::default()
        }
    }

    /// Adds normally distributed jitter with standard deviation `sigma`.
    pub fn with_jitter(mut self, sigma: Duration) -> Self {
        self.jitter = Some(Jitter::Normal(sigma));
        self
    }

    /// Adds uniform jitter of +-`half_width`.
    pub fn with_uniform_jitter(mut self, half_width: Duration) -> Self {
        self.jitter = Some(Jitter::Uniform(half_width));
        self
    }

    /// Adds independent random loss with probability `p` (0..=1).
    pub fn with_loss(mut self, p: f64) -> Self {
        self.loss = Some(Loss::Random(p.clamp(0.0, 1.0)));
        self
    }

    /// Adds Gilbert burst loss with long-run rate `rate` and mean burst length `mean_burst`.
    pub fn with_burst_loss(mut self, rate: f64, mean_burst: f64) -> Self {
        self.loss = Some(Loss::Burst {
            rate: rate.clamp(0.0, 1.0),
            mean_burst: mean_burst.max(1.0),
        });
        self
    }

    /// Limits the rate to `bps` bits per second.
    pub fn with_rate(mut self, bps: u64) -> Self {
        self.rate_bps = Some(bps.max(1));
        if self.queue_bytes == 0 {
            self.queue_bytes = DEFAULT_QUEUE_BYTES;
        }
        self
    }

    /// Drops packets longer than `bytes`; `icmp` answers them with "fragmentation needed".
    pub fn with_mtu(mut self, bytes: usize, icmp: bool) -> Self {
        self.mtu = Some(bytes);
        self.mtu_icmp = icmp;
        self
    }

    /// Drops ICMP echo requests and replies (a firewall that drops pings).
    pub fn with_drop_ping(mut self) -> Self {
        self.drop_ping = true;
        self
    }

    /// Clamps the MSS option of TCP SYNs to `bytes`.
    pub fn with_mss(mut self, bytes: u16) -> Self {
        self.mss = Some(bytes);
        self
    }

    /// Whether this is a clean link (packets can be forwarded at once).
    pub fn is_clean(&self) -> bool {
        self.delay.is_zero()
            && self.jitter.is_none()
            && self.loss.is_none()
            && self.rate_bps.is_none()
            && !self.blackout
            && self.mtu.is_none()
            && self.mss.is_none()
            && !self.drop_ping
    }

    /// The delay for one packet: `delay` plus a jitter sample, never negative.
    pub(crate) fn sample_delay(&self, rng: &mut impl Rng) -> Duration {
        let base = self.delay.as_secs_f64();
        let add = match self.jitter {
            None => 0.0,
            Some(Jitter::Normal(sigma)) => {
                let s = sigma.as_secs_f64();
                (standard_normal(rng) * s).clamp(-3.0 * s, 3.0 * s)
            }
            Some(Jitter::Uniform(w)) => {
                let w = w.as_secs_f64();
                if w == 0.0 {
                    0.0
                } else {
                    rng.random_range(-w..=w)
                }
            }
        };
        Duration::from_secs_f64((base + add).max(0.0))
    }
}

/// Box-Muller transform; one normal sample per call is plenty for a packet forwarder.
fn standard_normal(rng: &mut impl Rng) -> f64 {
    let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Per-direction loss state: the Gilbert model needs to remember whether it is in a burst.
#[derive(Debug, Default)]
pub(crate) struct LossState {
    in_burst: bool,
}

impl LossState {
    /// Decides whether to drop the next packet.
    pub(crate) fn drop_packet(&mut self, loss: Option<Loss>, rng: &mut impl Rng) -> bool {
        match loss {
            None => {
                self.in_burst = false;
                false
            }
            Some(Loss::Random(p)) => rng.random::<f64>() < p,
            Some(Loss::Burst { rate, mean_burst }) => {
                if rate <= 0.0 {
                    self.in_burst = false;
                    return false;
                }
                if rate >= 1.0 {
                    return true;
                }
                // Two-state Markov chain. Leaving the bad state with r = 1/mean_burst gives the
                // mean burst length; the stationary loss rate p/(p+r) = rate fixes p.
                let r = 1.0 / mean_burst;
                let p = (rate * r / (1.0 - rate)).min(1.0);
                self.in_burst = if self.in_burst {
                    rng.random::<f64>() >= r
                } else {
                    rng.random::<f64>() < p
                };
                self.in_burst
            }
        }
    }
}

/// Why the text form of an impairment did not parse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseImpairmentError {
    /// `delay`, `loss`, ... without `=VALUE`.
    #[error("`{0}` needs a value")]
    MissingValue(String),
    /// Not a duration humantime reads.
    #[error("`{value}` is not a duration like 25ms: {reason}")]
    Duration {
        /// The text.
        value: String,
        /// humantime's reason.
        reason: String,
    },
    /// Not a percentage or fraction.
    #[error("`{0}` is not a loss like 1% or 0.01")]
    Loss(String),
    /// A loss outside 0..=100%.
    #[error("loss `{0}` must be between 0% and 100%")]
    LossRange(String),
    /// `burst-loss` without the `/LENGTH`.
    #[error("burst-loss wants RATE/LENGTH, got `{0}`")]
    BurstLoss(String),
    /// A burst length that is not a number.
    #[error("burst length `{0}` is not a number")]
    BurstLength(String),
    /// A rate without `bit`, `kbit`, `mbit` or `gbit`.
    #[error("rate `{0}` needs a unit: bit, kbit, mbit or gbit")]
    RateUnit(String),
    /// A rate whose number does not parse.
    #[error("rate `{0}` is not a number")]
    Rate(String),
    /// A queue size that does not parse.
    #[error("queue `{0}` is not a size like 64k")]
    Queue(String),
    /// An MTU that is not a packet size netlab can apply.
    #[error("mtu `{0}` is not a packet size from 68 to 1500 bytes, optionally followed by /icmp (mtu=1400 drops larger packets silently, mtu=1400/icmp answers them with ICMP fragmentation needed)")]
    Mtu(String),
    /// A key the text form does not have.
    #[error("mss `{0}` is not a TCP MSS from 88 to 1460 bytes (mss=1360 clamps the MSS option of SYNs, as iptables TCPMSS does)")]
    Mss(String),
    #[error("unknown impairment `{0}` (expected delay, jitter, ujitter, loss, burst-loss, rate, queue, mtu, mss, drop-ping, blackout or none)")]
    Unknown(String),
}

/// The text form, used by the `netlab` binary: comma-separated `key=value` items and flags.
///
/// `delay=25ms`, `jitter=2ms` (normal sigma), `ujitter=5ms` (uniform half-width), `loss=1%`,
/// `burst-loss=5%/4` (rate / mean burst length), `rate=10mbit` (or kbit, gbit, bit), `queue=64k`,
/// `mtu=1400` (drop larger packets silently) or `mtu=1400/icmp` (answer them with ICMP
/// "fragmentation needed"), `mss=1360` (clamp the MSS option of TCP SYNs), `drop-ping` (drop ICMP
/// echoes), `blackout`, `none`.
impl FromStr for Impairment {
    type Err = ParseImpairmentError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut imp = Impairment::none();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (item, None),
            };
            let need = || value.ok_or_else(|| ParseImpairmentError::MissingValue(key.into()));
            match key {
                "none" => imp = Impairment::none(),
                "blackout" => imp.blackout = true,
                "drop-ping" => imp.drop_ping = true,
                "delay" => imp.delay = parse_duration(need()?)?,
                "jitter" => imp.jitter = Some(Jitter::Normal(parse_duration(need()?)?)),
                "ujitter" => imp.jitter = Some(Jitter::Uniform(parse_duration(need()?)?)),
                "loss" => imp = imp.with_loss(parse_percent(need()?)?),
                "burst-loss" => {
                    let v = need()?;
                    let (rate, len) = v
                        .split_once('/')
                        .ok_or_else(|| ParseImpairmentError::BurstLoss(v.into()))?;
                    let len: f64 = len
                        .parse()
                        .map_err(|_| ParseImpairmentError::BurstLength(len.into()))?;
                    imp = imp.with_burst_loss(parse_percent(rate)?, len);
                }
                "rate" => imp = imp.with_rate(parse_rate(need()?)?),
                "queue" => imp.queue_bytes = parse_bytes(need()?)?,
                "mtu" => {
                    let v = need()?;
                    let (size, icmp) = match v.split_once('/') {
                        Some((n, "icmp")) => (n, true),
                        Some(_) => return Err(ParseImpairmentError::Mtu(v.into())),
                        None => (v, false),
                    };
                    let size: usize = size
                        .parse()
                        .ok()
                        .filter(|n| (68..=1500).contains(n))
                        .ok_or_else(|| ParseImpairmentError::Mtu(v.into()))?;
                    imp = imp.with_mtu(size, icmp);
                }
                "mss" => {
                    let v = need()?;
                    let mss: u16 = v
                        .parse()
                        .ok()
                        .filter(|n| (88..=1460).contains(n))
                        .ok_or_else(|| ParseImpairmentError::Mss(v.into()))?;
                    imp = imp.with_mss(mss);
                }
                other => return Err(ParseImpairmentError::Unknown(other.into())),
            }
        }
        Ok(imp)
    }
}

impl fmt::Display for Impairment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.blackout {
            parts.push("blackout".to_string());
        }
        if self.drop_ping {
            parts.push("drop-ping".to_string());
        }
        if !self.delay.is_zero() {
            parts.push(format!("delay={}", fmt_duration(self.delay)));
        }
        match self.jitter {
            Some(Jitter::Normal(d)) => parts.push(format!("jitter={}", fmt_duration(d))),
            Some(Jitter::Uniform(d)) => parts.push(format!("ujitter={}", fmt_duration(d))),
            None => {}
        }
        match self.loss {
            Some(Loss::Random(p)) => parts.push(format!("loss={}%", p * 100.0)),
            Some(Loss::Burst { rate, mean_burst }) => {
                parts.push(format!("burst-loss={}%/{}", rate * 100.0, mean_burst))
            }
            None => {}
        }
        if let Some(r) = self.rate_bps {
            parts.push(format!("rate={r}bit"));
        }
        if let Some(m) = self.mtu {
            parts.push(format!(
                "mtu={m}{}",
                if self.mtu_icmp { "/icmp" } else { "" }
            ));
        }
        if let Some(m) = self.mss {
            parts.push(format!("mss={m}"));
        }
        if parts.is_empty() {
            parts.push("none".to_string());
        }
        f.write_str(&parts.join(","))
    }
}

fn fmt_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms.fract() == 0.0 {
        format!("{ms:.0}ms")
    } else {
        format!("{}us", d.as_micros())
    }
}

fn parse_duration(v: &str) -> Result<Duration, ParseImpairmentError> {
    humantime::parse_duration(v).map_err(|e| ParseImpairmentError::Duration {
        value: v.into(),
        reason: e.to_string(),
    })
}

fn parse_percent(v: &str) -> Result<f64, ParseImpairmentError> {
    let (num, scale) = match v.strip_suffix('%') {
        Some(n) => (n, 100.0),
        None => (v, 1.0),
    };
    let p: f64 = num
        .parse()
        .map_err(|_| ParseImpairmentError::Loss(v.into()))?;
    let p = p / scale;
    if !(0.0..=1.0).contains(&p) {
        return Err(ParseImpairmentError::LossRange(v.into()));
    }
    Ok(p)
}

fn parse_rate(v: &str) -> Result<u64, ParseImpairmentError> {
    let lower = v.to_ascii_lowercase();
    let (num, mult) = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)]
        .iter()
        .find_map(|(suf, m)| lower.strip_suffix(suf).map(|n| (n.to_string(), *m)))
        .ok_or_else(|| ParseImpairmentError::RateUnit(v.into()))?;
    let n: f64 = num
        .trim()
        .parse()
        .map_err(|_| ParseImpairmentError::Rate(v.into()))?;
    Ok((n * mult) as u64)
}

fn parse_bytes(v: &str) -> Result<usize, ParseImpairmentError> {
    let lower = v.to_ascii_lowercase();
    let (num, mult) = match lower.chars().last() {
        Some('k') => (&lower[..lower.len() - 1], 1024),
        Some('m') => (&lower[..lower.len() - 1], 1024 * 1024),
        _ => (lower.as_str(), 1),
    };
    num.parse::<usize>()
        .map(|n| n * mult)
        .map_err(|_| ParseImpairmentError::Queue(v.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn parses_and_prints_text_form() {
        let imp: Impairment = "delay=25ms,jitter=2ms,loss=1%,rate=10mbit".parse().unwrap();
        assert_eq!(imp.delay, Duration::from_millis(25));
        assert_eq!(imp.jitter, Some(Jitter::Normal(Duration::from_millis(2))));
        assert_eq!(imp.loss, Some(Loss::Random(0.01)));
        assert_eq!(imp.rate_bps, Some(10_000_000));
        assert_eq!(
            imp.to_string(),
            "delay=25ms,jitter=2ms,loss=1%,rate=10000000bit"
        );
        assert!("blackout".parse::<Impairment>().unwrap().blackout);
        let ping: Impairment = "delay=1ms,drop-ping".parse().unwrap();
        assert!(ping.drop_ping && !ping.is_clean());
        assert_eq!(ping.to_string().parse::<Impairment>().unwrap(), ping);
        let imp: Impairment = "delay=5ms,mtu=1400".parse().unwrap();
        assert_eq!((imp.mtu, imp.mtu_icmp), (Some(1400), false));
        assert!(!imp.is_clean());
        assert_eq!(imp.to_string(), "delay=5ms,mtu=1400");
        let imp: Impairment = "mtu=1400,mss=1360".parse().unwrap();
        assert_eq!((imp.mtu, imp.mss), (Some(1400), Some(1360)));
        assert_eq!(imp.to_string(), "mtu=1400,mss=1360");
        assert!(!imp.is_clean());
        assert!("mss=20".parse::<Impairment>().is_err());
        let imp: Impairment = "mtu=1280/icmp".parse().unwrap();
        assert_eq!((imp.mtu, imp.mtu_icmp), (Some(1280), true));
        assert_eq!(imp.to_string(), "mtu=1280/icmp");
        assert!("none".parse::<Impairment>().unwrap().is_clean());
    }

    #[test]
    fn rejects_bad_text_with_a_reason() {
        let e = |s: &str| s.parse::<Impairment>().unwrap_err().to_string();
        let m = e("delay=fast");
        assert!(m.contains("not a duration"), "{m}");
        let m = e("loss=150%");
        assert!(m.contains("between 0% and 100%"), "{m}");
        let m = e("latency=5ms");
        assert!(m.contains("unknown impairment `latency`"), "{m}");
        let m = e("rate=10");
        assert!(m.contains("needs a unit"), "{m}");
        assert_eq!(e("delay"), "`delay` needs a value");
        assert_eq!(e("burst-loss=5%"), "burst-loss wants RATE/LENGTH, got `5%`");
        assert_eq!(e("queue=lots"), "queue `lots` is not a size like 64k");
        for bad in ["mtu=9000", "mtu=big", "mtu=1400/quiet", "mtu=20"] {
            assert!(
                e(bad).contains("is not a packet size from 68 to 1500"),
                "{bad}"
            );
        }
    }

    #[test]
    fn burst_loss_has_the_requested_rate_and_burst_length() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut st = LossState::default();
        let loss = Some(Loss::Burst {
            rate: 0.1,
            mean_burst: 4.0,
        });
        let n = 200_000;
        let (mut lost, mut bursts, mut prev) = (0u32, 0u32, false);
        for _ in 0..n {
            let d = st.drop_packet(loss, &mut rng);
            lost += d as u32;
            if d && !prev {
                bursts += 1;
            }
            prev = d;
        }
        let rate = f64::from(lost) / f64::from(n);
        let mean_burst = f64::from(lost) / f64::from(bursts);
        assert!((rate - 0.1).abs() < 0.01, "rate {rate}");
        assert!((mean_burst - 4.0).abs() < 0.3, "burst {mean_burst}");
    }

    #[test]
    fn normal_jitter_has_the_requested_sigma_and_never_goes_negative() {
        let mut rng = SmallRng::seed_from_u64(1);
        let imp =
            Impairment::delay(Duration::from_millis(10)).with_jitter(Duration::from_millis(2));
        let xs: Vec<f64> = (0..50_000)
            .map(|_| imp.sample_delay(&mut rng).as_secs_f64() * 1e3)
            .collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64).sqrt();
        assert!((mean - 10.0).abs() < 0.05, "mean {mean}");
        assert!((sd - 2.0).abs() < 0.1, "sd {sd}");
        let imp = Impairment::delay(Duration::from_millis(1)).with_jitter(Duration::from_millis(5));
        assert!((0..10_000).all(|_| imp.sample_delay(&mut rng) >= Duration::ZERO));
    }
}
