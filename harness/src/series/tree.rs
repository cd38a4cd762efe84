//! The trainer tree: which files of the checkout make a record's trainer, reading them into git
//! trees, and writing a tree out as a directory.
use git2::{
    IndexEntry, IndexTime, ObjectType, Oid, Repository, Status, StatusOptions, TreeWalkMode,
    TreeWalkResult,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// What a record's trainer tree holds: what the trainer needs to build and test. Everything
/// else (the CLI, README, docs, scripts, the GPU check, manifests and patches) belongs to no
/// record and lives at HEAD only. `.cargo` is left out so a materialized tree picks up the
/// checkout's cargo config (LIBTORCH relative to the root).
const TRAINER_FILES: [&str; 4] = ["Cargo.toml", "Cargo.lock", "build.rs", "rustfmt.toml"];
const TRAINER_DIRS: [&str; 3] = ["src", "tests", "corpus"];

/// Names the file in the tree that holds the tree's id, so an unchanged tree is not rewritten
/// (rewriting would touch mtimes and make cargo rebuild).
pub const MARKER: &str = ".records-tree";

#[derive(Debug, Error)]
pub enum TreeError {
    #[error("{root} is not a git checkout ({source}); the trainer tree is what git tracks there")]
    NotARepo { root: PathBuf, source: git2::Error },
    /// Reading the checkout or writing a tree.
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TreeError + '_ {
    move |source| TreeError::Io { path: path.to_path_buf(), source }
}

/// Whether a repo-relative path belongs to the trainer tree.
pub fn is_trainer_path(path: &str) -> bool {
    match path.split_once('/') {
        Some((top, _)) => TRAINER_DIRS.contains(&top),
        None => TRAINER_FILES.contains(&path),
    }
}

/// The trainer files of the working directory: tracked or untracked-but-not-ignored, present on
/// disk, outside the lab folders. Uncommitted edits count.
pub fn worktree_files(root: &Path) -> Result<Vec<String>, TreeError> {
    let repo = Repository::open(root)
        .map_err(|source| TreeError::NotARepo { root: root.to_path_buf(), source })?;
    let mut opts = StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_unmodified(true)
        .include_ignored(false)
        .exclude_submodules(true);
    let mut files = Vec::new();
    for entry in repo.statuses(Some(&mut opts))?.iter() {
        if entry.status().intersects(Status::WT_DELETED | Status::IGNORED) {
            continue;
        }
        let Some(path) = entry.path().ok().map(str::to_string) else {
            continue;
        };
        if is_trainer_path(&path) && root.join(&path).symlink_metadata().is_ok() {
            files.push(path);
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// Stores the working directory's trainer files in `repo` and returns their tree.
pub fn worktree_tree(repo: &Repository, root: &Path) -> Result<Oid, TreeError> {
    let mut index = git2::Index::new()?;
    for path in worktree_files(root)? {
        let full = root.join(&path);
        let meta = full.symlink_metadata().map_err(io(&full))?;
        let (data, mode) = if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&full).map_err(io(&full))?;
            (target.to_string_lossy().into_owned().into_bytes(), 0o120000)
        } else {
            (
                std::fs::read(&full).map_err(io(&full))?,
                if is_executable(&meta) { 0o100755 } else { 0o100644 },
            )
        };
        let id = repo.blob(&data)?;
        index.add(&entry(&path, id, mode, data.len()))?;
    }
    Ok(index.write_tree_to(repo)?)
}

fn entry(path: &str, id: Oid, mode: u32, size: usize) -> IndexEntry {
    IndexEntry {
        ctime: IndexTime::new(0, 0),
        mtime: IndexTime::new(0, 0),
        dev: 0,
        ino: 0,
        mode,
        uid: 0,
        gid: 0,
        file_size: size as u32,
        id,
        flags: path.len().min(0xfff) as u16,
        flags_extended: 0,
        path: path.as_bytes().to_vec(),
    }
}

#[cfg(unix)]
fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_: &std::fs::Metadata) -> bool {
    false
}

/// Every blob of a tree: path → (mode, content).
pub fn files(repo: &Repository, tree: Oid) -> Result<BTreeMap<String, (i32, Vec<u8>)>, TreeError> {
    let tree = repo.find_tree(tree)?;
    let mut out = BTreeMap::new();
    let mut failure = None;
    tree.walk(TreeWalkMode::PreOrder, |dir, e| {
        if e.kind() != Some(ObjectType::Blob) {
            return TreeWalkResult::Ok;
        }
        let path = format!("{dir}{}", String::from_utf8_lossy(e.name_bytes()));
        match repo.find_blob(e.id()) {
            Ok(blob) => {
                out.insert(path, (e.filemode(), blob.content().to_vec()));
                TreeWalkResult::Ok
            }
            Err(err) => {
                failure = Some(err);
                TreeWalkResult::Abort
            }
        }
    })?;
    match failure {
        Some(e) => Err(e.into()),
        None => Ok(out),
    }
}

/// The diff text between two trees, trainer files only (`None` = the empty tree).
pub fn diff_text(repo: &Repository, old: Option<Oid>, new: Oid) -> Result<String, TreeError> {
    let old = old.map(|o| repo.find_tree(o)).transpose()?;
    let new = repo.find_tree(new)?;
    let diff = repo.diff_tree_to_tree(old.as_ref(), Some(&new), None)?;
    let mut text = String::new();
    for (i, delta) in diff.deltas().enumerate() {
        let path = delta.new_file().path().or(delta.old_file().path());
        if !path.is_some_and(|p| is_trainer_path(&p.to_string_lossy())) {
            continue;
        }
        if let Some(mut patch) = git2::Patch::from_diff(&diff, i)? {
            text.push_str(&String::from_utf8_lossy(&patch.to_buf()?));
        }
    }
    Ok(text)
}

/// Writes `tree` as `dest`, replacing what is there: the files go to a sibling temp folder that
/// is renamed into place, so `dest` is never half written. A `dest` already holding this tree
/// is left alone, also when another process (a concurrent replay) finished it first.
pub fn write_dir(repo: &Repository, tree: Oid, dest: &Path) -> Result<(), TreeError> {
    let holds = |d: &Path| {
        std::fs::read_to_string(d.join(MARKER)).is_ok_and(|s| s.trim() == tree.to_string())
    };
    if holds(dest) {
        return Ok(());
    }
    let parent = dest.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
    let old = parent.join(format!(".{name}.old-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let written = (|| {
        for (path, (mode, data)) in files(repo, tree)? {
            let file = tmp.join(&path);
            if let Some(dir) = file.parent() {
                std::fs::create_dir_all(dir).map_err(io(dir))?;
            }
            write_file(&file, mode, &data).map_err(io(&file))?;
        }
        std::fs::write(tmp.join(MARKER), format!("{tree}\n")).map_err(io(&tmp))
    })();
    // A full disk leaves no half-written tree behind.
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    if !holds(dest) && dest.exists() {
        let _ = std::fs::rename(dest, &old);
    }
    if let Err(e) = std::fs::rename(&tmp, dest) {
        let _ = std::fs::remove_dir_all(&tmp);
        if !holds(dest) {
            return Err(io(dest)(e));
        }
    }
    let _ = std::fs::remove_dir_all(&old);
    Ok(())
}

/// Copies the manifests of the workspace members that live at HEAD only (the CLI, the GPU
/// check) from the checkout at `root` into the tree at `dest`: cargo loads every member's
/// manifest to build the trainer, but compiles none of them. They are not part of the tree.
pub fn write_head_manifests(root: &Path, dest: &Path) -> Result<(), TreeError> {
    let workspace = root.join("Cargo.toml");
    let text = std::fs::read_to_string(&workspace).map_err(io(&workspace))?;
    let members: Vec<String> = toml::from_str::<toml::Table>(&text)
        .ok()
        .and_then(|t| t.get("workspace")?.get("members")?.as_array().cloned())
        .into_iter()
        .flatten()
        .filter_map(|m| m.as_str().map(str::to_string))
        .collect();
    let head_only = |m: &&String| *m != "." && !is_trainer_path(&format!("{m}/Cargo.toml"));
    for member in members.iter().filter(head_only) {
        let (from, to) =
            (root.join(member).join("Cargo.toml"), dest.join(member).join("Cargo.toml"));
        let data = std::fs::read(&from).map_err(io(&from))?;
        if std::fs::read(&to).ok().as_deref() != Some(data.as_slice()) {
            std::fs::create_dir_all(dest.join(member)).map_err(io(dest))?;
            std::fs::write(&to, data).map_err(io(&to))?;
        }
    }
    Ok(())
}

fn write_file(file: &Path, mode: i32, data: &[u8]) -> std::io::Result<()> {
    #[cfg(unix)]
    if mode == 0o120000 {
        return std::os::unix::fs::symlink(String::from_utf8_lossy(data).as_ref(), file);
    }
    std::fs::write(file, data)?;
    #[cfg(unix)]
    if mode == 0o100755 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_folders_are_not_trainer() {
        assert!(is_trainer_path("src/model/gpt.rs"));
        assert!(is_trainer_path("Cargo.toml"));
        assert!(is_trainer_path("tests/common/mod.rs"));
        assert!(is_trainer_path("corpus/src/shard.rs"));
        assert!(!is_trainer_path("harness/src/lib.rs"));
        assert!(!is_trainer_path("README.md"));
        assert!(!is_trainer_path("gpu-check/src/main.rs"));
        assert!(!is_trainer_path("scripts/gpu-check.sh"));
        assert!(!is_trainer_path("records/01.toml"));
        assert!(!is_trainer_path("patches/29.patch"));
        assert!(!is_trainer_path(".cargo/config.toml"));
        assert!(!is_trainer_path("target/x"));
    }
}
