//! The core's layering, checked on its source: every `crate::` path in `src/` (a `use` line or an
//! inline path) is an import of one module by another, and each must point down or sideways:
//!
//! 1. foundation: limits, target, key, sample, stats, duration, notes, failure, spec, logging, yaml (the
//!    only module that names the YAML crate), and the TLS material `probe::identity`;
//! 2. kube, kubeadm, joinconfig, retry (retry may use kube's types, not the reverse);
//! 3. probe, sampling, check, trace (the tracer and `trace::command`, the trace command's input
//!    validation; the binary runs it and prints);
//! 4. discovery;
//! 5. the commands preflight (with `preflight::report`), status, monitor, learner (etcd promote
//!    and cleanup): none imports another.
//!
//! docs/architecture.md draws the same picture. A pair that breaks a rule today and has a
//! planned move is in [`ALLOWED`] with that move named; merging the move empties its line.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// (module, layer). Longest prefix wins: `probe::identity` before `probe`.
const LAYERS: &[(&str, u8)] = &[
    ("limits", 1),
    ("target", 1),
    ("key", 1),
    ("stats", 1),
    ("sample", 1),
    ("duration", 1),
    ("notes", 1),
    ("failure", 1),
    ("input", 1),
    ("render", 1),
    ("secret", 1),
    ("spec", 1),
    ("logging", 1),
    ("yaml", 1),
    ("proxy", 1),
    ("probe::identity", 1),
    ("wire", 1),
    ("kube", 2),
    ("kubeadm", 2),
    ("joinconfig", 2),
    ("retry", 2),
    ("probe", 3),
    ("sampling", 3),
    ("check", 3),
    ("trace", 3),
    ("discovery", 4),
    ("preflight", 5),
    ("status", 5),
    ("monitor", 5),
    ("learner", 5),
];

/// The commands: none may import another.
const COMMANDS: &[(&str, &str)] = &[
    ("preflight", "preflight"),
    ("status", "status"),
    ("monitor", "monitor"),
    ("learner", "learner"),
];

/// Same-layer imports that point the wrong way.
const FORBIDDEN: &[(&str, &str, &str)] = &[
    (
        "kube",
        "retry",
        "the Kubernetes API error types belong to kube; retry may import kube, not the reverse",
    ),
    (
        "kubeadm",
        "joinconfig",
        "kubeadm's field tables are below the JoinConfiguration reader; joinconfig imports kubeadm",
    ),
];

/// Imports that break a rule today, each with the move that ends it. (importer, imported).
const ALLOWED: &[(&str, &str, &str)] = &[
    // kube's TLS client is probe's; TLS material (identity) is already foundation. Pending:
    // probe::tls beside probe::identity.
    ("kube", "probe", "probe::tls to the TLS-material module"),
];

fn layer_of(module: &str) -> Option<(&'static str, u8)> {
    LAYERS
        .iter()
        .filter(|(m, _)| module == *m || module.starts_with(&format!("{m}::")))
        .max_by_key(|(m, _)| m.len())
        .map(|(m, l)| (*m, *l))
}

fn command_of(module: &str) -> Option<&'static str> {
    let (top, _) = layer_of(module)?;
    COMMANDS.iter().find(|(m, _)| *m == top).map(|(_, c)| *c)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src/") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/probe/identity.rs` -> `probe::identity`; `src/trace/mod.rs` -> `trace`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file
        .strip_prefix(src)
        .expect("under src/")
        .with_extension("");
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .filter(|c| c != "mod")
        .collect();
    parts.join("::")
}

/// Every `crate::a::b` path outside comments, as `a::b` (two segments at most).
fn imports(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let tail = &rest[i + "crate::".len()..];
            let path: String = tail
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).take(2).collect();
            if let Some(first) = segs.first() {
                if first.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
                    let two = segs
                        .iter()
                        .take_while(|s| s.chars().next().is_some_and(|c| c.is_ascii_lowercase()))
                        .cloned()
                        .collect::<Vec<_>>()
                        .join("::");
                    out.insert(two);
                }
            }
            rest = &tail[path.len().max(1).min(tail.len())..];
        }
    }
    out
}

/// The broken rules, as `importer -> imported: why`.
fn violations() -> (Vec<String>, BTreeSet<(String, String)>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut bad = Vec::new();
    let mut allowed_used = BTreeSet::new();
    for f in files {
        let me = module_of(&src, &f);
        if me == "lib" {
            continue;
        }
        let Some((my_top, my_layer)) = layer_of(&me) else {
            bad.push(format!(
                "{me}: module not in the layering table (add it to LAYERS)"
            ));
            continue;
        };
        let text = std::fs::read_to_string(&f).expect("read source");
        for dep in imports(&text) {
            let Some((dep_top, dep_layer)) = layer_of(&dep) else {
                bad.push(format!("{me} -> {dep}: module not in the layering table"));
                continue;
            };
            if dep_top == my_top {
                continue;
            }
            let why = if dep_layer > my_layer {
                Some(format!("layer {my_layer} imports layer {dep_layer}"))
            } else if let (Some(a), Some(b)) = (command_of(&me), command_of(&dep)) {
                (a != b).then(|| format!("command {a} imports command {b}"))
            } else {
                FORBIDDEN
                    .iter()
                    .find(|(a, b, _)| *a == my_top && *b == dep_top)
                    .map(|(_, _, why)| why.to_string())
            };
            let Some(why) = why else { continue };
            let mine = me.split("::").next().unwrap_or(&me).to_string();
            let theirs = dep.split("::").next().unwrap_or(&dep).to_string();
            if ALLOWED.iter().any(|(a, b, _)| *a == mine && *b == theirs) {
                allowed_used.insert((mine, theirs));
            } else {
                bad.push(format!("{} ({}) -> {dep}: {why}", me, f.display()));
            }
        }
    }
    (bad, allowed_used)
}

#[test]
fn imports_follow_the_layering() {
    let (bad, _) = violations();
    assert!(
        bad.is_empty(),
        "imports against the layering (docs/architecture.md):\n{}",
        bad.join("\n")
    );
}

/// An allowlist entry whose import is gone must be removed, so the list only ever shrinks.
#[test]
fn every_allowed_exception_is_still_needed() {
    let (_, used) = violations();
    let stale: Vec<String> = ALLOWED
        .iter()
        .filter(|(a, b, _)| !used.contains(&(a.to_string(), b.to_string())))
        .map(|(a, b, move_)| format!("{a} -> {b} ({move_})"))
        .collect();
    assert!(
        stale.is_empty(),
        "allowed exceptions no longer needed, remove them from ALLOWED: {stale:?}"
    );
}

#[test]
fn the_checker_sees_a_violation() {
    // A lower layer importing a command, and one command importing another.
    let found = imports("use crate::preflight::run;\n    crate::status::x(); // crate::monitor");
    assert_eq!(
        found,
        BTreeSet::from(["preflight::run".to_string(), "status::x".to_string()])
    );
    assert_eq!(layer_of("probe::identity"), Some(("probe::identity", 1)));
    assert_eq!(layer_of("probe::tls"), Some(("probe", 3)));
    assert_eq!(command_of("preflight::report"), Some("preflight"));
    assert_eq!(command_of("learner::promote"), Some("learner"));
}

/// The YAML crate is named in `src/yaml.rs` alone, so it can be replaced in one file.
#[test]
fn only_the_yaml_module_names_the_yaml_crate() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let named: Vec<String> = files
        .iter()
        .filter(|f| !f.ends_with("yaml.rs"))
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            text.contains("serde_saphyr") || text.contains("serde_yaml")
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        named.is_empty(),
        "files that name the YAML crate outside src/yaml.rs: {named:?}"
    );
}

/// Flags of other programs the core's messages may name: etcd's own flags (what a member runs
/// with), iptables', kubeadm's. Not joinguard inputs, so no spelling applies.
const FOREIGN_FLAGS: &[&str] = &[
    "--initial-cluster",
    "--experimental-max-learners",
    "--listen-peer-urls",
    "--clamp-mss-to-pmtu",
    "--upload-certs",
    "--quota-backend-bytes",
    "--listen-client-urls",
    // kubeadm's own warning about its join line, quoted as kubeadm prints it.
    "--control-plane",
];

/// The core spells no flag: its messages name an input through the caller's spelling
/// (`input::Spelling`: the binary's flags, the monitor's YAML keys), anywhere in a string, not
/// only at its start. A command line to run, in backticks (`joinguard etcd cleanup --member-id
/// <id>`), and another program's flags ([`FOREIGN_FLAGS`]) are not inputs of the run. Unit tests
/// may (they read the command line's messages), so `tests.rs` files and inline `mod tests` are
/// skipped; so is `kubeadm/flags.rs`, which models kubeadm's own command line.
#[test]
fn the_core_spells_no_flag() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = Vec::new();
    for f in files.iter().filter(|f| {
        let name = f.to_string_lossy();
        !name.ends_with("tests.rs") && !name.ends_with("kubeadm/flags.rs")
    }) {
        let text = std::fs::read_to_string(f).unwrap();
        let code = text.split("#[cfg(test)]\nmod ").next().unwrap_or("");
        // A backtick span may open on one line of a string and close on the next (`\`).
        let mut open = false;
        for (n, line) in code.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                open = false;
                continue;
            }
            if let Some(flag) = flag_outside_backticks(line, open) {
                found.push(format!(
                    "{}:{}: {flag}: {}",
                    f.display(),
                    n + 1,
                    line.trim()
                ));
            }
            let ticks = line.matches('`').count();
            open = line.trim_end().ends_with('\\') && (open ^ (ticks % 2 == 1));
        }
    }
    assert!(
        found.is_empty(),
        "flag names in the core (name the input with input::Input and the caller's Spelling):\n{}",
        found.join("\n")
    );
}

/// The first `--name` in `line` that is neither in a backtick span nor a foreign flag; `open`:
/// the line starts inside a span opened on the line above.
fn flag_outside_backticks(line: &str, open: bool) -> Option<String> {
    let bytes = line.as_bytes();
    for (i, _) in line.match_indices("--") {
        let before = if i == 0 { b' ' } else { bytes[i - 1] };
        let next = line[i + 2..].chars().next();
        if before.is_ascii_alphanumeric() || before == b'-' {
            continue; // `DirAvailable--etc-...`, `---`
        }
        if !next.is_some_and(|c| c.is_ascii_lowercase() || c == '{') {
            continue;
        }
        let ticks_before = line[..i].matches('`').count();
        if open ^ (ticks_before % 2 == 1) {
            continue;
        }
        let flag: String = line[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '{' || *c == '}')
            .collect();
        if FOREIGN_FLAGS.contains(&flag.as_str()) {
            continue;
        }
        return Some(flag);
    }
    None
}

#[test]
fn the_flag_finder_sees_flags_mid_sentence_and_spares_commands() {
    assert_eq!(
        flag_outside_backticks("ran before --timeout ended", false),
        Some("--timeout".into())
    );
    assert_eq!(
        flag_outside_backticks("\"--wait {}\"", false),
        Some("--wait".into())
    );
    assert_eq!(
        flag_outside_backticks("run `joinguard trace --size 1500` now", false),
        None
    );
    assert_eq!(
        flag_outside_backticks("--member-id <id>` first", true),
        None
    );
    assert_eq!(
        flag_outside_backticks("--x` (with it), or `y --z", true),
        None,
        "a span closed and another opened"
    );
    assert_eq!(
        flag_outside_backticks("cleanup --member-id` now, --wait", true),
        Some("--wait".into())
    );
    assert_eq!(
        flag_outside_backticks("DirAvailable--etc-kubernetes", false),
        None
    );
    assert_eq!(
        flag_outside_backticks("etcd's --initial-cluster lists", false),
        None
    );
}

/// One error type per area: no `Result<_, String>` in the core, tests included (an error a
/// caller cannot match on is text the binary has to parse).
#[test]
fn the_core_has_no_stringly_results() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if let Some(i) = code.find("Result<") {
                let rest = &code[i..];
                if let Some(end) = rest.find('>') {
                    if rest[..end].trim_end().ends_with(", String") {
                        found.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "stringly results in the core:\n{}",
        found.join("\n")
    );
}
