//! `records verdict LOG...`: the replay's verdict for any training logs, upstream's or a user's
//! own GPU runs of `train_gpt.py`.
use super::FormatArg;
use anyhow::{bail, Result};
use records::catalog::TARGET_VAL_LOSS;
use records::runlog::{self, RunLog};
use records::verdict::Verdict;
use std::path::PathBuf;

/// Judge training logs as a replay is judged: did the runs reach the target val loss within
/// the step budget (one-sided t-test for two or more runs), and their train times. Reads
/// upstream's logs of every era and track (llm.c, track 1 and 2, track 3's times in seconds),
/// our train.log files and your own runs of upstream's train_gpt.py.
#[derive(clap::Args)]
pub struct Args {
    /// Log files, one per run (e.g. upstream's records/track_1_short/2025-09-03_FA3/*.txt).
    #[arg(required = true, value_name = "LOG")]
    pub logs: Vec<PathBuf>,
    /// The val loss to reach: the mean over the runs must be at or below it.
    #[arg(long, default_value_t = TARGET_VAL_LOSS, value_name = "LOSS")]
    pub target: f64,
    /// The step budget: a run counts when it validates at this step [default: the last
    /// validation step of the longest log].
    #[arg(long)]
    pub steps: Option<u64>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: FormatArg,
}

pub fn run(args: Args) -> Result<()> {
    if !args.target.is_finite() {
        bail!("--target must be a finite val loss, got {}", args.target);
    }
    if args.steps == Some(0) {
        bail!("--steps must be at least 1");
    }
    let mut logs = Vec::new();
    for path in &args.logs {
        let log = runlog::parse_for_verdict(path)?;
        if let Some((n, line)) = log.unread.first() {
            tracing::warn!(
                "records: warning: {}: {} not understood, the first at line {n}: `{}`",
                path.display(),
                records::figures::count(log.unread.len(), "step line"),
                runlog::clip(line),
            );
        }
        logs.push(log);
    }
    let steps = match args.steps {
        Some(s) => s,
        None => budget(&logs),
    };
    let mut verdict = Verdict::of_logs(&logs, args.target, steps)?;
    for (run, path) in verdict.runs.iter_mut().zip(&args.logs) {
        run.name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    }
    print!("{}", verdict.render(args.format.into()));
    Ok(())
}

/// The step the runs are judged at: the last validation of the longest log. Upstream's track 3
/// counts steps to the target, and its runs often stop before their schedule's end
/// (`step:3325/3350`), so the `/M` of the lines is not the budget.
fn budget(logs: &[RunLog]) -> u64 {
    logs.iter().filter_map(|l| l.final_val()).map(|v| v.step).max().unwrap_or(0)
}
