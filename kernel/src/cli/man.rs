//! `oxibot man`: manual pages in roff, one per command, from the command-line definition.
//!
//! The top page lists its subcommands as `oxibot-<name>(1)`; those pages exist: `oxibot man
//! agent` prints one, and `oxibot man --dir DIR` writes every page (`oxibot.1`,
//! `oxibot-agent.1`, `oxibot-cron-add.1`, …) into a directory on the `MANPATH`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

/// Prints the page of the command named by `path` (empty: `oxibot` itself).
pub fn print(top: clap::Command, path: &[String]) -> anyhow::Result<ExitCode> {
    let mut command = top.disable_help_subcommand(true);
    command.build();
    let mut name = String::from("oxibot");
    for part in path {
        let Some(sub) = command.find_subcommand(part).cloned() else {
            anyhow::bail!("no command '{name} {part}': see `{name} --help` for the commands");
        };
        name = format!("{name}-{}", sub.get_name());
        command = sub.display_name(name.clone());
    }
    clap_mangen::Man::new(command).render(&mut std::io::stdout()).context("cannot print the manual page")?;
    Ok(ExitCode::SUCCESS)
}

/// Writes the page of every command into `dir`, creating it, and says how many.
pub fn write_all(top: clap::Command, dir: &Path) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    clap_mangen::generate_to(top, dir).with_context(|| format!("cannot write manual pages into {}", dir.display()))?;
    let written = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(".1"))
        .count();
    println!("wrote {written} manual pages into {} (read one with `man -l {}/oxibot.1`)", dir.display(), dir.display());
    Ok(ExitCode::SUCCESS)
}
