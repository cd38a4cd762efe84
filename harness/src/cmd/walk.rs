//! `records walk A B`: every record of the series from A to B, the upstream records inside the
//! steps too, replayed at lab scale at B's budget with the same seeds, interleaved seed by seed;
//! a table and charts of what each one bought.
use anyhow::{Context, Result};
use records::catalog::{Catalog, Manifest, RecordId};
use records::cost::model::Model;
use records::data::corpora;
use records::present::plot::{self, svg};
use records::present::walk as show;
use records::run::lab_target::{self, Target};
use records::run::launch::LaunchOpts;
use records::run::timing_lock::TimingLock;
use records::run::trainer_cmd::Trainer;
use records::run::walk::{self, Stop, Walk};
use records::{paths, series};
use std::borrow::Cow;
use std::collections::btree_map::{BTreeMap, Entry};
use std::path::{Path, PathBuf};

/// Replay every upstream record from A to B at one lab budget (B's), seeds fixed.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub places: super::RunPlaces,
    /// The first record (#29 or later: a record of the series or an upstream record inside one,
    /// `records list --all`; or an Act 1 step, a1); its loss is where the deltas start.
    pub from: RecordId,
    /// The last record, of the same track; its lab budget is the walk's.
    pub to: RecordId,
    /// Runs per record, seeds seed, seed+1, ... (the same for every record): the deltas then
    /// print with their spread.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// The step budget of every run [default: B's lab budget].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub steps: Option<u64>,
    /// The first seed [default: B's recipe's].
    #[arg(long)]
    pub seed: Option<u64>,
    /// How the table prints.
    #[arg(long, value_enum, default_value = "text")]
    pub format: super::FormatArg,
    /// Print no charts (none are printed when stdout is not a terminal).
    #[arg(long)]
    pub no_plot: bool,
}

pub fn run(args: Args) -> Result<()> {
    let root = paths::repo_root()?;
    let catalog = super::load_catalog(&root, None)?;
    let numbers = walk::stops(&catalog, (args.from, args.to), "walk")?;
    let manifests: Vec<_> =
        numbers.iter().map(|&n| catalog.replayable(&root, n)).collect::<Result<_>>()?;
    let last = manifests.last().expect("a walk has two stops at least");
    let steps = args.steps.unwrap_or(last.budget(true));
    let first_seed = match args.seed {
        Some(s) => s,
        None => super::replay::seed_of(last)?,
    };
    let seeds: Vec<u64> = (0..u64::from(args.runs)).map(|i| first_seed + i).collect();
    let results = args.places.results(&root);
    let cpu = lab_target::this_cpu();

    let mut stops = stops_of(&root, &catalog, &manifests, steps)?;
    walk::predict(&mut stops, &catalog, &Model::load(&root));
    let plan = plan_runs(&results, &stops, &manifests, &seeds, steps)?;
    let missing = plan.iter().flatten().filter(|(_, kept)| kept.is_none()).count();
    println!(
        "walk {} -> {}: {} records x {} seed(s) at {steps} lab steps; {missing} run(s) to do, {} kept",
        args.from,
        args.to,
        stops.len(),
        seeds.len(),
        stops.len() * seeds.len() - missing
    );
    // The corpus only where a run is to do: a walk of kept runs reads none.
    let data = match missing {
        0 => PathBuf::new(),
        _ => args.places.data(&root, true)?,
    };
    if missing > 0 {
        corpora::check_shards_for(last, true, &data)?;
    }
    // Its runs would slow a timed replay beside them: one timed thing at a time (`--no-lock`).
    let _timing = match missing {
        0 => None,
        _ => Some(TimingLock::acquire(args.places.no_lock)?),
    };

    // Interleaved: every record's run with one seed, then the next seed.
    let mut trainers: BTreeMap<RecordId, Trainer> = BTreeMap::new();
    for (&seed, runs) in seeds.iter().zip(plan) {
        for ((s, m), (dir, kept)) in stops.iter_mut().zip(&manifests).zip(runs) {
            let run = match kept {
                Some(run) => run,
                None => {
                    let t = match trainers.entry(s.number) {
                        Entry::Occupied(e) => e.into_mut(),
                        Entry::Vacant(e) => {
                            e.insert(Trainer::build(&root, s.number, false, false)?)
                        }
                    };
                    one_run(t, m, &data, &dir, steps, seed)?
                }
            };
            println!(
                "{:<4} seed {seed}: val {:.4} at step {steps}  {}",
                s.number, run.val_loss, s.changed
            );
            s.runs.push(run);
        }
    }
    let walk = Walk { from: args.from, to: args.to, steps, seeds, cpu, stops };
    show_and_keep(&args, &catalog, &results, &walk)
}

/// Each stop with its tree id (materializing is cheap; a build waits until a run needs it),
/// what it changed, and whether its lab reading equals the stop before it.
fn stops_of(
    root: &Path,
    catalog: &Catalog,
    manifests: &[Cow<Manifest>],
    steps: u64,
) -> Result<Vec<Stop>> {
    let mut stops = Vec::new();
    for (i, m) in manifests.iter().enumerate() {
        let n = m.id();
        let dir = series::materialize(root, n)?;
        let tree = std::fs::read_to_string(dir.join(series::tree::MARKER))?.trim().to_string();
        let (changed, same_math) = walk::changed(catalog, n, i == 0);
        let same_at_lab = match i {
            0 => false,
            _ => walk::same_at_lab(&manifests[i - 1], m, steps)?,
        };
        stops.push(Stop {
            number: n,
            title: m.record.title.clone(),
            changed,
            same_math,
            same_at_lab,
            official_s: m.record.official_time_s,
            predicted: None,
            tree,
            runs: Vec::new(),
        });
    }
    Ok(stops)
}

/// Each run's folder, seed by seed (its key is what decides its losses), and its run if kept.
type Plan = Vec<Vec<(PathBuf, Option<walk::Run>)>>;

fn plan_runs(
    results: &Path,
    stops: &[Stop],
    manifests: &[Cow<Manifest>],
    seeds: &[u64],
    steps: u64,
) -> Result<Plan> {
    (seeds.iter())
        .map(|&seed| {
            (stops.iter().zip(manifests))
                .map(|(s, m)| {
                    let key = walk::run_key(m, &s.tree, steps, seed)?;
                    let dir = walk::run_dir(results, s.number, &key);
                    let kept = walk::kept_run(&dir)?;
                    Ok((dir, kept))
                })
                .collect::<Result<_>>()
        })
        .collect()
}

/// The walk's table and charts, printed, and kept with its SVGs under results/walk/.
fn show_and_keep(args: &Args, catalog: &Catalog, results: &Path, walk: &Walk) -> Result<()> {
    let target = Target::of(catalog, results, args.to, &walk.cpu).ok().map(|t| t.val_loss);
    println!();
    print!("{}", show::render(walk, args.format.into()));
    let charts = show::charts(walk, target);
    plot::term::print(&charts, !args.no_plot);
    let svgs: Vec<(&str, String)> = ["loss.svg", "time.svg"]
        .into_iter()
        .zip(&charts)
        .map(|(name, c)| Ok((name, svg::figure(c, (900, 420))?.svg)))
        .collect::<Result<_>>()?;
    let dir = walk::write(results, walk, &svgs)?;
    println!("results: {} (walk.json, loss.svg, time.svg)", dir.display());
    Ok(())
}

/// One lab run of `m` on its trainer `t`, kept at `dir`.
fn one_run(
    t: &Trainer,
    m: &Manifest,
    data: &Path,
    dir: &Path,
    steps: u64,
    seed: u64,
) -> Result<walk::Run> {
    let parent = dir.parent().context("a kept run has a folder")?;
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let tmp = parent.join(format!(".tmp-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)?;
    }
    let cmd = t.cmd(m, "lab", data, &tmp, false)?.steps(steps).seed(seed).header("walk=1");
    tracing::info!("records: {} seed {seed}, {steps} lab steps", m.id());
    super::replay::watch(&t.bin, cmd.args(), 1, &LaunchOpts::default(), steps)?;
    walk::keep_run(&tmp, dir, seed)
}
