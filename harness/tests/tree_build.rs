//! Tree builds share the checkout's dependency build: a toy checkout (crates named like ours,
//! with `anyhow` from the registry cache) builds first, then two materialized trees with the
//! same crate names and different code build through `TreeBuild`. Real cargo, offline. The
//! dependency must not be compiled again, each tree's binary must be its own, and the
//! checkout's `target/release/train` must stay the checkout's.
use records::run::tree_build::TreeBuild;
use records::series::tree::MARKER;
use std::path::Path;
use std::process::Command;
use std::time::SystemTime;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A workspace like ours in miniature: package `trainer` (bin `train`) and member `corpus`.
fn workspace(dir: &Path, says: &str) {
    write(
        &dir.join("Cargo.toml"),
        "[workspace]\nmembers = [\".\", \"corpus\"]\n[package]\nname = \"trainer\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
         [dependencies]\nanyhow = \"=1.0.105\"\ncorpus = { path = \"corpus\" }\n[[bin]]\nname = \"train\"\npath = \"src/main.rs\"\n",
    );
    write(
        &dir.join("corpus/Cargo.toml"),
        "[package]\nname = \"corpus\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(&dir.join("corpus/src/lib.rs"), "pub fn n() -> u32 { 7 }\n");
    write(
        &dir.join("src/main.rs"),
        &format!("fn main() {{ let e = anyhow::anyhow!(\"{says}\"); println!(\"{{e}} {{}}\", corpus::n()); }}\n"),
    );
}

/// The dependency's compiled files and their modification times.
fn anyhow_artifacts(target: &Path) -> Vec<(String, SystemTime)> {
    let mut out: Vec<_> = std::fs::read_dir(target.join("release/deps"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().starts_with("libanyhow-"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().modified().unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

fn run(bin: &Path) -> String {
    String::from_utf8(Command::new(bin).output().unwrap().stdout).unwrap().trim().to_string()
}

#[test]
fn trees_reuse_the_checkouts_dependencies_and_keep_their_own_binaries() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, target) = (tmp.path().join("checkout"), tmp.path().join("target"));
    // The only test in this binary, so changing the process environment races with nothing:
    // the trees build beside this target dir, and the build registers with a lock of its own.
    std::env::set_var("CARGO_TARGET_DIR", &target);
    std::env::set_var("RECORDS_TIMING_LOCK", tmp.path().join("timing.lock"));
    std::env::remove_var("RECORDS_STATE");
    workspace(&root, "checkout");
    std::fs::create_dir_all(root.join("records")).unwrap();
    let cargo = |dir: &Path| {
        let status = Command::new(env!("CARGO"))
            .args(["build", "--release", "--offline", "--quiet"])
            .current_dir(dir)
            .env("CARGO_TARGET_DIR", &target)
            .status()
            .unwrap();
        assert!(status.success());
    };
    cargo(&root);
    let deps = anyhow_artifacts(&target);
    assert!(!deps.is_empty());

    let mut kept = Vec::new();
    for (name, says) in [("a", "tree a"), ("b", "tree b"), ("a", "tree a")] {
        let tree = root.join("target/records/trees").join(name);
        workspace(&tree, says);
        write(&tree.join(MARKER), &format!("id-{name}\n"));
        let build = TreeBuild::start(&root, &tree).unwrap();
        build.cargo(&["build", "--release", "--offline", "--quiet"]).unwrap();
        let bin = build.keep_binary("train", false).unwrap();
        assert_eq!(run(&bin), format!("{says} 7"), "{name}'s binary is its own");
        kept.push(bin);
    }
    assert_eq!(anyhow_artifacts(&target), deps, "anyhow was compiled again for a tree");
    assert_eq!(run(&kept[1]), "tree b 7", "b's kept binary survives a's rebuild");
    assert_eq!(run(&target.join("release/train")), "checkout 7", "the checkout's binary stays");
}
