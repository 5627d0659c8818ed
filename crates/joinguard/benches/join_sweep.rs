//! The join sweep (issue 26): for each cell of impairments, joinguard's verdict beside what a
//! real join did. One impaired path, the joiner's links only; per cell a fresh lab, the database
//! grown to the cell's size, `joinguard preflight` from the joiner, then the join oracle
//! (`netlab::join`: a real etcd learner join on kubeadm's budgets) and, if it joined, a
//! stability window under load. One CSV row per cell.
//!
//! Run as root with the lab's prerequisites: `scripts/join-sweep` (bounded in time, resumable:
//! cells already in the CSV are skipped). Environment:
//! - `JOINGUARD_SWEEP_CSV`: the CSV (default `target/bench/join-sweep.csv`);
//! - `JOINGUARD_SWEEP_CELLS`: `grid` (default; the cells that locate each boundary), `smoke`,
//!   `loss` or `jitter` (the grid's loss or jitter cells), `ipv6` (a subset of the grid on an
//!   IPv6-only lab, with two path MTU cells; give it its own CSV) or `none` (only redraw the
//!   plot and the table);
//! - `JOINGUARD_SWEEP_BUDGET`: stop starting cells after this long (default `90m`);
//! - `JOINGUARD_SWEEP_WINDOW`: the stability window (default `30s`);
//! - `JOINGUARD_SWEEP_REPEAT`: runs of each cell with a random impairment (loss or jitter;
//!   default 3). Such a cell is joinable only when every run joined and stayed stable: one join
//!   in three broken is a path joinguard must call unfit, and one run cannot show it;
//! - `JOINGUARD_SWEEP_HISTORY`: earlier sweeps' CSVs (comma-separated) to judge each cell
//!   against every recorded run of it as well, under the table;
//! - `JOINGUARD_ETCD_BIN_34`, `JOINGUARD_ETCD_BIN_35`: the etcd binaries (`.cache/env`).
//!
//! Impairments are per direction on each joiner-member link: delay = RTT/2, normal jitter of
//! sigma `jitter` each way, loss `loss` each way (a round trip loses about twice that), rate
//! limit each way.

#![allow(clippy::print_stdout)] // A benchmark prints its figures.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use netlab::etcd::EtcdSpec;
use netlab::harness::{EnvBuilder, LabEnv};
use netlab::join::{KubeadmEtcdTiming, StabilityWindow};
use netlab::{Impairment, IpFamily};
use plotters::prelude::*;
use serde_json::Value;

const JOINGUARD: &str = env!("CARGO_BIN_EXE_joinguard");
const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

const HEADER: &str = "cell,members,etcd,rtt_ms,jitter_ms,loss_pct,rate_mbit,db_mb,\
verdict,exit,errors,warnings,join,join_step,join_s,requests,failed,past_timeout,p99_ms,\
leader_changes,joinable,agreement,in_guidance,cell_s,run";

/// One cell of the grid.
#[derive(Clone, Debug)]
struct Cell {
    /// Existing members (the join makes one more).
    members: usize,
    /// "3.4" or "3.5".
    etcd: &'static str,
    rtt_ms: u64,
    jitter_ms: u64,
    loss_pct: f64,
    /// 0: no rate limit.
    rate_mbit: u64,
    db_mb: u64,
    /// The lab's address family: IPv4, or IPv6 only.
    family: IpFamily,
    /// A path MTU on the joiner's links, answered with "too big" (`true`) or silent.
    mtu: Option<(usize, bool)>,
}

impl Cell {
    /// Whether the path is inside etcd's tuning guidance at its default 1 s election timeout:
    /// an election timeout of at least 10 x the RTT, the RTT taken at its p99 (the jitter is a
    /// normal sigma on each direction, so sqrt(2) sigma on the round trip). The guide says
    /// nothing about loss or bandwidth, so those cells count as inside (the strict reading).
    fn in_guidance(&self) -> bool {
        let p99 = self.rtt_ms as f64 + 2.33 * std::f64::consts::SQRT_2 * self.jitter_ms as f64;
        p99 <= 100.0
    }

    fn key(&self) -> String {
        let family = if self.family == IpFamily::V6 {
            "v6-"
        } else {
            ""
        };
        let mtu = match self.mtu {
            Some((m, true)) => format!("-mtu{m}icmp"),
            Some((m, false)) => format!("-mtu{m}"),
            None => String::new(),
        };
        format!(
            "{family}m{}-etcd{}-rtt{}-j{}-l{}-r{}-db{}{mtu}",
            self.members,
            self.etcd,
            self.rtt_ms,
            self.jitter_ms,
            self.loss_pct,
            self.rate_mbit,
            self.db_mb
        )
    }

    /// Whether runs of the cell differ by chance (random loss or jitter), so one run is not
    /// its outcome. Delay and rate limits are deterministic on netlab's forwarder.
    fn random(&self) -> bool {
        self.loss_pct > 0.0 || self.jitter_ms > 0
    }

    fn impairment(&self) -> Impairment {
        let mut imp = Impairment::delay(Duration::from_micros(self.rtt_ms * 500));
        if self.jitter_ms > 0 {
            imp = imp.with_jitter(Duration::from_millis(self.jitter_ms));
        }
        if self.loss_pct > 0.0 {
            imp = imp.with_loss(self.loss_pct / 100.0);
        }
        if self.rate_mbit > 0 {
            imp = imp.with_rate(self.rate_mbit * 1_000_000);
        }
        if let Some((mtu, answer)) = self.mtu {
            imp = imp.with_mtu(mtu, answer);
        }
        imp
    }
}

fn cell(members: usize, etcd: &'static str, rtt_ms: u64) -> Cell {
    Cell {
        members,
        etcd,
        rtt_ms,
        jitter_ms: 0,
        loss_pct: 0.0,
        rate_mbit: 0,
        db_mb: 10,
        family: IpFamily::V4,
        mtu: None,
    }
}

/// A subset of the grid on an IPv6-only lab: clean, 80 and 300 ms, 5% loss, and two path MTU
/// cells (1,280 bytes answered with Packet Too Big, IPv6's minimum; 1,400 bytes silent).
fn ipv6() -> Vec<Cell> {
    let v6 = |c: Cell| Cell {
        family: IpFamily::V6,
        ..c
    };
    vec![
        v6(cell(3, "3.4", 2)),
        v6(cell(3, "3.4", 80)),
        v6(cell(3, "3.4", 300)),
        v6(Cell {
            loss_pct: 5.0,
            ..cell(3, "3.4", 20)
        }),
        v6(Cell {
            mtu: Some((1280, true)),
            ..cell(3, "3.4", 2)
        }),
        v6(Cell {
            mtu: Some((1400, false)),
            ..cell(3, "3.4", 2)
        }),
    ]
}

/// The cells that locate each boundary: RTT alone on both topologies, loss and jitter at a
/// moderate RTT, bandwidth with a large database, and etcd 3.5 around the RTT boundary. The
/// 3 -> 4 cells come first (kubeadm's usual HA join), so a budget cut keeps the most asked ones.
fn grid() -> Vec<Cell> {
    let mut v = Vec::new();
    for members in [3, 1] {
        for rtt in [2, 20, 50, 80, 120, 200, 300] {
            v.push(cell(members, "3.4", rtt));
        }
        for loss in [1.0, 3.0, 5.0, 7.0, 10.0] {
            v.push(Cell {
                loss_pct: loss,
                ..cell(members, "3.4", 20)
            });
        }
        for jitter in [10, 30] {
            v.push(Cell {
                jitter_ms: jitter,
                ..cell(members, "3.4", 50)
            });
        }
    }
    for rate in [1, 10, 100] {
        v.push(Cell {
            rate_mbit: rate,
            db_mb: 100,
            ..cell(3, "3.4", 20)
        });
    }
    for rtt in [50, 80, 120, 200, 300, 500] {
        v.push(cell(3, "3.5", rtt));
    }
    // Past the grid: where the join itself starts to fail (the 2 s dial holds a TCP
    // and a TLS handshake and a MemberList, about 3 RTT).
    for members in [3, 1] {
        for rtt in [500, 700, 1000] {
            v.push(cell(members, "3.4", rtt));
        }
    }
    v
}

fn smoke() -> Vec<Cell> {
    vec![cell(3, "3.4", 2), cell(3, "3.4", 80), cell(3, "3.4", 300)]
}

/// The verdict: (verdict, exit code, checks in error, checks warning).
fn preflight(env: &LabEnv) -> (String, i32, Vec<String>, Vec<String>) {
    let mut args = vec![
        "preflight".to_string(),
        "-o".into(),
        "json".into(),
        "--timeout".into(),
        "30s".into(),
    ];
    args.extend(env.etcd().joinguard_args());
    let run = env.run(args);
    let v: Value = serde_json::from_str(&run.stdout).unwrap_or(Value::Null);
    let names = |status: &str| -> Vec<String> {
        let set: BTreeSet<String> = v["checks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["status"] == status)
            .filter_map(|c| c["name"].as_str().map(str::to_string))
            .collect();
        set.into_iter().collect()
    };
    let verdict = v["verdict"].as_str().unwrap_or("none").to_string();
    (verdict, run.code, names("error"), names("warning"))
}

fn run_cell(c: &Cell, run: usize, window: &StabilityWindow) -> Result<String, String> {
    let started = Instant::now();
    let bin = match c.etcd {
        "3.5" => std::env::var("JOINGUARD_ETCD_BIN_35"),
        _ => std::env::var("JOINGUARD_ETCD_BIN_34"),
    }
    .map_err(|_| "JOINGUARD_ETCD_BIN_34/35 unset: source .cache/env".to_string())?;
    let mut env = EnvBuilder::new()
        .bin(JOINGUARD)
        .name(format!("join-sweep-{}", c.key()))
        .members(c.members)
        .ip_family(c.family)
        .etcd_spec(EtcdSpec {
            bin: bin.into(),
            ..EtcdSpec::default()
        })
        .run_timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| format!("lab: {e}"))?;
    env.etcd()
        .wait_healthy(Duration::from_secs(30))
        .map_err(|e| format!("lab: {e}"))?;
    let first = env.etcd().member(0).host.clone();
    env.etcd()
        .fill(&first, c.db_mb * 1024 * 1024)
        .map_err(|e| format!("fill: {e}"))?;
    let joiner = env.joiner().clone();
    for m in env
        .etcd()
        .members()
        .iter()
        .map(|m| m.host.clone())
        .collect::<Vec<_>>()
    {
        env.lab().net().set_link(&joiner, &m, c.impairment());
    }
    let (verdict, exit, errors, warnings) = preflight(&env);
    let out = env
        .etcd_mut()
        .kubeadm_join(&joiner, &KubeadmEtcdTiming::default())
        .map_err(|e| format!("join: {e}"))?;
    let stability = if out.joined() {
        Some(
            env.etcd()
                .stability(window)
                .map_err(|e| format!("window: {e}"))?,
        )
    } else {
        None
    };
    let joinable = stability.as_ref().is_some_and(|s| s.stable());
    let fit = verdict == "fit";
    let agreement = match (fit, joinable) {
        (true, true) => "true-fit",
        (false, false) => "true-unfit",
        (true, false) => "FALSE-FIT",
        (false, true) => "false-unfit",
    };
    let step = match &out.failed {
        None => "joined",
        Some((s, _)) => s.as_str(),
    };
    println!(
        "{}{}: verdict {verdict} (errors: {}), join {}{}",
        c.key(),
        if run > 1 {
            format!(" run {run}")
        } else {
            String::new()
        },
        errors.join(" "),
        out.summary(),
        stability
            .as_ref()
            .map(|s| format!("; window: {}", s.summary()))
            .unwrap_or_default()
    );
    let s = stability.as_ref();
    Ok(format!(
        "{},{},{},{},{},{},{},{},{verdict},{exit},{},{},{},{step},{:.1},{},{},{},{},{},{joinable},{agreement},{},{:.0},{run}",
        c.key(),
        c.members,
        c.etcd,
        c.rtt_ms,
        c.jitter_ms,
        c.loss_pct,
        c.rate_mbit,
        c.db_mb,
        errors.join(";"),
        warnings.join(";"),
        if out.joined() { "joined" } else { "failed" },
        out.took.as_secs_f64(),
        s.map_or(String::new(), |s| s.requests.to_string()),
        s.map_or(String::new(), |s| s.failed.to_string()),
        s.map_or(String::new(), |s| s.past_request_timeout.to_string()),
        s.map_or(String::new(), |s| format!("{:.1}", s.p99_ms)),
        s.map_or(String::new(), |s| s.leader_changes.to_string()),
        c.in_guidance(),
        started.elapsed().as_secs_f64(),
    ))
}

fn main() {
    let csv: PathBuf = std::env::var("JOINGUARD_SWEEP_CSV")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/bench/join-sweep.csv")
        });
    let cells = match std::env::var("JOINGUARD_SWEEP_CELLS").as_deref() {
        Ok("smoke") => smoke(),
        Ok("ipv6") => ipv6(),
        // The grid's loss cells alone (both topologies), e.g. after a change to the loss rule.
        Ok("loss") => grid().into_iter().filter(|c| c.loss_pct > 0.0).collect(),
        // The grid's jitter cells alone.
        Ok("jitter") => grid().into_iter().filter(|c| c.jitter_ms > 0).collect(),
        // Only (re)draw the plot from the CSV.
        Ok("none") => Vec::new(),
        _ => grid(),
    };
    let dur = |var: &str, default: &str| {
        humantime::parse_duration(&std::env::var(var).unwrap_or_else(|_| default.into()))
            .unwrap_or_else(|e| panic!("{var}: {e}"))
    };
    let budget = dur("JOINGUARD_SWEEP_BUDGET", "90m");
    let window = StabilityWindow {
        duration: dur("JOINGUARD_SWEEP_WINDOW", "30s"),
        ..StabilityWindow::default()
    };
    if let Some(dir) = csv.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    let repeat: usize = std::env::var("JOINGUARD_SWEEP_REPEAT")
        .map(|v| v.parse().expect("JOINGUARD_SWEEP_REPEAT: a number of runs"))
        .unwrap_or(3)
        .max(1);
    let old = std::fs::read_to_string(&csv).unwrap_or_default();
    let fresh = old.lines().next().is_none();
    if !fresh && !old.starts_with(HEADER) && !cells.is_empty() {
        panic!(
            "{}: written by an older sweep (no run column); move it away to start over",
            csv.display()
        );
    }
    let done: BTreeSet<(String, usize)> = old
        .lines()
        .skip(1)
        .filter_map(|l| {
            let r: Vec<&str> = l.split(',').collect();
            Some((r.first()?.to_string(), r.last()?.parse().ok()?))
        })
        .collect();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&csv)
        .unwrap();
    if fresh {
        writeln!(file, "{HEADER}").unwrap();
    }
    let started = Instant::now();
    let runs: Vec<(&Cell, usize)> = cells
        .iter()
        .flat_map(|c| (1..=if c.random() { repeat } else { 1 }).map(move |r| (c, r)))
        .collect();
    let todo: Vec<(&Cell, usize)> = runs
        .iter()
        .filter(|(c, r)| !done.contains(&(c.key(), *r)))
        .copied()
        .collect();
    println!(
        "join sweep: {} cells, {} runs ({repeat} of each cell with loss or jitter), {} already in {}, budget {}",
        cells.len(),
        runs.len(),
        runs.len() - todo.len(),
        csv.display(),
        humantime::format_duration(budget)
    );
    for (i, (c, run)) in todo.iter().enumerate() {
        if started.elapsed() > budget {
            println!(
                "budget spent after {i} runs; run again to resume ({} left)",
                todo.len() - i
            );
            break;
        }
        match run_cell(c, *run, &window) {
            Ok(row) => {
                writeln!(file, "{row}").unwrap();
                file.flush().unwrap();
            }
            Err(e) => println!("{} run {run}: not run: {e}", c.key()),
        }
    }
    println!(
        "join sweep: done in {:.0}s; rows in {}",
        started.elapsed().as_secs_f64(),
        csv.display()
    );
    let png = std::env::var("JOINGUARD_SWEEP_PNG")
        .map(PathBuf::from)
        .unwrap_or_else(|_| csv.with_extension("png"));
    match plot(&csv, &png) {
        Ok(()) => println!("join sweep: plot in {}", png.display()),
        Err(e) => println!("join sweep: no plot: {e}"),
    }
    let md = csv.with_extension("md");
    match table(&csv) {
        Ok(t) => {
            std::fs::write(&md, t).unwrap();
            println!("join sweep: table in {}", md.display());
        }
        Err(e) => println!("join sweep: no table: {e}"),
    }
}

/// One cell's runs from the CSV: columns by name. A CSV from before the `run` column has one
/// run per cell.
struct CellRuns {
    rows: Vec<std::collections::HashMap<String, String>>,
}

impl CellRuns {
    fn get(&self, col: &str) -> &str {
        self.rows[0].get(col).map_or("", String::as_str)
    }

    /// Every run's value, or one value when the runs agree.
    fn each(&self, col: &str) -> String {
        let v: Vec<&str> = self
            .rows
            .iter()
            .map(|r| r.get(col).map_or("", String::as_str))
            .collect();
        if v.iter().all(|x| *x == v[0]) {
            v[0].to_string()
        } else {
            v.join(" / ")
        }
    }

    fn held(&self) -> usize {
        self.rows.iter().filter(|r| r["joinable"] == "true").count()
    }

    /// Joinable only when every run joined and stayed stable.
    fn joinable(&self) -> bool {
        self.held() == self.rows.len()
    }

    fn fits(&self) -> usize {
        self.rows.iter().filter(|r| r["verdict"] == "fit").count()
    }

    /// The verdict against the cell's joinability, strictly: a cell any run called fit is a
    /// false fit when any run broke; a cell any run called unfit is a false unfit when every
    /// run held.
    fn agreement(&self) -> &'static str {
        let (fits, n) = (self.fits(), self.rows.len());
        match (self.joinable(), fits) {
            (true, f) if f == n => "true-fit",
            (true, _) => "false-unfit",
            (false, 0) => "true-unfit",
            (false, _) => "FALSE-FIT",
        }
    }
}

/// The CSV's runs grouped by cell, in the order the cells first appear.
fn cells_of(csv: &std::path::Path) -> Result<Vec<CellRuns>, Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(csv)?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or("empty CSV")?.split(',').collect();
    // What the tally needs; the first sweep's CSV lacks the later `in_guidance` column.
    for need in ["cell", "verdict", "join", "joinable"] {
        if !header.contains(&need) {
            return Err(format!("no {need} column").into());
        }
    }
    let mut out: Vec<CellRuns> = Vec::new();
    for l in lines {
        let row: std::collections::HashMap<String, String> = header
            .iter()
            .zip(l.split(','))
            .map(|(h, v)| (h.to_string(), v.to_string()))
            .collect();
        match out.iter_mut().find(|c| c.get("cell") == row["cell"]) {
            Some(c) => c.rows.push(row),
            None => out.push(CellRuns { rows: vec![row] }),
        }
    }
    Ok(out)
}

/// The CSV as a markdown table, one row per cell (every run's figures where they differ), with
/// the tally of agreements under it: by cell, and by run against its cell.
fn table(csv: &std::path::Path) -> Result<String, Box<dyn std::error::Error>> {
    let cells = cells_of(csv)?;
    let show = [
        ("members", "members"),
        ("etcd", "etcd"),
        ("rtt_ms", "RTT ms"),
        ("jitter_ms", "jitter ms"),
        ("loss_pct", "loss %"),
        ("rate_mbit", "Mbit/s"),
        ("db_mb", "DB MB"),
        ("verdict", "verdict"),
        ("errors", "checks in error"),
        ("join_step", "join"),
        ("join_s", "join s"),
        ("p99_ms", "window p99 ms"),
        ("failed", "failed"),
        ("leader_changes", "leader changes"),
        ("held", "held"),
        ("agreement", "agreement"),
        ("in_guidance", "in etcd's guidance"),
    ];
    let mut t = String::new();
    t += &format!("| {} |\n", show.map(|(_, h)| h).join(" | "));
    t += &format!("|{}\n", "---|".repeat(show.len()));
    let mut tally = std::collections::BTreeMap::<&str, usize>::new();
    let mut by_run = std::collections::BTreeMap::<&str, usize>::new();
    let mut false_unfit_in_guidance = 0;
    let mut runs = 0;
    for c in &cells {
        let row: Vec<String> = show
            .iter()
            .map(|(col, _)| match *col {
                "rate_mbit" if c.get(col) == "0" => "-".to_string(),
                "held" => format!("{} of {}", c.held(), c.rows.len()),
                "agreement" => c.agreement().to_string(),
                "in_guidance" => c.get(col).to_string(),
                "errors" => {
                    let set: BTreeSet<&str> = c
                        .rows
                        .iter()
                        .flat_map(|r| r.get("errors").map_or("", String::as_str).split(';'))
                        .filter(|e| !e.is_empty())
                        .collect();
                    set.into_iter().collect::<Vec<_>>().join(" ")
                }
                _ => c.each(col),
            })
            .collect();
        t += &format!("| {} |\n", row.join(" | "));
        *tally.entry(c.agreement()).or_default() += 1;
        if c.agreement() == "false-unfit" && c.get("in_guidance") == "true" {
            false_unfit_in_guidance += 1;
        }
        for r in &c.rows {
            runs += 1;
            let k = match (r["verdict"] == "fit", c.joinable()) {
                (true, true) => "true-fit",
                (false, false) => "true-unfit",
                (true, false) => "FALSE-FIT",
                (false, true) => "false-unfit",
            };
            *by_run.entry(k).or_default() += 1;
        }
    }
    let list = |m: &std::collections::BTreeMap<&str, usize>| {
        m.iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let total = cells.len();
    t += &format!(
        "\n{total} cells, {runs} runs. By cell (joinable only when every run held): {}; \
         false-unfit inside etcd's tuning guidance {false_unfit_in_guidance} ({:.1}% of the \
         cells). By run, against its cell: {}\n",
        list(&tally),
        100.0 * false_unfit_in_guidance as f64 / total.max(1) as f64,
        list(&by_run)
    );
    t += &pooled(&cells)?;
    Ok(t)
}

/// With `JOINGUARD_SWEEP_HISTORY` (earlier sweeps' CSVs, comma-separated): each cell judged
/// against every recorded run of it, this sweep's and the earlier ones' (a join's outcome does
/// not depend on joinguard's version; the verdict is this sweep's). A cell is joinable only
/// when every recorded run held.
fn pooled(cells: &[CellRuns]) -> Result<String, Box<dyn std::error::Error>> {
    let Ok(history) = std::env::var("JOINGUARD_SWEEP_HISTORY") else {
        return Ok(String::new());
    };
    let mut earlier: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
    let files: Vec<&str> = history.split(',').filter(|f| !f.is_empty()).collect();
    for f in &files {
        for c in cells_of(std::path::Path::new(f))? {
            let e = earlier.entry(c.get("cell").to_string()).or_default();
            e.0 += c.held();
            e.1 += c.rows.len();
        }
    }
    let mut tally = std::collections::BTreeMap::<&str, usize>::new();
    let mut false_unfit_in_guidance = 0;
    let mut changed = Vec::new();
    for c in cells {
        let (h, n) = earlier.get(c.get("cell")).copied().unwrap_or_default();
        let (held, runs) = (c.held() + h, c.rows.len() + n);
        let joinable = held == runs;
        let fits = c.fits();
        let agreement = match (joinable, fits) {
            (true, f) if f == c.rows.len() => "true-fit",
            (true, _) => "false-unfit",
            (false, 0) => "true-unfit",
            (false, _) => "FALSE-FIT",
        };
        *tally.entry(agreement).or_default() += 1;
        if agreement == "false-unfit" && c.get("in_guidance") == "true" {
            false_unfit_in_guidance += 1;
        }
        if n > 0 && agreement != c.agreement() {
            changed.push(format!(
                "{} ({} here, {agreement} over {held} of {runs} held)",
                c.get("cell"),
                c.agreement()
            ));
        }
    }
    let total = cells.len();
    Ok(format!(
        "\nOver every recorded run (this sweep and {} earlier CSVs; joinable only when every \
         run held): {}; false-unfit inside etcd's tuning guidance {false_unfit_in_guidance} \
         ({:.1}% of the cells). Cells whose agreement the earlier runs change: {}\n",
        files.len(),
        tally
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        100.0 * false_unfit_in_guidance as f64 / total.max(1) as f64,
        if changed.is_empty() {
            "none".to_string()
        } else {
            changed.join("; ")
        }
    ))
}

/// The grid as a picture: one row per impairment other than RTT, one column per RTT; each cell
/// coloured by what the join did (green joined and stable, orange joined but unstable, red
/// failed; a repeated cell by its worst run, with the runs that held beside it), marked by the
/// verdict (a white ring: fit; a black cross: unfit; both when its runs disagreed).
fn plot(csv: &std::path::Path, png: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let runs = cells_of(csv)?;
    let mut labels: Vec<String> = Vec::new();
    let mut rtts: Vec<u64> = Vec::new();
    let mut cells = Vec::new();
    for c in &runs {
        let label = format!(
            "{}->{} etcd {} jit {} loss {}% {}db {}MB",
            c.get("members"),
            c.get("members").parse::<u32>().unwrap_or(0) + 1,
            c.get("etcd"),
            c.get("jitter_ms"),
            c.get("loss_pct"),
            if c.get("rate_mbit") == "0" {
                String::new()
            } else {
                format!("{}Mbit ", c.get("rate_mbit"))
            },
            c.get("db_mb")
        );
        if !labels.contains(&label) {
            labels.push(label.clone());
        }
        let x: u64 = c.get("rtt_ms").parse()?;
        if !rtts.contains(&x) {
            rtts.push(x);
        }
        let n = c.rows.len();
        cells.push((
            label,
            x,
            (c.fits(), n),
            c.rows.iter().all(|r| r["join"] == "joined"),
            c.joinable(),
            c.held(),
        ));
    }
    rtts.sort_unstable();
    let font: &'static [u8] = Box::leak(std::fs::read(FONT)?.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, font).map_err(|_| "font")?;
    let height = 120 + 34 * labels.len() as u32;
    let root = BitMapBackend::new(png, (1000, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Join sweep: colour = real join, worst run (green stable, orange unstable, red failed); \
             ring = fit, cross = unfit; n/m = runs held",
            ("sans-serif", 16),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(330)
        .build_cartesian_2d(0f64..rtts.len() as f64, 0f64..labels.len() as f64)?;
    let rtt_labels = rtts.clone();
    let row_labels = labels.clone();
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(rtts.len() * 2 + 1)
        .y_labels(labels.len() * 2 + 1)
        .x_label_formatter(&move |x| {
            let i = (x - 0.5).round();
            if (x - 0.5 - i).abs() < 0.01 && i >= 0.0 && (i as usize) < rtt_labels.len() {
                format!("{} ms", rtt_labels[i as usize])
            } else {
                String::new()
            }
        })
        .y_label_formatter(&move |y| {
            let i = (y - 0.5).round();
            if (y - 0.5 - i).abs() < 0.01 && i >= 0.0 && (i as usize) < row_labels.len() {
                row_labels[i as usize].clone()
            } else {
                String::new()
            }
        })
        .x_desc("RTT between the joiner and every member")
        .label_style(("sans-serif", 13))
        .draw()?;
    for (label, x, (fits, n), joined, stable, held) in &cells {
        let cx = rtts.iter().position(|r| r == x).unwrap_or(0) as f64;
        let cy = labels.iter().position(|l| l == label).unwrap_or(0) as f64;
        let colour = match (joined, stable) {
            (true, true) => RGBColor(76, 175, 80),
            (true, false) => RGBColor(255, 152, 0),
            _ => RGBColor(229, 57, 53),
        };
        chart.draw_series(std::iter::once(Rectangle::new(
            [(cx + 0.05, cy + 0.08), (cx + 0.95, cy + 0.92)],
            colour.filled(),
        )))?;
        let centre = (cx + 0.5, cy + 0.5);
        // A cell whose runs got both verdicts shows both marks.
        if *fits > 0 {
            chart.draw_series(std::iter::once(Circle::new(
                centre,
                7,
                WHITE.stroke_width(3),
            )))?;
        }
        if fits < n {
            chart.draw_series(std::iter::once(Cross::new(
                centre,
                7,
                BLACK.stroke_width(3),
            )))?;
        }
        if *n > 1 {
            chart.draw_series(std::iter::once(Text::new(
                format!("{held}/{n}"),
                (cx + 0.62, cy + 0.35),
                ("sans-serif", 12).into_font().color(&BLACK),
            )))?;
        }
    }
    root.present()?;
    Ok(())
}
