//! The series engine on a fixture of three records (#1 → #29 → #38): mailbox split, trees by
//! reverse-applying patches, forward re-application (`series check`), capture and the errors.
mod series_fixture;

use records::catalog::RecordId;
use records::series::{self, mailbox, Series};
use series_fixture::{read_files, stderr, stdout, Fixture};

/// What `git format-patch` writes for two commits, with a folded subject, a diffstat, git's
/// signature, and a removed line that reads like a signature (`-- `).
const GIT_MBOX: &str = "From 5b1d4c0a2f0d1b8c3e4f5a6b7c8d9e0f1a2b3c4d Mon Sep 17 00:00:00 2001
From: =?UTF-8?q?J=C3=BCrgen_Muon?= <j@example.org>
Date: Mon, 22 Dec 2025 10:00:00 +0100
Subject: [PATCH 1/2] Multi-token prediction: the loss averages the next k
 tokens

Predict k tokens ahead.

The weights decay over training.
---
 src/head.rs | 3 ++-
 1 file changed, 2 insertions(+), 1 deletion(-)

diff --git a/src/head.rs b/src/head.rs
index 1111111..2222222 100644
--- a/src/head.rs
+++ b/src/head.rs
@@ -1,3 +1,4 @@
 fn head() {
-- 
+    mtp();
+    loss();
 }
-- 
2.47.3


From 6c2e5d1b3a1e2c9d4f5a6b7c8d9e0f1a2b3c4d5e Mon Sep 17 00:00:00 2001
From: Ada <ada@example.org>
Date: Tue, 23 Dec 2025 08:30:00 +0000
Subject: [PATCH 2/2] Untie the head

---
 src/untie.rs | 1 +
 1 file changed, 1 insertion(+)
 create mode 100644 src/untie.rs

diff --git a/src/untie.rs b/src/untie.rs
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/src/untie.rs
@@ -0,0 +1 @@
+pub fn untie() {}
-- 
2.47.3

";

#[test]
fn mbox_splits_into_commits() {
    let commits = mailbox::parse(GIT_MBOX).unwrap();
    assert_eq!(commits.len(), 2);
    let c = &commits[0];
    assert_eq!(c.author, "Jürgen Muon <j@example.org>");
    assert_eq!(c.author_parts(), ("Jürgen Muon", "j@example.org"));
    assert_eq!(c.subject, "Multi-token prediction: the loss averages the next k tokens");
    assert_eq!(c.body, "Predict k tokens ahead.\n\nThe weights decay over training.");
    assert!(c.diff.starts_with("diff --git a/src/head.rs b/src/head.rs\n"));
    // The hunk's removed `-- ` line is part of the diff; git's signature is not.
    assert!(c.diff.ends_with("-- \n+    mtp();\n+    loss();\n }\n"), "{:?}", c.diff);
    assert_eq!(c.counts(), (2, 1));
    assert_eq!(c.time(), Some((1_766_394_000, 60)));
    let d = &commits[1];
    assert_eq!((d.subject.as_str(), d.body.as_str()), ("Untie the head", ""));
    assert!(d.diff.ends_with("+pub fn untie() {}\n"));
    // libgit2 reads every split diff.
    for c in &commits {
        git2::Diff::from_buffer(c.diff.as_bytes()).unwrap();
    }
    // Our own form parses back to the same commits, and re-writes byte for byte.
    let ours = mailbox::write(&commits).unwrap();
    assert!(ours.contains("Subject: [PATCH 1/2] Multi-token prediction"));
    assert!(ours.contains(" src/head.rs | 3 ++-\n"));
    assert_eq!(mailbox::parse(&ours).unwrap(), commits);
    assert_eq!(mailbox::write(&mailbox::parse(&ours).unwrap()).unwrap(), ours);
}

#[test]
fn mbox_errors_name_the_line() {
    let err = mailbox::parse("hello\n").unwrap_err();
    assert_eq!(err.line, 1);
    let cut = GIT_MBOX.replace("+    loss();\n }\n", "");
    let err = mailbox::parse(&cut).unwrap_err();
    assert!(err.what.contains("src/head.rs"), "{err}");
    // Cut short, the hunk takes git's signature (`-- `) as a removed line and fails on its
    // version line, the mailbox's 23rd.
    assert_eq!(err.line, 23, "{err}");
}

#[test]
fn capture_writes_one_email_per_commit() {
    let f = Fixture::new();
    let p29 = f.read("patches/29.patch");
    let commits = mailbox::parse(&p29).unwrap();
    let subjects: Vec<&str> = commits.iter().map(|c| c.subject.as_str()).collect();
    assert_eq!(subjects, ["Add value embeddings", "Raise the learning rate to 0.2"]);
    assert_eq!(commits[0].author, "Ada Lovelace <ada@example.org>");
    assert_eq!(commits[0].date, "Sun, 15 Jun 2025 17:06:50 +0200");
    assert!(commits[0].body.starts_with("A second embedding table"));
    assert!(commits[0].diff.contains("new file mode 100644\n"));
    // Only trainer files: the manifest committed alongside is not in the patch.
    assert!(!p29.contains("records/29.toml"));
    let p38 = f.read("patches/38.patch");
    assert!(
        p38.contains("deleted file mode 100644") && p38.contains("--- a/src/old.rs\n+++ /dev/null")
    );

    // Only the newest record can be captured, and an existing patch needs --force.
    let base = f.base.to_string();
    let err = series::capture::capture(f.root(), 29, &base, false).unwrap_err().to_string();
    assert!(err.contains("not the newest record (#38)"), "{err}");
    let err = series::capture::capture(f.root(), 38, &base, false).unwrap_err().to_string();
    assert!(err.contains("exists; pass --force"), "{err}");
    let err = series::capture::capture(f.root(), 38, "no-such-rev", true).unwrap_err().to_string();
    assert!(err.contains("no-such-rev"), "{err}");
}

#[test]
fn trees_round_trip_through_the_series() {
    let f = Fixture::new();
    let series = Series::load(f.root()).unwrap();
    assert_eq!(series.numbers(), [1, 29, 38]);
    for n in [38, 29, 1] {
        let dir = series::materialize(f.root(), n).unwrap();
        assert_eq!(dir, f.root().join(format!("target/records/trees/{n:02}")));
        let mut got = read_files(&dir, &[]);
        assert!(got.remove(series::tree::MARKER).is_some());
        assert_eq!(got, f.trees[&n], "tree of #{n}");
    }
    // The checkout itself is untouched.
    assert_eq!(f.trainer_files(), f.trees[&38]);
    // Forward: each patch applied to its parent's tree gives the record's tree.
    let repo = series::apply::scratch_repo().unwrap();
    let trees = series.trees(&repo, 1).unwrap();
    for (parent, n) in [(1, 29), (29, 38)] {
        let after = series.forward(&repo, n, trees[&RecordId::main(parent)]).unwrap();
        assert_eq!(after.last(), Some(&trees[&RecordId::main(n)]));
    }
    assert_eq!(series.forward(&repo, 29, trees[&RecordId::main(1)]).unwrap().len(), 2);
}

#[test]
fn uncommitted_edits_replay_and_unchanged_trees_are_kept() {
    let f = Fixture::new();
    let dir = series::materialize(f.root(), 1).unwrap();
    let marker = std::fs::metadata(dir.join("src/lib.rs")).unwrap().modified().unwrap();
    // Same tree again: the directory is left as it was (no rewrite, no rebuild).
    std::fs::write(dir.join("scratch.txt"), "kept").unwrap();
    series::materialize(f.root(), 1).unwrap();
    assert!(dir.join("scratch.txt").exists());
    assert_eq!(std::fs::metadata(dir.join("src/lib.rs")).unwrap().modified().unwrap(), marker);
    // An uncommitted edit away from the patches' hunks: refused until the trees are recorded,
    // then it shows in every older tree.
    f.write(
        "src/model.rs",
        &series_fixture::MODEL_38.replace("//! The model.", "//! The model (edited)."),
    );
    let err = format!("{:#}", series::materialize(f.root(), 1).unwrap_err());
    assert!(err.contains("a trainer file changed outside the series"), "{err}");
    series::recorded::record(f.root()).unwrap();
    let dir = series::materialize(f.root(), 1).unwrap();
    assert!(!dir.join("scratch.txt").exists());
    let model = std::fs::read_to_string(dir.join("src/model.rs")).unwrap();
    assert_eq!(model, series_fixture::MODEL_1.replace("//! The model.", "//! The model (edited)."));
    f.write("src/extra.rs", "// new\n");
    series::recorded::record(f.root()).unwrap();
    let dir = series::materialize(f.root(), 29).unwrap();
    assert_eq!(std::fs::read_to_string(dir.join("src/extra.rs")).unwrap(), "// new\n");
}

#[test]
fn series_check_passes_on_the_fixture() {
    let f = Fixture::new();
    let out = f.records(&["series", "check"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("ok   #1 ") && text.contains("ok   #29 ") && text.contains("ok   #38 "),
        "{text}"
    );
    assert!(text.contains("#29  2 commit(s), +"), "{text}");
    assert!(text.contains("series ok: 3 record(s)"));
}

#[test]
fn a_corrupted_hunk_is_named_precisely() {
    let f = Fixture::new();
    let p38 = f.read("patches/38.patch");
    assert!(p38.contains("+    h + 1.5\n"));
    f.write("patches/38.patch", &p38.replace("+    h + 1.5\n", "+    h + 9.5\n"));
    let out = f.records(&["series", "check"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    for part in [
        "record #38",
        "patches/38.patch",
        "commit 1/1",
        "\"Drop the old module, soften the head\"",
        "src/model.rs",
        "src/model.rs: hunk `@@ -15,9 +15,9 @@",
        "did not apply",
    ] {
        assert!(err.contains(part), "missing {part:?} in {err}");
    }
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn missing_patches_and_unknown_records_are_explained() {
    let f = Fixture::new();
    let out = f.records(&["series", "tree", "46"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("unknown record 46; known records: 1, 29, 38"),
        "{}",
        stderr(&out)
    );

    std::fs::remove_file(f.root().join("patches/29.patch")).unwrap();
    let out = f.records(&["series", "tree", "1"]);
    let err = stderr(&out);
    assert!(err.contains("record #29 has no patch") && err.contains("patches/29.patch"), "{err}");

    let f = Fixture::new();
    f.write("patches/46.patch", "");
    let out = f.records(&["series", "check"]);
    assert!(stderr(&out).contains("46.patch has no manifest"), "{}", stderr(&out));

    let f = Fixture::new();
    let m = f.read("records/29.toml").replace("line = 2\n", "line = 400\n");
    f.write("records/29.toml", &m);
    let out = f.records(&["series", "check"]);
    assert!(
        stderr(&out).contains("note at src/model.rs:400: the file has only 23 lines"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn series_tree_prints_the_materialized_dir() {
    let f = Fixture::new();
    let out = f.records(&["series", "tree", "29"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = std::path::PathBuf::from(stdout(&out).trim());
    assert_eq!(std::fs::read_to_string(dir.join("src/lib.rs")).unwrap(), series_fixture::LIB_29);
}

/// What `mailbox::write` makes is what `git am` takes: authors (non-ASCII too), subjects,
/// messages and diffs come through, commit by commit.
#[test]
fn git_am_applies_our_mailbox() {
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
            .args(args)
            .current_dir(repo.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(&["init", "-q"]);
    std::fs::create_dir(repo.path().join("src")).unwrap();
    std::fs::write(repo.path().join("src/head.rs"), "fn head() {\n- \n}\n").unwrap();
    git(&["add", "-A"]);
    git(&["commit", "-qm", "base"]);
    let mbox = repo.path().join("ours.patch");
    let ours = mailbox::write(&mailbox::parse(GIT_MBOX).unwrap()).unwrap();
    std::fs::write(&mbox, ours).unwrap();
    git(&["am", "-q", mbox.to_str().unwrap()]);
    let log = git(&["log", "--format=%an <%ae>|%s|%b", "-2"]);
    assert!(log.contains("Ada <ada@example.org>|Untie the head|"), "{log}");
    assert!(
        log.contains("Jürgen Muon <j@example.org>|Multi-token prediction: the loss averages the next k tokens|Predict k tokens ahead."),
        "{log}"
    );
    let head = std::fs::read_to_string(repo.path().join("src/head.rs")).unwrap();
    assert_eq!(head, "fn head() {\n    mtp();\n    loss();\n}\n");
    assert!(repo.path().join("src/untie.rs").is_file());
}
