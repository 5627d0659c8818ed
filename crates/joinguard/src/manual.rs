//! Generated documentation: shell completions and man pages, both rendered from the clap
//! definitions in [`crate::cli`] at run time, so they cannot drift from the flags of the binary
//! that prints them. The copies committed under `docs/man/` and `contrib/completions/` are
//! checked against this output by a test. Nothing here touches the network.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::CommandFactory;

use crate::cli::{Cli, CompletionArgs, ManArgs};
use crate::output;
use joinguard_core::Ending;

/// Renders the completion script for `shell`.
pub fn completion(shell: clap_complete::Shell) -> Vec<u8> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "joinguard", &mut out);
    out
}

/// The commands, as clap builds them for the man pages: no `help` subcommand (it has no page),
/// and every flag whose summary `-h` hides keeps its description (clap_mangen prints a hidden
/// short help as nothing).
fn man_command() -> clap::Command {
    fn described(cmd: clap::Command) -> clap::Command {
        cmd.mut_args(
            |a| match (a.is_hide_short_help_set(), a.get_long_help(), a.get_help()) {
                (true, None, Some(help)) => {
                    let help = help.clone();
                    a.long_help(help)
                }
                _ => a,
            },
        )
        .mut_subcommands(described)
    }
    let mut root = described(Cli::command()).disable_help_subcommand(true);
    root.build();
    root
}

/// Every page: the command path (`[]` for joinguard(1), `["etcd", "promote"]` for
/// joinguard-etcd-promote(1)), depth first, parents before their commands.
pub fn page_paths() -> Vec<Vec<String>> {
    fn walk(cmd: &clap::Command, path: Vec<String>, out: &mut Vec<Vec<String>>) {
        out.push(path.clone());
        for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
            let mut p = path.clone();
            p.push(sub.get_name().to_string());
            walk(sub, p, out);
        }
    }
    let mut out = Vec::new();
    walk(&man_command(), Vec::new(), &mut out);
    out
}

/// A page's name: `joinguard`, `joinguard-etcd-promote`.
fn page_name(path: &[String]) -> String {
    std::iter::once("joinguard")
        .chain(path.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("-")
}

/// Renders one man page: joinguard(1) for an empty path, `joinguard-<command>(1)` for
/// `["preflight"]`, `joinguard-etcd-promote(1)` for `["etcd", "promote"]` (or
/// `["etcd-promote"]`, the page's own name).
pub fn man_page(path: &[String]) -> Result<Vec<u8>, String> {
    let pages = page_paths();
    let wanted = page_name(path);
    let Some(found) = pages.iter().find(|p| page_name(p) == wanted) else {
        let names: Vec<String> = pages
            .iter()
            .filter(|p| !p.is_empty())
            .map(|p| p.join(" "))
            .collect();
        return Err(format!(
            "joinguard man: no command `{}`; choose one of: {}",
            path.join(" "),
            names.join(", ")
        ));
    };
    let root = man_command();
    let version = root.get_version().unwrap_or_default().to_string();
    let mut page = root.clone();
    for name in found {
        page = page
            .find_subcommand(name)
            .cloned()
            .ok_or_else(|| format!("joinguard man: no command `{name}`"))?;
    }
    let after = page.get_after_long_help().map(|t| t.to_string());
    let page = page
        .name(page_name(found))
        .version(version)
        .after_long_help(clap::builder::Resettable::<clap::builder::StyledStr>::Reset)
        .after_help(clap::builder::Resettable::<clap::builder::StyledStr>::Reset);
    let mut out = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut out)
        .map_err(|e| format!("rendering the man page: {e}"))?;
    let mut roff = String::from_utf8(out).map_err(|e| format!("rendering the man page: {e}"))?;
    // Our sections go before VERSION, where clap_mangen would put the after-help text.
    let mut extra = after
        .as_deref()
        .map(after_help_sections)
        .unwrap_or_default();
    extra.push_str(&see_also(&pages, found));
    let at = roff.find("\n.SH VERSION\n").map_or(roff.len(), |i| i + 1);
    roff.insert_str(at, &extra);
    Ok(roff.into_bytes())
}

/// roff text: backslashes and dashes escaped, apostrophes as the `Aq` string clap_mangen's
/// preamble defines, and a line that would start with a control character made plain.
fn roff_text(line: &str) -> String {
    let escaped = line
        .replace('\\', "\\\\")
        .replace('-', "\\-")
        .replace('\'', "\\*(Aq");
    if escaped.starts_with('.') {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

/// The after-help text as man sections: its `Examples:` block verbatim (no filling, so each
/// command line and continuation stays a line), then the prose after it (the exit codes) as
/// EXIT STATUS, filled.
fn after_help_sections(text: &str) -> String {
    let mut lines = text.lines().peekable();
    let mut out = String::new();
    if lines.peek().is_some_and(|l| l.trim_end() == "Examples:") {
        lines.next();
        let mut block = Vec::new();
        while let Some(l) = lines.next_if(|l| l.is_empty() || l.starts_with(' ')) {
            block.push(l);
        }
        while block.last().is_some_and(|l| l.is_empty()) {
            block.pop();
        }
        out.push_str(".SH EXAMPLES\n.nf\n");
        for l in block {
            out.push_str(&roff_text(l.strip_prefix("  ").unwrap_or(l)));
            out.push('\n');
        }
        out.push_str(".fi\n");
    }
    let rest: Vec<&str> = lines.collect();
    if rest.iter().any(|l| !l.trim().is_empty()) {
        let heading = if rest.iter().any(|l| l.starts_with("Exit codes:")) {
            ".SH \"EXIT STATUS\"\n"
        } else {
            ".SH NOTES\n"
        };
        out.push_str(heading);
        for l in rest {
            if l.trim().is_empty() {
                out.push_str(".PP\n");
            } else {
                out.push_str(&roff_text(l));
                out.push('\n');
            }
        }
    }
    out
}

/// SEE ALSO: the page of the command above this one and the pages of the commands below it,
/// each a page `joinguard man --out-dir` writes.
fn see_also(pages: &[Vec<String>], path: &[String]) -> String {
    let parent = (!path.is_empty()).then(|| path[..path.len() - 1].to_vec());
    let children = pages
        .iter()
        .filter(|p| p.len() == path.len() + 1 && p.starts_with(path));
    let names: Vec<String> = parent
        .iter()
        .chain(children)
        .map(|p| format!("{}(1)", roff_text(&page_name(p))))
        .collect();
    if names.is_empty() {
        return String::new();
    }
    format!(".SH \"SEE ALSO\"\n{}\n", names.join(", "))
}

/// Writes every page (joinguard.1, joinguard-preflight.1, joinguard-etcd-promote.1, ...) into
/// `dir`.
pub fn write_man_pages(dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut written = Vec::new();
    for path in page_paths() {
        let body = man_page(&path)?;
        let file = dir.join(format!("{}.1", page_name(&path)));
        std::fs::write(&file, body).map_err(|e| format!("{}: {e}", file.display()))?;
        written.push(file);
    }
    Ok(written)
}

/// `joinguard completion SHELL`.
pub fn run_completion(args: CompletionArgs) -> Ending {
    output::stdout_bytes(&completion(args.shell));
    Ending::Done
}

/// `joinguard man [COMMAND] [--out-dir DIR]`.
pub fn run_man(args: ManArgs) -> Ending {
    if let Some(dir) = args.out_dir {
        return match write_man_pages(&dir) {
            Ok(paths) => {
                for p in paths {
                    output::say(&format!("wrote {}", p.display()));
                }
                Ending::Done
            }
            Err(e) => {
                output::say(&format!("joinguard man: {e}"));
                Ending::Failed
            }
        };
    }
    match man_page(&args.command) {
        Ok(page) => {
            let _ = io::stdout().lock().write_all(&page);
            Ending::Done
        }
        Err(e) => {
            output::say(&e);
            Ending::InvalidInput
        }
    }
}
