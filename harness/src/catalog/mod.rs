//! The catalog of records: `records/NN.toml` manifests, parsed and validated.
//!
//! A manifest holds upstream's facts (`[record]`), the figures of its official logs
//! (`[evidence]`), the trainer's recipe (`[recipe]`, checked by the trainer itself), the lab-scale
//! overrides (`[lab]`) and review notes anchored in the record's patch (`[[notes]]`). A record
//! belongs to a track (`id.rs`): the main track's manifests are `records/NN.toml`, Act 1's
//! `records/aN.toml` with `track = "act1"`.
pub mod id;
pub mod manifest_text;
pub mod older_shape;
pub mod recipe_check;
pub mod upstream_recipe;

use crate::toml_file;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::path::{Path, PathBuf};

pub use id::{RecordId, Track, TrackDef, TRACKS};

/// The main track's records, oldest first; each one's parent is the one before it.
pub const SERIES: [u32; 9] = [1, 29, 38, 46, 53, 54, 62, 63, 84];

/// The speedrun's target: mean final val loss at or below 3.28 (upstream rule).
pub const TARGET_VAL_LOSS: f64 = 3.28;

/// The lab budget of the modern records: proportional to the official step count, with #29's
/// 1,670 steps at 250 lab steps, so a record that trains fewer steps upstream trains fewer in
/// the lab. Record #1 keeps its own budget (its era's target is its own).
pub const LAB_STEPS_ANCHOR: (u32, u64, u64) = (29, 1670, 250);

/// The `[lab] steps` the lab rule of its track gives record `id` with `steps` official steps
/// (rounded half up); None for the records before the anchor, which set their own. On the main
/// track the anchor is [`LAB_STEPS_ANCHOR`]; Act 1's is a1's 24,576 steps at 250, for every step.
pub fn lab_steps_rule(id: impl Into<RecordId>, steps: u64) -> Option<u64> {
    id.into().lab_steps_rule(steps)
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    #[serde(skip)]
    pub path: PathBuf,
    pub record: RecordFacts,
    #[serde(default)]
    pub evidence: Evidence,
    pub recipe: toml::Table,
    pub lab: toml::Table,
    /// In record #1's manifest (its own target) and #29's (the modern records' target): what
    /// the lab judges a replay against, as upstream judges against 3.28.
    pub lab_target: Option<LabTarget>,
    /// The upstream records in this record's span (#30 ... #38 for #38), oldest first: each
    /// commit of the patch ports one, and `records review` credits it.
    #[serde(default)]
    pub upstream: Vec<Upstream>,
    #[serde(default)]
    pub notes: Vec<Note>,
    /// Every key path of `[recipe]` (`lr`, `rotary.base`) and its line, for the recipe diff.
    #[serde(skip)]
    pub recipe_keys: Vec<(String, usize)>,
}

/// One upstream record inside a record's span, as upstream's record table gives it.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Upstream {
    pub number: u32,
    /// None for a record without a PR (upstream #66: the move to torch 2.10).
    #[serde(default)]
    pub pr: Option<u32>,
    pub title: String,
    pub authors: Vec<String>,
    pub date: String,
    pub time_text: String,
    /// Its folder in upstream's records/track_1_short/ (None: #66 has no log).
    #[serde(default)]
    pub folder: Option<String>,
    /// The step count of the log upstream's table links.
    #[serde(default)]
    pub steps: Option<u64>,
    /// The final val loss and train time of each log in the folder at that step count.
    #[serde(default)]
    pub val_losses: Vec<f64>,
    #[serde(default)]
    pub train_times_s: Vec<f64>,
    /// The recipe keys this upstream record set, full-scale values in the manifest's syntax
    /// (`[upstream.recipe]`): the parent record's recipe with the rows up to this one applied
    /// is this upstream record's recipe (`upstream_recipe.rs`).
    #[serde(default)]
    pub recipe: Option<toml::Table>,
    /// Why the row sets no key: upstream changed a kernel, the comms or a version.
    #[serde(default)]
    pub same_math: Option<String>,
}

/// "PR #N", or "no PR".
pub fn pr_text(pr: Option<u32>) -> String {
    pr.map_or("no PR".into(), |n| format!("PR #{n}"))
}

impl Upstream {
    /// "PR #N by @a, @b", or as much of it as upstream's table gives (#66: no PR, no author).
    pub fn credit(&self) -> String {
        match self.authors.as_slice() {
            [] => pr_text(self.pr),
            authors => format!("{} by {}", pr_text(self.pr), authors.join(", ")),
        }
    }
}

/// The val loss a record reaches at the end of its lab budget on the default corpus: #1's for
/// itself (as 3.28 is what llm.c's baseline reached at full scale), #29's for every later one.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LabTarget {
    pub val_loss: f64,
    /// How and where it was measured.
    pub measured: String,
}

/// Upstream's facts about one record.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RecordFacts {
    /// The record's number on its track (29 for #29, 3 for a3); [`RecordFacts::id`] is both.
    pub number: u32,
    /// Its track: `track = "act1"`; absent for the main track.
    #[serde(default, skip_serializing_if = "Track::is_main")]
    pub track: Track,
    pub title: String,
    /// Upstream modded-nanogpt PR; #1 (llm.c) has none.
    pub pr: Option<u32>,
    pub link: String,
    /// The date in upstream's record table.
    pub date: String,
    pub authors: Vec<String>,
    /// The record-table figure in seconds, and as the table writes it ("45 minutes").
    pub official_time_s: f64,
    pub official_time_text: String,
    pub hardware: String,
    pub steps: u64,
    pub tokens: u64,
    /// The record before it: an integer for a main record (`parent = 29`), a string for another
    /// track's (`parent = "a2"`; a1's is `"#1"`, the main record its track branches from).
    pub parent: Option<RecordId>,
    /// Upstream folder of the record's logs.
    pub upstream_folder: String,
    /// What changed and why, in our words.
    pub claim: String,
    /// The git tree id of the record's trainer, as the series derives it; written by `records
    /// series capture`/`import` and verified by `records series check`.
    pub tree: Option<String>,
    /// A track that branches from the main one (Act 1) reuses the shared trainer's techniques:
    /// a file its patch adds or changes under src/model/, src/optim/ or src/data/ that HEAD has
    /// too must be HEAD's, byte for byte, unless it is listed here (with the reason in a
    /// comment). `records series check` holds every non-main record to it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differs_from_head: Vec<String>,
}

impl RecordFacts {
    /// The record's id: its track and number.
    pub fn id(&self) -> RecordId {
        RecordId::new(self.track, self.number)
    }
}

/// The official logs' figures.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// Final val loss of each official log.
    #[serde(default)]
    pub val_losses: Vec<f64>,
    /// Final train time of each official log, seconds (empty where the log has no timing).
    #[serde(default)]
    pub train_times_s: Vec<f64>,
    /// (step, val loss) of the linked log.
    #[serde(default)]
    pub val_curve: Vec<(u64, f64)>,
    /// (step, train time in seconds) at every validation of the linked log: the time model's
    /// check stage by stage (`records cost --validate`).
    #[serde(default)]
    pub time_curve: Vec<(u64, f64)>,
    #[serde(default)]
    pub source: String,
}

/// A review note anchored at a line of the record's own tree (new side of its patch).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Note {
    pub file: String,
    pub line: u32,
    /// Text the line must contain, so `series check` catches a note left behind when code moves.
    #[serde(default)]
    pub anchor: Option<String>,
    pub text: String,
}

impl Manifest {
    /// The record's id: its track and number.
    pub fn id(&self) -> RecordId {
        self.record.id()
    }

    /// The record's lab step budget, `[lab] steps` (checked positive when the manifest loads).
    pub fn lab_steps(&self) -> u64 {
        self.lab.get("steps").and_then(|v| v.as_integer()).map_or(0, |s| s as u64)
    }

    /// The recipe as the record's trainer reads it at `scale` (at lab scale over `steps`, or
    /// `[lab] steps` when `None`).
    pub fn typed_recipe(
        &self,
        scale: crate::trainer::recipe::Scale,
        steps: Option<u64>,
    ) -> Result<crate::trainer::recipe::Recipe> {
        let name = match scale {
            crate::trainer::recipe::Scale::Full => "full",
            crate::trainer::recipe::Scale::Lab => "lab",
        };
        recipe_check::typed(&self.recipe, &self.lab, scale, steps)
            .with_context(|| format!("{}: the recipe at {name} scale", self.path.display()))
    }

    /// The record's step budget at lab scale (`[lab] steps`) or at full scale (its official
    /// steps).
    pub fn budget(&self, lab: bool) -> u64 {
        if lab {
            self.lab_steps()
        } else {
            self.record.steps
        }
    }

    /// Parses and validates one manifest; errors name the file and line.
    pub fn load(path: &Path) -> Result<Manifest> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut m: Manifest = toml::from_str(&text).map_err(|e| {
            let line = toml_file::error_line(&text, &e);
            let at = quoted_line(&text, line);
            anyhow::anyhow!("{}: line {line}: {}{at}", path.display(), e.message().trim())
        })?;
        m.path = path.to_path_buf();
        m.recipe_keys = recipe_check::key_lines(&text);
        recipe_check::check(path, &text).map_err(anyhow::Error::msg)?;
        m.validate()?;
        Ok(m)
    }

    /// Every rule a manifest must keep beyond its types: where it sits, its numbers, its rows.
    fn validate(&self) -> Result<()> {
        self.validate_place()?;
        self.validate_figures()?;
        self.validate_rows()
    }

    /// Its file name, track membership and parent agree with its number.
    fn validate_place(&self) -> Result<()> {
        let p = self.path.display();
        let r = &self.record;
        let id = r.id();
        let stem = self.path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if id.is_main() && stem.parse::<u32>().ok() != Some(r.number) {
            let hint = match stem.parse::<RecordId>() {
                Ok(other) if !other.is_main() => format!(
                    "; {stem}.toml is a record of {}: set track = \"{}\" in [record]",
                    other.track.def().name,
                    other.track.key()
                ),
                _ => String::new(),
            };
            bail!("{p}: record.number = {} but the file is named {stem}.toml{hint}", r.number);
        }
        if !id.is_main() && stem != id.slug() {
            bail!(
                "{p}: record.number = {} on track {} is {}, whose manifest is {}.toml, but the \
                 file is named {stem}.toml",
                r.number,
                id.track,
                id,
                id.slug()
            );
        }
        let def = id.track.def();
        if !def.members.contains(&r.number) {
            if id.is_main() {
                bail!("{p}: record {} is not in the series {SERIES:?}", r.number);
            }
            bail!(
                "{p}: {id} is not a record of {} (its records are {})",
                def.name,
                show_ids(def.members.iter().map(|&n| RecordId::new(id.track, n)))
            );
        }
        let expected_parent = id.expected_parent();
        if r.parent != expected_parent {
            if id.is_main() {
                bail!(
                    "{p}: record.parent = {:?} but the parent of #{} is {:?}",
                    r.parent,
                    r.number,
                    expected_parent
                );
            }
            let want = expected_parent.map_or("none".into(), |e| match e.track {
                Track::Main => format!("{} (parent = {})", e, e.n),
                _ => format!("{e} (parent = \"{}\")", e.slug()),
            });
            bail!(
                "{p}: record.parent = {} but the parent of {id} is {want}",
                r.parent.map_or("none".into(), |x| x.to_string()),
            );
        }
        Ok(())
    }

    /// Its facts, evidence and lab budget are numbers the lab can use.
    fn validate_figures(&self) -> Result<()> {
        let p = self.path.display();
        let r = &self.record;
        let id = r.id();
        let def = id.track.def();
        if id.is_main() && !r.differs_from_head.is_empty() {
            bail!(
                "{p}: record.differs_from_head is for the tracks that branch from the main one; \
                 a main record's trainer is HEAD's by construction"
            );
        }
        if r.official_time_s.is_nan() || r.official_time_s <= 0.0 || r.steps == 0 {
            bail!("{p}: record.official_time_s and record.steps must be positive");
        }
        if self
            .evidence
            .val_losses
            .iter()
            .chain(&self.evidence.train_times_s)
            .chain(self.evidence.time_curve.iter().map(|(_, t)| t))
            .any(|x| !x.is_finite())
        {
            bail!("{p}: evidence holds a non-finite number");
        }
        let t = &self.evidence.time_curve;
        if let Some(w) = t.windows(2).find(|w| w[1].0 <= w[0].0 || w[1].1 < w[0].1) {
            bail!(
                "{p}: evidence.time_curve must rise in step and not fall in time: [{}, {}] then [{}, {}]",
                w[0].0,
                w[0].1,
                w[1].0,
                w[1].1
            );
        }
        let lab_steps = self.lab.get("steps").and_then(|v| v.as_integer());
        let Some(lab_steps) = lab_steps.and_then(|v| u64::try_from(v).ok()) else {
            bail!("{p}: [lab] needs a positive integer `steps`: the record's lab budget");
        };
        if let Some(want) = id.lab_steps_rule(r.steps) {
            let a = def.anchor;
            if lab_steps != want {
                bail!(
                    "{p}: [lab] steps = {lab_steps}, but the lab rule gives {want}: \
                     {} x {} official steps / {} ({}), rounded",
                    a.lab,
                    r.steps,
                    a.official,
                    id.anchor()
                );
            }
        }
        Ok(())
    }

    /// Its `[[upstream]]` rows (oldest first, main track only, none newer than itself) and notes.
    fn validate_rows(&self) -> Result<()> {
        let p = self.path.display();
        let r = &self.record;
        let id = r.id();
        if let Some(w) = self.upstream.windows(2).find(|w| w[1].number <= w[0].number) {
            bail!(
                "{p}: [[upstream]] #{} comes after #{}; list them oldest first",
                w[1].number,
                w[0].number
            );
        }
        if !id.is_main() && !self.upstream.is_empty() {
            bail!("{p}: [[upstream]] rows are the main track's upstream records; {id} has none");
        }
        if let Some(u) = self.upstream.iter().find(|u| u.number > r.number) {
            bail!(
                "{p}: [[upstream]] #{} is newer than the record itself (#{})",
                u.number,
                r.number
            );
        }
        for n in &self.notes {
            if n.line == 0 {
                bail!("{p}: note on {} has line 0; lines count from 1", n.file);
            }
        }
        Ok(())
    }
}

/// A manifest that does not load: the others stay usable, and this one's error is what any
/// command that needs it reports.
#[derive(Debug, Clone)]
pub struct Broken {
    pub path: PathBuf,
    /// From the file name (`29.toml`, `a3.toml`), so the series still knows its place in the
    /// chain.
    pub number: Option<RecordId>,
    pub error: String,
}

/// Ids, as typed: `1, 29, a1`.
pub fn show_ids(ids: impl IntoIterator<Item = RecordId>) -> String {
    ids.into_iter().map(RecordId::bare).collect::<Vec<_>>().join(", ")
}

/// All manifests under `records/`, sorted by id (the main track's, then Act 1's); the ones that
/// do not load are set aside.
#[derive(Debug, Clone)]
pub struct Catalog {
    records: Vec<Manifest>,
    broken: Vec<Broken>,
}

impl Catalog {
    pub fn load(root: &Path) -> Result<Catalog> {
        let dir = root.join("records");
        let entries =
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?;
        let mut loaded = Vec::new();
        let mut broken = Vec::new();
        for entry in entries {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "toml") {
                match Manifest::load(&path) {
                    Ok(m) => loaded.push(m),
                    Err(e) => broken.push(Broken::new(path, format!("{e:#}"))),
                }
            }
        }
        loaded.sort_by_key(|m| m.id());
        broken.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Catalog { records: loaded, broken })
    }

    /// The manifests that loaded, the main track's first.
    pub fn records(&self) -> &[Manifest] {
        &self.records
    }

    /// The manifests of `track` that loaded, oldest first.
    pub fn track(&self, track: Track) -> impl Iterator<Item = &Manifest> {
        self.records.iter().filter(move |m| m.record.track == track)
    }

    /// The manifests that did not load.
    pub fn broken(&self) -> &[Broken] {
        &self.broken
    }

    /// Every record that has a manifest, loaded or not, in id order: the chains of the series
    /// (the main track's first, oldest first, then each other track's).
    pub fn chain(&self) -> Vec<RecordId> {
        let mut chain: Vec<RecordId> = self.records.iter().map(Manifest::id).collect();
        chain.extend(self.broken.iter().filter_map(|b| b.number));
        chain.sort_unstable();
        chain.dedup();
        chain
    }

    /// Every upstream record inside a main record's step (#30-#84 but the main track's own
    /// records), oldest first, with the record whose patch holds it.
    pub fn inside_steps(&self) -> Vec<(RecordId, &Upstream)> {
        let chain = self.chain();
        let mut rows: Vec<(RecordId, &Upstream)> = (self.track(Track::Main))
            .flat_map(|m| m.upstream.iter().map(move |u| (m.id(), u)))
            .filter(|(_, u)| !chain.contains(&RecordId::main(u.number)))
            .collect();
        rows.sort_by_key(|(_, u)| u.number);
        rows
    }

    /// The record `id`, its manifest's error, or an error that lists the known ones.
    pub fn get(&self, id: impl Into<RecordId>) -> Result<&Manifest> {
        let id = id.into();
        if let Some(b) = self.broken.iter().find(|b| b.number == Some(id)) {
            bail!("{}", b.error);
        }
        self.records.iter().find(|m| m.id() == id).with_context(|| {
            format!(
                "unknown record {}; known records: {} (the upstream records inside their steps: `records list --all`)",
                id.bare(),
                show_ids(self.records.iter().map(Manifest::id))
            )
        })
    }

    /// Record `id` as a replay reads it: one of the catalog's manifests, or an upstream record
    /// inside a main record's step (#30-#84; `records list --all`), whose manifest is written to
    /// `<root>/target/records/upstream/NN.toml` for its trainer to read.
    pub fn replayable(&self, root: &Path, id: impl Into<RecordId>) -> Result<Cow<'_, Manifest>> {
        let id = id.into();
        let step = id.is_main().then(|| upstream_recipe::step(self, id.n)).flatten();
        let Some(step) = step.filter(|_| !self.chain().contains(&id)) else {
            return self.get(id).map(Cow::Borrowed);
        };
        let n = id.n;
        let dir = crate::paths::derived_dir(root).join("upstream");
        let m = step.manifest(dir.join(format!("{n:02}.toml"))).map_err(anyhow::Error::msg)?;
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let text = toml::to_string(&m).context("writing an upstream record's manifest")?;
        let header = format!(
            "# Upstream record #{n}, written by `records` from {}'s [[upstream]] rows; do not edit.\n",
            step.holder.path.display()
        );
        corpus::fs::write_atomic(&m.path, format!("{header}{text}").as_bytes())
            .with_context(|| format!("writing {}", m.path.display()))?;
        Ok(Cow::Owned(m))
    }

    /// The lab target record `id` is judged against, and the record that set it: the
    /// `[lab_target]` of the newest record of its track at or before it that has one (#1 for
    /// itself, #29 for the modern records, a1 for Act 1).
    pub fn lab_target_of(&self, id: impl Into<RecordId>) -> Result<(&LabTarget, RecordId)> {
        let id = id.into();
        self.records
            .iter()
            .rev()
            .filter(|m| m.record.track == id.track && m.record.number <= id.n)
            .find_map(|m| m.lab_target.as_ref().map(|t| (t, m.id())))
            .with_context(|| match id.track {
                Track::Main => {
                    format!(
                        "no [lab_target] in records/01.toml or a later manifest up to #{}",
                        id.n
                    )
                }
                t => format!(
                    "no [lab_target] in {}'s manifests up to {id}: the track's first record \
                     ({}.toml) sets it",
                    t.def().name,
                    RecordId::new(t, t.def().members[0]).slug()
                ),
            })
    }

    /// The newest main record that loaded: its trainer is `src/` at HEAD.
    pub fn newest(&self) -> Option<&Manifest> {
        self.track(Track::Main).last()
    }
}

impl Broken {
    fn new(path: PathBuf, error: String) -> Broken {
        let number = path.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse().ok());
        Broken { path, number, error }
    }
}

/// Line `line` of a manifest as toml's error points at it (` at `[record]`, first on line 2`
/// for a table given twice, whose error toml words as a duplicate key), so the reader sees
/// which of two equal lines is meant.
fn quoted_line(text: &str, line: usize) -> String {
    let Some(here) = line.checked_sub(1).and_then(|i| text.lines().nth(i)).map(str::trim) else {
        return String::new();
    };
    let first = (here.starts_with('['))
        .then(|| text.lines().take(line - 1).position(|l| l.trim() == here))
        .flatten();
    match first {
        Some(i) => format!(" at `{here}`, first on line {}", i + 1),
        None => format!(" at `{here}`"),
    }
}
