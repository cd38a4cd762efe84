//! `records series check --build`: over the proven series (`series::check`), every record's
//! tree compiles (a full release build of the first and the newest main record and of each
//! track's newest, `cargo check` of the others), and the trees of some upstream records inside
//! the steps build and have their trainer read their own recipe.
use super::tree_build::TreeBuild;
use super::{lab_recipe, trainer_cmd::Trainer};
use crate::catalog::{Catalog, RecordId};
use crate::series::check::Proven;
use crate::series::{tree, tree_dir, Series};
use anyhow::{Context, Result};
use std::path::Path;

/// Which trees of the upstream records inside the steps (#30-#84 but the nine) `--build` also
/// builds and runs with their own recipes: a full proof is 45 release builds (about 45 s each
/// on 2 cores, each with its trainer's recipe check), too long for every CI run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Intermediate {
    None,
    /// `n` of them, a different `n` each day (consecutive ones, wrapping), so that successive
    /// days' runs cover them all.
    Rotating(usize),
    All,
}

/// Builds every tree of `proven` and the `intermediate` upstream records' trees; `log` gets
/// one line per build. The first failure is the error, naming the record to fix.
pub fn build(
    root: &Path,
    proven: &Proven,
    intermediate: Intermediate,
    log: &mut dyn FnMut(&str),
) -> Result<()> {
    let series = &proven.series;
    let (first, newest) = (series.numbers()[0], series.newest());
    // Each branching track's newest is built too (its replays start from it).
    let tips: Vec<RecordId> = (series.branches().into_iter())
        .filter_map(|(t, _)| series.chain(t).last().map(|r| r.number))
        .collect();
    for r in series.numbers() {
        let dir = tree_dir(root, r);
        tree::write_dir(&proven.repo, proven.trees[&r], &dir)?;
        tree::write_head_manifests(root, &dir)?;
        // Release profile for both: libtorch's bindings (a minutes-long C++ build script)
        // then build once for all trees and their replays.
        let action = if r == first || r == newest || tips.contains(&r) { "build" } else { "check" };
        let args = [action, "--release", "--all-targets", "-p", "trainer"];
        log(&format!("     {r:<4} cargo {}", args.join(" ")));
        TreeBuild::start(root, &dir).and_then(|b| b.cargo(&args)).with_context(|| {
            format!("record {r}: its tree does not build; fix the record's patch")
        })?;
    }
    let catalog = &proven.catalog;
    let all: Vec<u32> = catalog.inside_steps().iter().map(|(_, u)| u.number).collect();
    for k in chosen(&all, intermediate, days_since_epoch()) {
        run_own_recipe(root, catalog, series, k, log)?;
    }
    Ok(())
}

/// The trees `which` picks among `all` on day `day`.
fn chosen(all: &[u32], which: Intermediate, day: u64) -> Vec<u32> {
    match which {
        Intermediate::None => Vec::new(),
        Intermediate::All => all.to_vec(),
        Intermediate::Rotating(n) => {
            let n = n.min(all.len());
            let start = (day as usize * n) % all.len().max(1);
            let mut picked: Vec<u32> = (0..n).map(|i| all[(start + i) % all.len()]).collect();
            picked.sort_unstable();
            picked
        }
    }
}

fn days_since_epoch() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(0, |d| d.as_secs() / 86_400)
}

/// Upstream record `k`'s tree builds (release, its trainer kept for replays) and its trainer
/// reads k's own recipe at lab and full scale (`train --print-recipe`).
fn run_own_recipe(
    root: &Path,
    catalog: &Catalog,
    series: &Series,
    k: u32,
    log: &mut dyn FnMut(&str),
) -> Result<()> {
    let (holder, i, _) = series.upstream_commit(k).context("an upstream step has its commit")?;
    let m = catalog.replayable(root, k)?;
    log(&format!(
        "     upstream #{k:<3} (commit {} of {holder}'s patch): build, read its recipe",
        i + 1
    ));
    let why = || {
        format!("upstream #{k}: its tree (commit {} of {holder}'s patch) does not build or run its own recipe; fix that commit", i + 1)
    };
    let t = Trainer::build(root, k, false, false).with_context(why)?;
    for scale in ["lab", "full"] {
        lab_recipe::ask(&t, &m.path, scale, lab_recipe::PRINT_RECIPE).with_context(why)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rotation_covers_every_tree_in_turn() {
        let all: Vec<u32> = (30..37).collect(); // 7 trees, 3 a day
        assert_eq!(chosen(&all, Intermediate::Rotating(3), 0), [30, 31, 32]);
        assert_eq!(chosen(&all, Intermediate::Rotating(3), 1), [33, 34, 35]);
        assert_eq!(chosen(&all, Intermediate::Rotating(3), 2), [30, 31, 36]);
        let mut seen: Vec<u32> =
            (0..3).flat_map(|d| chosen(&all, Intermediate::Rotating(3), d)).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen, all);
        assert_eq!(chosen(&all, Intermediate::Rotating(10), 5), all);
        assert_eq!(chosen(&all, Intermediate::All, 5), all);
        assert!(chosen(&all, Intermediate::None, 5).is_empty());
    }
}
