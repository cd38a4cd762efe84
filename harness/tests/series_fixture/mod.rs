//! A tiny records checkout in a temp dir: a fake trainer, three manifests (#1 → #29 → #38) and
//! their patches, made from real git commits with `records series capture`.
#![allow(dead_code)] // each test binary uses its own part of the fixture

#[path = "../sandbox/mod.rs"]
pub mod sandbox;

use git2::{IndexAddOption, Oid, Repository, Signature, Time};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

pub type Files = BTreeMap<String, String>;

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub repo: Repository,
    /// The trainer files of each record, as the test wrote them.
    pub trees: BTreeMap<u32, Files>,
    /// The commit after which record #29's work starts, and #38's.
    pub base: Oid,
    pub after_29: Oid,
}

pub const MODEL_1: &str = "//! The model.
pub struct Gpt {
    pub layers: usize,
}

pub fn forward(x: f32) -> f32 {
    let h = embed(x);
    let h = blocks(h);
    head(h)
}

fn embed(x: f32) -> f32 {
    x * 2.0
}

fn blocks(h: f32) -> f32 {
    h + 1.0
}

fn head(h: f32) -> f32 {
    h - 0.5
}
";

pub const MODEL_29: &str = "//! The model.
pub struct Gpt {
    pub layers: usize,
}

pub fn forward(x: f32) -> f32 {
    let h = embed(x);
    let h = h + crate::value_embed::value_embed(x);
    let h = blocks(h);
    head(h)
}

fn embed(x: f32) -> f32 {
    x * 2.0
}

fn blocks(h: f32) -> f32 {
    h + 1.0
}

fn head(h: f32) -> f32 {
    h - 0.5
}
";

pub const MODEL_38: &str = "//! The model.
pub struct Gpt {
    pub layers: usize,
}

pub fn forward(x: f32) -> f32 {
    let h = embed(x);
    let h = h + crate::value_embed::value_embed(x);
    let h = blocks(h);
    head(h)
}

fn embed(x: f32) -> f32 {
    x * 2.0
}

fn blocks(h: f32) -> f32 {
    h + 1.5
}

fn head(h: f32) -> f32 {
    (h - 0.5).tanh()
}
";

pub const LIB_1: &str = "pub mod model;\npub mod old;\n\npub const LR: f32 = 0.1;\n";
pub const LIB_29: &str =
    "pub mod model;\npub mod old;\npub mod value_embed;\n\npub const LR: f32 = 0.2;\n";
pub const LIB_38: &str = "pub mod model;\npub mod value_embed;\n\npub const LR: f32 = 0.2;\n";
pub const VALUE_EMBED: &str = "/// Value embeddings: a second table mixed into the residual.\npub fn value_embed(x: f32) -> f32 {\n    x * 0.25\n}\n";
pub const OLD: &str = "pub fn unused() {}\n";

/// The line of `MODEL_29`/`MODEL_38` that record #29's note is anchored at.
pub const NOTE_LINE: u32 = 8;
pub const NOTE_TEXT: &str =
    "The value embedding joins the residual right after the token embedding.";

/// The rest of a whole recipe (record #1's), as the trainer's rules, which the catalog applies,
/// need one.
const RECIPE_REST: &str = "# Shape and data
vocab_size = 50257
padded_vocab_size = 50304
n_layer = 12
n_head = 12
n_embd = 768
max_seq_len = 1024
ln_eps = 1e-5
init_std = 0.02
tokenizer = \"gpt2\"
seq_len = 1024
batch_rows = 64
batch_tokens = 524288
reference_ranks = 8
steps = 19560
warmup_steps = 700
min_lr_frac = 0.0
beta1 = 0.9
beta2 = 0.95
eps = 1e-8
weight_decay = 0.1
grad_clip = 1.0
val_every = 250
val_tokens = 10485760
seed = 42
";

fn manifest(n: u32, parent: Option<u32>, lr: f64, time_s: f64, extra: &str) -> String {
    let parent = parent.map(|p| format!("parent = {p}\n")).unwrap_or_default();
    let pr = if n == 1 { String::new() } else { format!("pr = {}\n", 100 + n) };
    format!(
        r#"[record]
number = {n}
title = "Record {n} title"
{pr}link = "https://github.com/KellerJordan/modded-nanogpt/pull/{}"
date = "2025-0{}-01"
authors = ["@author{n}", "@coauthor"]
official_time_s = {time_s}
official_time_text = "{:.2} minutes"
hardware = "8xH100"
steps = {}
tokens = 1000
{parent}upstream_folder = "records/track_1_short/x{n}"
claim = "Claim of record {n}: it is faster because of a reason."

[evidence]
val_losses = [3.2771, 3.2785, 3.2779]
train_times_s = [{time_s}, {}]
val_curve = [[0, 10.8], [50, 4.5], [100, 3.27]]

[recipe]
# Optimizer: its lr
lr = {lr}   # step size
# Model
zero_proj = {}
{RECIPE_REST}
[lab]
steps = 100
{extra}"#,
        100 + n,
        1 + n % 9,
        time_s / 60.0,
        // The lab rule: from #29 on, 100 lab steps are about 668 official ones (x 250/1,670).
        if n >= 29 { 664 + n / 10 } else { 1000 - n },
        time_s + 0.2,
        n >= 29,
    )
}

fn sig(t: i64) -> Signature<'static> {
    Signature::new("Ada Lovelace", "ada@example.org", &Time::new(1_750_000_000 + t, 120)).unwrap()
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let mut f = Fixture {
            dir,
            repo,
            trees: BTreeMap::new(),
            base: Oid::ZERO_SHA1,
            after_29: Oid::ZERO_SHA1,
        };
        f.write(".gitignore", "/target\n/results\n");
        f.write("Cargo.toml", "[workspace]\nmembers = [\".\"]\n\n[package]\nname = \"trainer\"\n");
        f.write("src/model.rs", MODEL_1);
        f.write("src/lib.rs", LIB_1);
        f.write("src/old.rs", OLD);
        f.write("docs/notes.md", "not part of the trainer\n");
        f.write("records/01.toml", &manifest(1, None, 0.1, 180.0, ""));
        f.base = f.commit("Record 1: the baseline", 0);
        f.trees.insert(1, f.trainer_files());

        // Record #29: two commits, one adding a file.
        let note = format!("\n[[notes]]\nfile = \"src/model.rs\"\nline = {NOTE_LINE}\ntext = \"{NOTE_TEXT}\"\n\n[[notes]]\nfile = \"src/model.rs\"\nline = 2\ntext = \"Unchanged line, outside every hunk.\"\n");
        f.write("records/29.toml", &manifest(29, Some(1), 0.2, 170.0, &note));
        f.write("src/value_embed.rs", VALUE_EMBED);
        f.write("src/model.rs", MODEL_29);
        f.write(
            "src/lib.rs",
            "pub mod model;\npub mod old;\npub mod value_embed;\n\npub const LR: f32 = 0.1;\n",
        );
        f.commit("Add value embeddings\n\nA second embedding table whose output is added to the residual stream.\nIt lets early layers see token identity again.", 10);
        f.write("src/lib.rs", LIB_29);
        f.commit("Raise the learning rate to 0.2", 20);
        f.trees.insert(29, f.trainer_files());
        records::series::capture::capture(f.root(), 29, &f.base.to_string(), false).unwrap();
        f.after_29 = f.commit("Add patches/29.patch", 25);

        // Record #38: one commit that deletes a file and changes two others.
        f.write("records/38.toml", &manifest(38, Some(29), 0.2, 165.5, ""));
        std::fs::remove_file(f.root().join("src/old.rs")).unwrap();
        f.write("src/lib.rs", LIB_38);
        f.write("src/model.rs", MODEL_38);
        f.commit(
            "Drop the old module, soften the head\n\nThe head squashes its output with tanh.",
            30,
        );
        f.trees.insert(38, f.trainer_files());
        records::series::capture::capture(f.root(), 38, &f.after_29.to_string(), false).unwrap();
        f.commit("Add patches/38.patch", 40);
        f
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, path: &str, text: &str) {
        let p = self.root().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.root().join(path)).unwrap()
    }

    /// Commits everything in the working directory (additions and deletions).
    pub fn commit(&self, message: &str, t: i64) -> Oid {
        commit_all(&self.repo, message, t)
    }

    /// The trainer files now in the working directory (the series' own rule: src/, tests/,
    /// Cargo.toml, ...).
    pub fn trainer_files(&self) -> Files {
        let mut files = read_files(self.root(), &["target", "results", ".git"]);
        files.retain(|path, _| records::series::tree::is_trainer_path(path));
        files
    }

    /// Runs the real `records` binary with RECORDS_ROOT at the fixture, which is its own state
    /// (results/, target/records/), in an environment without what the CLI reads.
    pub fn records(&self, args: &[&str]) -> Output {
        self.records_with(args, &[])
    }

    /// `records args` with extra environment variables.
    pub fn records_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.command().args(args).envs(env.iter().copied()).output().unwrap()
    }

    /// `records` on the fixture, as [`Fixture::records`] runs it.
    pub fn command(&self) -> std::process::Command {
        sandbox::records_with_state(self.root(), self.root())
    }
}

/// Commits the whole working directory of `repo` at a fixed time.
pub fn commit_all(repo: &Repository, message: &str, t: i64) -> Oid {
    let mut index = repo.index().unwrap();
    index.add_all(["*"], IndexAddOption::DEFAULT, None).unwrap();
    index.update_all(["*"], None).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    repo.commit(Some("HEAD"), &sig(t), &sig(t), message, &tree, &parents).unwrap()
}

/// Text files under `dir`, relative paths, skipping the given top-level folders.
pub fn read_files(dir: &Path, skip: &[&str]) -> Files {
    let mut out = Files::new();
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().replace('\\', "/");
            if skip.contains(&rel.split('/').next().unwrap()) {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(rel, std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    out
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A shared optimizer file the checkout's trainer holds at HEAD (outside every patch, so every
/// main record's tree has it too), for the rule that a branching track reuses HEAD's files.
pub const SGD_HEAD: &str =
    "/// Plain SGD.\npub fn step(w: f32, g: f32, lr: f32) -> f32 {\n    w - lr * g\n}\n";
/// Act 1's step a1: one line of the model changed on #1's tree.
pub const MODEL_A1: &str = "x * 3.0\n";
/// The file a2's patch adds: Act 1's own (HEAD has no such file).
pub const A2_OWN: &str = "/// Only in Act 1.\npub fn warmdown(t: f32) -> f32 {\n    1.0 - t\n}\n";

/// An Act 1 manifest: step `n` with `steps` official steps (the lab rule: 250 x steps / 24,576)
/// after `parent` (`"#1"`, `"a1"`), and `extra` lines at the end of `[record]`.
pub fn act1_manifest(n: u32, parent: &str, steps: u64, extra: &str) -> String {
    let lab = (250 * steps + 24_576 / 2) / 24_576;
    let target =
        if n == 1 { "\n[lab_target]\nval_loss = 2.61\nmeasured = \"fixture\"\n" } else { "" };
    format!(
        r#"[record]
number = {n}
track = "act1"
title = "Step a{n} title"
link = "https://github.com/tyler-romero/nanogpt-speedrun/commit/a{n}"
date = "2025-01-1{n}"
authors = ["@tyler-romero"]
official_time_s = {}
official_time_text = "{} hours"
hardware = "2xRTX4090"
steps = {steps}
tokens = 1000
parent = "{parent}"
upstream_folder = "logs/a{n}.txt"
claim = "Claim of step a{n}."
{extra}
[evidence]
val_losses = [3.2780]
train_times_s = [29266.9]
val_curve = [[0, 10.8], [1024, 4.14], [{steps}, 3.278]]

[recipe]
lr = 0.1
zero_proj = false
{RECIPE_REST}
[lab]
steps = {lab}
{target}"#,
        30000 - 1000 * n,
        8 - n,
    )
}

/// A git mailbox of one commit that turns the trainer files in `base` (a materialized tree)
/// into the same files with `edits` applied (path, new text; `None` removes the file), as `git
/// format-patch` would write it.
pub fn patch_on(base: &Path, edits: &[(&str, Option<&str>)], message: &str, t: i64) -> String {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::init(dir.path()).unwrap();
    let mut files = read_files(base, &[".git"]);
    files.retain(|path, _| records::series::tree::is_trainer_path(path));
    for (path, text) in &files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let before = commit_all(&repo, "base", t);
    for (path, text) in edits {
        let p = dir.path().join(path);
        match text {
            Some(text) => {
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, text).unwrap();
            }
            None => std::fs::remove_file(p).unwrap(),
        }
    }
    let after = commit_all(&repo, message, t + 1);
    let (before, after) = (repo.find_commit(before).unwrap(), repo.find_commit(after).unwrap());
    let diff =
        records::series::tree::diff_text(&repo, Some(before.tree_id()), after.tree_id()).unwrap();
    let commit = records::series::mailbox::Commit::from_git(&after, message, diff);
    records::series::mailbox::write(&[commit]).unwrap()
}

impl Fixture {
    /// The fixture with Act 1's first two steps: HEAD also holds `src/optim/sgd.rs` (outside
    /// the patches, so #1's tree has it), a1 changes one line of #1's model, a2 adds a file of
    /// its own; the trees of all five records are recorded.
    pub fn with_act1() -> Fixture {
        let mut f = Fixture::new();
        f.write("src/optim/sgd.rs", SGD_HEAD);
        records::series::recorded::record(f.root()).unwrap();
        f.commit("A shared optimizer at HEAD", 50);
        for files in f.trees.values_mut() {
            files.insert("src/optim/sgd.rs".into(), SGD_HEAD.into());
        }
        let one = records::series::materialize(f.root(), 1).unwrap();
        let model = MODEL_1.replace("x * 2.0\n", MODEL_A1);
        let a1 = patch_on(
            &one,
            &[("src/model.rs", Some(&model))],
            "a1: a wider embedding scale\n\nThe baseline as Act 1 ran it.",
            60,
        );
        f.write("patches/a1.patch", &a1);
        f.write("records/a1.toml", &act1_manifest(1, "#1", 24_576, ""));
        // A tree is made only once its id is recorded, so a2 is written on a recorded a1.
        let out = f.records(&["series", "record-trees", "--track", "act1"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let a1_dir = tempfile::tempdir().unwrap();
        records::series::materialize_into(
            f.root(),
            "a1".parse::<records::catalog::RecordId>().unwrap(),
            a1_dir.path(),
        )
        .unwrap();
        let a2 = patch_on(
            a1_dir.path(),
            &[("src/optim/warmdown.rs", Some(A2_OWN))],
            "a2: a warmdown of its own",
            70,
        );
        f.write("patches/a2.patch", &a2);
        f.write("records/a2.toml", &act1_manifest(2, "a1", 12_288, ""));
        let out = f.records(&["series", "record-trees", "--track", "act1"]);
        assert!(out.status.success(), "{}", stderr(&out));
        f.commit("Act 1: a1 and a2", 80);
        f
    }
}
