//! The real series (records/ and patches/ of this repository, committed state): `series check`
//! passes; a review note whose line moved away from its anchor, a commit that ports another
//! upstream record than its row, and one corrupted hunk of patches/29.patch, are each reported
//! precisely.
mod sandbox;

use sandbox::{checkout, Sandbox};
use std::path::Path;
use std::process::Output;

fn check(root: &Path) -> Output {
    Sandbox::new().records_at(root).args(["series", "check"]).output().unwrap()
}

/// Replaces the one occurrence of `old` in `path` with `new`; returns the file as it was.
fn edit_once(path: &Path, old: &str, new: &str) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    assert_eq!(text.matches(old).count(), 1, "{old:?} must occur once in {}", path.display());
    std::fs::write(path, text.replace(old, new)).unwrap();
    text
}

#[test]
fn the_real_series_checks_and_a_corrupted_hunk_of_29_is_named() {
    let dir = tempfile::tempdir().unwrap();
    git2::Repository::clone(checkout().to_str().unwrap(), dir.path()).unwrap();
    let out = check(dir.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{text}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("ok   #1 ") && text.contains("ok   #29 "), "{text}");

    let manifest = dir.path().join("records/29.toml");
    let notes =
        edit_once(&manifest, "anchor = \"let grad_mult =\"", "anchor = \"let grad_mult = 2\"");
    let err = String::from_utf8_lossy(&check(dir.path()).stderr).to_string();
    assert!(
        err.contains("records/29.toml: note at src/train.rs:")
            && err.contains("no longer holds \"let grad_mult = 2\""),
        "{err}"
    );
    std::fs::write(&manifest, notes).unwrap();

    // A commit whose subject names another upstream record than its row: `replay 31` would
    // build the wrong state.
    let patch = dir.path().join("patches/38.patch");
    let good = edit_once(&patch, "Subject: [PATCH 2/9] #31: ", "Subject: [PATCH 2/9] #13: ");
    let err = String::from_utf8_lossy(&check(dir.path()).stderr).to_string();
    assert!(
        err.contains("record #38: ")
            && err.contains("commits port #30 #13 #32")
            && err.contains("rows are #30 #31 #32"),
        "{err}"
    );
    std::fs::write(&patch, good).unwrap();

    let patch = dir.path().join("patches/29.patch");
    let line = "+            (Some(s), true) => fp8_linear(x, &self.weight, s)?,\n";
    edit_once(&patch, line, &line.replace("weight, s", "weight, t"));
    let out = check(dir.path());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for part in [
        "record #29",
        "patches/29.patch",
        "commit 4/",
        "src/model/head.rs: hunk `@@ ",
        "did not apply",
    ] {
        assert!(err.contains(part), "missing {part:?} in {err}");
    }
}

/// A one-byte change to a removed line of patches/62.patch still applies both ways, but gives
/// #54 and every older record another trainer: it is blamed on patches/62.patch, and no
/// command makes #54's tree from it.
#[test]
fn a_changed_removed_line_of_62_is_blamed_on_62() {
    let dir = tempfile::tempdir().unwrap();
    git2::Repository::clone(checkout().to_str().unwrap(), dir.path()).unwrap();
    let patch = dir.path().join("patches/62.patch");
    let text = std::fs::read_to_string(&patch).unwrap();
    // A removed line of a hunk (not a `- ` bullet of a commit message).
    let mut in_diff = false;
    let line = text
        .lines()
        .find(|l| {
            in_diff = (in_diff || l.starts_with("diff --git ")) && !l.starts_with("From ");
            in_diff
                && l.starts_with('-')
                && !l.starts_with("---")
                && l.trim_end().ends_with(|c: char| c.is_ascii_alphanumeric())
                && text.matches(&format!("\n{l}\n")).count() == 1
        })
        .expect("a unique removed line");
    let changed = format!("{}#", &line[..line.len() - 1]);
    std::fs::write(&patch, text.replace(&format!("\n{line}\n"), &format!("\n{changed}\n")))
        .unwrap();
    let sandbox = Sandbox::new();
    let before = tree_marker(&sandbox, "54");
    for args in [&["series", "check"][..], &["series", "tree", "54"]] {
        let out = sandbox.records_at(dir.path()).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stdout));
        assert!(err.contains("records/54.toml: record.tree = "), "{args:?}: {err}");
        assert!(err.contains("reverse-applying patches/62.patch gives #54 the tree"), "{err}");
        assert!(!err.contains("46.patch"), "{args:?}: {err}");
    }
    // The trees are shared between tests (and kept from earlier runs, whose ids may differ):
    // #54's is as it was, or the recorded one.
    assert_untouched_or_recorded(&sandbox, dir.path(), "54", before);
    assert!(!dir.path().join("target").exists());
}

/// The id in `NN`'s shared tree's marker, if that tree is there.
fn tree_marker(sandbox: &Sandbox, n: &str) -> Option<String> {
    let marker = sandbox.path().join(format!("target/records/trees/{n}/.records-tree"));
    std::fs::read_to_string(marker).ok().map(|id| id.trim().to_string())
}

/// `NN`'s shared tree is as it was before (`before`), or the one its manifest in `root`
/// records: a refused command wrote no tree of its own.
fn assert_untouched_or_recorded(sandbox: &Sandbox, root: &Path, n: &str, before: Option<String>) {
    let now = tree_marker(sandbox, n);
    let manifest = std::fs::read_to_string(root.join(format!("records/{n}.toml"))).unwrap();
    let recorded = now.as_ref().is_some_and(|id| manifest.contains(&format!("tree = \"{id}\"")));
    assert!(now.is_none() || now == before || recorded, "#{n}'s tree: {now:?}, was {before:?}");
}

/// A manifest whose `tree =` line is gone is refused by every command that makes its tree, even
/// when a patch below it was corrupted too (nothing checks such a tree, so nothing builds it).
#[test]
fn a_record_without_a_tree_id_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    git2::Repository::clone(checkout().to_str().unwrap(), dir.path()).unwrap();
    let manifest = dir.path().join("records/54.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let tree = text.lines().find(|l| l.starts_with("tree = ")).unwrap().to_string();
    std::fs::write(&manifest, text.replace(&format!("{tree}\n"), "")).unwrap();
    let sandbox = Sandbox::new();
    let before = tree_marker(&sandbox, "54");
    for args in
        [&["series", "check"][..], &["series", "tree", "54"], &["replay", "54", "--steps", "3"]]
    {
        let out = sandbox.records_at(dir.path()).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stdout));
        assert!(
            err.contains("records/54.toml: no `tree = \"<git tree id>\"` in [record]"),
            "{err}"
        );
        assert!(!err.contains("Compiling"), "{args:?} built: {err}");
    }
    let id = tree.trim_start_matches("tree = \"").trim_end_matches('"');
    let now = tree_marker(&sandbox, "54");
    assert!(now.is_none() || now == before || now.as_deref() == Some(id), "a tree was made");
}

/// A tree id edited in one manifest is blamed on that manifest (the older records' trees still
/// match theirs), not on the patch above it; an id that is no git id is called malformed.
#[test]
fn a_wrong_tree_id_is_blamed_on_its_manifest() {
    let dir = tempfile::tempdir().unwrap();
    git2::Repository::clone(checkout().to_str().unwrap(), dir.path()).unwrap();
    let manifest = dir.path().join("records/62.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let line = text.lines().find(|l| l.starts_with("tree = ")).unwrap().to_string();
    let id = line.trim_start_matches("tree = \"").trim_end_matches('"').to_string();
    let flipped = format!("{}{}", if id.starts_with('0') { "1" } else { "0" }, &id[1..]);
    std::fs::write(&manifest, text.replace(&id, &flipped)).unwrap();
    for args in [&["series", "check"][..], &["series", "tree", "62"]] {
        let out = Sandbox::new().records_at(dir.path()).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(&format!("records/62.toml: record.tree = {flipped}")), "{err}");
        assert!(err.contains("the manifest's id is wrong"), "{args:?}: {err}");
        assert!(err.contains(&format!("Put back tree = \"{id}\"")), "{args:?}: {err}");
        assert!(!err.contains("63.patch"), "{args:?}: {err}");
    }
    std::fs::write(&manifest, text.replace(&id, "deadbeef")).unwrap();
    let out = check(dir.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("record.tree = \"deadbeef\" is not a git tree id (40 hex digits)"),
        "{err}"
    );
}

/// `records series stats`: ARCHITECTURE.md quotes its summary as it is today, and each commit's
/// files, diffed tree to tree with libgit2, add up to the lines its patch text holds.
#[test]
fn series_stats_are_architecture_s_figures_and_add_up_to_the_patches() {
    let out = Sandbox::new().run(&["series", "stats", "--summary", "--format", "md"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc = std::fs::read_to_string(checkout().join("ARCHITECTURE.md")).unwrap();
    let start = "<!-- records series stats --summary --format md -->\n";
    let quoted = &doc[doc.find(start).expect("ARCHITECTURE.md quotes the stats") + start.len()..];
    let quoted = &quoted[..quoted.find("<!-- end of records series stats -->").unwrap()];
    assert_eq!(quoted, text, "ARCHITECTURE.md's figures are stale: paste the command's output");

    let copy = sandbox::scratch_checkout();
    let stats = records::series::stats::main_track(copy.path()).unwrap();
    let series = records::series::Series::load(copy.path()).unwrap();
    let commits: Vec<_> = (series.chain(records::catalog::Track::Main).iter())
        .filter(|r| r.number > records::catalog::RecordId::main(29))
        .flat_map(|r| &r.commits)
        .collect();
    assert_eq!(stats.len(), commits.len());
    for (s, c) in stats.iter().zip(commits) {
        let sum = s.files.iter().fold((0, 0), |(a, r), f| (a + f.added, r + f.removed));
        assert_eq!(sum, c.counts(), "{}", c.subject);
        assert_eq!(s.upstream, c.upstream());
    }
    let row = |k| stats.iter().find(|s| s.upstream == Some(k)).unwrap();
    assert!(row(44).stays_home() && !row(73).stays_home());
}

/// Export and import, unedited, give back the same checkout: the patches byte for byte and the
/// newest trainer with head.patch's commits (an import once wrote the newest record's tree over
/// them, leaving src/ without what head.patch adds).
#[test]
fn the_real_series_exports_and_imports_back_unchanged() {
    let copy = sandbox::scratch_checkout();
    let sandbox = Sandbox::new();
    let run = |args: &[&str]| {
        let out = sandbox.records_at(copy.path()).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let before = snapshot(copy.path());
    let edit = tempfile::tempdir().unwrap();
    let dir = edit.path().join("series");
    run(&["series", "export", dir.to_str().unwrap()]);
    let text = run(&["series", "import", dir.to_str().unwrap()]);
    assert!(text.contains("0 trainer file(s) of the checkout changed"), "{text}");
    assert!(snapshot(copy.path()) == before, "the import changed the checkout's files");
    assert!(run(&["series", "check"]).contains("series ok"));
}

/// Every file under the checkout's src/, tests/, patches/ and records/, with its bytes.
fn snapshot(root: &Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    fn walk(dir: &Path, out: &mut std::collections::BTreeMap<std::path::PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            match path.is_dir() {
                true => walk(&path, out),
                false => drop(out.insert(path.clone(), std::fs::read(&path).unwrap())),
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    for top in ["src", "tests", "patches", "records"] {
        walk(&root.join(top), &mut out);
    }
    out
}
