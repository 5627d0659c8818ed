//! The network: one forwarder thread that holds a TUN device in every host and moves IPv4 and
//! IPv6 packets between them, applying each direction's [`Impairment`] to both families alike.
//!
//! Why a userspace forwarder: the kernel here has no netem, and a TCP proxy would complete the
//! handshake locally and hide connect latency. Packets are real IP packets, so TCP handshakes,
//! retransmits, ICMP and TLS all behave as on a wire.
//!
//! Multi-hop labs: with a path table (from [`crate::LabBuilder::route`]), a packet read from host
//! `a` for host `b` goes to the next hop of the route from `a` to `b` instead of to `b`. Routers
//! are ordinary hosts with kernel forwarding on, so their kernels decrement the TTL and send real
//! ICMP Time Exceeded; the forwarder only picks the next TUN. Impairments and counters are then
//! per link (the host a packet was read from, the host it is delivered to), so a delay can sit on
//! one hop of a path. Without routes every pair is one link, as before.
//!
//! One thread runs an event loop: `ppoll` on every TUN fd with a nanosecond timeout set to the
//! next scheduled release, so a delayed packet leaves within the kernel's wake-up latency
//! (timer slack is set to 1 us and the thread asks for SCHED_FIFO). Clean links are forwarded at
//! once without touching the timer heap. This module must not know about etcd or tests.

#![allow(unsafe_code)] // poll(2), prctl(2) and sched_setscheduler(2) on the TUN glue thread.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::Serialize;

use crate::host::Host;
use crate::impair::{Impairment, LossState};

/// Largest packet we read from a TUN device (its MTU is 1500).
const MAX_PACKET: usize = 65_536;
/// Packets read from one device per loop turn, so one busy host cannot starve the others.
const READ_BURST: usize = 64;
/// Longest sleep of the loop, which bounds how long shutdown takes.
const IDLE_WAKE: Duration = Duration::from_millis(20);
/// The loop sleeps until this long before a release and spins for the rest. A VM's timer
/// wake-up is 50 to 150 us late even with 1 us timer slack; spinning the last stretch keeps the
/// added one-way error near 10 us (figures in docs/netlab.md).
const SPIN: Duration = Duration::from_micros(200);

/// Counters of one direction of one pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PairStats {
    pub forwarded: u64,
    pub bytes: u64,
    pub dropped_loss: u64,
    pub dropped_blackout: u64,
    pub dropped_queue: u64,
    /// Dropped for being longer than the link's `mtu` (answered or not).
    pub dropped_mtu: u64,
    /// ICMP echoes dropped by `drop-ping`.
    #[serde(default)]
    pub dropped_ping: u64,
}

#[derive(Default)]
struct AtomicStats {
    forwarded: AtomicU64,
    bytes: AtomicU64,
    dropped_loss: AtomicU64,
    dropped_blackout: AtomicU64,
    dropped_queue: AtomicU64,
    dropped_mtu: AtomicU64,
    dropped_ping: AtomicU64,
}

/// Mutable state of one direction: its configuration and what the rate and ordering rules need.
#[derive(Default)]
struct Direction {
    imp: Impairment,
    loss: LossState,
    /// When the rate limiter's "wire" is next free.
    wire_free: Option<Instant>,
    /// Release time of the previous packet: jitter never reorders.
    last_release: Option<Instant>,
}

struct Shared {
    names: Vec<String>,
    /// Each host's IPv4 address, and its IPv6 address in an IPv6 or dual-stack lab.
    addrs: Vec<(Ipv4Addr, Option<Ipv6Addr>)>,
    /// `next[from * n + dst]`: the host a packet read from `from` for `dst` is delivered to, when
    /// a route says so; `None` delivers it to `dst` directly. Fixed when the lab is built.
    next: Vec<Option<usize>>,
    /// Two per direction of each pair: `dirs[2 * (from * n + to) + family]`, family 0 for IPv4
    /// packets and 1 for IPv6 ones, so one family's path can be impaired alone (a dual-stack
    /// name whose AAAA path is dark). Every setter but [`Network::set_family`] sets both.
    dirs: Mutex<Vec<Direction>>,
    stats: Vec<AtomicStats>,
    unroutable: AtomicU64,
    stop: AtomicBool,
}

impl Shared {
    fn n(&self) -> usize {
        self.addrs.len()
    }
}

/// The running forwarder. Dropping it stops the thread and closes every TUN device, which removes
/// them from their namespaces.
pub struct Network {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Network")
            .field("hosts", &self.shared.names)
            .finish()
    }
}

struct Queued {
    at: Instant,
    seq: u64,
    dst: usize,
    packet: Vec<u8>,
}

impl PartialEq for Queued {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Queued {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

impl Network {
    /// Starts the forwarder over `devices` (one per host, index = host index). `next` is the path
    /// table (see [`Shared::next`]); empty means no routes.
    pub(crate) fn start(
        devices: Vec<tun::Device>,
        names: Vec<String>,
        addrs: Vec<(Ipv4Addr, Option<Ipv6Addr>)>,
        next: Vec<Option<usize>>,
        seed: u64,
    ) -> Result<Network, crate::Error> {
        let n = addrs.len();
        let next = if next.is_empty() {
            vec![None; n * n]
        } else {
            next
        };
        if next.len() != n * n {
            return Err(crate::Error::Invalid(format!(
                "path table has {} entries for {n} hosts",
                next.len()
            )));
        }
        for d in &devices {
            d.set_nonblock()
                .map_err(|e| crate::Error::Tun(format!("set nonblocking: {e}")))?;
        }
        let shared = Arc::new(Shared {
            names,
            addrs,
            next,
            dirs: Mutex::new((0..2 * n * n).map(|_| Direction::default()).collect()),
            stats: (0..n * n).map(|_| AtomicStats::default()).collect(),
            unroutable: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        let sh = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("netlab-forwarder".into())
            .spawn(move || run(sh, devices, seed))
            .map_err(|e| crate::Error::Tun(format!("spawn forwarder: {e}")))?;
        Ok(Network {
            shared,
            thread: Some(thread),
        })
    }

    /// Sets the impairment of packets from `from` to `to` (one direction). Takes effect for the
    /// next packet; packets already delayed keep their schedule.
    ///
    /// In a lab with routes this is one *link*: packets the forwarder moves from `from`'s device
    /// to `to`'s. A pair whose traffic is routed through other hosts never crosses its own
    /// link; impair a hop of its route instead (e.g. `set_link(r1, r2, ..)`).
    pub fn set(&self, from: &Host, to: &Host, imp: Impairment) {
        self.set_family(from, to, crate::IpFamily::Dual, imp);
    }

    /// Sets the impairment of one family's packets from `from` to `to` (one direction):
    /// [`crate::IpFamily::V4`] or [`crate::IpFamily::V6`] alone, or both with `Dual` (as
    /// [`Network::set`]).
    pub fn set_family(&self, from: &Host, to: &Host, family: crate::IpFamily, imp: Impairment) {
        let n = self.shared.n();
        let pair = from.index() * n + to.index();
        let mut dirs = lock(&self.shared.dirs);
        for (slot, on) in [(0, family.has_v4()), (1, family.has_v6())] {
            if !on {
                continue;
            }
            let d = &mut dirs[2 * pair + slot];
            d.imp = imp.clone();
            if d.imp.rate_bps.is_none() {
                d.wire_free = None;
            }
        }
    }

    /// [`Network::set_family`] in both directions between `a` and `b`.
    pub fn set_link_family(&self, a: &Host, b: &Host, family: crate::IpFamily, imp: Impairment) {
        self.set_family(a, b, family, imp.clone());
        self.set_family(b, a, family, imp);
    }

    /// Sets the same impairment in both directions between `a` and `b`. A delay given here is per
    /// direction, so the round trip gains twice the delay.
    pub fn set_link(&self, a: &Host, b: &Host, imp: Impairment) {
        self.set(a, b, imp.clone());
        self.set(b, a, imp);
    }

    /// Sets `imp` in both directions between `h` and every other host.
    pub fn set_host(&self, h: &Host, imp: Impairment) {
        let n = self.shared.n();
        let mut dirs = lock(&self.shared.dirs);
        for other in (0..n).filter(|&o| o != h.index()) {
            for pair in [h.index() * n + other, other * n + h.index()] {
                dirs[2 * pair].imp = imp.clone();
                dirs[2 * pair + 1].imp = imp.clone();
            }
        }
    }

    /// Sets `imp` on every direction of every pair.
    pub fn set_all(&self, imp: Impairment) {
        for d in lock(&self.shared.dirs).iter_mut() {
            d.imp = imp.clone();
        }
    }

    /// Makes every link clean again.
    pub fn clear(&self) {
        self.set_all(Impairment::none());
    }

    /// The impairment from `from` to `to` (of IPv4 packets, when the families differ).
    pub fn get(&self, from: &Host, to: &Host) -> Impairment {
        let n = self.shared.n();
        lock(&self.shared.dirs)[2 * (from.index() * n + to.index())]
            .imp
            .clone()
    }

    /// Counters from `from` to `to`.
    pub fn stats(&self, from: &Host, to: &Host) -> PairStats {
        let s = &self.shared.stats[from.index() * self.shared.n() + to.index()];
        PairStats {
            forwarded: s.forwarded.load(Ordering::Relaxed),
            bytes: s.bytes.load(Ordering::Relaxed),
            dropped_loss: s.dropped_loss.load(Ordering::Relaxed),
            dropped_blackout: s.dropped_blackout.load(Ordering::Relaxed),
            dropped_queue: s.dropped_queue.load(Ordering::Relaxed),
            dropped_mtu: s.dropped_mtu.load(Ordering::Relaxed),
            dropped_ping: s.dropped_ping.load(Ordering::Relaxed),
        }
    }

    /// The host a packet from `from` for `to` is handed to: the next hop of their route, or `to`.
    pub fn next_hop(&self, from: &Host, to: &Host) -> usize {
        let n = self.shared.n();
        self.shared.next[from.index() * n + to.index()].unwrap_or(to.index())
    }

    /// Packets whose destination is no host of the lab (dropped).
    pub fn unroutable(&self) -> u64 {
        self.shared.unroutable.load(Ordering::Relaxed)
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave a Direction half-written in a way that matters
    // for a test fabric, so recover the guard instead of cascading the panic.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Ask the kernel for precise wake-ups. Both calls are best effort: without them the forwarder
/// still works, with about 50 us more error per packet.
fn tune_thread() {
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes an integer argument and touches only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
    // Zeroed, then the priority: musl's sched_param has more fields than glibc's (reserved ones
    // for SCHED_SPORADIC), and zero is what both want in them.
    // SAFETY: sched_param is plain integers (and, on musl, timespecs), for which zero is valid.
    let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
    param.sched_priority = 10;
    // SAFETY: `param` is a valid sched_param for the duration of the call; pid 0 is this thread.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_FIFO, &param);
    }
}

fn run(sh: Arc<Shared>, devices: Vec<tun::Device>, seed: u64) {
    tune_thread();
    let n = sh.n();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut heap: BinaryHeap<Reverse<Queued>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut buf = vec![0u8; MAX_PACKET];
    let mut pollfds: Vec<libc::pollfd> = devices
        .iter()
        .map(|d| libc::pollfd {
            fd: d.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();

    while !sh.stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let wait = heap
            .peek()
            .map(|Reverse(q)| q.at.saturating_duration_since(now).saturating_sub(SPIN))
            .unwrap_or(IDLE_WAKE)
            .min(IDLE_WAKE);
        let ts = libc::timespec {
            tv_sec: wait.as_secs() as _, // at most IDLE_WAKE; time_t is deprecated on musl
            tv_nsec: wait.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `pollfds` is a valid array of `n` pollfd structs for the call, `ts` lives
        // across it, and a null sigmask keeps the thread's mask.
        let ready = unsafe {
            libc::ppoll(
                pollfds.as_mut_ptr(),
                pollfds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };

        // A release is close: spin to it instead of trusting another timer wake-up.
        if ready == 0 {
            if let Some(Reverse(q)) = heap.peek() {
                if q.at.saturating_duration_since(Instant::now()) <= SPIN * 2 {
                    while Instant::now() < q.at {
                        std::hint::spin_loop();
                    }
                }
            }
        }
        // Release what is due first: it was scheduled before anything we are about to read.
        let now = Instant::now();
        while heap.peek().is_some_and(|Reverse(q)| q.at <= now) {
            let Reverse(q) = heap.pop().expect("peeked");
            let _ = devices[q.dst].send(&q.packet);
        }

        if ready <= 0 {
            continue;
        }
        for src in 0..n {
            if pollfds[src].revents & libc::POLLIN == 0 {
                continue;
            }
            for _ in 0..READ_BURST {
                let len = match devices[src].recv(&mut buf) {
                    Ok(len) => len,
                    Err(_) => break, // EAGAIN: drained.
                };
                let pkt = &mut buf[..len];
                let dst = match route(&sh.addrs, pkt) {
                    Route::Host(dst) => dst,
                    // IPv6 multicast (a host's MLD reports): no lab host listens to it.
                    Route::Multicast => continue,
                    Route::Unroutable => {
                        sh.unroutable.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                };
                // The next hop toward `dst`, which is `dst` itself unless a route says otherwise.
                let dst = sh.next[src * n + dst].unwrap_or(dst);
                let pair = src * n + dst;
                let stats = &sh.stats[pair];
                let now = Instant::now();
                let release = {
                    let mut dirs = lock(&sh.dirs);
                    let d = &mut dirs[2 * pair + usize::from(pkt[0] >> 4 == 6)];
                    if let Some(mss) = d.imp.mss {
                        clamp_mss(pkt, mss);
                    }
                    if d.imp.drop_ping && is_echo(pkt) {
                        stats.dropped_ping.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    match d.imp.mtu.filter(|m| len > *m) {
                        Some(mtu) => Err(d.imp.mtu_icmp.then_some(mtu)),
                        None => Ok(decide(d, len, now, &mut rng, stats)),
                    }
                };
                let release = match release {
                    Ok(r) => r,
                    Err(answer) => {
                        stats.dropped_mtu.fetch_add(1, Ordering::Relaxed);
                        // The next hop answers at once, as a router on the link would.
                        if let Some(reply) = answer.and_then(|m| too_big(pkt, sh.addrs[dst], m)) {
                            let _ = devices[src].send(&reply);
                        }
                        continue;
                    }
                };
                let Some(at) = release else { continue };
                stats.forwarded.fetch_add(1, Ordering::Relaxed);
                stats.bytes.fetch_add(len as u64, Ordering::Relaxed);
                if at <= now {
                    let _ = devices[dst].send(pkt);
                } else {
                    seq += 1;
                    heap.push(Reverse(Queued {
                        at,
                        seq,
                        dst,
                        packet: pkt.to_vec(),
                    }));
                }
            }
        }
    }
}

/// Lowers the MSS option of a TCP SYN (or SYN-ACK) over IPv4 or IPv6 to `mss` and recomputes
/// the TCP checksum, as `iptables -j TCPMSS --set-mss` does; other packets, IPv6 packets with
/// extension headers before TCP, and SYNs whose MSS is already no larger, are left alone.
/// Returns whether it changed the packet.
fn clamp_mss(pkt: &mut [u8], mss: u16) -> bool {
    let (ihl, addrs) = match pkt.first().map(|b| b >> 4) {
        Some(4) if pkt.len() >= 20 && pkt[9] == 6 => (usize::from(pkt[0] & 0x0f) * 4, 12..20),
        Some(6) if pkt.len() >= 40 && pkt[6] == 6 => (40, 8..40),
        _ => return false,
    };
    if ihl < 20 || pkt.len() < ihl + 20 || pkt[ihl + 13] & 0x02 == 0 {
        return false;
    }
    let doff = usize::from(pkt[ihl + 12] >> 4) * 4;
    let end = ihl + doff;
    if doff < 20 || pkt.len() < end {
        return false;
    }
    let mut i = ihl + 20;
    let at = loop {
        if i + 1 >= end {
            return false;
        }
        match pkt[i] {
            0 => return false,
            1 => i += 1,
            kind => {
                let l = usize::from(pkt[i + 1]);
                if l < 2 || i + l > end {
                    return false;
                }
                if kind == 2 && l == 4 {
                    break i + 2;
                }
                i += l;
            }
        }
    };
    if u16::from_be_bytes([pkt[at], pkt[at + 1]]) <= mss {
        return false;
    }
    pkt[at..at + 2].copy_from_slice(&mss.to_be_bytes());
    // The TCP checksum covers a pseudo header (RFC 793, RFC 8200 8.1): recomputed whole.
    pkt[ihl + 16] = 0;
    pkt[ihl + 17] = 0;
    let seg_len = pkt.len() - ihl;
    let mut pseudo = Vec::with_capacity(40 + seg_len);
    pseudo.extend_from_slice(&pkt[addrs.clone()]);
    if addrs.len() == 8 {
        pseudo.extend_from_slice(&[0, 6]);
        pseudo.extend_from_slice(&u16::try_from(seg_len).unwrap_or(u16::MAX).to_be_bytes());
    } else {
        pseudo.extend_from_slice(&u32::try_from(seg_len).unwrap_or(u32::MAX).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, 6]);
    }
    pseudo.extend_from_slice(&pkt[ihl..]);
    let c = inet_checksum(&pseudo).to_be_bytes();
    pkt[ihl + 16..ihl + 18].copy_from_slice(&c);
    true
}

/// Whether `pkt` is an ICMP echo request or reply (IPv4 types 8 and 0, ICMPv6 128 and 129; an
/// IPv6 echo directly after the fixed header).
fn is_echo(pkt: &[u8]) -> bool {
    match pkt.first().map(|b| b >> 4) {
        Some(4) if pkt.len() >= 20 && pkt[9] == 1 => {
            let ihl = usize::from(pkt[0] & 0x0f) * 4;
            matches!(pkt.get(ihl), Some(0 | 8))
        }
        Some(6) if pkt.len() > 40 && pkt[6] == 58 => matches!(pkt[40], 128 | 129),
        _ => false,
    }
}

/// The answer a router gives to a packet too long for a link of `mtu` bytes: ICMP
/// "fragmentation needed" for IPv4, ICMPv6 Packet Too Big for IPv6, from the next hop's address
/// of the packet's family.
fn too_big(pkt: &[u8], router: (Ipv4Addr, Option<Ipv6Addr>), mtu: usize) -> Option<Vec<u8>> {
    match pkt.first()? >> 4 {
        4 => frag_needed(pkt, router.0, mtu),
        6 => packet_too_big(pkt, router.1?, mtu),
        _ => None,
    }
}

/// ICMPv6 Packet Too Big (type 2, code 0, RFC 4443 3.2) from `router` for an IPv6 packet too
/// long for a link of `mtu` bytes: the MTU, then as much of the packet as fits in 1,280 bytes
/// (RFC 4443 2.4 (c)). IPv6 routers never fragment, so every such packet is answered, but none
/// that is itself an ICMPv6 error (RFC 4443 2.4 (e)) or comes from the unspecified or a
/// multicast address.
fn packet_too_big(pkt: &[u8], router: Ipv6Addr, mtu: usize) -> Option<Vec<u8>> {
    if pkt.len() < 40 || pkt[0] >> 4 != 6 {
        return None;
    }
    if pkt[6] == 58 && pkt.get(40).is_some_and(|t| *t < 128) {
        return None;
    }
    let src: [u8; 16] = pkt[8..24].try_into().ok()?;
    let src_ip = Ipv6Addr::from(src);
    if src_ip.is_unspecified() || src_ip.is_multicast() {
        return None;
    }
    let quote = &pkt[..pkt.len().min(1280 - 40 - 8)];
    let mut icmp = vec![2, 0, 0, 0];
    icmp.extend_from_slice(&u32::try_from(mtu).unwrap_or(u32::MAX).to_be_bytes());
    icmp.extend_from_slice(quote);
    let len = u16::try_from(icmp.len()).ok()?;
    let mut pseudo = Vec::with_capacity(40 + icmp.len());
    pseudo.extend_from_slice(&router.octets());
    pseudo.extend_from_slice(&src);
    pseudo.extend_from_slice(&u32::from(len).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 58]);
    pseudo.extend_from_slice(&icmp);
    let c = inet_checksum(&pseudo).to_be_bytes();
    icmp[2..4].copy_from_slice(&c);
    let l = len.to_be_bytes();
    let mut ip = vec![0x60, 0, 0, 0, l[0], l[1], 58, 64];
    ip.extend_from_slice(&router.octets());
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&icmp);
    Some(ip)
}

/// ICMP "fragmentation needed and DF set" (type 3, code 4, RFC 792 with RFC 1191's next-hop MTU)
/// from `router` for an IPv4 packet too long for a link of `mtu` bytes: `None` when the packet
/// may be fragmented (DF clear: netlab drops it silently, it never fragments) or is itself an
/// ICMP error (RFC 1122 3.2.2: no error about an error).
fn frag_needed(pkt: &[u8], router: Ipv4Addr, mtu: usize) -> Option<Vec<u8>> {
    if pkt.len() < 20 || pkt[0] >> 4 != 4 || pkt[6] & 0x40 == 0 {
        return None;
    }
    let ihl = usize::from(pkt[0] & 0x0f) * 4;
    if ihl < 20 || pkt.len() < ihl {
        return None;
    }
    if pkt[9] == 1 && pkt.len() > ihl && matches!(pkt[ihl], 3 | 4 | 5 | 11 | 12) {
        return None;
    }
    let quote = &pkt[..(ihl + 8).min(pkt.len())];
    let mtu = u16::try_from(mtu).unwrap_or(u16::MAX).to_be_bytes();
    let mut icmp = vec![3, 4, 0, 0, 0, 0, mtu[0], mtu[1]];
    icmp.extend_from_slice(quote);
    let c = inet_checksum(&icmp).to_be_bytes();
    icmp[2..4].copy_from_slice(&c);
    let total = u16::try_from(20 + icmp.len()).ok()?.to_be_bytes();
    let r = router.octets();
    let mut ip = vec![
        0x45, 0xc0, total[0], total[1], 0, 0, 0, 0, 64, 1, 0, 0, r[0], r[1], r[2], r[3], pkt[12],
        pkt[13], pkt[14], pkt[15],
    ];
    let c = inet_checksum(&ip).to_be_bytes();
    ip[10..12].copy_from_slice(&c);
    ip.extend_from_slice(&icmp);
    Some(ip)
}

/// The Internet checksum (RFC 1071) of `bytes`.
fn inet_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Where a packet read from a host goes.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    /// To the host at this index.
    Host(usize),
    /// An IPv6 multicast destination, which no lab host serves (dropped, not counted).
    Multicast,
    /// No host has the destination address, or the packet is not IP.
    Unroutable,
}

/// The destination host of an IPv4 or IPv6 packet, by its destination address.
fn route(addrs: &[(Ipv4Addr, Option<Ipv6Addr>)], pkt: &[u8]) -> Route {
    let found = match pkt.first().map(|b| b >> 4) {
        Some(4) if pkt.len() >= 20 => {
            let dst = Ipv4Addr::new(pkt[16], pkt[17], pkt[18], pkt[19]);
            addrs.iter().position(|(a, _)| *a == dst)
        }
        Some(6) if pkt.len() >= 40 => {
            let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&pkt[24..40]).expect("16 bytes"));
            if dst.is_multicast() {
                return Route::Multicast;
            }
            addrs.iter().position(|(_, a)| *a == Some(dst))
        }
        _ => None,
    };
    found.map_or(Route::Unroutable, Route::Host)
}

/// Applies one direction's impairment to a packet of `len` bytes arriving at `now`: `None` to
/// drop it, or the instant to release it.
fn decide(
    d: &mut Direction,
    len: usize,
    now: Instant,
    rng: &mut SmallRng,
    stats: &AtomicStats,
) -> Option<Instant> {
    if d.imp.is_clean() {
        d.last_release = None;
        return Some(now);
    }
    if d.imp.blackout {
        stats.dropped_blackout.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    if d.loss.drop_packet(d.imp.loss, rng) {
        stats.dropped_loss.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    let mut depart = now;
    if let Some(bps) = d.imp.rate_bps {
        // Serialise the packet onto a wire of `bps`: it leaves when the wire is free plus its
        // own transmission time. A backlog beyond the queue size is tail-dropped, as tbf does.
        let start = d.wire_free.map_or(now, |w| w.max(now));
        let backlog_bytes = start.saturating_duration_since(now).as_secs_f64() * bps as f64 / 8.0;
        if backlog_bytes + len as f64 > d.imp.queue_bytes.max(len) as f64 {
            stats.dropped_queue.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        depart = start + Duration::from_secs_f64(len as f64 * 8.0 / bps as f64);
        d.wire_free = Some(depart);
    }
    let mut at = depart + d.imp.sample_delay(rng);
    if let Some(last) = d.last_release {
        at = at.max(last);
    }
    d.last_release = Some(at);
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SYN from 198.18.0.1:40000 to 198.18.0.3:2380 with the options Linux sends (MSS 1460,
    /// SACK permitted, timestamps, NOP, window scale), TCP checksum valid.
    fn syn() -> Vec<u8> {
        let mut p = vec![
            0x45, 0, 0, 60, 0, 0, 0x40, 0, 64, 6, 0, 0, 198, 18, 0, 1, 198, 18, 0, 3,
        ];
        p.extend_from_slice(&[0x9c, 0x40, 0x09, 0x4c, 0, 0, 0, 1, 0, 0, 0, 0, 0xa0, 0x02]);
        p.extend_from_slice(&[0xfa, 0xf0, 0, 0, 0, 0]);
        p.extend_from_slice(&[
            2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
        ]);
        let mut pseudo = p[12..20].to_vec();
        pseudo.extend_from_slice(&[0, 6, 0, 40]);
        pseudo.extend_from_slice(&p[20..]);
        let c = inet_checksum(&pseudo).to_be_bytes();
        p[36..38].copy_from_slice(&c);
        p
    }

    fn tcp_checksum_ok(p: &[u8]) -> bool {
        let mut pseudo = p[12..20].to_vec();
        pseudo.extend_from_slice(&[0, 6, 0, (p.len() - 20) as u8]);
        pseudo.extend_from_slice(&p[20..]);
        inet_checksum(&pseudo) == 0
    }

    #[test]
    fn mss_clamp_lowers_a_syns_mss_and_keeps_the_checksum_valid() {
        let mut p = syn();
        assert!(tcp_checksum_ok(&p));
        assert!(clamp_mss(&mut p, 1360));
        assert_eq!(u16::from_be_bytes([p[42], p[43]]), 1360);
        assert!(tcp_checksum_ok(&p), "checksum recomputed");
        // Already at or below: untouched.
        assert!(!clamp_mss(&mut p, 1400));
        // Not a SYN: untouched.
        let mut ack = syn();
        ack[33] = 0x10;
        assert!(!clamp_mss(&mut ack, 1360));
        // Not TCP: untouched.
        let mut udp = syn();
        udp[9] = 17;
        assert!(!clamp_mss(&mut udp, 1360));
    }

    /// The SYN of [`syn`] over IPv6: fd00:198:18::1 to fd00:198:18::3, checksum valid.
    fn syn6() -> Vec<u8> {
        let v4 = syn();
        let tcp = &v4[20..];
        let mut p = vec![0x60, 0, 0, 0, 0, tcp.len() as u8, 6, 64];
        p.extend_from_slice(&crate::host_addr6(0).octets());
        p.extend_from_slice(&crate::host_addr6(2).octets());
        p.extend_from_slice(tcp);
        p[40 + 16] = 0;
        p[40 + 17] = 0;
        let c = inet_checksum(&pseudo6(&p)).to_be_bytes();
        p[56..58].copy_from_slice(&c);
        p
    }

    fn pseudo6(p: &[u8]) -> Vec<u8> {
        let mut pseudo = p[8..40].to_vec();
        pseudo.extend_from_slice(&((p.len() - 40) as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, p[6]]);
        pseudo.extend_from_slice(&p[40..]);
        pseudo
    }

    #[test]
    fn mss_clamp_works_over_ipv6() {
        let mut p = syn6();
        assert_eq!(inet_checksum(&pseudo6(&p)), 0);
        assert!(clamp_mss(&mut p, 1220));
        assert_eq!(u16::from_be_bytes([p[62], p[63]]), 1220);
        assert_eq!(inet_checksum(&pseudo6(&p)), 0, "checksum recomputed");
        assert!(!clamp_mss(&mut p, 1400));
    }

    #[test]
    fn packets_are_routed_by_either_family_and_multicast_is_set_aside() {
        let addrs: Vec<_> = (0..3)
            .map(|i| (crate::lab::host_addr(i), Some(crate::host_addr6(i))))
            .collect();
        assert_eq!(route(&addrs, &syn()), Route::Host(2));
        assert_eq!(route(&addrs, &syn6()), Route::Host(2));
        let mut mld = syn6();
        mld[24] = 0xff;
        mld[25] = 0x02;
        assert_eq!(route(&addrs, &mld), Route::Multicast);
        let mut elsewhere = syn6();
        elsewhere[39] = 9;
        assert_eq!(route(&addrs, &elsewhere), Route::Unroutable);
        assert_eq!(route(&addrs, &[0x60; 20]), Route::Unroutable, "truncated");
    }

    #[test]
    fn packet_too_big_quotes_the_packet_and_carries_the_mtu() {
        let router = crate::host_addr6(2);
        let mut pkt = syn6();
        pkt.resize(1500, 0);
        let r = packet_too_big(&pkt, router, 1400).expect("answered");
        assert_eq!(r.len(), 1280, "at most the minimum MTU");
        assert_eq!((r[0] >> 4, r[6]), (6, 58), "IPv6 carrying ICMPv6");
        assert_eq!(&r[8..24], &router.octets(), "from the router");
        assert_eq!(&r[24..40], &pkt[8..24], "to the sender");
        assert_eq!((r[40], r[41]), (2, 0), "Packet Too Big");
        assert_eq!(u32::from_be_bytes([r[44], r[45], r[46], r[47]]), 1400);
        assert_eq!(&r[48..], &pkt[..1280 - 48], "the packet, cut to fit");
        assert_eq!(usize::from(u16::from_be_bytes([r[4], r[5]])), 1240);
        assert_eq!(inet_checksum(&pseudo6(&r)), 0, "ICMPv6 checksum verifies");
        // Never an error about an ICMPv6 error; an echo request is answered.
        let mut icmp = pkt.clone();
        icmp[6] = 58;
        icmp[40] = 1;
        assert!(packet_too_big(&icmp, router, 1400).is_none());
        icmp[40] = 128;
        assert!(packet_too_big(&icmp, router, 1400).is_some());
        // too_big answers by the packet's family.
        let both = (Ipv4Addr::new(198, 18, 0, 3), Some(router));
        assert_eq!(too_big(&pkt, both, 1400).map(|r| r[0] >> 4), Some(6));
    }

    #[test]
    fn frag_needed_quotes_the_packet_and_carries_the_mtu() {
        // A 1500-byte TCP packet from 198.18.0.1 to 198.18.0.3 with DF set.
        let mut pkt = vec![0u8; 1500];
        pkt[..20].copy_from_slice(&[
            0x45, 0, 0x05, 0xdc, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 198, 18, 0, 1, 198, 18, 0, 3,
        ]);
        pkt[20..28].copy_from_slice(&[0x9c, 0x40, 0x09, 0x54, 1, 2, 3, 4]);
        let r = frag_needed(&pkt, Ipv4Addr::new(198, 18, 0, 3), 1400).expect("DF set");
        assert_eq!(r.len(), 20 + 8 + 28);
        assert_eq!(&r[12..16], &[198, 18, 0, 3], "from the router");
        assert_eq!(&r[16..20], &[198, 18, 0, 1], "to the sender");
        assert_eq!((r[9], r[20], r[21]), (1, 3, 4), "ICMP type 3 code 4");
        assert_eq!(u16::from_be_bytes([r[26], r[27]]), 1400);
        assert_eq!(&r[28..], &pkt[..28], "the original header and 8 bytes");
        assert_eq!(inet_checksum(&r[..20]), 0, "IP checksum verifies");
        assert_eq!(inet_checksum(&r[20..]), 0, "ICMP checksum verifies");
        // DF clear: dropped silently (netlab does not fragment).
        pkt[6] = 0;
        assert!(frag_needed(&pkt, Ipv4Addr::new(198, 18, 0, 3), 1400).is_none());
        // Never an error about an ICMP error.
        pkt[6] = 0x40;
        pkt[9] = 1;
        pkt[20] = 3;
        assert!(frag_needed(&pkt, Ipv4Addr::new(198, 18, 0, 3), 1400).is_none());
    }
}
