//! `records list`: the records, one line each.
use records::paths;

/// List the records with upstream's PR, date, official time and steps.
#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    let root = paths::repo_root()?;
    let catalog = super::load_catalog(&root, None)?;
    println!(
        "{:>3}  {:<8} {:<10}  {:>16}  {:>6}  title",
        "#", "PR", "date", "official (8xH100)", "steps"
    );
    for m in catalog.records() {
        let r = &m.record;
        let pr = r.pr.map_or("-".to_string(), |p| format!("#{p}"));
        println!(
            "{:>3}  {:<8} {:<10}  {:>16}  {:>6}  {}",
            r.number, pr, r.date, r.official_time_text, r.steps, r.title
        );
    }
    let missing: Vec<String> = records::catalog::SERIES
        .iter()
        .filter(|n| catalog.get(**n).is_err())
        .map(|n| format!("#{n}"))
        .collect();
    if !missing.is_empty() {
        println!("not yet in the lab: {}", missing.join(", "));
    }
    Ok(())
}
