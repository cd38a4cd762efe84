//! `records replay N`: build record N's trainer, run it, print the verdict.
use anyhow::{Context, Result};
use corpus::tokenizer::Tokenizer;
use indicatif::{ProgressBar, ProgressStyle};
use records::catalog::{Catalog, TARGET_VAL_LOSS};
use records::replay::{build_trainer, run_trainer, PendingResults};
use records::{corpora, paths, runlog, series, verdict::Verdict};
use std::path::PathBuf;
use std::process::Command;

/// Replay a record: lab scale on CPU (the default corpus), or the full recipe on GPUs.
#[derive(clap::Args)]
pub struct Args {
    /// Record number (see `records list`).
    pub record: u32,
    /// Step budget [default: the scale's: 300 at lab, the record's own at full].
    #[arg(long)]
    pub steps: Option<u64>,
    /// Independent runs (seeds seed, seed+1, ...) for the t-test against the target.
    #[arg(long, default_value_t = 1)]
    pub runs: u32,
    /// full: upstream's recipe (needs FineWeb shards: `records data fineweb`); lab: CPU-sized.
    #[arg(long, value_enum, default_value = "lab")]
    pub scale: ScaleArg,
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
    let lab = args.scale == ScaleArg::Lab;
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
        let id = std::fs::read_to_string(dir.join(series::tree::MARKER))?.trim().to_string();
        (dir, id, scale.to_string())
    };
    eprintln!("records: building the trainer in {} ...", tree.display());
    let bin = build_trainer(&root, &tree, &paths::cargo_target_dir(&root), false)?;

    let results = args.results.clone().unwrap_or_else(|| paths::results_dir(&root));
    let pending = PendingResults::new(&results, args.record, &label)?;
    let mut logs = Vec::new();
    for i in 0..args.runs {
        let out = pending.dir().join(format!("run-{}", i + 1));
        let mut cmd = Command::new(&bin);
        cmd.arg("--manifest")
            .arg(&m.path)
            .args(["--scale", scale])
            .arg("--data")
            .arg(&data)
            .arg("--out")
            .arg(&out);
        cmd.args([
            "--steps",
            &steps.to_string(),
            "--header",
            &format!("run={}/{}", i + 1, args.runs),
            "--header",
            &format!("tree={tree_id} ({})", tree.display()),
        ]);
        if let Some(seed) = args
            .seed
            .map(|s| s + u64::from(i))
            .or((i > 0).then(|| seed_of(m) + u64::from(i)))
        {
            cmd.args(["--seed", &seed.to_string()]);
        }
        eprintln!(
            "records: #{} run {}/{} at {scale} scale ({steps} steps, data {})",
            args.record,
            i + 1,
            args.runs,
            data.display()
        );
        watch(cmd, steps)?;
        logs.push(runlog::parse_file(&out.join("train.log"))?);
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
fn lab_budget(m: &records::catalog::Manifest) -> Result<u64> {
    let steps = m
        .lab
        .get("steps")
        .and_then(|v| v.as_integer())
        .with_context(|| format!("{}: [lab] has no integer `steps`", m.path.display()))?;
    Ok(steps as u64)
}

fn seed_of(m: &records::catalog::Manifest) -> u64 {
    m.recipe
        .get("seed")
        .and_then(|v| v.as_integer())
        .unwrap_or(0) as u64
}

/// Runs the trainer with a progress bar; validation lines are printed as they come.
fn watch(cmd: Command, steps: u64) -> Result<()> {
    let bar = ProgressBar::new(steps);
    bar.set_style(ProgressStyle::with_template(
        "{bar:40} {pos}/{len} steps  {msg}  [{elapsed} < {eta}]",
    )?);
    let quiet_every = (steps / 10).max(1);
    let result = run_trainer(cmd, |line| {
        let Some(step) = parse_step(line) else { return };
        if line.contains("val_loss:") {
            if bar.is_hidden() {
                println!("{line}");
            } else {
                bar.println(line);
            }
        } else {
            bar.set_position(step);
            bar.set_message(
                line.split_whitespace()
                    .find(|w| w.starts_with("train_loss:"))
                    .unwrap_or("")
                    .to_string(),
            );
            if bar.is_hidden() && step % quiet_every == 0 {
                println!("{line}");
            }
        }
    });
    bar.finish_and_clear();
    result
}

/// N of a `step:N/M ...` line.
fn parse_step(line: &str) -> Option<u64> {
    line.strip_prefix("step:")?.split('/').next()?.parse().ok()
}
