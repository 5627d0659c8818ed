//! Completions and man pages are generated from the clap definitions by the binary itself
//! (`joinguard completion`, `joinguard man`). The copies committed for packagers
//! (`contrib/completions/`, `docs/man/`) must be exactly what this binary prints, so a flag
//! change without `scripts/gen-docs` fails here.

#[allow(dead_code)]
#[path = "lab/schema.rs"]
mod schema;

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn joinguard(args: &[&str]) -> (i32, Vec<u8>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_joinguard"))
        .args(args)
        .output()
        .expect("run joinguard");
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const REGENERATE: &str = "out of date: run scripts/gen-docs and commit the result";

#[test]
fn committed_completions_match_the_binary() {
    for (shell, file) in [
        ("bash", "joinguard.bash"),
        ("zsh", "_joinguard"),
        ("fish", "joinguard.fish"),
    ] {
        let (code, out, err) = joinguard(&["completion", shell]);
        assert_eq!(code, 0, "{err}");
        let text = String::from_utf8(out).unwrap();
        // Each script completes the subcommands and a preflight flag.
        for word in ["preflight", "update-status", "etcd-endpoints"] {
            assert!(text.contains(word), "{shell}: no `{word}`");
        }
        let committed = std::fs::read_to_string(repo().join("contrib/completions").join(file))
            .unwrap_or_default();
        assert!(committed == text, "contrib/completions/{file} {REGENERATE}");
    }
    // bash really completes with it: a subcommand, then a preflight flag.
    let script = repo().join("contrib/completions/joinguard.bash");
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}; COMP_WORDS=(joinguard pre); COMP_CWORD=1; _joinguard joinguard pre \
             joinguard; echo \"${{COMPREPLY[@]}}\"; COMP_WORDS=(joinguard preflight --etcd-c); \
             COMP_CWORD=2; _joinguard joinguard --etcd-c preflight; echo \"${{COMPREPLY[@]}}\"",
            script.display()
        ))
        .output()
        .unwrap();
    let replies = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        replies.lines().collect::<Vec<_>>(),
        ["preflight", "--etcd-cacert --etcd-cert"],
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let (code, _, err) = joinguard(&["completion", "tcsh"]);
    assert_eq!(code, 2);
    assert!(err.contains("possible values"), "{err}");
}

#[test]
fn committed_man_pages_match_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = joinguard(&["man", "--out-dir", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let mut generated: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    generated.sort();
    assert!(generated.contains(&"joinguard.1".to_string()));
    assert!(generated.contains(&"joinguard-preflight.1".to_string()));
    let mut committed: Vec<String> = std::fs::read_dir(repo().join("docs/man"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".1"))
                .collect()
        })
        .unwrap_or_default();
    committed.sort();
    assert_eq!(generated, committed, "docs/man {REGENERATE}");
    for name in &generated {
        let want = std::fs::read(dir.path().join(name)).unwrap();
        let have = std::fs::read(repo().join("docs/man").join(name)).unwrap();
        assert!(want == have, "docs/man/{name} {REGENERATE}");
    }
    // The preflight page carries the flags and the exit codes from --help.
    let page = std::fs::read_to_string(dir.path().join("joinguard-preflight.1")).unwrap();
    assert!(page.contains(".TH joinguard-preflight 1"), "{page}");
    assert!(page.contains("etcd\\-endpoints"), "{page}");
    assert!(page.contains("Exit codes"), "{page}");

    // One page to stdout, a nested command's page by its words or by its page's name, and a
    // clear error for a command that does not exist.
    let (code, out, _) = joinguard(&["man", "update-status"]);
    assert_eq!(code, 0);
    assert!(String::from_utf8_lossy(&out).contains(".TH joinguard-update-status 1"));
    for words in [&["etcd", "promote"][..], &["etcd-promote"]] {
        let (code, out, err) = joinguard(&[&["man"][..], words].concat());
        assert_eq!(code, 0, "{words:?}: {err}");
        let want = std::fs::read(dir.path().join("joinguard-etcd-promote.1")).unwrap();
        assert!(out == want, "{words:?}");
    }
    let (code, _, err) = joinguard(&["man", "frobnicate"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no command `frobnicate`") && err.contains("preflight"),
        "{err}"
    );
}

/// The pages a page names (`joinguard\-etcd\-promote(1)` in roff) in its `SEE ALSO` and
/// `SUBCOMMANDS` sections.
fn referenced_pages(page: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut section = "";
    for line in page.lines() {
        if let Some(heading) = line.strip_prefix(".SH ") {
            section = heading.trim_matches('"');
            continue;
        }
        if !matches!(section, "SEE ALSO" | "SUBCOMMANDS") {
            continue;
        }
        let text = line.replace("\\-", "-");
        for (i, _) in text.match_indices("(1)") {
            let start = text[..i]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .map_or(0, |j| j + 1);
            names.push(text[start..i].to_string());
        }
    }
    names
}

/// Every page a `SEE ALSO` or `SUBCOMMANDS` section names is one `joinguard man --out-dir`
/// writes (and the packages install), every page but joinguard(1) has a `SEE ALSO`, and the
/// examples are set verbatim: no `help` pseudo-command, no joinguard-etcd-promote(1) that does
/// not exist, no example reflowed into one paragraph.
#[test]
fn every_page_a_man_page_names_exists() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = joinguard(&["man", "--out-dir", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let pages: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for nested in ["joinguard-etcd-promote.1", "joinguard-etcd-cleanup.1"] {
        assert!(pages.contains(&nested.to_string()), "{pages:?}");
    }
    let mut checked = 0;
    for file in &pages {
        let page = std::fs::read_to_string(dir.path().join(file)).unwrap();
        let names = referenced_pages(&page);
        if file != "joinguard.1" {
            assert!(page.contains("\n.SH \"SEE ALSO\"\n"), "{file}: no SEE ALSO");
        }
        for name in names {
            assert!(
                pages.contains(&format!("{name}.1")),
                "{file} names {name}(1), which is not generated ({pages:?})"
            );
            checked += 1;
        }
        // Examples: no filling, so each command line stays a line.
        if let Some(at) = page.find(".SH EXAMPLES\n") {
            assert!(page[at..].starts_with(".SH EXAMPLES\n.nf\n"), "{file}");
            assert!(page[at..].contains("\n.fi\n"), "{file}");
        }
        // A flag whose summary -h hides keeps its description (`--v`, kubeadm's klog flags).
        let lines: Vec<&str> = page.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if l.starts_with("\\fB") && i > 0 && lines[i - 1] == ".TP" {
                let body = lines.get(i + 1).copied().unwrap_or_default();
                assert!(
                    !body.is_empty() && !body.starts_with('.'),
                    "{file}: {l} has no description"
                );
            }
        }
    }
    assert!(checked > 10, "only {checked} references checked");
    let promote = std::fs::read_to_string(dir.path().join("joinguard-etcd-promote.1")).unwrap();
    assert!(promote.contains(".SH EXAMPLES\n.nf\n"), "{promote}");
    let v = std::fs::read_to_string(dir.path().join("joinguard.1")).unwrap();
    assert!(
        v.contains("Number for the log level verbosity"),
        "--v has no description: {v}"
    );
}

/// Every docs page the help and man pages send a reader to exists, and the .deb installs it
/// where the help says (/usr/share/doc/joinguard/docs/): a node with the package has the page.
#[test]
fn every_docs_page_the_help_names_is_in_the_deb() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = joinguard(&["man", "--out-dir", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let mut named = std::collections::BTreeSet::new();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let page = std::fs::read_to_string(e.unwrap().path()).unwrap();
        let mut rest = page.as_str();
        while let Some(at) = rest.find("docs/") {
            let tail = &rest[at..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || "/-_.".contains(c)))
                .unwrap_or(tail.len());
            let path = tail[..end].trim_end_matches('.');
            if path.ends_with(".md") {
                named.insert(path.to_string());
            }
            rest = &tail[end..];
        }
    }
    assert!(named.len() >= 3, "{named:?}");
    let manifest = std::fs::read_to_string(repo().join("crates/joinguard/Cargo.toml")).unwrap();
    assert!(
        manifest.contains(r#"["../../docs/*.md", "usr/share/doc/joinguard/docs/", "644"]"#),
        "the .deb does not install docs/*.md under /usr/share/doc/joinguard/docs/"
    );
    for path in &named {
        assert!(
            repo().join(path).is_file(),
            "the help names {path}, which does not exist"
        );
    }
}

#[test]
fn version_reports_the_build() {
    let (code, out, _) = joinguard(&["version"]);
    assert_eq!(code, 0);
    let line = String::from_utf8(out).unwrap();
    assert!(
        line.starts_with(&format!("joinguard {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{line}"
    );
    assert!(line.contains("x86_64-unknown-linux"), "{line}");
    let (code, out, _) = joinguard(&["version", "-o", "json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    schema::assert_document("version", &String::from_utf8_lossy(&out));
    assert_eq!(v["schemaVersion"], 1);
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    assert!(v["rustc"].as_str().unwrap().starts_with("rustc "), "{v}");
    assert!(v["static"].is_boolean());
    let commit = v["gitCommit"].as_str().unwrap();
    assert!(commit == "unknown" || commit.len() >= 12, "{commit}");
}

/// The findings reference: every check joinguard defines has its section in docs/preflight.md
/// (a `### ` heading naming it), so an operator who reads `[ERROR Name]` or passes a name to
/// `--ignore-preflight-errors` can look it up. A new check without one fails here.
#[test]
fn every_check_has_a_section_in_the_findings_reference() {
    let text = std::fs::read_to_string(repo().join("docs/preflight.md")).unwrap();
    let headings: Vec<&str> = text.lines().filter(|l| l.starts_with("### ")).collect();
    let missing: Vec<&str> = joinguard_core::check::CheckName::ALL
        .iter()
        .map(|c| c.as_str())
        .filter(|name| {
            !headings.iter().any(|h| {
                h.split(|c: char| !c.is_ascii_alphanumeric())
                    .any(|word| word == *name)
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "checks without a section in docs/preflight.md: {missing:?}"
    );
}

/// User docs carry no history: no commit hash (a 7-hex-digit word) and no "issue N" in the
/// README or docs/*.md; measurements stay, stated without them. docs/benchmarks.md is generated
/// by scripts/bench and dated there, so it is not checked.
#[test]
fn user_docs_carry_no_commit_hashes_or_issue_numbers() {
    let mut files = vec![repo().join("README.md")];
    for e in std::fs::read_dir(repo().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") && !p.ends_with("benchmarks.md") {
            files.push(p);
        }
    }
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let hash = line.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| {
                w.len() == 7
                    && w.bytes()
                        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            });
            let lower = line.to_ascii_lowercase();
            let issue = lower
                .match_indices("issue ")
                .any(|(i, m)| lower[i + m.len()..].starts_with(|c: char| c.is_ascii_digit()));
            if hash || issue {
                found.push(format!("{}:{}: {line}", f.display(), n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "history in the user docs:\n{}",
        found.join("\n")
    );
}
