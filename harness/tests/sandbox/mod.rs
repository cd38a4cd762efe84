//! Where a test runs the `records` CLI: a state of its own, apart from everything a user's runs
//! leave in the checkout.
//!
//! A [`Sandbox`] is a temporary folder that the CLI takes as `RECORDS_STATE` (results/, data/,
//! the lab targets, upstream records' manifests), with its own `$HOME` and timing lock, and an
//! environment without the variables the CLI reads (`RECORDS_*`, `PAGER`, `COLUMNS`, ...). Only
//! the materialized trees and their binaries are shared between tests, in one folder under
//! cargo's test tmpdir that no user's run writes: a tree is named by its id and checked before it
//! is reused, so sharing it saves a build per test and can change no result.
//!
//! `RECORDS_TEST_CHECKOUT` names the checkout the tests read (default: this one); the hermetic
//! test sets it to a scratch copy holding a user's leftovers and runs these tests there.
#![allow(dead_code)] // each test binary uses its own part of it
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The checkout under test: `RECORDS_TEST_CHECKOUT`, else the one these tests were built from.
pub fn checkout() -> PathBuf {
    std::env::var_os("RECORDS_TEST_CHECKOUT").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf(),
        PathBuf::from,
    )
}

/// The trees and tree binaries every test shares (see the module docs), laid out as a state of
/// their own: scripts/test runs `series check --build` there too, so the suite builds each tree
/// once.
fn shared_builds() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("records-test-builds")
}

/// Variables of the test's own environment that the CLI, its trainers or its pager read; a
/// test that wants one sets it on the command.
/// (A proxy would carry the tests' loopback downloads elsewhere.)
const SCRUBBED: &[&str] = &[
    "PAGER",
    "LESS",
    "COLUMNS",
    "NO_COLOR",
    "HF_ENDPOINT",
    "OMP_NUM_THREADS",
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
];

pub struct Sandbox {
    dir: tempfile::TempDir,
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox::new()
    }
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let dir = tempfile::Builder::new().prefix("records-test-").tempdir().unwrap();
        let builds = shared_builds();
        let trees = builds.join("target/records/trees");
        let bins = builds.join("records-trees");
        for d in [&trees, &bins, &dir.path().join("target/records")] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::os::unix::fs::symlink(&trees, dir.path().join("target/records/trees")).unwrap();
        std::os::unix::fs::symlink(&bins, dir.path().join("records-trees")).unwrap();
        Sandbox { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Where this sandbox's runs keep their results (`<state>/results`).
    pub fn results(&self) -> PathBuf {
        self.path().join("results")
    }

    /// The timing lock of this sandbox's runs (see [`records_with_state`]).
    pub fn lock(&self) -> PathBuf {
        lock_of(self.path())
    }

    /// `records` on the checkout under test.
    pub fn records(&self) -> Command {
        self.records_at(&checkout())
    }

    /// `records` with `root` as its checkout (a fixture's), in this sandbox's state.
    pub fn records_at(&self, root: &Path) -> Command {
        records_with_state(root, self.path())
    }

    /// `records args` on the checkout under test.
    pub fn run(&self, args: &[&str]) -> Output {
        self.records().args(args).output().unwrap()
    }
}

/// `records` on the checkout `root` with `state` as its state (`RECORDS_STATE`), its `$HOME`
/// and its timing lock under `<state>/target/` (which git ignores in a checkout), in an
/// environment without what the CLI reads. A fixture, a temporary checkout of its own, is its
/// own state.
pub fn records_with_state(root: &Path, state: &Path) -> Command {
    hermetic(Command::new(env!("CARGO_BIN_EXE_records")), root, state)
}

/// `cmd` (the CLI, or a program that runs it, as `script` does) in the environment of
/// [`records_with_state`].
pub fn hermetic(mut cmd: Command, root: &Path, state: &Path) -> Command {
    let home = state.join("target/home");
    std::fs::create_dir_all(&home).unwrap();
    for (key, _) in std::env::vars_os() {
        let name = key.to_string_lossy();
        if name.starts_with("RECORDS_") || SCRUBBED.contains(&name.as_ref()) {
            cmd.env_remove(&key);
        }
    }
    let real_home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    let or_home = |var: &str, sub: &str| -> OsString {
        std::env::var_os(var).unwrap_or_else(|| real_home.join(sub).into_os_string())
    };
    // cargo and rustup keep finding the toolchain and the registry when $HOME moves.
    cmd.env("CARGO_HOME", or_home("CARGO_HOME", ".cargo"))
        .env("RUSTUP_HOME", or_home("RUSTUP_HOME", ".rustup"))
        .env("HOME", &home)
        .env("RECORDS_ROOT", root)
        .env("RECORDS_STATE", state)
        .env("RECORDS_TIMING_LOCK", lock_of(state))
        .env("RECORDS_VENV", venv());
    cmd
}

fn lock_of(state: &Path) -> PathBuf {
    state.join("target/timing.lock")
}

/// The venv scripts/setup.sh made for the checkout these tests were built from (the setup's
/// libtorch and corpus text, not a run's output): `RECORDS_VENV` as the test was given it, else
/// its `.venv`.
fn venv() -> PathBuf {
    std::env::var_os("RECORDS_VENV").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join(".venv"),
        PathBuf::from,
    )
}

/// Marks the running test as skipped, saying why: the line goes to stderr and to the file
/// `RECORDS_TEST_SKIPS` names (scripts/test counts those lines as skipped, never as passed).
pub fn skip(why: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    let line = format!("{}::{test}: {why}\n", env!("CARGO_CRATE_NAME"));
    eprint!("SKIPPED: {line}");
    if let Some(file) = std::env::var_os("RECORDS_TEST_SKIPS") {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(file).unwrap();
        f.write_all(line.as_bytes()).unwrap();
    }
}

/// A copy of the checkout under test in a temporary folder: its `.git` and the files git tracks
/// or would track (untracked ones it does not ignore), as they are in the working tree; nothing
/// git ignores (results/, data/, target/, .venv). For tests whose own code calls the library on
/// a checkout: what it derives lands in the copy.
pub fn scratch_checkout() -> tempfile::TempDir {
    let (from, copy) =
        (checkout(), tempfile::Builder::new().prefix("records-copy-").tempdir().unwrap());
    let listed = Command::new("git")
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .current_dir(&from)
        .output()
        .unwrap();
    assert!(listed.status.success(), "git ls-files in {}", from.display());
    for rel in listed.stdout.split(|&b| b == 0).filter(|p| !p.is_empty()) {
        let rel = Path::new(std::str::from_utf8(rel).unwrap());
        let (src, dst) = (from.join(rel), copy.path().join(rel));
        if src.is_file() {
            std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
            std::fs::copy(&src, &dst).unwrap();
        }
    }
    copy_dir(&from.join(".git"), &copy.path().join(".git"));
    copy
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_type().unwrap().is_dir() {
            copy_dir(&src, &dst);
        } else if e.file_type().unwrap().is_file() {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}
