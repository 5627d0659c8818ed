//! Ground-truth measurements of the fabric itself: ping RTT and TCP connect time between hosts.
//!
//! The fabric bounds every accuracy claim joinguard makes, so netlab measures itself with tools
//! that do not share code with joinguard: the system `ping` (iputils) and plain `connect(2)`.
//! Used by the fabric tests and by `netlab accuracy`.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::{Error, Host};

/// Summary of a set of RTT samples in milliseconds.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Rtt {
    pub samples: usize,
    pub min_ms: f64,
    pub median_ms: f64,
    pub mean_ms: f64,
    pub max_ms: f64,
}

impl Rtt {
    /// Summarises samples (in ms). Empty input gives NaN figures.
    pub fn from_ms(mut xs: Vec<f64>) -> Rtt {
        xs.sort_by(f64::total_cmp);
        let n = xs.len();
        let nan = f64::NAN;
        Rtt {
            samples: n,
            min_ms: xs.first().copied().unwrap_or(nan),
            median_ms: if n == 0 { nan } else { xs[n / 2] },
            mean_ms: if n == 0 {
                nan
            } else {
                xs.iter().sum::<f64>() / n as f64
            },
            max_ms: xs.last().copied().unwrap_or(nan),
        }
    }
}

/// Pings `to` from `from` `count` times, `interval` apart, and returns the per-reply RTTs parsed
/// from iputils `ping` output.
pub fn ping(from: &Host, to: &Host, count: u32, interval: Duration) -> Result<Rtt, Error> {
    let out = from
        .command("ping")
        .arg("-n")
        .arg("-c")
        .arg(count.to_string())
        .arg("-i")
        .arg(format!("{:.3}", interval.as_secs_f64()))
        .arg("-W")
        .arg("2")
        .arg(to.ip().to_string())
        .output()
        .map_err(|e| Error::Prerequisite(format!("ping (apt-get install iputils-ping): {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let xs: Vec<f64> = text
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next())
        .filter_map(|t| t.parse().ok())
        .collect();
    Ok(Rtt::from_ms(xs))
}

/// A TCP listener inside `host` that accepts and closes connections until dropped.
#[derive(Debug)]
pub struct SinkListener {
    pub addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SinkListener {
    /// Binds `host:port` inside the host and starts accepting.
    pub fn start(host: &Host, port: u16) -> Result<SinkListener, Error> {
        let addr = SocketAddr::new(host.ip(), port);
        let listener = host
            .run(|| TcpListener::bind(addr))?
            .map_err(|e| Error::Netns(format!("bind {addr}: {e}")))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::Netns(format!("listener: {e}")))?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let st = stop.clone();
        let thread = std::thread::spawn(move || {
            while !st.load(std::sync::atomic::Ordering::Relaxed) {
                match listener.accept() {
                    Ok((s, _)) => drop(s),
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        Ok(SinkListener {
            addr,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for SinkListener {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Times `count` TCP connects from `from` to `to`, `gap` apart, each on a fresh connection.
/// Failed connects are left out of the figures.
pub fn tcp_connect(from: &Host, to: SocketAddr, count: u32, gap: Duration) -> Result<Rtt, Error> {
    from.run(|| {
        let mut xs = Vec::new();
        for _ in 0..count {
            let t = Instant::now();
            if let Ok(s) = TcpStream::connect_timeout(&to, Duration::from_secs(3)) {
                xs.push(t.elapsed().as_secs_f64() * 1e3);
                drop(s);
            }
            std::thread::sleep(gap);
        }
        Rtt::from_ms(xs)
    })
}

/// Times `count` UDP echo round trips from `from` to an echo socket in `to`, `gap` apart, with
/// microsecond resolution (ping prints 0.1 ms steps above 10 ms). Lost echoes are left out.
pub fn udp_echo(
    from: &Host,
    to: &Host,
    port: u16,
    count: u32,
    gap: Duration,
) -> Result<Rtt, Error> {
    let addr = SocketAddr::new(to.ip(), port);
    let server = to
        .run(|| std::net::UdpSocket::bind(addr))?
        .map_err(|e| Error::Netns(format!("bind {addr}: {e}")))?;
    server
        .set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| Error::Netns(e.to_string()))?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let st = stop.clone();
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while !st.load(std::sync::atomic::Ordering::Relaxed) {
            if let Ok((n, peer)) = server.recv_from(&mut buf) {
                let _ = server.send_to(&buf[..n], peer);
            }
        }
    });
    let result = from.run(|| {
        let any: SocketAddr = if addr.is_ipv6() {
            "[::]:0".parse().expect("literal")
        } else {
            "0.0.0.0:0".parse().expect("literal")
        };
        let sock = std::net::UdpSocket::bind(any).ok()?;
        sock.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
        let mut xs = Vec::new();
        let mut buf = [0u8; 64];
        for i in 0..count {
            let t = Instant::now();
            sock.send_to(&i.to_be_bytes(), addr).ok()?;
            // Skip late replies of earlier probes.
            while let Ok(n) = sock.recv(&mut buf) {
                if n == 4 && buf[..4] == i.to_be_bytes() {
                    xs.push(t.elapsed().as_secs_f64() * 1e3);
                    break;
                }
            }
            std::thread::sleep(gap);
        }
        Some(Rtt::from_ms(xs))
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = echo.join();
    result?.ok_or_else(|| Error::Netns("udp echo socket".into()))
}
