//! `records series export` / `import`: the series as an editable git history and back.
mod series_fixture;

use git2::Repository;
use series_fixture::{commit_all, stderr, stdout, Fixture};

fn history(repo: &Repository) -> Vec<String> {
    let mut walk = repo.revwalk().unwrap();
    walk.push_head().unwrap();
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE).unwrap();
    walk.map(|id| repo.find_commit(id.unwrap()).unwrap().message().unwrap().to_string()).collect()
}

#[test]
fn export_then_import_is_byte_identical() {
    let f = Fixture::new();
    let (p29, p38) = (f.read("patches/29.patch"), f.read("patches/38.patch"));
    let out_dir = tempfile::tempdir().unwrap();
    let dir = out_dir.path().join("edit");
    let out = f.records(&["series", "export", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("exported 4 commit(s)"));

    let repo = Repository::open(&dir).unwrap();
    let messages = history(&repo);
    assert_eq!(messages.len(), 4);
    assert!(messages[0].starts_with("Record #1: Record 1 title"));
    assert!(messages[1].starts_with("Add value embeddings\n\nA second embedding table"));
    assert!(messages[1].ends_with("\nRecords-Patch: 29\n"));
    assert!(messages[3].ends_with("\nRecords-Patch: 38\n"));
    // The export's working tree is the newest record's trainer.
    assert_eq!(
        std::fs::read_to_string(dir.join("src/model.rs")).unwrap(),
        series_fixture::MODEL_38
    );
    assert!(!dir.join("src/old.rs").exists() && !dir.join("records").exists());

    let out = f.records(&["series", "import", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("0 trainer file(s) of the checkout changed"), "{}", stdout(&out));
    assert_eq!(f.read("patches/29.patch"), p29);
    assert_eq!(f.read("patches/38.patch"), p38);
    assert_eq!(f.trainer_files(), f.trees[&38]);

    let out = f.records(&["series", "export", dir.to_str().unwrap()]);
    assert!(stderr(&out).contains("is not empty"), "{}", stderr(&out));
}

#[test]
fn an_edited_history_rewrites_patches_and_the_tip() {
    let f = Fixture::new();
    let dir = tempfile::tempdir().unwrap();
    records::series::export::export(f.root(), dir.path()).unwrap();
    // A maintainer adds a commit on top without a trailer: it joins the last record (#38).
    let repo = Repository::open(dir.path()).unwrap();
    let lib = series_fixture::LIB_38.replace("0.2", "0.25");
    std::fs::write(dir.path().join("src/lib.rs"), &lib).unwrap();
    commit_all(&repo, "Nudge the learning rate\n\nA follow-up found 0.25 a little better.", 50);

    let done = records::series::export::import(f.root(), dir.path()).unwrap();
    assert_eq!(done.patches, [(29, 2), (38, 2)]);
    assert_eq!(done.tip_changes, 1);
    assert_eq!(f.read("src/lib.rs"), lib);
    let p38 = records::series::mailbox::parse(&f.read("patches/38.patch")).unwrap();
    assert_eq!(p38[1].subject, "Nudge the learning rate");
    assert_eq!(p38[1].body, "A follow-up found 0.25 a little better.");
    assert!(!f.read("patches/38.patch").contains("Records-Patch"));
    // The rewritten series still holds: #29's tree is unchanged, the check passes.
    let tree = records::series::materialize(f.root(), 29).unwrap();
    assert_eq!(std::fs::read_to_string(tree.join("src/lib.rs")).unwrap(), series_fixture::LIB_29);
    let out = f.records(&["series", "check"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn import_refuses_a_history_that_skips_a_record() {
    let f = Fixture::new();
    let dir = tempfile::tempdir().unwrap();
    records::series::export::export(f.root(), dir.path()).unwrap();
    // Re-label #38's commit as #29's: the chain then lacks #38.
    let repo = Repository::open(dir.path()).unwrap();
    let head = repo.head().unwrap().peel_to_commit().unwrap();
    let msg = head.message().unwrap().replace("Records-Patch: 38", "Records-Patch: 29");
    head.amend(Some("HEAD"), None, None, None, Some(&msg), None).unwrap();
    let before = f.read("patches/29.patch");
    let err = records::series::export::import(f.root(), dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("belong to records [29]") && err.contains("the chain after #1 is [29, 38]"),
        "{err}"
    );
    assert_eq!(f.read("patches/29.patch"), before, "nothing is written on error");
}
