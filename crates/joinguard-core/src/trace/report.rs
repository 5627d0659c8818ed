//! Presentation of traces: the mtr `--report`-like table, the sentences that say what the table
//! means, and the JSON shape. Used by `joinguard trace` and by the preflight report.
//!
//! Writes to a caller-given writer, never to stdout itself; measures and judges nothing.

use std::io::{self, Write};

use serde::Serialize;

use super::analysis::{attribute, Attribution};
use super::{FinalReply, PathTrace, TraceProtocol};
use crate::failure::Ending;

/// Version of the `joinguard trace -o json` shape. Adding keys is compatible.
pub const SCHEMA_VERSION: u32 = 2;

/// A trace with what it means: the form both reports carry.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TracedPath {
    #[serde(flatten)]
    pub trace: PathTrace,
    pub attribution: Attribution,
    /// The findings as sentences, as the text report prints them.
    pub findings: Vec<String>,
}

impl TracedPath {
    pub fn new(trace: PathTrace) -> TracedPath {
        let attribution = attribute(&trace);
        let findings = findings(&trace, &attribution);
        TracedPath {
            trace,
            attribution,
            findings,
        }
    }

    /// Done when the target answered every probe sent to it, else Failed.
    pub fn ending(&self) -> Ending {
        let clean_at_target = self
            .trace
            .hops
            .last()
            .is_some_and(|h| h.is_target && h.received == h.sent && h.sent > 0);
        if self.trace.reached && clean_at_target {
            Ending::Done
        } else {
            Ending::Failed
        }
    }
}

/// `joinguard trace -o json`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct CommandJson<'a> {
    schema_version: u32,
    #[serde(flatten)]
    path: &'a TracedPath,
}

impl crate::render::Render for TracedPath {
    fn render(&self, output: crate::spec::Output, w: &mut dyn Write) -> io::Result<()> {
        match output {
            crate::spec::Output::Text => render_text(self, "[trace]", w),
            crate::spec::Output::Json => render_json(self, w),
        }
    }
}

/// Writes one JSON object and a newline.
pub(crate) fn render_json<W: Write + ?Sized>(p: &TracedPath, w: &mut W) -> io::Result<()> {
    serde_json::to_writer_pretty(
        &mut *w,
        &CommandJson {
            schema_version: SCHEMA_VERSION,
            path: p,
        },
    )?;
    writeln!(w)
}

/// Writes the headline, the hop table and the findings, each finding line prefixed with `tag`
/// (`[trace]` or `[preflight]`).
pub(crate) fn render_text<W: Write + ?Sized>(
    p: &TracedPath,
    tag: &str,
    w: &mut W,
) -> io::Result<()> {
    writeln!(w, "{tag} {}", headline(&p.trace))?;
    write_table(&p.trace, w)?;
    for f in &p.findings {
        writeln!(w, "{tag} {f}")?;
    }
    Ok(())
}

/// "Trace to 198.18.0.4 with TCP SYNs to port 2380, 10 cycles".
pub fn headline(t: &PathTrace) -> String {
    let name = if t.target == t.address.to_string() {
        t.address.to_string()
    } else {
        format!("{} ({})", t.target, t.address)
    };
    let how = match (t.protocol, t.port) {
        (TraceProtocol::Icmp, _) => "ICMP echo".to_string(),
        (TraceProtocol::Udp, Some(p)) => format!("UDP to port {p}"),
        (TraceProtocol::Udp, None) => "UDP to ports 33434 and up".to_string(),
        (TraceProtocol::Tcp, Some(p)) => format!("TCP SYNs to port {p}"),
        (TraceProtocol::Tcp, None) => "TCP SYNs".to_string(),
    };
    let size = t
        .size
        .map_or(String::new(), |s| format!(" of {s} bytes (DF set)"));
    format!(
        "Trace to {name} with {how}{size}, {} cycle{}:",
        t.cycles,
        if t.cycles == 1 { "" } else { "s" }
    )
}

/// The mtr `--report` table: one row per hop.
pub(crate) fn write_table<W: Write + ?Sized>(t: &PathTrace, w: &mut W) -> io::Result<()> {
    let shown: Vec<String> = t
        .hops
        .iter()
        .map(|h| {
            let addr = h.address.map_or("???".to_string(), |a| a.to_string());
            let mut s = match &h.name {
                Some(n) => format!("{n} ({addr})"),
                None => addr,
            };
            if !h.other_addresses.is_empty() {
                s.push_str(&format!(" +{}", h.other_addresses.len()));
            }
            s
        })
        .collect();
    let aw = shown.iter().map(String::len).max().unwrap_or(0).max(7);
    // With --size, an MTU column: the MTU where it drops, blank elsewhere.
    let mtu_col = |v: Option<String>| match (t.size, v) {
        (None, _) => String::new(),
        (Some(_), v) => format!("  {:>5}", v.unwrap_or_default()),
    };
    writeln!(
        w,
        "{:>3}  {:<aw$}  {:>6}  {:>4}  {:>4}  {:>8}  {:>8}  {:>8}  {:>8}  {:>7}{}",
        "HOP",
        "ADDRESS",
        "LOSS%",
        "SNT",
        "RCV",
        "LAST",
        "AVG",
        "BEST",
        "WRST",
        "JTTR",
        mtu_col(Some("MTU".into()))
    )?;
    let cell = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
    for (h, addr) in t.hops.iter().zip(&shown) {
        writeln!(
            w,
            "{:>3}  {:<aw$}  {:>5.1}%  {:>4}  {:>4}  {:>8}  {:>8}  {:>8}  {:>8}  {:>7}{}",
            h.ttl,
            addr,
            h.loss_pct,
            h.sent,
            h.received,
            cell(h.last_ms),
            cell(h.avg_ms),
            cell(h.min_ms),
            cell(h.max_ms),
            cell(h.jitter_ms),
            mtu_col(h.mtu.map(|m| m.to_string())),
        )?;
    }
    Ok(())
}

fn hop_name(hop: u8, addr: Option<std::net::IpAddr>) -> String {
    match addr {
        Some(a) => format!("hop {hop} ({a})"),
        None => format!("hop {hop}"),
    }
}

/// What the table means, in sentences: reached or where it went dark, and where latency and
/// loss first appear.
pub fn findings(t: &PathTrace, a: &Attribution) -> Vec<String> {
    let mut out = Vec::new();
    let port = t.port.map_or(String::new(), |p| format!(" {p}"));
    if t.reached {
        let hop = t.hops.last().map_or(0, |h| h.ttl);
        let how = match t.final_reply {
            Some(FinalReply::SynAck) => format!("SYN-ACK: port{port} is open"),
            Some(FinalReply::Rst) => format!("RST: the host is up, port{port} is closed"),
            Some(FinalReply::EchoReply) => "echo reply".to_string(),
            Some(FinalReply::PortUnreachable) => "port unreachable: the host is up".to_string(),
            Some(FinalReply::Unreachable { code }) => {
                format!("destination unreachable, code {code}")
            }
            None => "answered".to_string(),
        };
        out.push(format!("{} reached at hop {hop} ({how})", t.address));
    } else {
        let last = t.hops.iter().rev().find(|h| h.received > 0);
        match (t.final_reply, last) {
            (Some(FinalReply::Unreachable { code }), Some(h)) => out.push(format!(
                "{} not reached: {} answered destination unreachable (ICMP code {code}: {})",
                t.address,
                hop_name(h.ttl, h.address),
                unreachable_meaning(code)
            )),
            (_, Some(h)) => out.push(format!(
                "{} not reached: the last hop that answered is {}; nothing answered beyond it \
                 (a firewall or a dark link after that hop, or a target that drops {} probes)",
                t.address,
                hop_name(h.ttl, h.address),
                t.protocol.as_str()
            )),
            (_, None) => out.push(format!(
                "{} not reached: no hop answered (check this host's firewall and its first \
                 router; some networks drop {} probes: trace with another protocol, `joinguard trace \
                 --protocol tcp`)",
                t.address,
                t.protocol.as_str()
            )),
        }
    }
    let too_big = if t.address.is_ipv6() {
        "ICMPv6 \"Packet Too Big\""
    } else {
        "\"fragmentation needed\""
    };
    for h in t.hops.iter().filter(|h| h.mtu.is_some()) {
        let (mtu, from) = (h.mtu.unwrap_or_default(), h.mtu_from);
        out.push(format!(
            "the path MTU drops to {mtu} bytes at {}: {} answered larger probes with \
             {too_big}, and later probes went at {mtu} bytes (the kernel copes while this ICMP \
             arrives; a firewall that drops it makes the path a blackhole)",
            hop_name(h.ttl, h.address),
            from.map_or("a router".to_string(), |f| f.to_string()),
        ));
    }
    let silent = !matches!(t.final_reply, Some(FinalReply::Unreachable { .. }));
    if let (Some(size), false, true) = (t.size, t.reached, silent) {
        out.push(format!(
            "probes were {size} bytes with DF set: if a trace of the default size \
             (`joinguard trace` without `--size`) reaches {}, \
             packets of this size are dropped silently past the last hop that answered (a path \
             MTU blackhole); `joinguard preflight` measures the largest size that crosses \
             (PathMTU)",
            t.address
        ));
    }
    if let Some(l) = &a.latency {
        out.push(format!(
            "latency first appears at {}: +{:.1} ms",
            hop_name(l.hop, l.address),
            l.added_ms
        ));
    }
    if let Some(l) = &a.loss {
        out.push(format!(
            "loss first appears at {}: {:.1}% of probes lost from there on",
            hop_name(l.hop, l.address),
            l.loss_pct
        ));
    }
    if t.timed_out {
        out.push(format!(
            "the trace's deadline ended it after {} of {} cycles",
            t.cycles_sent, t.cycles
        ));
    }
    out
}

/// RFC 792 / RFC 1812 Destination Unreachable codes.
fn unreachable_meaning(code: u8) -> &'static str {
    match code {
        0 => "network unreachable",
        1 => "host unreachable",
        2 => "protocol unreachable",
        3 => "port unreachable",
        4 => "fragmentation needed",
        9 | 10 | 13 => "administratively prohibited (a firewall)",
        _ => "see RFC 1812",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::analysis::tests::{hop, path};

    #[test]
    fn text_has_the_headline_table_and_findings() {
        let mut hops = vec![
            hop(1, Some(0.12), 10, 10),
            hop(2, Some(60.21), 10, 10),
            hop(3, Some(60.3), 10, 10),
        ];
        hops[2].is_target = true;
        hops[2].address = Some(std::net::Ipv4Addr::new(198, 18, 0, 4).into());
        let p = TracedPath::new(path(hops));
        let mut out = Vec::new();
        render_text(&p, "[trace]", &mut out).unwrap();
        let t = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "[trace] Trace to 198.18.0.4 with TCP SYNs to port 2380, 10 cycles:"
        );
        assert!(lines[1].starts_with("HOP  ADDRESS     "), "{t}");
        assert!(lines[3].starts_with("  2  198.18.0.3    "), "{t}");
        assert!(lines[3].contains("   0.0%    10    10     60.21"), "{t}");
        assert_eq!(
            lines[5],
            "[trace] 198.18.0.4 reached at hop 3 (SYN-ACK: port 2380 is open)"
        );
        assert_eq!(
            lines[6],
            "[trace] latency first appears at hop 2 (198.18.0.3): +60.1 ms"
        );
        assert_eq!(p.ending(), Ending::Done);
    }

    #[test]
    fn sized_traces_show_the_mtu_where_it_drops() {
        let mut hops = vec![
            hop(1, Some(0.1), 10, 10),
            hop(2, Some(0.2), 10, 10),
            hop(3, Some(0.3), 10, 10),
        ];
        hops[1].mtu = Some(1400);
        hops[1].mtu_from = hops[1].address;
        hops[2].is_target = true;
        let mut t = path(hops);
        t.protocol = TraceProtocol::Icmp;
        t.port = None;
        t.final_reply = Some(FinalReply::EchoReply);
        t.size = Some(1500);
        t.path_mtu = Some(1400);
        let p = TracedPath::new(t);
        let mut out = Vec::new();
        render_text(&p, "[trace]", &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "[trace] Trace to 198.18.0.4 with ICMP echo of 1500 bytes (DF set), 10 cycles:"
        );
        assert!(lines[1].ends_with("JTTR    MTU"), "{text}");
        assert!(lines[3].ends_with(" 1400"), "{text}");
        assert!(lines[2].ends_with("0.01       "), "{text}");
        assert!(
            text.contains("the path MTU drops to 1400 bytes at hop 2 (198.18.0.3): 198.18.0.3"),
            "{text}"
        );
        assert_eq!(p.ending(), Ending::Done);
        let mut out = Vec::new();
        render_json(&p, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["size"], 1500);
        assert_eq!(v["pathMtu"], 1400);
        assert_eq!(v["hops"][1]["mtu"], 1400);
        assert!(v["hops"][0].get("mtu").is_none());
    }

    #[test]
    fn unreached_paths_say_where_they_went_dark_and_exit_1() {
        let mut t = path(vec![hop(1, Some(0.1), 5, 5), hop(2, None, 5, 0)]);
        t.reached = false;
        t.final_reply = None;
        let p = TracedPath::new(t);
        assert_eq!(p.ending(), Ending::Failed);
        assert!(
            p.findings[0].starts_with(
                "198.18.0.4 not reached: the last hop that answered is hop 1 (198.18.0.2)"
            ),
            "{:?}",
            p.findings
        );
        let mut out = Vec::new();
        render_json(&p, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["schemaVersion"], 2);
        assert_eq!(v["reached"], false);
        assert_eq!(v["hops"][1]["received"], 0);
        assert!(v["hops"][1]["avgMs"].is_null());
    }
}
