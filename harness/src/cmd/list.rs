//! `records list`: the records, one line each.
use records::catalog::upstream_recipe;
use records::paths;
use records::present::figures;
use records::run::replays;
use records::verdict::stats;

/// List the records with upstream's PR, date, official time and steps, and this machine's lab
/// result of each (its newest replay over its whole lab budget).
#[derive(clap::Args)]
pub struct Args {
    /// Also every upstream record inside the series (#30-#84): upstream's figures and its logs'
    /// evidence (mean val loss, the one-sided t-test against 3.28), whose patch holds it, and
    /// the recipe keys it set
    #[arg(long)]
    all: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
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
    if args.all {
        println!();
        upstream_table(&catalog);
    }
    Ok(())
}

/// Every upstream record of the series, oldest first (official figures are upstream's), with
/// the recipe keys its row sets (`records show K` prints their values).
fn upstream_table(catalog: &records::catalog::Catalog) {
    println!(
        "{:>3}  {:<8} {:<10}  {:>16}  {:>6}  {:<34}  {:<5}  title",
        "#",
        "PR",
        "date",
        "official (8xH100)",
        "steps",
        "its logs: val loss (t-test < 3.28)",
        "patch"
    );
    let mut rows: Vec<(u32, &records::catalog::Upstream)> = catalog
        .records()
        .iter()
        .flat_map(|m| m.upstream.iter().map(|u| (m.record.number, u)))
        .collect();
    rows.sort_by_key(|(_, u)| u.number);
    for (patch, u) in rows {
        let pr = u.pr.map_or("-".to_string(), |p| format!("#{p}"));
        let steps = u.steps.map_or("-".to_string(), |s| s.to_string());
        let evidence =
            match (stats::mean(&u.val_losses), stats::ttest_1samp_less(&u.val_losses, 3.28)) {
                (Some(m), Some(t)) => format!(
                    "{} (p = {}, {} logs)",
                    figures::loss(m),
                    figures::p_value(t.p),
                    u.val_losses.len()
                ),
                (Some(m), None) => format!("{} (1 log)", figures::loss(m)),
                _ => "no log".to_string(),
            };
        let sets = upstream_recipe::step(catalog, u.number).map(|s| s.summary());
        let sets = sets.filter(|s| !s.is_empty()).map_or(String::new(), |s| format!("  [{s}]"));
        println!(
            "{:>3}  {:<8} {:<10}  {:>16}  {:>6}  {evidence:<34}  #{patch:<4}  {}{sets}",
            u.number, pr, u.date, u.time_text, steps, u.title
        );
    }
}
