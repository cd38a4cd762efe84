//! The lab target of this machine's CPU.
//!
//! As 3.28 is upstream's target, the lab's is what a reference record reaches at the end of its
//! lab budget: #1 for itself, #29 for the modern records, a1 for Act 1's steps (`[lab_target]`
//! in their manifests says which). libtorch's CPU kernels round differently by CPU model (#29 ends at 1.8096 on
//! one 2-core EPYC and 1.8063 on a Xeon), so a target is one CPU's: it is measured on this CPU
//! the first time a lab verdict needs it (a replay of the reference record over its whole
//! budget, one rank, its own seed), then kept with the CPU's name and the reference record's
//! tree id in `<results>/lab-targets.json`, and never changed by later replays of that tree. A
//! changed reference tree (its `tree =` in the manifest) needs its target measured again. The manifest's figure is
//! the reference machine's (the README's numbers); it judges a run only where this CPU has no
//! target of its own (a shortened run, a log from an unknown CPU), and the verdict says so.
use crate::catalog::{Catalog, RecordId};
use anyhow::{Context, Result};
use corpus::fs::write_atomic;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// This machine's CPU as lab figures name it: `RECORDS_CPU` if set, else /proc/cpuinfo's
/// model name with its family, model and stepping (a VM's model name can be as bare as
/// `Intel(R) Xeon(R) Processor`) and the core count.
pub fn this_cpu() -> String {
    if let Some(cpu) = std::env::var_os("RECORDS_CPU") {
        return cpu.to_string_lossy().into_owned();
    }
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    describe_cpu(&info, cores)
}

fn describe_cpu(cpuinfo: &str, cores: usize) -> String {
    let field = |name: &str| {
        cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    let name = field("model name").unwrap_or_else(|| "unknown CPU".into());
    let ids: Vec<String> = [("family", "cpu family"), ("model", "model"), ("stepping", "stepping")]
        .iter()
        .filter_map(|(label, key)| field(key).map(|v| format!("{label} {v}")))
        .collect();
    let ids = if ids.is_empty() { String::new() } else { format!("{}, ", ids.join(" ")) };
    format!("{name} ({ids}{cores} cores)")
}

/// One target measured on one CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub cpu: String,
    /// The reference record whose replay measured it (1, 29 or a1), and its tree id.
    pub record: RecordId,
    pub tree: String,
    pub val_loss: f64,
    /// The replay's run id under `results/<NN>/` (`results/a1/`).
    pub run: String,
}

/// `<results>/lab-targets.json`: every target measured on a machine that writes there.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Store {
    targets: Vec<Measured>,
}

fn store_path(results: &Path) -> PathBuf {
    results.join("lab-targets.json")
}

fn load(results: &Path) -> Result<Store> {
    let path = store_path(results);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).with_context(|| {
            format!(
                "{} does not read: it keeps the lab targets measured on this machine; mend it, or \
                 delete it and the next whole-budget lab replay of #1, #29 or a1 measures its \
                 target again",
                path.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Store::default()),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Keeps `m` unless its CPU has a target of that tree already (the first one stays).
pub fn keep(results: &Path, m: Measured) -> Result<()> {
    let mut store = load(results)?;
    if store.targets.iter().any(|t| t.cpu == m.cpu && t.record == m.record && t.tree == m.tree) {
        return Ok(());
    }
    store.targets.push(m);
    Ok(write_atomic(&store_path(results), serde_json::to_string_pretty(&store)?.as_bytes())?)
}

/// The tree id of reference record `record`, as its manifest records it.
pub fn reference_tree(catalog: &Catalog, record: RecordId) -> Result<String> {
    let m = catalog.get(record)?;
    m.record.tree.clone().with_context(|| {
        format!("{}: no record.tree, so its lab target cannot be kept", m.path.display())
    })
}

/// What to run after reference record `record`'s replay has set its target on this CPU, for a
/// verdict that compares something: the next record of its track (or, when that one is a
/// reference too, as #29 is after #1, it and then the walk from it).
pub fn next_after(catalog: &Catalog, record: RecordId) -> String {
    let ids: Vec<RecordId> = catalog.track(record.track).map(|m| m.id()).collect();
    let mut after = ids.iter().skip_while(|&&id| id != record).skip(1);
    let is_reference = |id: RecordId| catalog.lab_target_of(id).is_ok_and(|(_, r)| r == id);
    match (after.next(), after.next()) {
        (Some(&next), Some(&then)) if is_reference(next) => format!(
            "`records replay {}` (the target of the records after it, set the same way), then \
             `records walk {} {}`: what each upstream record between them bought at equal steps",
            next.bare(),
            next.bare(),
            then.bare()
        ),
        // A walk starts at its track's anchor (#29 on the main track): none from #1.
        (Some(&next), _) if record < record.anchor() => {
            format!("`records replay {}`, judged against this target", next.bare())
        }
        (Some(&next), _) => format!(
            "`records replay {}`, judged against this target, or `records walk {} {}`: what \
             each step between them bought at equal steps",
            next.bare(),
            record.bare(),
            next.bare()
        ),
        (None, _) => "a replay of any record of its era, judged against this target".into(),
    }
}

/// The target a lab run of some record on `cpu` is judged against.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub val_loss: f64,
    /// The reference record (1, 29 or a1).
    pub record: RecordId,
    /// Measured on `cpu`, or `None`: the manifest's figure from the reference machine.
    pub measured: Option<Measured>,
    pub cpu: String,
}

impl Target {
    /// The target record `n` is judged against on `cpu`: the one measured there, else the
    /// manifest's reference figure.
    pub fn of(
        catalog: &Catalog,
        results: &Path,
        n: impl Into<RecordId>,
        cpu: &str,
    ) -> Result<Target> {
        let (reference, record) = catalog.lab_target_of(n)?;
        let tree = reference_tree(catalog, record)?;
        let measured = load(results)?
            .targets
            .into_iter()
            .find(|t| t.cpu == cpu && t.record == record && t.tree == tree);
        Ok(Target {
            val_loss: measured.as_ref().map_or(reference.val_loss, |m| m.val_loss),
            record,
            measured,
            cpu: cpu.to_string(),
        })
    }

    /// The target this run measures: its own final loss.
    pub fn measured_by(record: RecordId, m: Measured) -> Target {
        Target { val_loss: m.val_loss, record, cpu: m.cpu.clone(), measured: Some(m) }
    }

    /// Where it comes from, in one line for the verdict.
    pub fn describe(&self) -> String {
        let r = self.record;
        match &self.measured {
            Some(m) => format!(
                "{r}'s lab result on {} (replay {}, kept in lab-targets.json)",
                self.cpu, m.run
            ),
            None => format!(
                "records/{}.toml's [lab_target], measured on another machine (see its \
                 `measured`); {} has no lab target of its own yet: a whole-budget lab replay of \
                 {r} measures it",
                r.slug(),
                self.cpu
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_is_named_by_model_ids_and_cores() {
        let info = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 167\n\
                    model name\t: Intel(R) Xeon(R) Processor\nstepping\t: 1\n\nprocessor\t: 1\n";
        assert_eq!(
            describe_cpu(info, 2),
            "Intel(R) Xeon(R) Processor (family 6 model 167 stepping 1, 2 cores)"
        );
        assert_eq!(describe_cpu("", 4), "unknown CPU (4 cores)");
    }

    #[test]
    fn the_first_target_of_a_cpu_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let m = |cpu: &str, tree: &str, loss: f64| Measured {
            cpu: cpu.into(),
            record: 29.into(),
            tree: tree.into(),
            val_loss: loss,
            run: "r".into(),
        };
        keep(dir.path(), m("A", "t1", 1.81)).unwrap();
        keep(dir.path(), m("A", "t1", 1.90)).unwrap();
        keep(dir.path(), m("B", "t1", 1.80)).unwrap();
        keep(dir.path(), m("A", "t2", 1.83)).unwrap();
        let store = load(dir.path()).unwrap();
        let want = [m("A", "t1", 1.81), m("B", "t1", 1.80), m("A", "t2", 1.83)];
        assert_eq!(store.targets, want);
    }
}
