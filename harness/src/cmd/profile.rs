//! `records profile N [--compare M]`: record N's own trainer for a few steps with the Kineto
//! profiler on; a Chrome trace per rank under `results/profile/<run id>/` and "where the time
//! goes" on stdout.
use super::replay::ScaleArg;
use super::FormatArg;
use anyhow::{Context, Result};
use records::catalog::{Manifest, RecordId};
use records::logging::step;
use records::profile::render::{self, Profiled};
use records::profile::{self as trace, StageTable};
use records::run::bench;
use records::run::launch::{launch, LaunchOpts, Stream};
use records::run::replay::PendingResults;
use records::run::timing_lock::TimingLock;
use records::run::trainer_cmd::Trainer;
use records::verdict::runlog;
use records::{paths, series};
use serde::Serialize;
use std::path::{Path, PathBuf};
use tracing::info;

/// What Kineto prints when it looks for GPUs and finds none (libtorch_cpu's profiler).
const KINETO_GPU_PROBE: &str = "gpuGetDeviceCount failed";

/// Profile a few training steps of a record: a Chrome trace and where the time goes.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub places: super::RunPlaces,
    /// The record to profile (29, a3).
    pub record: RecordId,
    /// A second record to profile the same way; its table is printed beside the first's.
    #[arg(long)]
    pub compare: Option<RecordId>,
    /// Steps traced (after the warmup steps).
    #[arg(long, default_value_t = 3)]
    pub steps: u64,
    /// Steps run before the traced ones (at least 1: the first step warms the kernels up).
    #[arg(long, default_value_t = 2)]
    pub warmup: u64,
    /// Where the traced steps sit in the record's own schedule: `first`, `last` (the full
    /// batch; runs the whole budget) or a step number, as in `records bench`.
    #[arg(long, default_value = "first")]
    pub at: bench::At,
    /// lab: the [lab] shape on CPU; full: upstream's shape on GPUs (one per rank).
    #[arg(long, value_enum, default_value = "lab")]
    pub scale: ScaleArg,
    /// Ranks: CPU processes at lab scale, GPUs at full scale.
    #[arg(long, default_value_t = 1)]
    pub ranks: usize,
    /// Table format.
    #[arg(long, value_enum, default_value_t)]
    pub format: FormatArg,
    /// Summarise this trace of `train --profile` (a run of your own, a GPU machine's) instead of
    /// running the record.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["compare", "ranks", "steps", "warmup"])]
    pub trace: Option<PathBuf>,
}

/// What `profile.json` keeps of one record's run.
#[derive(Serialize)]
struct RecordProfile {
    record: RecordId,
    tree: String,
    device: String,
    /// The trainer's own step times (ms) of the traced steps, from its log.
    log_step_ms: Vec<f64>,
    steps: Vec<trace::Step>,
    stages: Vec<StageTable>,
    /// One per rank, relative to the run's folder.
    traces: Vec<PathBuf>,
}

pub fn run(args: Args) -> Result<()> {
    anyhow::ensure!(args.steps >= 1, "--steps must be at least 1");
    anyhow::ensure!(args.warmup >= 1, "--warmup must be at least 1 (the first step warms up)");
    anyhow::ensure!(args.ranks >= 1, "--ranks must be at least 1");
    if let Some(path) = &args.trace {
        let title = format!("{} ({})", args.record, path.display());
        print_stages(&title, &trace::by_stage(&trace::read(path)?), args.format);
        return Ok(());
    }
    let root = paths::repo_root()?;
    let catalog = super::load_catalog(&root, Some(args.record))?;
    let lab = args.scale == ScaleArg::Lab;
    let scale = if lab { "lab" } else { "full" };
    let mut chosen = vec![catalog.get(args.record)?];
    if let Some(other) = args.compare {
        chosen.push(catalog.get(other)?);
    }
    for m in &chosen {
        let n = m.id();
        args.at.window(m.budget(lab), args.warmup, args.steps).with_context(|| format!("{n}"))?;
    }
    let data = args.places.data(&root, lab)?;
    for m in &chosen {
        records::data::corpora::check_shards_for(m, lab, &data)?;
    }
    let mut trainers = Vec::new();
    for m in &chosen {
        let n = m.id();
        trainers.push((*m, Trainer::build(&root, n, false, !lab)?));
    }

    let results = args.places.results(&root);
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    let id = format!("{}-{}-{scale}", series::date::compact_utc(secs as i64), std::process::id());
    let pending = PendingResults::in_dir(&results.join("profile"), &id)?;
    let timing = TimingLock::acquire(args.places.no_lock)?;
    let mut profiles = Vec::new();
    for (m, t) in &trainers {
        profiles.push(profile_one(&args, m, t, &data, scale, pending.dir())?);
    }
    let not_comparable = timing.not_comparable()?;
    drop(timing);

    let title = |p: &RecordProfile| format!("{} ({scale}, {})", p.record, p.device);
    if let Some(why) = &not_comparable {
        println!("Times NOT COMPARABLE: {why}");
    }
    match profiles.as_slice() {
        [one] => {
            print_stages(&title(one), &one.stages, args.format);
            println!("{}", log_line(one));
        }
        [a, b] => {
            let (ta, tb) = (trace::overall(&a.steps), trace::overall(&b.steps));
            let (pa, pb) = (
                Profiled { title: title(a), table: &ta },
                Profiled { title: title(b), table: &tb },
            );
            println!("{}\n{}", render::heading(&pa), render::heading(&pb));
            print!("{}", render::compare(&pa, &pb, args.format.into()));
            println!("{}\n{}", log_line(a), log_line(b));
        }
        _ => unreachable!("one record, or two with --compare"),
    }
    let json = serde_json::json!({ "time_not_comparable": not_comparable, "records": profiles });
    let json = serde_json::to_string_pretty(&json)?;
    corpus::fs::write_atomic(&pending.dir().join("profile.json"), json.as_bytes())?;
    let dest = pending.commit()?;
    println!("traces (open in ui.perfetto.dev or chrome://tracing):");
    for p in &profiles {
        for t in &p.traces {
            println!("  {}", dest.join(t).display());
        }
    }
    Ok(())
}

/// One table per stage, each under its heading.
fn print_stages(title: &str, stages: &[StageTable], format: FormatArg) {
    for t in stages {
        println!("{}", render::heading(&Profiled { title: title.to_string(), table: t }));
        print!("{}", render::table(t, format.into()));
    }
}

fn log_line(p: &RecordProfile) -> String {
    let times: Vec<String> = p.log_step_ms.iter().map(|t| format!("{t:.0}")).collect();
    format!(
        "{}: the trainer's own clock for the traced steps (profiler on): {} ms",
        p.record,
        times.join(", ")
    )
}

/// Runs `m`'s trainer with `--profile` into `run/NN/` and reads its traces.
fn profile_one(
    args: &Args,
    m: &Manifest,
    t: &Trainer,
    data: &Path,
    scale: &str,
    run: &Path,
) -> Result<RecordProfile> {
    let n = m.id();
    let out = run.join(n.slug());
    let budget = m.budget(scale == "lab");
    let window = args.at.window(budget, args.warmup, args.steps).with_context(|| format!("{n}"))?;
    let dir = out.join("trace");
    // The record's own budget and schedule, stopped after the traced steps.
    let cmd = t.cmd(m, scale, data, &out, scale != "lab")?.stop_after(window.stop);
    let cmd = cmd.profile(&dir, args.steps);
    info!(
        "records: profiling {n}: steps {}-{} of its {budget} traced, {} rank(s)",
        window.skip + 1,
        window.stop,
        args.ranks
    );
    step("launch", n, || {
        launch(&t.bin, cmd.args(), args.ranks, &LaunchOpts::default(), |line| {
            // On a CPU, Kineto's probe for GPUs fails by design; its error line is noise.
            let probe = scale == "lab" && line.text.contains(KINETO_GPU_PROBE);
            if line.stream == Stream::Stderr && !probe {
                info!("[{n} rank {}] {}", line.rank, line.text);
            }
        })
        .map_err(|e| anyhow::anyhow!("record {n}: {e}"))
    })?;
    let traces: Vec<PathBuf> = (0..args.ranks)
        .map(|r| PathBuf::from(format!("{}/trace/trace-rank{r}.json", n.slug())))
        .collect();
    let (log, log_step_ms, steps) = step("parse", n, || -> Result<_> {
        let log = runlog::parse_file(&out.join("train.log"))?;
        let times = bench::step_times(&log, window.skip)
            .with_context(|| format!("record {n}: {}", out.display()))?;
        Ok((log, times, trace::read(&run.join(&traces[0]))?))
    })?;
    Ok(RecordProfile {
        record: n,
        tree: t.tree_id.clone(),
        device: log.header_value("device").unwrap_or_default().to_string(),
        log_step_ms,
        stages: trace::by_stage(&steps),
        steps,
        traces,
    })
}
