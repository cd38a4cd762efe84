//! `records list`: the records, one line each.
use records::catalog::{upstream_recipe, RecordId, Track};
use records::paths;
use records::run::replays;
use records::text::figures;
use records::verdict::stats;

/// List the records with upstream's PR, date, official time and steps, and this machine's lab
/// result of each (its newest replay over its whole lab budget).
#[derive(clap::Args)]
pub struct Args {
    /// Also every upstream record inside the main track's steps (#30-#84): upstream's figures
    /// and its logs' evidence (mean val loss, the one-sided t-test against 3.28), whose patch
    /// holds it, and the recipe keys it set
    #[arg(long)]
    all: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let root = paths::repo_root()?;
    let catalog = super::load_catalog(&root, None)?;
    let results = paths::results_dir(&root);
    let chain = catalog.chain();
    // Each track under its heading, the main track first; another track once it has a manifest.
    for (i, track) in Track::all().enumerate() {
        if !track.is_main() && !chain.iter().any(|id| id.track == track) {
            continue;
        }
        let def = track.def();
        if i > 0 {
            println!();
        }
        println!("{}", def.line);
        let official = format!("official ({})", def.hardware);
        // Right-aligned one short of the header's end, as the main track's always was.
        let w = official.len().max(17) - 1;
        println!(
            "{:>3}  {:<8} {:<10}  {:>w$}  {:>6}  {:<26}  title",
            "#", "PR", "date", official, "steps", "lab here (ours)"
        );
        for m in catalog.track(track) {
            let r = &m.record;
            let pr = r.pr.map_or("-".to_string(), |p| format!("#{p}"));
            let all = replays::of_record(&results, m.id())?;
            let result = replays::lab_result(&all, m).and_then(|x| x.verdict.as_ref());
            let lab = match (result, replays::newest_shortened(&all, m)) {
                (Some(v), _) => {
                    let loss =
                        v.loss.as_ref().map_or("-".to_string(), |s| format!("{:.4}", s.mean));
                    format!("{loss} {} {:.4}", v.mark(), v.target_loss)
                }
                (None, Some(short)) => {
                    format!("shortened: {}", short.shortened(m).unwrap_or_default())
                }
                (None, None) => "not replayed".to_string(),
            };
            println!(
                "{:>3}  {:<8} {:<10}  {:>w$}  {:>6}  {lab:<26}  {}",
                m.id().bare(),
                pr,
                r.date,
                r.official_time_text,
                r.steps,
                r.title
            );
        }
        let missing: Vec<String> = (def.members.iter())
            .map(|&n| RecordId::new(track, n))
            .filter(|id| catalog.get(*id).is_err())
            .map(|id| id.to_string())
            .collect();
        if !missing.is_empty() {
            println!("not yet in the lab: {}", missing.join(", "));
        }
    }
    if args.all {
        println!();
        upstream_table(&catalog);
    }
    Ok(())
}

/// Every upstream record of the main track's steps, oldest first (official figures are
/// upstream's), with the recipe keys its row sets (`records show K` prints their values).
fn upstream_table(catalog: &records::catalog::Catalog) {
    println!("Every upstream record inside the main track's steps");
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
        .track(Track::Main)
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
