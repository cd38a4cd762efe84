//! A commit's diff as libgit2 reads it (`git2::Diff::from_buffer`), held as files and hunks:
//! reversed (libgit2 applies a diff forward only, and the series walks backwards), counted
//! (stats) and line-mapped (anchoring review notes).
use git2::{Delta, Diff, DiffFormat, Patch};
use thiserror::Error;

/// A diff text that libgit2 cannot read, or one a record patch may not hold.
#[derive(Debug, Error, PartialEq)]
pub enum PatchError {
    /// libgit2's message, with the file it was reading where one can be told, and the diff
    /// line (from 1) it names, or else where that file's part starts.
    #[error("{}{what}", file.as_ref().map(|f| format!("{f}: ")).unwrap_or_default())]
    Malformed { file: Option<String>, what: String, line: Option<usize> },
    #[error("{file}: {what} is not supported in record patches (text diffs only)")]
    Unsupported { file: String, what: String },
}

impl PatchError {
    /// The diff line the error is about, counted from 1 within the diff.
    pub fn line(&self) -> Option<usize> {
        match self {
            PatchError::Malformed { line, .. } => *line,
            PatchError::Unsupported { .. } => None,
        }
    }
}

/// One file's part of a diff.
#[derive(Debug, Clone, PartialEq)]
pub struct FilePatch {
    /// `None` where the file is created.
    pub old_path: Option<String>,
    /// `None` where the file is deleted.
    pub new_path: Option<String>,
    /// Git's file modes (0o100644, 0o100755); 0 on the side that does not exist.
    pub old_mode: u32,
    pub new_mode: u32,
    /// The blob ids of the `index` line, abbreviated as the diff writes them.
    pub old_id: String,
    pub new_id: String,
    pub hunks: Vec<Hunk>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Hunk {
    pub old: Range,
    pub new: Range,
    /// What follows the closing `@@` (git's function context), with the newline.
    pub section: String,
    /// Body lines with their origin character (` `, `+`, `-`, `\`) and newline.
    pub lines: Vec<String>,
}

/// A hunk range: its first line and how many lines it spans.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub start: u32,
    pub len: u32,
}

/// Git writes a range of one line without its length (`-10 +11`).
impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.len {
            1 => write!(f, "{}", self.start),
            len => write!(f, "{},{len}", self.start),
        }
    }
}

impl Hunk {
    /// `@@ -a,b +c,d @@ section` without the newline.
    pub fn header(&self) -> String {
        format!("@@ -{} +{} @@{}", self.old, self.new, self.section.trim_end_matches('\n'))
    }

    /// The first line each side's walk starts at (a zero-length range names the line before).
    fn first_lines(&self) -> (u32, u32) {
        let first = |r: Range| if r.len == 0 { r.start + 1 } else { r.start };
        (first(self.old), first(self.new))
    }

    /// Each body line with its new-side line number (`None` for removed lines and markers).
    pub fn numbered_lines(&self) -> Vec<(Option<u32>, &str)> {
        let (_, mut new) = self.first_lines();
        self.lines
            .iter()
            .map(|l| match l.as_bytes().first() {
                Some(b'-') | Some(b'\\') => (None, l.as_str()),
                _ => {
                    new += 1;
                    (Some(new - 1), l.as_str())
                }
            })
            .collect()
    }
}

impl FilePatch {
    /// The file's path in the newer tree, or in the older one where it is deleted.
    pub fn path(&self) -> &str {
        self.new_path.as_deref().or(self.old_path.as_deref()).unwrap_or("")
    }

    /// Lines added and removed.
    pub fn counts(&self) -> (usize, usize) {
        let mut c = (0, 0);
        for l in self.hunks.iter().flat_map(|h| &h.lines) {
            match l.as_bytes().first() {
                Some(b'+') => c.0 += 1,
                Some(b'-') => c.1 += 1,
                _ => {}
            }
        }
        c
    }

    /// Where line `old_line` of the old file ends up in the new file; `None` when the patch
    /// removes it or deletes the file.
    pub fn map_line(&self, old_line: u32) -> Option<u32> {
        self.new_path.as_ref()?;
        let mut offset: i64 = 0;
        for h in &self.hunks {
            let (mut o, mut n) = h.first_lines();
            if old_line < o {
                break;
            }
            for l in &h.lines {
                match l.as_bytes().first() {
                    Some(b'+') => n += 1,
                    Some(b'-') if o == old_line => return None,
                    Some(b'-') => o += 1,
                    Some(b'\\') => {}
                    _ if o == old_line => return Some(n),
                    _ => {
                        o += 1;
                        n += 1;
                    }
                }
            }
            offset = n as i64 - o as i64;
        }
        u32::try_from(old_line as i64 + offset).ok()
    }

    /// The patch that undoes this one: sides, names, modes and line origins swapped.
    pub fn reversed(&self) -> FilePatch {
        let swap = |l: &String| match l.as_bytes().first() {
            Some(b'+') => format!("-{}", &l[1..]),
            Some(b'-') => format!("+{}", &l[1..]),
            _ => l.clone(),
        };
        let hunks = self
            .hunks
            .iter()
            .map(|h| Hunk {
                old: h.new,
                new: h.old,
                section: h.section.clone(),
                lines: h.lines.iter().map(swap).collect(),
            })
            .collect();
        FilePatch {
            old_path: self.new_path.clone(),
            new_path: self.old_path.clone(),
            old_mode: self.new_mode,
            new_mode: self.old_mode,
            old_id: self.new_id.clone(),
            new_id: self.old_id.clone(),
            hunks,
        }
    }

    /// The `---`/`+++` names: `a/<old path>` and `b/<new path>`, `/dev/null` for a side that
    /// does not exist.
    pub fn side_names(&self) -> (String, String) {
        let side = |p: &Option<String>, prefix: &str| match p {
            Some(p) => format!("{prefix}{p}"),
            None => "/dev/null".into(),
        };
        (side(&self.old_path, "a/"), side(&self.new_path, "b/"))
    }

    /// This file's diff in git's form, its extended header lines in git's order (a patch holds
    /// no renames: see `file_patch`).
    pub fn render(&self) -> String {
        let path = self.path();
        let (old, new) = (self.old_path.as_deref(), self.new_path.as_deref());
        let mut s = format!("diff --git a/{} b/{}\n", old.unwrap_or(path), new.unwrap_or(path));
        match (old, new) {
            (None, _) => s += &format!("new file mode {:o}\n", self.new_mode),
            (_, None) => s += &format!("deleted file mode {:o}\n", self.old_mode),
            _ if self.old_mode != self.new_mode => {
                s += &format!("old mode {:o}\nnew mode {:o}\n", self.old_mode, self.new_mode);
            }
            _ => {}
        }
        // The mode of a file both sides have is on the index line (libgit2 takes 100644 when a
        // diff names none).
        let mode = match self.old_mode == self.new_mode && old.is_some() && new.is_some() {
            true => format!(" {:o}", self.new_mode),
            false => String::new(),
        };
        s += &format!("index {}..{}{mode}\n", self.old_id, self.new_id);
        if !self.hunks.is_empty() {
            let (a, b) = self.side_names();
            s += &format!("--- {a}\n+++ {b}\n");
        }
        for h in &self.hunks {
            s += &format!("@@ -{} +{} @@{}", h.old, h.new, h.section);
            s.extend(h.lines.iter().map(String::as_str));
        }
        s
    }
}

/// Reads a whole diff text with libgit2.
pub fn parse(text: &str) -> Result<Vec<FilePatch>, PatchError> {
    let diff = read(text)?;
    (0..diff.deltas().len()).map(|i| file_patch(&diff, i)).collect()
}

/// The diff at the start of `text` (an email's, which its signature follows), as libgit2 reads
/// and prints it: the text it took, byte for byte.
pub fn leading(text: &str) -> Result<String, PatchError> {
    let diff = read(text)?;
    let mut out = Vec::new();
    diff.print(DiffFormat::Patch, |_, _, line| {
        if matches!(line.origin(), '+' | '-' | ' ') {
            out.push(line.origin() as u8);
        }
        out.extend_from_slice(line.content());
        true
    })
    .map_err(|e| malformed(None, &e))?;
    let printed = String::from_utf8_lossy(&out).into_owned();
    match text.starts_with(&printed) {
        true => Ok(printed),
        false => Err(PatchError::Malformed {
            file: None,
            line: None,
            what: "libgit2 reads this diff other than it is written (fix the patch by hand or rewrite it with `records series export`/`import`)".into(),
        }),
    }
}

/// libgit2's error, with the diff line its message names ("... at line 6").
fn malformed(file: Option<String>, e: &git2::Error) -> PatchError {
    let what = e.message().to_string();
    let line = what.rsplit_once(" at line ").and_then(|(_, n)| n.parse().ok());
    PatchError::Malformed { file, what, line }
}

/// libgit2's diff of `text`; when it fails, the file it failed in is found by reading each
/// file's part alone, and the line is libgit2's or else that file's `diff --git` line.
fn read(text: &str) -> Result<Diff<'static>, PatchError> {
    Diff::from_buffer(text.as_bytes()).map_err(|e| {
        // (first line, text) of each file's part
        let mut parts: Vec<(usize, String)> = Vec::new();
        for (i, l) in text.split_inclusive('\n').enumerate() {
            match (l.starts_with("diff --git "), parts.last_mut()) {
                (false, Some((_, last))) => last.push_str(l),
                _ => parts.push((i + 1, l.to_string())),
            }
        }
        let failing = parts.iter().find(|(_, p)| Diff::from_buffer(p.as_bytes()).is_err());
        let mut err = malformed(failing.and_then(|(_, p)| Some(git_path(p.lines().next()?))), &e);
        if let (PatchError::Malformed { line: line @ None, .. }, Some((first, _))) =
            (&mut err, failing)
        {
            *line = Some(*first);
        }
        err
    })
}

/// The new side's path on a `diff --git a/X b/X` line (the failing file's name in an error).
fn git_path(line: &str) -> String {
    let rest = line.strip_prefix("diff --git ").unwrap_or(line);
    rest.rsplit_once(" b/").map_or(rest, |(_, b)| b).to_string()
}

/// The `i`th file of `diff`, refusing what a record patch may not hold.
fn file_patch(diff: &Diff, i: usize) -> Result<FilePatch, PatchError> {
    let patch = Patch::from_diff(diff, i).map_err(|e| malformed(None, &e))?;
    let delta = diff.get_delta(i).expect("a delta per index");
    let path = |f: git2::DiffFile| f.path().map(|p| p.to_string_lossy().into_owned());
    let (old, new) = (path(delta.old_file()), path(delta.new_file()));
    let name = new.clone().or(old.clone()).unwrap_or_default();
    let refuse = |what: &str| PatchError::Unsupported { file: name.clone(), what: what.into() };
    let (old_path, new_path) = match delta.status() {
        Delta::Added => (None, new),
        Delta::Deleted => (old, None),
        Delta::Modified => (old, new),
        // libgit2 keeps no similarity to write a reversed rename with.
        Delta::Renamed => return Err(refuse("a rename (write it as a deletion and an addition)")),
        Delta::Copied => return Err(refuse("a copy")),
        other => return Err(refuse(&format!("a {other:?} file"))),
    };
    let patch = match patch {
        Some(p) if !delta.flags().is_binary() => p,
        _ => return Err(refuse("a binary diff")),
    };
    let hunks = (0..patch.num_hunks()).map(|h| hunk(&patch, h)).collect::<Result<_, _>>();
    let mode = |f: git2::DiffFile| u32::from(f.mode());
    Ok(FilePatch {
        old_mode: if old_path.is_some() { mode(delta.old_file()) } else { 0 },
        new_mode: if new_path.is_some() { mode(delta.new_file()) } else { 0 },
        old_id: abbreviated(delta.old_file().id()),
        new_id: abbreviated(delta.new_file().id()),
        old_path,
        new_path,
        hunks: hunks.map_err(|e| malformed(Some(name.clone()), &e))?,
    })
}

/// An `index` line's id: libgit2 keeps an abbreviated one zero-padded to full length, so
/// the trailing zeros are dropped down to git's seven digits.
fn abbreviated(id: git2::Oid) -> String {
    let hex = id.to_string();
    let kept = hex.trim_end_matches('0').len().max(7);
    hex[..kept].to_string()
}

/// Hunk `h` of `patch`: its ranges, its section and its lines as the diff writes them (git's
/// "\ No newline at end of file" marker is its own line after the one it is about).
fn hunk(patch: &Patch, h: usize) -> Result<Hunk, git2::Error> {
    let (head, n) = patch.hunk(h)?;
    let header = String::from_utf8_lossy(head.header()).into_owned();
    let section = header.splitn(3, "@@").nth(2).unwrap_or("\n").to_string();
    let mut lines: Vec<String> = Vec::with_capacity(n);
    for l in 0..n {
        let line = patch.line_in_hunk(h, l)?;
        let content = String::from_utf8_lossy(line.content());
        match line.origin() {
            o @ ('+' | '-' | ' ') => lines.push(format!("{o}{content}")),
            // The marker's content is "\n\ No newline at end of file\n": the newline the line
            // before lacks in the file, and the marker.
            _ => {
                if let Some(last) = lines.last_mut().filter(|l| !l.ends_with('\n')) {
                    last.push('\n');
                }
                lines.push(content.trim_start_matches('\n').to_string());
            }
        }
    }
    Ok(Hunk {
        old: Range { start: head.old_start(), len: head.old_lines() },
        new: Range { start: head.new_start(), len: head.new_lines() },
        section,
        lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &str = "diff --git a/src/a.rs b/src/a.rs
index 1111111..2222222 100644
--- a/src/a.rs
+++ b/src/a.rs
@@ -1,3 +1,4 @@ fn main() {
 one
-two
+deux
+zwei
 three
@@ -10 +11 @@
-ten
+dix
diff --git a/src/new.rs b/src/new.rs
new file mode 100755
index 0000000..3333333
--- /dev/null
+++ b/src/new.rs
@@ -0,0 +1,2 @@
+fn f() {}
+-- 
\\ No newline at end of file
";

    #[test]
    fn reads_as_written_and_renders_byte_identical() {
        let files = parse(DIFF).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].hunks.len(), 2);
        assert_eq!(files[0].hunks[1].old, Range { start: 10, len: 1 });
        assert_eq!(files[0].hunks[0].section, " fn main() {\n");
        assert_eq!((files[0].old_id.as_str(), files[0].new_id.as_str()), ("1111111", "2222222"));
        assert_eq!((files[1].old_path.as_deref(), files[1].new_mode), (None, 0o100755));
        assert_eq!(files[1].path(), "src/new.rs");
        assert_eq!(files[0].counts(), (3, 2));
        assert_eq!(
            files[1].hunks[0].lines,
            ["+fn f() {}\n", "+-- \n", "\\ No newline at end of file\n"]
        );
        let text: String = files.iter().map(FilePatch::render).collect();
        assert_eq!(text, DIFF);
        assert_eq!(leading(&format!("{DIFF}-- \nrecords\n\n")).unwrap(), DIFF);
    }

    #[test]
    fn reversing_twice_is_identity_and_swaps_sides() {
        let files = parse(DIFF).unwrap();
        let rev: Vec<FilePatch> = files.iter().map(FilePatch::reversed).collect();
        let text: String = rev.iter().map(FilePatch::render).collect();
        assert!(text.contains("diff --git a/src/new.rs b/src/new.rs\ndeleted file mode 100755\nindex 3333333..0000000\n--- a/src/new.rs\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-fn f() {}\n--- \n\\ No newline"), "{text}");
        assert!(text.contains("@@ -1,4 +1,3 @@ fn main() {\n one\n+two\n-deux\n-zwei\n three\n@@ -11 +10 @@\n+ten\n-dix\n"));
        assert!(text.contains("index 2222222..1111111 100644\n--- a/src/a.rs\n+++ b/src/a.rs\n"));
        assert_eq!(parse(&text).unwrap(), rev, "libgit2 reads the reversal as built");
        let back: String = parse(&text).unwrap().iter().map(|f| f.reversed().render()).collect();
        assert_eq!(back, DIFF);
    }

    #[test]
    fn modes_survive_reversal_and_renames_are_refused() {
        let diff = "diff --git a/x b/x\nold mode 100644\nnew mode 100755\nindex 1111111..2222222\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n";
        let f = &parse(diff).unwrap()[0];
        assert_eq!((f.old_mode, f.new_mode), (0o100644, 0o100755));
        assert_eq!(f.render(), diff);
        let r = f.reversed();
        assert_eq!(parse(&r.render()).unwrap()[0], r);
        let renamed = "diff --git a/x b/y\nsimilarity index 90%\nrename from x\nrename to y\n";
        let err = parse(renamed).unwrap_err().to_string();
        assert!(err.contains("y: a rename"), "{err}");
    }

    #[test]
    fn maps_lines_through_hunks() {
        let f = &parse(DIFF).unwrap()[0];
        assert_eq!(f.map_line(1), Some(1));
        assert_eq!(f.map_line(2), None);
        assert_eq!(f.map_line(3), Some(4));
        assert_eq!(f.map_line(5), Some(6));
        assert_eq!(f.map_line(10), None);
        assert_eq!(f.map_line(12), Some(13));
        let numbered = f.hunks[0].numbered_lines();
        assert_eq!(numbered[2], (Some(2), "+deux\n"));
        assert_eq!(numbered[4], (Some(4), " three\n"));
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let short = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n";
        let two = format!("{DIFF}{short}");
        let err = parse(&two).unwrap_err();
        assert!(matches!(&err, PatchError::Malformed { file: Some(f), .. } if f == "x"), "{err}");
        assert_eq!(err.line(), Some(DIFF.lines().count() + 1), "the short file's first line");
        let stray = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\nzz\n b\n";
        assert_eq!(parse(stray).unwrap_err().line(), Some(6));
        let bin =
            "diff --git a/x b/x\nindex 1111111..2222222 100644\nBinary files a/x and b/x differ\n";
        assert!(matches!(parse(bin), Err(PatchError::Unsupported { .. })), "{:?}", parse(bin));
    }
}
