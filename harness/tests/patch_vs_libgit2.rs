//! The series' own diff parser held to libgit2's, on every commit of every patch the checkout
//! has. libgit2 applies the patches (series/apply.rs) but cannot reverse one or read a mailbox,
//! and its parse errors name no mailbox line; the parser that does must read each diff exactly
//! as libgit2 does: the same files, hunks, ranges and lines, forward and reversed.
use git2::{Diff, Patch};
use records::series::mailbox;
use records::series::patch::{self, FilePatch};

mod sandbox;

/// One hunk as libgit2 reads it: (old start, old lines, new start, new lines) and its body's
/// origin characters in order.
type Hunk = ((u32, u32, u32, u32), String);

fn libgit2_files(text: &str) -> Vec<(Option<String>, Option<String>, Vec<Hunk>)> {
    let diff = Diff::from_buffer(text.as_bytes()).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let path = |f: git2::DiffFile| f.path().map(|p| p.to_string_lossy().into_owned());
    (0..diff.deltas().len())
        .map(|i| {
            let patch = Patch::from_diff(&diff, i).unwrap().expect("a text diff");
            let delta = patch.delta();
            let (old, new) = match delta.status() {
                git2::Delta::Added => (None, path(delta.new_file())),
                git2::Delta::Deleted => (path(delta.old_file()), None),
                _ => (path(delta.old_file()), path(delta.new_file())),
            };
            let hunks = (0..patch.num_hunks())
                .map(|h| {
                    let (hunk, n) = patch.hunk(h).unwrap();
                    let range =
                        (hunk.old_start(), hunk.old_lines(), hunk.new_start(), hunk.new_lines());
                    let origins = (0..n)
                        .map(|l| patch.line_in_hunk(h, l).unwrap().origin())
                        .map(|o| if o == '>' || o == '<' || o == '=' { '\\' } else { o })
                        .collect();
                    (range, origins)
                })
                .collect();
            (old, new, hunks)
        })
        .collect()
}

fn ours(files: &[FilePatch]) -> Vec<(Option<String>, Option<String>, Vec<Hunk>)> {
    files
        .iter()
        .map(|f| {
            let hunks = f
                .hunks
                .iter()
                .map(|h| {
                    let range = (h.old.start, h.old.len, h.new.start, h.new.len);
                    (range, h.lines.iter().filter_map(|l| l.chars().next()).collect())
                })
                .collect();
            (f.old_path.clone(), f.new_path.clone(), hunks)
        })
        .collect()
}

#[test]
fn every_commit_of_every_patch_reads_as_libgit2_reads_it_both_ways() {
    let dir = sandbox::checkout().join("patches");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for (k, c) in mailbox::parse(&text).unwrap().iter().enumerate() {
            let at = format!("{name} commit {}", k + 1);
            let files = patch::parse(&c.diff).unwrap();
            assert_eq!(ours(&files), libgit2_files(&c.diff), "{at}");
            let reversed: Vec<FilePatch> = files.iter().map(FilePatch::reversed).collect();
            let text: String = reversed.iter().map(FilePatch::render).collect();
            assert_eq!(ours(&reversed), libgit2_files(&text), "{at}, reversed");
            let stats = Diff::from_buffer(c.diff.as_bytes()).unwrap().stats().unwrap();
            assert_eq!(c.counts(), (stats.insertions(), stats.deletions()), "{at}: counts");
            checked += 1;
        }
    }
    assert!(checked > 60, "every patch's commits: {checked}");
}
