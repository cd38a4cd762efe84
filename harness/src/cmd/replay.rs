//! `records replay N`: build record N's trainer, run its ranks, print the verdict.
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use records::catalog::{Catalog, Manifest, RecordId, TARGET_VAL_LOSS};
use records::data::corpora;
use records::logging::step;
use records::present::plot::{self, Chart, XAxis};
use records::run::lab_target::{self, Measured, Target};
use records::run::launch::{launch, LaunchOpts, Stream};
use records::run::replay::PendingResults;
use records::run::timing_lock::TimingLock;
use records::run::trainer_cmd::Trainer;
use records::trainer::recipe::Scale;
use records::verdict::runlog;
use records::{paths, verdict::Verdict};
use std::ffi::OsString;
use std::path::Path;

/// Replay a record: lab scale on CPU (the default corpus), or the full recipe on GPUs.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub places: super::RunPlaces,
    /// Record: one of the catalog's (`records list`: 29, or a3 for Act 1's third step) or any
    /// upstream record inside a step (`records list --all`), its tree at its own commit and its
    /// own recipe.
    pub record: RecordId,
    /// Step budget [default: the record's, from its manifest: `[lab] steps` at lab scale
    /// (proportional to its official steps: #29 250, #46 323), `record.steps` at full scale].
    #[arg(long, value_parser = positive::<u64>)]
    pub steps: Option<u64>,
    /// Independent runs (seeds seed, seed+1, ...) for the t-test against the target.
    #[arg(long, default_value_t = 1, value_parser = positive::<u32>)]
    pub runs: u32,
    /// full: upstream's recipe (needs FineWeb shards: `records data fineweb`); lab: CPU-sized
    /// [default: lab, or full with --gpus].
    #[arg(long, value_enum)]
    pub scale: Option<ScaleArg>,
    /// CPU ranks (processes) per node; the batch is split across them.
    #[arg(long, default_value_t = 1, conflicts_with = "gpus", value_parser = positive::<usize>)]
    pub ranks: usize,
    /// GPU ranks per node (one process per GPU); fewer than the official 8 keep its batch by
    /// gradient accumulation. Builds the trainer with CUDA (run `scripts/setup.sh --cuda`).
    #[arg(long, alias = "nproc-per-node", value_parser = positive::<usize>)]
    pub gpus: Option<usize>,
    /// Nodes in the job (run the same command on each, with its --node-rank).
    #[arg(long, default_value_t = 1, value_parser = positive::<usize>)]
    pub nnodes: usize,
    /// This node's rank among the --nnodes, 0 to nnodes-1; node 0 runs rank 0, writes the log
    /// and prints the verdict.
    #[arg(long, default_value_t = 0)]
    pub node_rank: usize,
    /// Rank 0's host; required with --nnodes > 1.
    #[arg(long)]
    pub master_addr: Option<String>,
    /// Rank 0's port [default: a free port, on one node].
    #[arg(long, value_parser = positive::<u16>)]
    pub master_port: Option<u16>,
    /// Override the recipe's seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Run the newest trainer (src/ as it is) with this record's recipe, instead of the
    /// record's own tree; both must give the same losses.
    #[arg(long)]
    pub head: bool,
    /// Also re-time the parent record on this machine, interleaved run by run, and report the
    /// time delta (upstream's rule: faster than the prior record on the same hardware).
    #[arg(long)]
    pub baseline: bool,
    /// How the verdict prints.
    #[arg(long, value_enum, default_value = "text")]
    pub format: super::FormatArg,
    /// Print no val-loss curve after the verdict (none is printed when stdout is not a terminal).
    #[arg(long)]
    pub no_plot: bool,
}

impl Args {
    /// The replay that measures this CPU's lab target: reference record `n` at lab scale over
    /// its whole budget, one rank, its own seed and tree; places and output as `a`'s.
    fn reference(a: &Args, n: RecordId) -> Args {
        Args {
            places: a.places.clone(),
            record: n,
            steps: None,
            runs: 1,
            scale: Some(ScaleArg::Lab),
            ranks: 1,
            gpus: None,
            nnodes: 1,
            node_rank: 0,
            master_addr: None,
            master_port: None,
            seed: None,
            head: false,
            baseline: false,
            format: a.format,
            no_plot: a.no_plot,
        }
    }
}

/// A count that must be positive, checked while the arguments are parsed so that the error
/// names the flag and nothing is built first.
fn positive<T: std::str::FromStr + PartialOrd + From<u8>>(s: &str) -> Result<T, String> {
    let v: T = s.parse().map_err(|_| format!("`{s}` is not a whole number"))?;
    if v < T::from(1) {
        return Err("must be at least 1".into());
    }
    Ok(v)
}

#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
pub enum ScaleArg {
    /// Shrunk by the common [lab] rule to run on a CPU in minutes.
    Lab,
    /// Upstream's recipe as it ran on 8×H100.
    Full,
}

pub fn run(args: Args) -> Result<()> {
    check_args(&args)?;
    let root = paths::repo_root()?;
    let catalog = super::load_catalog(&root, Some(args.record))?;
    let m = catalog.replayable(&root, args.record)?;
    let cuda = args.gpus.is_some();
    let lab =
        args.scale.unwrap_or(if cuda { ScaleArg::Full } else { ScaleArg::Lab }) == ScaleArg::Lab;
    if cuda {
        records::run::replay::check_cuda_setup(&root)?;
    }
    let data = args.places.data(&root, lab)?;
    corpora::check_shards_for(&m, lab, &data)?;
    let results = args.places.results(&root);
    let cpu = lab_target::this_cpu();
    let replay = Replay { args: &args, catalog: &catalog, m: &m, cuda, lab, results, cpu, data };
    let (lab_target, self_measures) = replay.lab_target()?;
    let (scale, target) = match &lab_target {
        Some(t) => ("lab", t.val_loss),
        None => ("full", TARGET_VAL_LOSS),
    };
    let steps = args.steps.unwrap_or(m.budget(lab));
    // Upstream's rule: a record must beat its parent re-timed on the same hardware.
    let parent_manifest = match args.baseline {
        true => {
            let n = m.record.parent.with_context(|| {
                format!("record {} has no parent to re-time", args.record.bare())
            })?;
            Some(catalog.replayable(&root, n)?)
        }
        false => None,
    };
    let parent = match &parent_manifest {
        Some(p) => Some((p.as_ref(), Trainer::build(&root, p.id(), false, cuda)?)),
        None => None,
    };
    let this = (m.as_ref(), Trainer::build(&root, args.record, args.head, cuda)?);
    let label = if args.head { format!("{scale}-head") } else { scale.to_string() };
    let pending = PendingResults::new(&replay.results, args.record, &label)?;
    let runs = replay.launch_all(&pending, scale, steps, parent.as_ref(), &this)?;
    if args.node_rank != 0 {
        return Ok(()); // rank 0's node judges and keeps the results
    }
    let lab_target = match self_measures {
        true => Some(replay.measured_target(&runs.logs, &pending)?),
        false => lab_target,
    };
    let target = lab_target.as_ref().map_or(target, |t| t.val_loss);
    let verdict = replay.verdict(&runs, lab_target.as_ref(), self_measures, target, steps)?;
    println!("\n{} {} ({scale} scale; target {target})", m.id(), m.record.title);
    print!("{}", verdict.render(args.format.into()));
    plot_runs(m.id(), &runs.logs, lab, target, !args.no_plot);
    let json = serde_json::to_string_pretty(&verdict)?;
    corpus::fs::write_atomic(&pending.dir().join("verdict.json"), json.as_bytes())?;
    let dest = pending.commit()?;
    if let Some(m) = lab_target.and_then(|t| t.measured).filter(|_| self_measures) {
        lab_target::keep(&replay.results, m)?;
    }
    println!("results: {}", dest.display());
    Ok(())
}

/// The flags that contradict each other, refused before anything is built.
fn check_args(args: &Args) -> Result<()> {
    anyhow::ensure!(
        args.node_rank < args.nnodes,
        "--node-rank {} must be below --nnodes {}",
        args.node_rank,
        args.nnodes
    );
    if args.nnodes > 1 && args.master_addr.is_none() {
        anyhow::bail!("--master-addr is needed with --nnodes {}: rank 0's host", args.nnodes);
    }
    Ok(())
}

/// One replay's setting: what every phase reads.
struct Replay<'a> {
    args: &'a Args,
    catalog: &'a Catalog,
    m: &'a Manifest,
    cuda: bool,
    lab: bool,
    results: std::path::PathBuf,
    cpu: String,
    data: std::path::PathBuf,
}

/// A trainer and the manifest it runs.
type Side<'a> = (&'a Manifest, Trainer);

/// What the runs logged: this record's, its re-timed parent's, and whether the timing lock
/// saw other work.
struct Runs {
    logs: Vec<runlog::RunLog>,
    baseline_logs: Vec<runlog::RunLog>,
    not_comparable: Option<String>,
}

impl Replay<'_> {
    /// The lab target this run is judged by (none at full scale), and whether this run is the
    /// reference replay that measures it. A whole-budget lab run is judged against a target
    /// measured on this CPU: the reference record's replay measures it once (this run, if it is
    /// that replay; else one first, after this run's own checks, so a run that cannot start
    /// measures nothing).
    fn lab_target(&self) -> Result<(Option<Target>, bool)> {
        let (args, cpu) = (self.args, &self.cpu);
        if !self.lab {
            return Ok((None, false));
        }
        let target = Target::of(self.catalog, &self.results, args.record, cpu)?;
        let whole = args.steps.is_none() && args.nnodes == 1;
        let measuring = whole && target.measured.is_none();
        let self_measures = measuring
            && target.record == args.record
            && args.seed.is_none()
            && !args.head
            && args.ranks == 1;
        if !measuring || self_measures {
            return Ok((Some(target), self_measures));
        }
        tracing::info!(
            "records: this CPU ({cpu}) has no lab target yet; replaying {} once to measure it",
            target.record
        );
        run(Args::reference(args, target.record))?;
        Ok((Some(Target::of(self.catalog, &self.results, args.record, cpu)?), false))
    }

    /// Every run, each interleaved with the parent's when it is re-timed (so drift of the
    /// machine hits both sides alike), under the timing lock.
    fn launch_all(
        &self,
        pending: &PendingResults,
        scale: &str,
        steps: u64,
        parent: Option<&Side>,
        this: &Side,
    ) -> Result<Runs> {
        let timing = TimingLock::acquire(self.args.places.no_lock)?;
        let (mut logs, mut baseline_logs) = (Vec::new(), Vec::new());
        for i in 0..self.args.runs {
            if let Some(p) = parent {
                baseline_logs.extend(self.one(pending, scale, steps, i, p, "baseline")?);
            }
            logs.extend(self.one(pending, scale, steps, i, this, "run")?);
        }
        let not_comparable = timing.not_comparable()?;
        Ok(Runs { logs, baseline_logs, not_comparable })
    }

    /// Run `i` of `side` into `<pending>/<name>-<i+1>`: its ranks launched and watched, rank 0's
    /// node parsing the log (the others only train).
    fn one(
        &self,
        pending: &PendingResults,
        scale: &str,
        steps: u64,
        i: u32,
        (m, t): &Side,
        name: &str,
    ) -> Result<Option<runlog::RunLog>> {
        let args = self.args;
        let seed = match (args.seed, i) {
            (Some(s), _) => Some(s + u64::from(i)),
            (None, 0) => None,
            (None, _) => Some(seed_of(m)? + u64::from(i)),
        };
        let (number, nproc) = (m.id(), args.gpus.unwrap_or(args.ranks));
        tracing::info!(
            "records: {number} run {}/{} at {scale} scale, {} rank(s) per node ({steps} steps, data {})",
            i + 1,
            args.runs,
            nproc,
            self.data.display()
        );
        let out = pending.dir().join(format!("{name}-{}", i + 1));
        let mut cmd = t.cmd(m, scale, &self.data, &out, self.cuda)?.steps(steps);
        cmd = cmd.header(format!("run={}/{}", i + 1, args.runs));
        if let Some(seed) = seed {
            cmd = cmd.seed(seed);
        }
        let opts = LaunchOpts {
            nnodes: args.nnodes,
            node_rank: args.node_rank,
            master_addr: args.master_addr.clone(),
            master_port: args.master_port,
            ..LaunchOpts::default()
        };
        step("launch", number, || watch(&t.bin, cmd.args(), nproc, &opts, steps))?;
        step("parse", number, || {
            (args.node_rank == 0).then(|| runlog::parse_file(&out.join("train.log"))).transpose()
        })
    }

    /// The target this reference replay measured: its final val loss on this CPU.
    fn measured_target(&self, logs: &[runlog::RunLog], pending: &PendingResults) -> Result<Target> {
        let last = logs.first().and_then(|l| l.final_val());
        let record = self.args.record;
        let m = Measured {
            cpu: self.cpu.clone(),
            record,
            tree: lab_target::reference_tree(self.catalog, record)?,
            val_loss: last
                .map(|v| v.val_loss)
                .context("the run that measures this CPU's lab target logged no final val loss")?,
            run: pending.id().to_string(),
        };
        Ok(Target::measured_by(record, m))
    }

    /// The verdict on the runs: against `target`, with the official time, this CPU's lab
    /// target, the re-timed parent, and whether the times can be compared.
    fn verdict(
        &self,
        runs: &Runs,
        lab_target: Option<&Target>,
        self_measures: bool,
        target: f64,
        steps: u64,
    ) -> Result<Verdict> {
        let m = self.m;
        let mut verdict = Verdict::new(&runs.logs, target, m.record.official_time_s, steps)?;
        if !m.id().is_main() {
            let hardware = m.record.track.def().hardware.replacen('x', "×", 1);
            verdict = verdict.official_on(Some(hardware));
        }
        if let Some(t) = lab_target {
            verdict = verdict.at_lab_scale().target_from(Some(t.describe())).on_cpu(&self.cpu);
        }
        if self_measures {
            let (r, next) =
                (self.args.record, lab_target::next_after(self.catalog, self.args.record));
            verdict = verdict.setting_the_target(&r.to_string(), &next);
        }
        if self.args.baseline {
            verdict = verdict.with_baseline(&runs.baseline_logs);
        }
        Ok(verdict.time_not_comparable(runs.not_comparable.clone()))
    }
}

/// The runs' val curves in the terminal, against the target they were judged by.
fn plot_runs(number: RecordId, logs: &[runlog::RunLog], lab: bool, target: f64, enabled: bool) {
    let runs: Vec<(String, &[runlog::ValPoint])> =
        logs.iter().enumerate().map(|(i, l)| (format!("run {}", i + 1), &l.val[..])).collect();
    let chart = Chart::runs(number, &runs, lab, Some(target), XAxis::Step);
    plot::term::print(chart.as_slice(), enabled);
}

/// A record's built trainer: the record's own tree (or, with `head`, the checkout).
pub(super) fn seed_of(m: &Manifest) -> Result<u64> {
    Ok(m.typed_recipe(Scale::Full, None)?.seed)
}

/// Runs the ranks with a progress bar: rank 0's validation lines are printed as they come, and
/// every rank's stderr with its rank.
pub(super) fn watch(
    bin: &Path,
    args: &[OsString],
    nproc: usize,
    opts: &LaunchOpts,
    steps: u64,
) -> Result<()> {
    let bar = ProgressBar::new(steps);
    bar.set_style(ProgressStyle::with_template(
        "{bar:40} {pos}/{len} steps  {msg}  [{elapsed} < {eta}]",
    )?);
    let quiet_every = (steps / 10).max(1);
    let print = |text: &str| {
        if bar.is_hidden() {
            println!("{text}")
        } else {
            bar.println(text)
        }
    };
    let result = launch(bin, args, nproc, opts, |line| {
        if line.stream == Stream::Stderr {
            print(&format!("[rank {}] {}", line.rank, line.text));
            return;
        }
        let Some(step) = parse_step(line.text) else {
            return;
        };
        if line.text.contains("val_loss:") {
            print(line.text);
        } else {
            bar.set_position(step);
            let loss = line.text.split_whitespace().find(|w| w.starts_with("train_loss:"));
            bar.set_message(loss.unwrap_or("").to_string());
            if bar.is_hidden() && step % quiet_every == 0 {
                println!("{}", line.text);
            }
        }
    });
    bar.finish_and_clear();
    result.map(|_| ()).map_err(|e| anyhow::anyhow!("{e}"))
}

/// N of a `step:N/M ...` line.
fn parse_step(line: &str) -> Option<u64> {
    line.strip_prefix("step:")?.split('/').next()?.parse().ok()
}
