//! `oxibot usage`: token use per day (or per session) over the last days, from the usage log,
//! with the cost when `agents.defaults.pricing` prices the models.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context as _;
use oxibot_kernel::paths;
use oxibot_kernel::usage::{Totals, UsageLog, summarise};

use super::CommonArgs;
use super::kernel::Setup;

/// Prints the table.
pub fn run(common: &CommonArgs, days: u64, by_session: bool) -> anyhow::Result<ExitCode> {
    let setup = Setup::load(common)?;
    let prices = setup.settings.pricing.clone().map_err(anyhow::Error::msg)?;
    let today = chrono::Utc::now().date_naive();
    let entries = UsageLog::new(&paths::data_dir()).entries(today, days.max(1));
    let (per_day, per_session) = summarise(&entries, &prices);
    let rows: Vec<(String, Totals)> = if by_session {
        per_session.into_iter().collect()
    } else {
        per_day.into_iter().map(|(day, totals)| (day.to_string(), totals)).collect()
    };
    let mut out = std::io::stdout().lock();
    if rows.is_empty() {
        writeln!(out, "no model calls recorded in the last {days} day(s)")?;
        return Ok(ExitCode::SUCCESS);
    }
    write_table(&mut out, if by_session { "SESSION" } else { "DAY (UTC)" }, &rows).context("cannot print")?;
    Ok(ExitCode::SUCCESS)
}

fn write_table(out: &mut impl Write, first: &str, rows: &[(String, Totals)]) -> std::io::Result<()> {
    let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0).max(first.len());
    writeln!(
        out,
        "{first:<width$}  {:>6}  {:>6}  {:>12}  {:>12}  {:>12}  {:>10}",
        "TURNS", "CALLS", "PROMPT", "CACHED", "COMPLETION", "COST"
    )?;
    let mut total = Totals::default();
    let mut priced = true;
    for (name, totals) in rows {
        writeln!(out, "{name:<width$}  {}", columns(totals))?;
        total.prompt += totals.prompt;
        total.cached += totals.cached;
        total.completion += totals.completion;
        total.calls += totals.calls;
        total.turns += totals.turns;
        priced &= totals.cost.is_some();
        total.cost = Some(total.cost.unwrap_or(0.0) + totals.cost.unwrap_or(0.0));
    }
    if !priced {
        total.cost = None;
    }
    writeln!(out, "{:<width$}  {}", "total", columns(&total))
}

fn columns(totals: &Totals) -> String {
    let cost = totals.cost.map_or_else(|| "-".to_owned(), |c| format!("{c:.4}"));
    format!(
        "{:>6}  {:>6}  {:>12}  {:>12}  {:>12}  {cost:>10}",
        totals.turns, totals.calls, totals.prompt, totals.cached, totals.completion
    )
}
