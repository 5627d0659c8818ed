//! Generated documentation: shell completions and man pages, both rendered from the clap
//! definitions in [`crate::cli`] at run time, so they cannot drift from the flags of the binary
//! that prints them. The copies committed under `docs/man/` and `contrib/completions/` are
//! checked against this output by a test. Nothing here touches the network.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::CommandFactory;

use crate::cli::{Cli, CompletionArgs, ManArgs};
use crate::commands as output;
use joinguard_core::Ending;

/// Renders the completion script for `shell`.
pub fn completion(shell: clap_complete::Shell) -> Vec<u8> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "joinguard", &mut out);
    out
}

/// Renders one man page: `joinguard(1)` for `None`, `joinguard-<command>(1)` otherwise.
pub fn man_page(command: Option<&str>) -> Result<Vec<u8>, String> {
    let mut root = Cli::command();
    root.build();
    let page = match command {
        None => root,
        Some(name) => {
            let names: Vec<String> = visible_commands(&root);
            let sub = root
                .find_subcommand(name)
                .filter(|c| !c.is_hide_set())
                .ok_or_else(|| {
                    format!(
                        "joinguard man: no command `{name}`; choose one of: {}",
                        names.join(", ")
                    )
                })?
                .clone();
            let version = root.get_version().unwrap_or_default().to_string();
            sub.name(format!("joinguard-{name}")).version(version)
        }
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut out)
        .map_err(|e| format!("rendering the man page: {e}"))?;
    Ok(out)
}

/// Writes `joinguard.1` and one `joinguard-<command>.1` per visible command into `dir`.
pub fn write_man_pages(dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut root = Cli::command();
    root.build();
    let mut pages = vec![("joinguard.1".to_string(), man_page(None)?)];
    for name in visible_commands(&root) {
        pages.push((format!("joinguard-{name}.1"), man_page(Some(&name))?));
    }
    let mut written = Vec::new();
    for (file, body) in pages {
        let path = dir.join(file);
        std::fs::write(&path, body).map_err(|e| format!("{}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// The commands a man page is made for: every visible one except `help`.
pub fn visible_commands(root: &clap::Command) -> Vec<String> {
    root.get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
        .map(|c| c.get_name().to_string())
        .collect()
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
    match man_page(args.command.as_deref()) {
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
