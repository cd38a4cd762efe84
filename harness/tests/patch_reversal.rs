//! Every commit of every patch the checkout has, as the series reads it: libgit2 parses it, and
//! the reversal the series renders (libgit2 applies forward only) reads back as built, while
//! reversing twice gives the commit's diff again byte for byte.
use records::series::mailbox;
use records::series::patch::{self, FilePatch};

mod sandbox;

#[test]
fn every_commit_of_every_patch_reverses_exactly() {
    let dir = sandbox::checkout().join("patches");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for (k, c) in mailbox::parse(&text).unwrap().iter().enumerate() {
            let at = format!("{name} commit {}", k + 1);
            let files = patch::parse(&c.diff).unwrap();
            let forward: String = files.iter().map(FilePatch::render).collect();
            assert_eq!(forward, c.diff, "{at}: rendered as written");
            let reversed: Vec<FilePatch> = files.iter().map(FilePatch::reversed).collect();
            let text: String = reversed.iter().map(FilePatch::render).collect();
            let read_back = patch::parse(&text).unwrap();
            assert_eq!(read_back, reversed, "{at}: libgit2 reads the reversal as built");
            let twice: String = read_back.iter().map(|f| f.reversed().render()).collect();
            assert_eq!(twice, c.diff, "{at}: reversed twice");
            let (added, removed) =
                files.iter().fold((0, 0), |a, f| (a.0 + f.counts().0, a.1 + f.counts().1));
            assert_eq!(c.counts(), (added, removed), "{at}: counts");
            checked += 1;
        }
    }
    assert!(checked > 60, "every patch's commits: {checked}");
}
