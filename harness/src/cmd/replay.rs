//! `records replay N`: build record N's trainer, run its ranks, print the verdict.
use anyhow::{Context, Result};
use corpus::tokenizer::Tokenizer;
use indicatif::{ProgressBar, ProgressStyle};
use records::catalog::{Catalog, Manifest, TARGET_VAL_LOSS};
use records::launch::{launch, LaunchOpts, Stream};
use records::replay::{build_trainer, PendingResults};
use records::{corpora, paths, runlog, series, verdict::Verdict};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Replay a record: lab scale on CPU (the default corpus), or the full recipe on GPUs.
#[derive(clap::Args)]
pub struct Args {
    /// Record number (see `records list`).
    pub record: u32,
    /// Step budget [default: 250 at lab scale (the [lab] table), the record's own at full].
    #[arg(long)]
    pub steps: Option<u64>,
    /// Independent runs (seeds seed, seed+1, ...) for the t-test against the target.
    #[arg(long, default_value_t = 1)]
    pub runs: u32,
    /// full: upstream's recipe (needs FineWeb shards: `records data fineweb`); lab: CPU-sized
    /// [default: lab, or full with --gpus].
    #[arg(long, value_enum)]
    pub scale: Option<ScaleArg>,
    /// CPU ranks (processes) per node; the batch is split across them.
    #[arg(long, default_value_t = 1, conflicts_with = "gpus")]
    pub ranks: usize,
    /// GPU ranks per node (one process per GPU); fewer than the official 8 keep its batch by
    /// gradient accumulation. Builds the trainer with CUDA (run `scripts/setup.sh --cuda`).
    #[arg(long, alias = "nproc-per-node")]
    pub gpus: Option<usize>,
    /// Nodes in the job (run the same command on each, with its --node-rank).
    #[arg(long, default_value_t = 1)]
    pub nnodes: usize,
    #[arg(long, default_value_t = 0)]
    pub node_rank: usize,
    /// Rank 0's host; required with --nnodes > 1.
    #[arg(long)]
    pub master_addr: Option<String>,
    /// Rank 0's port [default: a free port, on one node].
    #[arg(long)]
    pub master_port: Option<u16>,
    /// Shard folder [default: data/default at lab scale, data/fineweb10B at full scale].
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Override the recipe's seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Run the newest trainer (src/ as it is) with this record's recipe, instead of the
    /// record's own tree; both must give the same losses.
    #[arg(long)]
    pub head: bool,
    /// Where results go [default: <repo>/results].
    #[arg(long)]
    pub results: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
pub enum ScaleArg {
    Lab,
    Full,
}

pub fn run(args: Args) -> Result<()> {
    anyhow::ensure!(args.runs >= 1, "--runs must be at least 1");
    let root = paths::repo_root()?;
    let catalog = Catalog::load(&root)?;
    let m = catalog.get(args.record)?;
    let cuda = args.gpus.is_some();
    let lab = args
        .scale
        .unwrap_or(if cuda { ScaleArg::Full } else { ScaleArg::Lab })
        == ScaleArg::Lab;
    let (scale, target) = if lab {
        ("lab", catalog.lab_target()?.val_loss)
    } else {
        ("full", TARGET_VAL_LOSS)
    };
    let data = match (&args.data, lab) {
        (Some(d), _) => d.clone(),
        (None, true) => corpora::ensure_default(&root, &Tokenizer::byte())?.0,
        (None, false) => records::download::default_dest(&root),
    };
    let steps = args
        .steps
        .unwrap_or(if lab { lab_budget(m)? } else { m.record.steps });

    // The tree id (a git tree hash of the trainer's files) goes into the log, so a result names
    // the exact code that produced it.
    let (tree, tree_id, label) = if args.head {
        let id = series::tree::worktree_tree(&series::apply::scratch_repo()?, &root)?;
        (root.clone(), id.to_string(), format!("{scale}-head"))
    } else {
        let dir = series::materialize(&root, args.record)?;
        let id = std::fs::read_to_string(dir.join(series::tree::MARKER))?
            .trim()
            .to_string();
        (dir, id, scale.to_string())
    };
    eprintln!("records: building the trainer in {} ...", tree.display());
    let bin = build_trainer(&root, &tree, &paths::cargo_target_dir(&root), cuda)?;

    let nproc = args.gpus.unwrap_or(args.ranks);
    let opts = LaunchOpts {
        nnodes: args.nnodes,
        node_rank: args.node_rank,
        master_addr: args.master_addr.clone(),
        master_port: args.master_port,
        ..LaunchOpts::default()
    };
    let results = args
        .results
        .clone()
        .unwrap_or_else(|| paths::results_dir(&root));
    let pending = PendingResults::new(&results, args.record, &label)?;
    let mut logs = Vec::new();
    for i in 0..args.runs {
        let out = pending.dir().join(format!("run-{}", i + 1));
        let mut targs: Vec<OsString> = vec![
            "--manifest".into(),
            m.path.clone().into(),
            "--scale".into(),
            scale.into(),
        ];
        targs.extend([
            "--data".into(),
            data.clone().into(),
            "--out".into(),
            out.clone().into(),
        ]);
        targs.extend(["--steps".into(), steps.to_string().into()]);
        targs.extend([
            "--header".into(),
            format!("run={}/{}", i + 1, args.runs).into(),
        ]);
        targs.extend([
            "--header".into(),
            format!("tree={tree_id} ({})", tree.display()).into(),
        ]);
        if !cuda {
            targs.push("--cpu".into());
        }
        if let Some(seed) = args
            .seed
            .map(|s| s + u64::from(i))
            .or((i > 0).then(|| seed_of(m) + u64::from(i)))
        {
            targs.extend(["--seed".into(), seed.to_string().into()]);
        }
        eprintln!(
            "records: #{} run {}/{} at {scale} scale, {} rank(s) per node ({steps} steps, data {})",
            args.record,
            i + 1,
            args.runs,
            nproc,
            data.display()
        );
        watch(&bin, &targs, nproc, &opts, steps)?;
        if args.node_rank == 0 {
            logs.push(runlog::parse_file(&out.join("train.log"))?);
        }
    }
    if args.node_rank != 0 {
        return Ok(()); // rank 0's node judges and keeps the results
    }

    let mut verdict = Verdict::new(&logs, target, m.record.official_time_s, steps)?;
    if lab {
        verdict = verdict.at_lab_scale();
    }
    println!(
        "\n#{} {} ({scale} scale; target {target})",
        m.record.number, m.record.title
    );
    print!("{}", verdict.render());
    let json = serde_json::to_string_pretty(&verdict)?;
    std::fs::write(pending.dir().join("verdict.json"), json).context("writing verdict.json")?;
    let dest = pending.commit()?;
    println!("results: {}", dest.display());
    Ok(())
}

/// The lab step budget from the manifest's `[lab]` table.
fn lab_budget(m: &Manifest) -> Result<u64> {
    let steps = m.lab.get("steps").and_then(|v| v.as_integer());
    let steps =
        steps.with_context(|| format!("{}: [lab] has no integer `steps`", m.path.display()))?;
    Ok(steps as u64)
}

fn seed_of(m: &Manifest) -> u64 {
    m.recipe
        .get("seed")
        .and_then(|v| v.as_integer())
        .unwrap_or(0) as u64
}

/// Runs the ranks with a progress bar: rank 0's validation lines are printed as they come, and
/// every rank's stderr with its rank.
fn watch(bin: &Path, args: &[OsString], nproc: usize, opts: &LaunchOpts, steps: u64) -> Result<()> {
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
            let loss = line
                .text
                .split_whitespace()
                .find(|w| w.starts_with("train_loss:"));
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
