//! Where a manifest's notes land in a record's patch: each at the body line whose line,
//! followed through the later commits, is the note's line in the record's tree.
use crate::catalog::Note;
use crate::series::patch::FilePatch;
use std::collections::BTreeMap;

/// Where a note lands: commit, file, hunk and body line of the record's patch.
pub type Spot = (usize, usize, usize, usize);

/// Anchors each note at a body line of the patch; an added line wins over a context line.
/// Notes that anchor nowhere come back loose.
pub fn place_notes<'n>(
    notes: &'n [Note],
    commits: &[Vec<FilePatch>],
) -> (BTreeMap<Spot, Vec<&'n Note>>, Vec<&'n Note>) {
    let mut placed: BTreeMap<Spot, Vec<&Note>> = BTreeMap::new();
    let mut loose = Vec::new();
    for note in notes {
        let mut best: Option<(bool, Spot)> = None;
        for (ci, files) in commits.iter().enumerate() {
            for (fi, f) in files.iter().enumerate() {
                let Some(path) = f.new_path.as_deref().filter(|&p| p == note.file) else {
                    continue;
                };
                for (hi, h) in f.hunks.iter().enumerate() {
                    for (li, (num, text)) in h.numbered_lines().into_iter().enumerate() {
                        let final_line = num.and_then(|l| follow(path, l, &commits[ci + 1..]));
                        if final_line == Some(note.line) {
                            let added = text.starts_with('+');
                            if best.is_none_or(|(b_added, _)| added && !b_added) {
                                best = Some((added, (ci, fi, hi, li)));
                            }
                        }
                    }
                }
            }
        }
        match best {
            Some((_, spot)) => placed.entry(spot).or_default().push(note),
            None => loose.push(note),
        }
    }
    (placed, loose)
}

/// Line `line` of `path` after one commit, followed through the `later` commits.
fn follow(path: &str, line: u32, later: &[Vec<FilePatch>]) -> Option<u32> {
    let mut line = line;
    for files in later {
        if let Some(f) = files.iter().find(|f| f.old_path.as_deref() == Some(path)) {
            line = f.map_line(line)?;
        }
    }
    Some(line)
}
