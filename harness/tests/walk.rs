//! Every upstream record as a step: `records replay K`'s manifest and tree for an upstream
//! record inside a step, and `records walk A B` over kept runs (the table, the paired deltas,
//! the charts and walk.json), on the real manifests and patches.
use records::catalog::upstream_recipe::recipe_at;
use records::catalog::{lab_steps_rule, Catalog};
use records::cost::model::Model;
use records::present::predicted;
use records::run::walk::{self, Run, Walk};
use records::series::{apply, Series};
use records::text::figures;
use records::verdict::stats;
use std::path::Path;
use std::process::Output;

mod sandbox;

use sandbox::{scratch_checkout, Sandbox};

fn records(args: &[&str]) -> Output {
    Sandbox::new().run(args)
}

#[test]
fn an_upstream_record_replays_with_its_own_recipe_budget_and_parent() {
    // `replayable` writes the upstream record's manifest under the copy.
    let copy = scratch_checkout();
    let repo = || copy.path();
    let catalog = Catalog::load(repo()).unwrap();
    let m = catalog.replayable(repo(), 58).unwrap();
    let (holder, parent) = (catalog.get(62).unwrap(), catalog.get(54).unwrap());
    assert_eq!(m.recipe, recipe_at(&parent.recipe, &holder.upstream, 58));
    assert_ne!(m.recipe, recipe_at(&parent.recipe, &holder.upstream, 57), "#58 set keys");
    assert_eq!((m.record.number, m.record.parent, m.record.steps), (58, Some(57.into()), 1775));
    assert_eq!(m.lab_steps(), lab_steps_rule(58, 1775).unwrap());
    assert_eq!(m.lab_steps(), 266); // 250 x 1775 / 1670, rounded
    assert!((m.record.official_time_s - 109.2).abs() < 1e-9); // "1.820 minutes"
                                                              // The first row's parent is the holder's parent; the trainer reads the written manifest.
    let first = catalog.replayable(repo(), 55).unwrap();
    assert_eq!(first.record.parent, Some(54.into()));
    let written = std::fs::read_to_string(&m.path).unwrap();
    let r = records::trainer::recipe::Recipe::from_manifest_str(
        &written,
        records::trainer::recipe::Scale::Lab,
        None,
    )
    .unwrap();
    assert_eq!(r.steps, 266);
    // One of the nine is its own manifest; a number in no row is the usual error.
    assert_eq!(catalog.replayable(repo(), 62).unwrap().path, holder.path);
    let e = catalog.replayable(repo(), 82).unwrap_err().to_string();
    assert!(e.contains("unknown record 82") && e.contains("list --all"), "{e}");
}

#[test]
fn an_upstream_records_tree_is_its_commit_of_the_holding_patch() {
    let series = Series::load(&sandbox::checkout()).unwrap();
    let repo_git = apply::scratch_repo().unwrap();
    let base = series.tree(&repo_git, 54).unwrap();
    let states = series.forward(&repo_git, 62, base).unwrap();
    assert_eq!(series.tree_any(&repo_git, 58).unwrap(), states[3]); // #55 #56 #57 #58
    assert_eq!(series.tree_any(&repo_git, 55).unwrap(), states[0]);
    assert_eq!(series.tree_any(&repo_git, 62).unwrap(), series.tree(&repo_git, 62).unwrap());
    assert_ne!(states[2], states[3]);
}

#[test]
fn walk_refuses_what_it_cannot_walk() {
    for (args, want) in [
        (["walk", "38", "29"], "must be older"),
        (["walk", "1", "29"], "starts at #29"),
        (["walk", "29", "82"], "82 is neither a record"),
    ] {
        let out = records(&args);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// A kept run of record `n` with `seed` and a final val loss, where walk looks for it.
fn keep(repo: &Path, results: &Path, catalog: &Catalog, n: u32, steps: u64, seed: u64, loss: f64) {
    let m = catalog.replayable(repo, n).unwrap();
    let tree_dir = tempfile::tempdir().unwrap();
    records::series::materialize_into(repo, n, tree_dir.path()).unwrap();
    let tree = std::fs::read_to_string(tree_dir.path().join(records::series::tree::MARKER));
    let tree = tree.unwrap();
    let key = walk::run_key(&m, tree.trim(), steps, seed).unwrap();
    let dir = walk::run_dir(results, n, &key);
    std::fs::create_dir_all(&dir).unwrap();
    let run = Run { seed, val_loss: loss, train_time_ms: 1000.0, val: vec![(steps, loss)] };
    std::fs::write(dir.join("run.json"), serde_json::to_string(&run).unwrap()).unwrap();
}

#[test]
fn a_walk_over_kept_runs_reuses_them_and_pairs_the_deltas_by_seed() {
    let copy = scratch_checkout();
    let catalog = Catalog::load(copy.path()).unwrap();
    let sandbox = Sandbox::new();
    let results = &sandbox.results();
    // #62 -> #63: #63 is both a record and its patch's one row.
    for (n, losses) in [(62, [1.90, 1.86]), (63, [1.87, 1.85])] {
        for (seed, loss) in [(5, losses[0]), (6, losses[1])] {
            keep(copy.path(), results, &catalog, n, 7, seed, loss);
        }
    }
    let args = ["walk", "62", "63", "--steps", "7", "--runs", "2", "--seed", "5"];
    let out = sandbox.run(&[&args[..], &["--format", "md", "--no-plot"]].concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{text}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("0 run(s) to do, 4 kept"), "{text}");
    // Paired by seed: #63's loss minus #62's, as mean ± sd.
    let paired = paired_delta(&[1.90, 1.86], &[1.87, 1.85]);
    assert!(text.contains(&paired), "{paired}: {text}");
    assert!(text.contains("| #63 "), "{text}");
    let w = Walk::load(results, 62, 63, 7).unwrap().expect("walk.json written");
    assert_eq!(w.seeds, [5, 6]);
    assert_eq!(w.stops.iter().map(|s| s.number).collect::<Vec<_>>(), [62, 63]);
    // Each stop carries the time model's step for its record, and the table its change.
    let model = Model::load(copy.path()).unwrap();
    let (p62, p63) =
        (model.predict(&catalog, 62.into()).unwrap(), model.predict(&catalog, 63.into()).unwrap());
    assert_eq!(w.stops[0].predicted.as_ref(), Some(&p62));
    assert_eq!(w.stops[1].predicted.as_ref(), Some(&p63));
    let d = predicted::delta(&p62, &p63);
    let row63 = text.lines().find(|l| l.starts_with("| #63 ")).unwrap();
    assert!(row63.contains(&format!(" {d} |")), "{d}: {text}");
    let dir = Walk::dir(results, 62, 63, 7);
    for svg in ["loss.svg", "time.svg"] {
        let text = std::fs::read_to_string(dir.join(svg)).unwrap();
        assert!(text.starts_with("<svg"), "{svg}");
    }
    // The site shows the walk on #63's page, each row linked to its record's page.
    let site = sandbox.path().join("site");
    let out = sandbox.run(&["site", site.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = std::fs::read_to_string(site.join("63.html")).unwrap();
    assert!(page.contains("Walk from #62 (ours, lab scale)"), "{page}");
    assert!(page.contains("<code>records walk 62 63 --runs 2</code>"), "{page}");
    assert!(page.contains("<a href=\"62.html\">#62 ") && page.contains(&paired));
    assert!(page.contains(&d) && page.contains("Predicted step"), "{page}");
    let walk_section = &page[page.find("id=\"walk\"").unwrap()..page.find("<h2>Changes").unwrap()];
    assert_eq!(walk_section.matches("<figure class=\"curve\"").count(), 2);
    // A page per upstream record inside a step: the keys it set, its commit, its logs.
    let u58 = std::fs::read_to_string(site.join("u58.html")).unwrap();
    assert!(u58.contains("<code>attn_layers</code>"), "{u58}");
    assert!(u58.contains("href=\"62.html#commit-4\""), "{u58}");
    assert!(u58.contains("mean 3.2788"), "{u58}");
    let u59 = std::fs::read_to_string(site.join("u59.html")).unwrap();
    assert!(u59.contains("No recipe key: the same math as #58"), "{u59}");
    let index = std::fs::read_to_string(site.join("index.html")).unwrap();
    let (numbers, rows) = manifest_numbers(copy.path());
    let inside: Vec<u32> = rows.iter().copied().filter(|n| !numbers.contains(n)).collect();
    assert!(inside.contains(&58) && !inside.contains(&62), "{inside:?}");
    for n in inside {
        assert!(index.contains(&format!("<a href=\"u{n:02}.html\">")), "#{n}");
        assert!(site.join(format!("u{n:02}.html")).is_file(), "#{n}");
    }
    // A walk visits the upstream records inside the steps, in order.
    for (a, b) in [(54, 62), (63, 84), (29, 38)] {
        let mut want: Vec<u32> = numbers.iter().chain(&rows).copied().collect();
        want.retain(|n| (a..=b).contains(n));
        want.sort_unstable();
        want.dedup();
        let stops = walk::stops(&catalog, (a.into(), b.into()), "walk").unwrap();
        assert_eq!(stops.iter().map(|s| s.n).collect::<Vec<_>>(), want, "{a} -> {b}");
    }
}

/// `b − a` per seed, as the walk table prints it: mean ± sample sd.
fn paired_delta(a: &[f64], b: &[f64]) -> String {
    let d: Vec<f64> = a.iter().zip(b).map(|(a, b)| b - a).collect();
    let (mean, sd) = (stats::mean(&d).unwrap(), stats::std(&d).unwrap());
    format!("{} ± {sd:.4}", figures::loss_delta(mean))
}

/// Read from the manifests' text, not the catalog: the main records' numbers and the numbers of
/// every `[[upstream]]` row.
fn manifest_numbers(root: &Path) -> (Vec<u32>, Vec<u32>) {
    let (mut numbers, mut rows) = (Vec::new(), Vec::new());
    for entry in std::fs::read_dir(root.join("records")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.extension().is_none_or(|e| e != "toml") || name.starts_with('a') {
            continue; // Act 1's manifests: another track
        }
        let doc: toml::Table = std::fs::read_to_string(&path).unwrap().parse().unwrap();
        let number = |t: &toml::Value| t["number"].as_integer().unwrap() as u32;
        numbers.push(number(&doc["record"]));
        let upstream = doc.get("upstream").and_then(|u| u.as_array());
        rows.extend(upstream.into_iter().flatten().map(number));
    }
    (numbers, rows)
}

/// A stop whose keys the lab cannot see runs its parent's recipe: #36's value embedding on layer
/// 0 falls outside the lab's 4 layers, #37 sets only a bf16 choice; #32 changes Adam's eps and
/// adds the skip gate, which the lab runs.
#[test]
fn a_step_the_lab_cannot_see_is_marked_same_at_lab_scale() {
    let copy = scratch_checkout();
    let catalog = Catalog::load(copy.path()).unwrap();
    let m = |n| catalog.replayable(copy.path(), n).unwrap().into_owned();
    for (a, b, same) in [(35, 36, true), (36, 37, true), (31, 32, false), (58, 59, true)] {
        assert_eq!(walk::same_at_lab(&m(a), &m(b), 250).unwrap(), same, "#{a} -> #{b}");
    }
    assert_ne!(m(36).recipe, m(37).recipe, "#37 did set a key");

    let sandbox = Sandbox::new();
    for (n, loss) in [(35, 1.8464), (36, 1.8464), (37, 1.8464)] {
        keep(copy.path(), &sandbox.results(), &catalog, n, 7, 5, loss);
    }
    let args = ["walk", "35", "37", "--steps", "7", "--seed", "5", "--no-plot"];
    let out = sandbox.run(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{text}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.matches("= at lab scale: ").count(), 3, "two rows and the legend: {text}");
    assert!(text.contains("bf16 choices the fp32 lab does not make"), "{text}");
}
