//! `records series tree N --out DIR`: a record's trainer tree written where the user asks, never
//! over a folder of theirs.
mod series_fixture;

use series_fixture::{read_files, stderr, stdout, Fixture};

#[test]
fn tree_goes_to_the_folder_given() {
    let f = Fixture::new();
    let out_dir = tempfile::tempdir().unwrap();
    let dest = out_dir.path().join("tree-1");
    let dest_arg = dest.to_str().unwrap();
    let out = f.records(&["series", "tree", "1", "--out", dest_arg]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), dest_arg);
    assert_eq!(read_files(&dest, &[".records-tree"]), f.trees[&1]);
    assert!(!f.root().join("target/records/trees/01").exists(), "the default folder is untouched");

    // The same folder again, now for #38: a folder holding a tree is replaced.
    let out = f.records(&["series", "tree", "38", "--out", dest_arg]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read_files(&dest, &[".records-tree"]), f.trees[&38]);

    // An empty folder is fine too.
    let empty = out_dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = f.records(&["series", "tree", "29", "--out", empty.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read_files(&empty, &[".records-tree"]), f.trees[&29]);
}

#[test]
fn a_folder_of_the_user_s_is_never_replaced() {
    let f = Fixture::new();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("thesis.tex"), "years of work").unwrap();
    let out = f.records(&["series", "tree", "1", "--out", dir.path().to_str().unwrap()]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("is not empty and holds no tree"), "{err}");
    assert_eq!(std::fs::read_to_string(dir.path().join("thesis.tex")).unwrap(), "years of work");
}
