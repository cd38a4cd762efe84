//! `records show N`: one record's facts, evidence and recipe.
use records::catalog::manifest_text;
use records::catalog::upstream_recipe::{self, Step};
use records::catalog::{RecordId, SERIES, TARGET_VAL_LOSS};
use records::paths;
use records::present::plot::{self, Chart, XAxis};
use records::run::lab_recipe;
use records::text::figures;
use records::text::table::{Format, Table};
use records::verdict::stats;

/// Show one record: upstream facts, the official figures and its recipe as the manifest writes
/// it (with its comments).
#[derive(clap::Args)]
pub struct Args {
    /// Record (see `records list`: 29, a3), or an upstream record inside one's step
    /// (`list --all`).
    pub record: RecordId,
    /// Show the recipe that actually runs at lab scale, as the record's own trainer resolves it
    /// (builds that trainer first, like `replay`; an upstream record's, its commit's tree).
    #[arg(long)]
    pub lab: bool,
    /// Show each parameter at full scale as its optimizer treats it (shape, storage dtype,
    /// optimizer, lr and decay multipliers, betas, eps, state dtype, Muon's blocks and NorMuon's
    /// reduce dim), from the newest trainer's `train --print-params` (builds it first).
    #[arg(long)]
    pub params: bool,
    /// Print no official val-loss curve (none is printed when stdout is not a terminal).
    #[arg(long)]
    pub no_plot: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let root = paths::repo_root()?;
    let catalog = super::load_catalog(&root, Some(args.record))?;
    let id = args.record;
    if id.is_main() && !SERIES.contains(&id.n) {
        if let Some(step) = upstream_recipe::step(&catalog, id.n) {
            // Its own tree (its commit of the step) and recipe, as `replay K` runs them.
            let m = catalog.replayable(&root, args.record)?;
            let params = args.params.then(|| lab_recipe::params(&root, &m)).transpose()?;
            let lab = args.lab.then(|| lab_recipe::resolved(&root, &m, "lab")).transpose()?;
            show_upstream(&step);
            if let Some(text) = params {
                println!(
                    "\n# Each parameter of {} at full scale, as a GPU run holds it",
                    args.record
                );
                print_params(&text);
            }
            if let Some(recipe) = lab {
                println!(
                    "\n# The recipe {} runs at lab scale, as its tree resolves it",
                    args.record
                );
                println!("{}", recipe.trim_end());
            }
            return Ok(());
        }
    }
    let m = catalog.get(args.record)?;
    // What needs a trainer built comes first, so its build messages never land mid-output.
    let params = args.params.then(|| lab_recipe::params(&root, m)).transpose()?;
    let lab = args.lab.then(|| lab_recipe::resolved(&root, m, "lab")).transpose()?;
    print_facts(m);
    let e = &m.evidence;
    print_logs(
        ("official final val losses", "official train times:     "),
        &e.val_losses,
        &e.train_times_s,
    );
    if let Some(text) = params {
        println!("\n# Each parameter of {} at full scale, as a GPU run holds it", m.id());
        print_params(&text);
    }
    if let Some(recipe) = lab {
        println!("\n# The recipe {} runs at lab scale, as its trainer resolves it", m.id());
        println!("{}", recipe.trim_end());
    } else {
        println!("\n{}", manifest_text::table_as_written(&m.path, "recipe")?);
        println!("\n{}", manifest_text::table_as_written(&m.path, "lab")?);
    }
    let chart = Chart::official(m, XAxis::Step);
    plot::term::print(chart.as_slice(), !args.no_plot);
    Ok(())
}

/// A record's facts (upstream's), its claim and the upstream records in its step.
fn print_facts(m: &records::catalog::Manifest) {
    let r = &m.record;
    println!("Record {}: {}", m.id(), r.title);
    let pr = r.pr.map_or("none".to_string(), |p| format!("#{p}"));
    match r.track {
        records::catalog::Track::Main => println!("  upstream PR   {pr}  ({})", r.link),
        _ => println!("  source        {}", r.link),
    }
    println!("  date          {}", r.date);
    println!("  authors       {}", r.authors.join(", "));
    println!(
        "  official      {} on {} ({})",
        r.official_time_text,
        r.hardware,
        figures::secs(r.official_time_s)
    );
    println!("  steps         {}  ({} tokens)", r.steps, r.tokens);
    if let Some(p) = r.parent {
        println!("  parent        {p}");
    }
    println!("  logs          {}", r.upstream_folder);
    println!("\n{}", r.claim.trim());
    if !m.upstream.is_empty() {
        println!("\nupstream records in this step (official times on 8xH100):");
        for u in &m.upstream {
            println!("  #{:<3} {}  {}  {}", u.number, u.date, u.time_text, u.credit());
            println!("        {}", u.title);
        }
    }
}

/// An upstream record inside one of the nine records' steps: its facts and logs (upstream's),
/// and what it set in the recipe (the manifest's row).
fn show_upstream(step: &Step) {
    let (u, holder) = (step.row, &step.holder.record);
    println!("Upstream record #{}: {}", u.number, u.title);
    println!("  upstream PR   {}", records::catalog::pr_text(u.pr));
    println!("  date          {}", u.date);
    let authors = if u.authors.is_empty() { "-".to_string() } else { u.authors.join(", ") };
    println!("  authors       {authors}");
    println!("  official      {} on 8xH100", u.time_text);
    if let Some(steps) = u.steps {
        println!("  steps         {steps} (its linked log's)");
    }
    if let Some(folder) = &u.folder {
        println!("  logs          {folder}");
    }
    let commit = step.holder.upstream.iter().position(|r| r.number == u.number).unwrap_or(0) + 1;
    let (k, h) = (u.number, holder.number);
    let walk = holder
        .parent
        .map_or(String::new(), |p| format!(", `records walk {} {h}` the whole step", p.bare()));
    println!(
        "  in the lab    commit {commit} of record #{h}'s step (patches/{h:02}.patch): `records review {k}` shows it, `records replay {k}` runs its tree and recipe{walk}"
    );
    if let Some(lab) = u.steps.and_then(|s| records::catalog::lab_steps_rule(k, s)) {
        let (anchor, official, steps) = records::catalog::LAB_STEPS_ANCHOR;
        println!(
            "  lab budget    {lab} steps (the lab rule: #{anchor}'s {official} steps = {steps})"
        );
    }
    print_logs(
        ("its logs' final val losses", "its logs' train times:     "),
        &u.val_losses,
        &u.train_times_s,
    );
    match (&u.same_math, step.changes()) {
        (Some(why), _) => println!("\nrecipe: unchanged (same math: {why})"),
        (None, changes) if changes.is_empty() => {
            println!("\nrecipe: the row states no keys yet (issue 26)")
        }
        (None, changes) => {
            println!("\nwhat it set in the recipe (full scale; before -> after):");
            let show =
                |v: Option<&toml::Value>| v.map_or("(absent)".to_string(), |v| v.to_string());
            for (key, before, after) in changes {
                println!("  {key:<22} {} -> {}", show(before), show(after));
            }
        }
    }
}

/// Logs' final val losses with the one-sided t-test against 3.28, and their train times.
fn print_logs((losses_label, times_label): (&str, &str), losses: &[f64], times: &[f64]) {
    if !losses.is_empty() {
        let text: Vec<String> = losses.iter().map(|&x| figures::loss(x)).collect();
        println!("\n{losses_label}: {}", text.join(", "));
        if let Some(t) = stats::ttest_1samp_less(losses, TARGET_VAL_LOSS) {
            println!("{}", t.stated(TARGET_VAL_LOSS));
        }
    }
    if !times.is_empty() {
        let text: Vec<String> = times.iter().map(|&x| figures::secs(x)).collect();
        println!("{times_label} {}", text.join(", "));
    }
}

/// The trainer's `--print-params` (`# ` header lines, then a tab-separated table) aligned.
fn print_params(text: &str) {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let mut table = None;
    for line in lines.by_ref() {
        match line.strip_prefix("# ") {
            Some(head) => println!("  {head}"),
            None => {
                table = Some(
                    Table::new(line.split('\t'))
                        .left(0)
                        .left(1)
                        .left(2)
                        .left(3)
                        .left(6)
                        .left(8)
                        .left(9),
                );
                break;
            }
        }
    }
    let Some(mut table) = table else { return };
    for line in lines {
        table.row(line.split('\t'));
    }
    print!("{}", table.render(Format::Text));
}
