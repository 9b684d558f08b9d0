//! `oxibot usage`: token use per day (or per source, cron job, session or model) over the last
//! days, from the usage log, with the cache hit rate, the cost when `agents.defaults.pricing`
//! prices the models, then the reasoning tokens and the mean time of a model call (last, so
//! the columns before keep their place).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context as _;
use oxibot_kernel::paths;
use oxibot_kernel::usage::{GroupBy, Totals, UsageLog, UsageStore, group};

use super::CommonArgs;
use super::kernel::Setup;

/// What `oxibot usage` sums by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum By {
    /// The UTC day.
    Day,
    /// What spent the tokens: user, cron, heartbeat, subagent, system, dream (per phase),
    /// consolidation, memory_flush, embedding.
    Source,
    /// The cron job's id (`-` for everything else).
    Job,
    /// The session.
    Session,
    /// The model.
    Model,
}

impl By {
    fn group(self) -> GroupBy {
        match self {
            By::Day => GroupBy::Day,
            By::Source => GroupBy::Source,
            By::Job => GroupBy::Job,
            By::Session => GroupBy::Session,
            By::Model => GroupBy::Model,
        }
    }

    fn heading(self) -> &'static str {
        match self {
            By::Day => "DAY (UTC)",
            By::Source => "SOURCE",
            By::Job => "JOB",
            By::Session => "SESSION",
            By::Model => "MODEL",
        }
    }
}

/// Prints the table. Reads only: the workspace is not needed, nor created.
pub fn run(common: &CommonArgs, days: u64, by: By) -> anyhow::Result<ExitCode> {
    let setup = Setup::load_read_only(common)?;
    let prices = setup.settings.pricing.clone().map_err(anyhow::Error::msg)?;
    let today = chrono::Utc::now().date_naive();
    let entries = UsageLog::new(&paths::data_dir()).entries(today, days.max(1));
    let rows: Vec<(String, Totals)> = group(&entries, &prices, by.group()).into_iter().collect();
    let mut out = std::io::stdout().lock();
    if rows.is_empty() {
        writeln!(out, "no model calls recorded in the last {days} day(s)")?;
        return Ok(ExitCode::SUCCESS);
    }
    write_table(&mut out, by.heading(), &rows).context("cannot print")?;
    Ok(ExitCode::SUCCESS)
}

fn write_table(out: &mut impl Write, first: &str, rows: &[(String, Totals)]) -> std::io::Result<()> {
    let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0).max(first.len());
    writeln!(
        out,
        "{first:<width$}  {:>6}  {:>6}  {:>12}  {:>12}  {:>12}  {:>10}  {:>6}  {:>10}  {:>8}",
        "TURNS", "CALLS", "PROMPT", "CACHED", "COMPLETION", "COST", "HIT", "REASONING", "MS/CALL"
    )?;
    let mut total = Totals::default();
    for (name, totals) in rows {
        writeln!(out, "{name:<width$}  {}", columns(totals))?;
        total.merge(totals);
    }
    writeln!(out, "{:<width$}  {}", "total", columns(&total))
}

fn columns(totals: &Totals) -> String {
    let cost = totals.cost.map_or_else(|| "-".to_owned(), |c| format!("{c:.4}"));
    let hit = if totals.prompt == 0 {
        "-".to_owned()
    } else {
        format!("{:.0}%", totals.cached as f64 * 100.0 / totals.prompt as f64)
    };
    let latency = totals.ms_per_call().map_or_else(|| "-".to_owned(), |ms| ms.to_string());
    format!(
        "{:>6}  {:>6}  {:>12}  {:>12}  {:>12}  {cost:>10}  {hit:>6}  {:>10}  {latency:>8}",
        totals.turns, totals.calls, totals.prompt, totals.cached, totals.completion, totals.reasoning
    )
}
