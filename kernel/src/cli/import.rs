//! `oxibot import nanobot [--from DIR] [--dry-run]`: bring a nanobot data dir over and say
//! what was brought (see `oxibot_kernel::import`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use oxibot_kernel::config::Config;
use oxibot_kernel::import::{self, ImportOptions};
use oxibot_kernel::paths;

/// The `import` subcommands.
#[derive(Debug, Subcommand)]
pub enum ImportCommand {
    /// Bring over a nanobot data dir: config, sessions, cron jobs, pairing approvals; the
    /// workspace is used where it is.
    ///
    /// Nothing in the nanobot data dir is changed, and running it again brings over only
    /// what is new. Sessions go to oxibot's data dir ($OXIBOT_HOME, else ~/.oxibot), the
    /// config to --config (written only when nothing is there).
    Nanobot {
        /// The nanobot data dir.
        #[arg(long, value_name = "DIR", default_value = "~/.nanobot")]
        from: PathBuf,
        /// Only show what would be done.
        #[arg(long)]
        dry_run: bool,
        /// Use nanobot's config even though oxibot has one (it is kept as
        /// config.json.before-import). Without it, nanobot's config replaces only one that is
        /// still as `oxibot onboard` wrote it.
        #[arg(long)]
        take_config: bool,
        /// oxibot's config file [default: $OXIBOT_HOME/config.json, else ~/.oxibot/config.json].
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
    },
}

/// Runs an `import` subcommand.
pub fn run(command: ImportCommand) -> anyhow::Result<ExitCode> {
    let ImportCommand::Nanobot { from, dry_run, take_config, config } = command;
    let options = ImportOptions {
        from: paths::expand_tilde(&from),
        data_dir: paths::data_dir(),
        config_path: config.map_or_else(paths::default_config_path, |path| paths::expand_tilde(&path)),
        dry_run,
        take_config,
    };
    let report = import::run(&options)?;
    let from = options.from.display();
    if dry_run {
        println!("Importing from {from} (dry run: nothing is written):");
    } else {
        println!("Importing from {from}:");
    }
    print!("{report}");
    let changes = report.changes();
    match (dry_run, changes) {
        (_, 0) => println!("Nothing new to import."),
        (true, n) => println!("{n} {} would be imported; run again without --dry-run to do it.", things(n)),
        (false, n) => println!("Imported {n} {}. Talk to the assistant with `oxibot agent`.", things(n)),
    }
    if let Some(config_path) = config_in_use(&options) {
        let restricted = Config::load(&config_path).map_or(true, |config| config.tools.restrict_to_workspace);
        if !restricted {
            println!("{}", super::status::sandbox_off_warning(&config_path));
        }
    }
    if report.failures() > 0 {
        eprintln!("error: {} {} could not be imported (see above)", report.failures(), things(report.failures()));
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The config oxibot uses after this import: its own, else (in a dry run, before the copy)
/// nanobot's, which the import would copy.
fn config_in_use(options: &ImportOptions) -> Option<PathBuf> {
    if options.config_path.exists() {
        return Some(options.config_path.clone());
    }
    let nanobot = options.from.join("config.json");
    (options.dry_run && nanobot.is_file()).then_some(nanobot)
}

fn things(n: usize) -> &'static str {
    if n == 1 { "thing" } else { "things" }
}
