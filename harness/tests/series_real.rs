//! The real series (records/ and patches/ of this repository, committed state): `series check`
//! passes; a review note whose line moved away from its anchor, a commit that ports another
//! upstream record than its row, and one corrupted hunk of patches/29.patch, are each reported
//! precisely.
use std::path::Path;
use std::process::{Command, Output};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn check(root: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_records"))
        .args(["series", "check"])
        .env("RECORDS_ROOT", root)
        .output()
        .unwrap()
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
    git2::Repository::clone(repo().to_str().unwrap(), dir.path()).unwrap();
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
    git2::Repository::clone(repo().to_str().unwrap(), dir.path()).unwrap();
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
    for args in [&["series", "check"][..], &["series", "tree", "54"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_records"))
            .args(args)
            .env("RECORDS_ROOT", dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stdout));
        assert!(err.contains("records/54.toml: record.tree = "), "{args:?}: {err}");
        assert!(err.contains("reverse-applying patches/62.patch gives #54 the tree"), "{err}");
        assert!(!err.contains("46.patch"), "{args:?}: {err}");
    }
    assert!(!dir.path().join("target/records/trees/54").exists());
}
