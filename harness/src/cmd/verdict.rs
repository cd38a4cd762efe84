//! `records verdict LOG...`: the replay's verdict for any training logs, upstream's or a user's
//! own GPU runs of `train_gpt.py`.
use super::FormatArg;
use anyhow::{bail, Context, Result};
use records::catalog::{Catalog, RecordId, TARGET_VAL_LOSS};
use records::run::lab_target::{self, Target};
use records::verdict::runlog::{self, RunLog};
use records::verdict::Verdict;
use std::path::{Path, PathBuf};

/// Judge training logs as a replay is judged: did the runs reach the target val loss within
/// their step budget (one-sided t-test for two or more runs), and their train times. Reads
/// upstream's logs of every era and track (llm.c, track 1 and 2, track 3's times in seconds),
/// our train.log files and your own runs of upstream's train_gpt.py.
#[derive(clap::Args)]
pub struct Args {
    /// Log files, one per run (e.g. upstream's records/track_1_short/2025-09-03_FA3/*.txt).
    #[arg(required = true, value_name = "LOG")]
    pub logs: Vec<PathBuf>,
    /// The val loss to reach: the mean over the runs must be at or below it [default: 3.28;
    /// for our lab logs (`# scale: lab`, `# record: N`), record N's lab target].
    #[arg(long, value_name = "LOSS")]
    pub target: Option<f64>,
    /// The step budget of logs whose lines state none (llm.c's `s:N`) [default: the last
    /// validation step of the longest of them]; a log's own `step:N/M` lines set its budget.
    #[arg(long)]
    pub steps: Option<u64>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: FormatArg,
}

pub fn run(args: Args) -> Result<()> {
    if let Some(t) = args.target.filter(|t| !t.is_finite() || *t <= 0.0) {
        bail!("--target must be a positive val loss, got {t}");
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
                records::text::figures::count(log.unread.len(), "step line"),
                runlog::clip(line),
            );
        }
        if let Some(cut) = &log.cut {
            tracing::warn!("records: warning: {}: {}", path.display(), runlog::cut_text(cut));
        }
        if let (Some(given), Some(stated)) = (args.steps, log.stated_steps()) {
            if given != stated {
                bail!(
                    "{}: the log's own budget is {stated} steps (its `step:N/{stated}` lines), \
                     not --steps {given}; leave --steps out to judge each log by its own budget",
                    path.display()
                );
            }
        }
        logs.push(log);
    }
    one_record(&args.logs, &logs)?;
    let (target, from) = match args.target {
        Some(t) => (t, None),
        None => target_of(&args.logs, &logs)?,
    };
    let mut verdict = Verdict::of_logs(&logs, target, args.steps)?.target_from(from);
    for (run, name) in verdict.runs.iter_mut().zip(names(&args.logs)) {
        run.name = Some(name);
    }
    print!("{}", verdict.render(args.format.into()));
    Ok(())
}

/// Refuses logs whose headers name different records: a verdict pools its logs into one
/// t-test, which means something only for runs of one record.
fn one_record(paths: &[PathBuf], logs: &[RunLog]) -> Result<()> {
    let named = paths.iter().zip(logs).filter_map(|(p, l)| Some((p, l.record()?)));
    let mut first: Option<(&PathBuf, &str)> = None;
    for (path, record) in named {
        match first {
            None => first = Some((path, record)),
            Some((p, r)) if r != record => bail!(
                "{} is a log of record {r} and {} of record {record} (their `# record:` lines); \
                 a verdict pools its logs into one t-test, so give it the runs of one record",
                p.display(),
                path.display()
            ),
            Some(_) => {}
        }
    }
    Ok(())
}

/// The CPU in the `verdict.json` of the replay that wrote the log at `path` (in the run's
/// folder or the replay's, one up).
fn replay_cpu(path: &Path) -> Option<String> {
    path.ancestors().skip(1).take(2).find_map(|dir| {
        let text = std::fs::read_to_string(dir.join("verdict.json")).ok()?;
        serde_json::from_str::<Verdict>(&text).ok()?.cpu
    })
}

/// The target the logs are judged against, and where it comes from when it is not upstream's
/// 3.28: our lab logs (`# scale: lab`) reach the lab target of their record (`# record: N`),
/// as `records replay` judges them. Logs that call for different targets are refused.
fn target_of(paths: &[PathBuf], logs: &[RunLog]) -> Result<(f64, Option<String>)> {
    let mut catalog = None;
    let mut chosen: Option<(f64, Option<String>, &Path)> = None;
    for (path, log) in paths.iter().zip(logs) {
        let (target, from) = if log.header_value("scale") == Some("lab") {
            let record = log.record().unwrap_or("?");
            let key = if log.header_value("record_id").is_some() { "record_id" } else { "record" };
            let n: RecordId = record.parse().map_err(|_| {
                anyhow::anyhow!(
                    "{}: a lab-scale log (`# scale: lab`) of no known record (`# {key}: {record}`); \
                     give --target",
                    path.display()
                )
            })?;
            if catalog.is_none() {
                let loaded = records::paths::repo_root().and_then(|root| {
                    Ok((Catalog::load(&root)?, records::paths::results_dir(&root)))
                });
                catalog = Some(loaded.with_context(|| {
                    format!(
                        "{}: a lab-scale log is judged against its record's lab target, in the \
                         checkout's records/ (or give --target)",
                        path.display()
                    )
                })?);
            }
            let (catalog, results) = catalog.as_ref().expect("loaded above");
            catalog.get(n).with_context(|| format!("{}: `# {key}: {record}`", path.display()))?;
            // The CPU it ran on, as its replay's verdict.json says; else this machine's.
            let (cpu, whose) = match replay_cpu(path) {
                Some(cpu) => (cpu, "its replay's verdict.json names the CPU"),
                None => {
                    (lab_target::this_cpu(), "no verdict.json beside it names a CPU: this one's")
                }
            };
            let t = Target::of(catalog, results, n, &cpu)?;
            let from = format!(
                "{} (the log says `# scale: lab` and `# {key}: {record}`; {whose})",
                t.describe()
            );
            (t.val_loss, Some(from))
        } else {
            (TARGET_VAL_LOSS, None)
        };
        match &chosen {
            Some((t, _, first)) if *t != target => bail!(
                "{} is judged against val loss {t} and {} against {target}; judge them separately \
                 or give --target",
                first.display(),
                path.display()
            ),
            Some(_) => {}
            None => chosen = Some((target, from, path.as_path())),
        }
    }
    let (target, from, _) = chosen.context("no logs")?;
    Ok((target, from))
}

/// A name per log for the runs table: the file name, or, where file names collide (every run of
/// a replay is a `train.log`), as many of the path's last components as tell them apart.
fn names(paths: &[PathBuf]) -> Vec<String> {
    let tail = |p: &Path, k: usize| -> String {
        let parts: Vec<String> =
            p.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        parts[parts.len().saturating_sub(k)..].join("/")
    };
    let depth = paths.iter().map(|p| p.components().count()).max().unwrap_or(1);
    let mut k = vec![1; paths.len()];
    for _ in 0..depth {
        let current: Vec<String> = paths.iter().zip(&k).map(|(p, &k)| tail(p, k)).collect();
        let mut clash = false;
        for i in 0..paths.len() {
            if current.iter().filter(|c| **c == current[i]).count() > 1 {
                k[i] += 1;
                clash = true;
            }
        }
        if !clash {
            return current;
        }
    }
    paths.iter().map(|p| p.display().to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_grow_only_where_they_collide() {
        let p = |s: &str| PathBuf::from(s);
        let got = names(&[p("r/01/x/run-1/train.log"), p("r/01/x/run-2/train.log"), p("a.txt")]);
        assert_eq!(got, ["run-1/train.log", "run-2/train.log", "a.txt"]);
        assert_eq!(names(&[p("a/t.log"), p("b/c/t.log")]), ["a/t.log", "c/t.log"]);
        assert_eq!(names(&[p("t.log"), p("t.log")]), ["t.log", "t.log"]);
    }
}
