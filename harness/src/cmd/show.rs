//! `records show N`: one record's facts, evidence and recipe.
use records::plot::{self, Chart, XAxis};
use records::{catalog::Catalog, paths};

/// Show one record: upstream facts, the official figures and its recipe.
#[derive(clap::Args)]
pub struct Args {
    /// Record number (see `records list`).
    pub record: u32,
    /// Print no official val-loss curve (none is printed when stdout is not a terminal).
    #[arg(long)]
    pub no_plot: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let root = paths::repo_root()?;
    let catalog = Catalog::load(&root)?;
    let m = catalog.get(args.record)?;
    let r = &m.record;
    println!("Record #{}: {}", r.number, r.title);
    let pr = r.pr.map_or("none".to_string(), |p| format!("#{p}"));
    println!("  upstream PR   {pr}  ({})", r.link);
    println!("  date          {}", r.date);
    println!("  authors       {}", r.authors.join(", "));
    println!(
        "  official      {} on {} ({:.1} s)",
        r.official_time_text, r.hardware, r.official_time_s
    );
    println!("  steps         {}  ({} tokens)", r.steps, r.tokens);
    if let Some(p) = r.parent {
        println!("  parent        #{p}");
    }
    println!("  logs          {}", r.upstream_folder);
    println!("\n{}", r.claim.trim());
    let e = &m.evidence;
    if !e.val_losses.is_empty() {
        let losses: Vec<String> = e.val_losses.iter().map(|x| format!("{x:.4}")).collect();
        println!("\nofficial final val losses: {}", losses.join(", "));
    }
    if !e.train_times_s.is_empty() {
        let times: Vec<String> = e.train_times_s.iter().map(|x| format!("{x:.3}")).collect();
        println!("official train times (s):  {}", times.join(", "));
    }
    let chart = Chart::official(m, XAxis::Step);
    plot::term::print(chart.as_slice(), !args.no_plot);
    println!("\n[recipe]\n{}", toml::to_string(&m.recipe)?.trim_end());
    println!("\n[lab]\n{}", toml::to_string(&m.lab)?.trim_end());
    Ok(())
}
