//! `records bench [N...]`: each record's own trainer on its own schedule, stopped after a few
//! timed steps at a stated place in it (`--at`), in interleaved rounds under the timing lock; a
//! table on stdout and `results/bench/<run id>/bench.json`.
use super::replay::ScaleArg;
use anyhow::{Context, Result};
use records::catalog::{Catalog, Manifest, RecordId};
use records::run::bench::{self, Bench, Samples, Setup};
use records::run::launch::{launch, LaunchOpts, Stream};
use records::run::replay::PendingResults;
use records::run::timing_lock::TimingLock;
use records::run::trainer_cmd::Trainer;
use records::verdict::runlog;
use records::{paths, series};

/// Time one rank's training step of each record, interleaved round by round.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub places: super::RunPlaces,
    /// Records to time (29, a3) [default: every record in records/].
    pub records: Vec<RecordId>,
    /// lab: the [lab] shape on CPU; full: upstream's shape on one GPU (its batch by gradient
    /// accumulation) [default: lab, or full with --cuda].
    #[arg(long, value_enum)]
    pub scale: Option<ScaleArg>,
    /// Run on the GPU: trainers built with CUDA; adds MFU and peak memory.
    #[arg(long)]
    pub cuda: bool,
    /// Rounds; each runs every record once, in turn.
    #[arg(long, default_value_t = 5)]
    pub rounds: u32,
    /// Timed steps of each record per round.
    #[arg(long, default_value_t = 8)]
    pub steps: u64,
    /// Steps of each run left out before the timed ones (at least 1).
    #[arg(long, default_value_t = 2)]
    pub warmup: u64,
    /// Where the timed steps sit in each record's own schedule: `first` (the first stage; only
    /// those steps run), `last` (the last stage, at the full batch; runs the whole budget) or
    /// a step number (the warmup starts there).
    #[arg(long, default_value = "first")]
    pub at: bench::At,
    /// The device's peak TFLOP/s for MFU [default: 989, an H100's bf16 dense peak].
    #[arg(long, default_value_t = bench::H100_BF16_TFLOPS)]
    pub peak_tflops: f64,
}

pub fn run(args: Args) -> Result<()> {
    check_flags(&args)?;
    let root = paths::repo_root()?;
    let catalog = Catalog::load(&root)?;
    let chosen: Vec<&Manifest> = if args.records.is_empty() {
        catalog.records().iter().collect()
    } else {
        args.records.iter().map(|&n| catalog.get(n)).collect::<Result<_>>()?
    };
    let first = catalog.records().first().context("records/ holds no manifest")?.id();
    let lab = args.scale.unwrap_or(if args.cuda { ScaleArg::Full } else { ScaleArg::Lab })
        == ScaleArg::Lab;
    let scale = if lab { "lab" } else { "full" };
    let data = args.places.data(&root, lab)?;
    for m in &chosen {
        records::data::corpora::check_shards_for(m, lab, &data)?;
    }
    let trainers = build_trainers(&args, &root, &chosen, lab)?;

    let results = args.places.results(&root);
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    let date = series::date::compact_utc(secs as i64);
    let id = format!("{date}-{}-{scale}", std::process::id());
    let pending = PendingResults::in_dir(&results.join("bench"), &id)?;

    let timing = TimingLock::acquire(args.places.no_lock)?;
    let mut samples: Vec<Samples> =
        (trainers.iter()).map(|(m, t)| empty_samples(&args, m, t, lab)).collect();
    let mut device = String::new();
    for round in 1..=args.rounds {
        for ((m, t), s) in trainers.iter().zip(&mut samples) {
            let out = pending.dir().join(format!("round-{round}-{}", m.id().slug()));
            device = sample_round(&args, (m, t), s, round, scale, &data, &out)?;
        }
    }
    let not_comparable = timing.not_comparable()?;
    drop(timing);

    let setup = Setup {
        date_utc: date,
        scale: scale.to_string(),
        device,
        cpu: records::run::lab_target::this_cpu(),
        rounds: args.rounds,
        warmup_steps: args.warmup,
        timed_steps: args.steps,
        at: args.at.to_string(),
        peak_tflops: args.cuda.then_some(args.peak_tflops),
    };
    let mut bench = Bench::new(setup, &samples, first)?;
    bench.time_not_comparable = not_comparable;
    print!("{}", bench.render());
    let json = serde_json::to_string_pretty(&bench)?;
    corpus::fs::write_atomic(&pending.dir().join("bench.json"), json.as_bytes())?;
    let dest = pending.commit()?;
    println!("results: {}", dest.join("bench.json").display());
    Ok(())
}

/// The flags that leave nothing to time, refused first.
fn check_flags(args: &Args) -> Result<()> {
    anyhow::ensure!(args.rounds >= 1, "--rounds must be at least 1");
    anyhow::ensure!(args.steps >= 1, "--steps must be at least 1");
    anyhow::ensure!(
        args.warmup >= 1,
        "--warmup must be at least 1 (the first step has no earlier time to differ from)"
    );
    Ok(())
}

/// Each chosen record's trainer, after checking that its budget holds the timed window.
fn build_trainers<'m>(
    args: &Args,
    root: &std::path::Path,
    chosen: &[&'m Manifest],
    lab: bool,
) -> Result<Vec<(&'m Manifest, Trainer)>> {
    let mut trainers = Vec::new();
    for m in chosen {
        let n = m.id();
        args.at
            .window(m.budget(lab), args.warmup, args.steps)
            .with_context(|| format!("record {n}"))?;
        trainers.push((*m, Trainer::build(root, n, false, args.cuda)?));
    }
    Ok(trainers)
}

/// A record's samples before the first round: its window in its own budget.
fn empty_samples(args: &Args, m: &Manifest, t: &Trainer, lab: bool) -> Samples {
    let budget = m.budget(lab);
    Samples {
        record: m.id(),
        title: m.record.title.clone(),
        parent: m.record.parent,
        tree: t.tree_id.clone(),
        rounds: Vec::new(),
        tokens: 0,
        window: args.at.window(budget, args.warmup, args.steps).expect("checked when built"),
        budget,
        parameters: None,
        peak_mem_allocated_mib: None,
    }
}

/// One round of one record into `out`: its own budget and schedule, stopped after the window;
/// its step times, tokens, parameters and peak memory added to `s`. Returns the device it ran
/// on, as its log's header names it.
fn sample_round(
    args: &Args,
    (m, t): (&Manifest, &Trainer),
    s: &mut Samples,
    round: u32,
    scale: &str,
    data: &std::path::Path,
    out: &std::path::Path,
) -> Result<String> {
    let n = m.id();
    let cmd = t.cmd(m, scale, data, out, args.cuda)?.stop_after(s.window.stop);
    let cmd = cmd.header(format!("bench=round {round}/{}", args.rounds));
    launch(&t.bin, cmd.args(), 1, &LaunchOpts::default(), |line| {
        if line.stream == Stream::Stderr {
            tracing::info!("[{n}] {}", line.text);
        }
    })
    .map_err(|e| anyhow::anyhow!("record {n}, round {round}: {e}"))?;
    let log = runlog::parse_file(&out.join("train.log"))?;
    let context = || format!("record {n}, round {round}: {}", out.display());
    let times = bench::step_times(&log, s.window.skip).with_context(context)?;
    s.tokens +=
        bench::window_tokens(&out.join("metrics.jsonl"), s.window.skip).with_context(context)?;
    tracing::info!(
        "records: round {round}/{}: {n} {:.1} ms/step (median of {})",
        args.rounds,
        records::verdict::stats::median(&times).unwrap_or(f64::NAN),
        times.len()
    );
    s.rounds.push(times);
    s.parameters = bench::header_number(&log, "parameters");
    s.peak_mem_allocated_mib = s.peak_mem_allocated_mib.max(log.peak_mem_allocated_mib);
    Ok(log.header_value("device").unwrap_or_default().to_string())
}
