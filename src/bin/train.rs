//! `train`: run one record's recipe. The `records` CLI launches it; it also runs by hand:
//!
//!   train --manifest records/01.toml --scale lab --data data/default --out /tmp/run --cpu
//!   train --manifest records/29.toml --scale lab --print-schedule   # or --print-layout, --print-recipe
//!   train --manifest records/84.toml --scale full --print-params     # each parameter's optimizer
use anyhow::{Context, Result};
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use trainer::data::stream::first_shards;
use trainer::device::Target;
use trainer::dist::RankEnv;
use trainer::model::Gpt;
use trainer::optim::optimizer::Optimizer;
use trainer::optim::param_table;
use trainer::optim::schedule::Schedule;
use trainer::recipe::{Recipe, Scale};
use trainer::train::{run_until, RunConfig};

#[derive(Parser)]
#[command(name = "train", about = "Train a GPT with one record's recipe")]
struct Args {
    /// The record's manifest (records/NN.toml); its [recipe] and [lab] tables are read.
    #[arg(long)]
    manifest: PathBuf,
    /// full: upstream's recipe; lab: shrunk to a 2-core CPU by the common rule.
    #[arg(long, value_enum)]
    scale: ScaleArg,
    /// Folder with *_train_*.bin and *_val_*.bin shards.
    #[arg(
        long,
        required_unless_present_any = ["print_recipe", "print_layout", "print_schedule", "print_params"]
    )]
    data: Option<PathBuf>,
    /// Folder for train.log, metrics.jsonl, summary.json and recipe.toml.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Override the number of optimizer steps (schedules are mapped onto it).
    #[arg(long)]
    steps: Option<u64>,
    /// Override the recipe's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Train on the CPU. Without it the run needs a usable CUDA device and stops, saying why,
    /// when there is none.
    #[arg(long)]
    cpu: bool,
    /// Compute in bf16 with CUDA's storage policy (bf16 embeddings and block matrices, fp32 Adam
    /// state where the recipe asks) on any device: how tests run the GPU's dtypes on a CPU.
    #[arg(long, hide = true)]
    bf16: bool,
    /// Extra `key=value` header lines for the log (tree id, record number, ...).
    #[arg(long = "header", value_parser = parse_kv)]
    headers: Vec<(String, String)>,
    /// Print the recipe that runs at this scale (after the lab rule) as TOML, and exit.
    #[arg(long)]
    print_recipe: bool,
    /// Print the scalar bank's layout (name, range, init) of the built model, and exit.
    #[arg(long)]
    print_layout: bool,
    /// Print every parameter's optimizer settings (shape, storage, optimizer, lr and decay
    /// multipliers, betas, eps, state dtype, Muon's blocks and NorMuon's reduce dim) as a GPU
    /// run holds them (bf16 compute; with --cpu as the CPU lab does), and exit.
    #[arg(long)]
    print_params: bool,
    /// Print the schedule's table (lr, momentum, windows at every stage), and exit.
    #[arg(long)]
    print_schedule: bool,
    /// Write a Chrome trace (Kineto, with named ranges around each step's phases) of the run's
    /// last steps to DIR/trace-rank<R>.json.
    #[arg(long, value_name = "DIR")]
    profile: Option<PathBuf>,
    /// How many of the last steps --profile traces.
    #[arg(long, default_value_t = 3, requires = "profile")]
    profile_steps: u64,
    /// End after this step of the budget, the schedule unchanged (no final validation): how
    /// `records bench` and `records profile` time a stage of a record's real schedule.
    #[arg(long)]
    stop_after: Option<u64>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ScaleArg {
    Full,
    Lab,
}

fn parse_kv(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("expected key=value, got {s:?}"))
}

fn main() -> ExitCode {
    let args = Args::parse();
    trainer::logging::init();
    // torchrun's or Slurm's variables, else a single process.
    let ranks = match RankEnv::from_env() {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("train: error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let rank = ranks.rank;
    match main_inner(args, ranks) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("train (rank {rank}): error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The `--print-*` flags: prints what was asked and says whether one was.
fn print_only(args: &Args, recipe: &Recipe) -> Result<bool> {
    if args.print_recipe {
        print!("{}", toml::to_string(recipe)?);
        return Ok(true);
    }
    if args.print_schedule {
        print!("{}", Schedule::new(recipe).table(recipe.val_every));
        return Ok(true);
    }
    if args.print_layout {
        let vs = tch::nn::VarStore::new(tch::Device::Cpu);
        let (gpt, _) = Gpt::new(vs.root(), recipe, tch::Kind::Float);
        println!("name\tfrom\tto\tinit");
        for e in gpt.scalar_layout() {
            let init: Vec<String> = e.init.iter().map(f32::to_string).collect();
            println!("{}\t{}\t{}\t{}", e.name, e.at, e.at + e.init.len(), init.join(" "));
        }
        return Ok(true);
    }
    if args.print_params {
        let compute = if args.cpu { tch::Kind::Float } else { tch::Kind::BFloat16 };
        let vs = tch::nn::VarStore::new(tch::Device::Cpu);
        let (_, params) = Gpt::new(vs.root(), recipe, compute);
        let (head, rows) = Optimizer::new(params, recipe, compute)?.param_table();
        for line in head {
            println!("# {line}");
        }
        print!("{}", param_table::render(&rows));
        return Ok(true);
    }
    Ok(false)
}

/// `--stop-after` inside the budget, and `--profile`'s window inside the steps run.
fn check_stop_and_profile(
    args: &Args,
    budget: u64,
    ranks: &RankEnv,
    target: &Target,
) -> Result<()> {
    if let Some(stop) = args.stop_after {
        anyhow::ensure!(
            (1..=budget).contains(&stop),
            "--stop-after {stop}: must be 1 to {budget}, the run's steps"
        );
    }
    if let Some(dir) = args.profile.clone() {
        let steps = args.stop_after.unwrap_or(budget);
        // Step 0 warms the kernels up (and is untimed without an explicit warmup).
        anyhow::ensure!(
            (1..steps).contains(&args.profile_steps),
            "--profile-steps {}: must be 1 to {} (the run's steps but the first)",
            args.profile_steps,
            steps.saturating_sub(1)
        );
        trainer::profile::set(trainer::profile::Window {
            dir,
            first: steps - args.profile_steps,
            steps: args.profile_steps,
            rank: ranks.rank,
            cuda: target.device.is_cuda(),
        })?;
    }
    Ok(())
}

fn main_inner(args: Args, ranks: RankEnv) -> Result<()> {
    let scale = match args.scale {
        ScaleArg::Full => Scale::Full,
        ScaleArg::Lab => Scale::Lab,
    };
    let mut recipe = Recipe::from_manifest(&args.manifest, scale, args.steps)?;
    if let Some(seed) = args.seed {
        recipe.seed = seed;
    }
    if print_only(&args, &recipe)? {
        return Ok(());
    }
    let data = args.data.clone().context("--data is needed to train")?;
    let mut target = Target::pick(args.cpu, ranks.local_rank)?;
    if args.bf16 {
        target.compute = tch::Kind::BFloat16;
    }
    let budget = Schedule::new(&recipe).steps();
    check_stop_and_profile(&args, budget, &ranks, &target)?;
    let train_files = corpus::shard::shard_files(&data, "train").context("finding train shards")?;
    let train_files = first_shards(train_files, recipe.train_shards, &data)?;
    let val_files = corpus::shard::shard_files(&data, "val").context("finding val shards")?;
    // "29" for records/29.toml; an Act 1 step keeps its name ("a3").
    let stem = args.manifest.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
    let record = stem.parse().ok();
    let mut header = vec![
        ("record".to_string(), record.map_or(stem.to_string(), |n: u32| n.to_string())),
        ("scale".to_string(), format!("{scale:?}").to_lowercase()),
        ("device".to_string(), target.describe()),
        ("ranks".to_string(), ranks.world.to_string()),
        ("libtorch".to_string(), "2.11.0 (tch 0.24)".to_string()),
        ("data".to_string(), data.display().to_string()),
    ];
    header.extend(args.headers);
    header.push(("recipe".to_string(), serde_json::to_string(&recipe)?));
    let cfg = RunConfig {
        recipe,
        scale,
        record,
        train_files,
        val_files,
        out: args.out,
        target,
        ranks,
        header,
    };
    run_until(&cfg, args.stop_after)?;
    Ok(())
}
