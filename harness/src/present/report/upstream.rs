//! The typed report of an upstream record inside a step (#55 inside #62's patch): its row made
//! a manifest, its one commit of the holding patch with the holder's notes that land there, the
//! time model's step against the record before it, and this machine's replays of it.
use super::{commits, CommitReport};
use crate::catalog::upstream_recipe::{self, Step};
use crate::catalog::{Catalog, Manifest, RecordId};
use crate::cost::model::Model;
use crate::present::predicted;
use crate::run::replays::Replay;
use crate::series::Series;
use anyhow::{Context, Result};
use std::path::PathBuf;

pub struct UpstreamReport<'a> {
    pub step: Step<'a>,
    /// Upstream record k as a manifest (its facts and logs from its row).
    pub m: Manifest,
    /// Its commit of the holder's patch (0-based), and the patch's commit count.
    pub commit: usize,
    pub commits: usize,
    pub report: CommitReport<'a>,
    /// The time model's step and its change from the record before it, or why there is none.
    pub predicted: String,
    pub replays: Vec<Replay>,
}

impl<'a> UpstreamReport<'a> {
    /// Upstream record `k`, with this machine's `replays` of it; `None` when no manifest's
    /// rows hold it (a record of the series).
    pub fn load(
        (catalog, series): (&'a Catalog, &'a Series),
        model: &Result<Model>,
        replays: Vec<Replay>,
        k: u32,
    ) -> Result<Option<UpstreamReport<'a>>> {
        let Some(step) = upstream_recipe::step(catalog, k) else {
            return Ok(None);
        };
        let holder = step.holder.id();
        let patch = &series.record(holder)?.commits;
        let commit = series
            .upstream_commit(k)
            .filter(|(r, ..)| *r == holder)
            .map(|(_, i, _)| i)
            .with_context(|| {
                format!("no commit of patches/{}.patch ports upstream #{k}", holder.bare())
            })?;
        let (mut reports, _) = commits(step.holder, patch)?;
        let predicted = predicted::line_for(model, catalog, RecordId::main(k), Some(step.parent));
        Ok(Some(UpstreamReport {
            m: step.manifest(PathBuf::new()).map_err(anyhow::Error::msg)?,
            commit,
            commits: patch.len(),
            report: reports.swap_remove(commit),
            predicted,
            replays,
            step,
        }))
    }
}
