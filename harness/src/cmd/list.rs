//! `records list`: the records, one line each.
use records::paths;
use records::run::replays;

/// List the records with upstream's PR, date, official time and steps, and this machine's lab
/// result of each (its newest replay over its whole lab budget).
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
        let all = replays::of_record(&results, r.number)?;
        let result = replays::lab_result(&all, m).and_then(|x| x.verdict.as_ref());
        let lab = match (result, replays::newest_shortened(&all, m)) {
            (Some(v), _) => {
                let loss = v.loss.as_ref().map_or("-".to_string(), |s| format!("{:.4}", s.mean));
                let word = if v.reached { "reached" } else { "NOT REACHED" };
                format!("{loss} {word} {:.4}", v.target_loss)
            }
            (None, Some(short)) => {
                format!("shortened: {}", short.shortened(m).unwrap_or_default())
            }
            (None, None) => "not replayed".to_string(),
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
