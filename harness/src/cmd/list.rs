//! `records list`: the records, one line each.
use records::{diff, paths};

/// List the records with upstream's PR, date, official time and steps, and this machine's
/// newest lab verdict of each.
#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<()> {
    let root = paths::repo_root()?;
    let catalog = super::load_catalog(&root, None)?;
    let results = paths::results_dir(&root);
    println!(
        "{:>3}  {:<8} {:<10}  {:>16}  {:>6}  {:<26}  title",
        "#", "PR", "date", "official (8xH100)", "steps", "lab here (ours)"
    );
    for m in catalog.records() {
        let r = &m.record;
        let pr = r.pr.map_or("-".to_string(), |p| format!("#{p}"));
        let lab = match diff::newest_lab(&results, m)?.and_then(|x| x.verdict) {
            Some(v) => {
                let loss = v.loss.map_or("-".to_string(), |s| format!("{:.4}", s.mean));
                let word = if v.reached { "reached" } else { "NOT REACHED" };
                format!("{loss} {word} {:.4}", v.target_loss)
            }
            None => "not replayed".to_string(),
        };
        println!(
            "{:>3}  {:<8} {:<10}  {:>16}  {:>6}  {lab:<26}  {}",
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
