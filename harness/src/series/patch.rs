//! Git's unified diff text, parsed into files and hunks: reversed exactly (for walking the series
//! backwards), counted (for stats) and line-mapped (for anchoring review notes).
use thiserror::Error;

/// A diff text that this module cannot read; `line` counts from 1 within the diff.
#[derive(Debug, Error, PartialEq)]
pub enum PatchError {
    #[error("diff line {line}: {what}")]
    Malformed { line: usize, what: String },
    #[error("{file}: {what} is not supported in record patches (text diffs only)")]
    Unsupported { file: String, what: String },
}

/// One file's part of a diff.
#[derive(Debug, Clone, PartialEq)]
pub struct FilePatch {
    /// Lines from `diff --git` up to the first hunk, each with its newline.
    pub header: Vec<String>,
    /// `None` where the file is created.
    pub old_path: Option<String>,
    /// `None` where the file is deleted.
    pub new_path: Option<String>,
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

/// A hunk range; git omits the length when it is 1, and so must a faithful re-rendering.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub start: u32,
    pub len: u32,
    explicit_len: bool,
}

impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.explicit_len {
            write!(f, "{},{}", self.start, self.len)
        } else {
            write!(f, "{}", self.start)
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
        let mut header: Vec<String> = self.header.iter().map(|l| reverse_header_line(l)).collect();
        // Paired lines keep git's order (`---` before `+++`), so swap them back into place.
        for (first, second) in
            [("--- ", "+++ "), ("old mode ", "new mode "), ("rename from ", "rename to ")]
        {
            let a = header.iter().position(|l| l.starts_with(second));
            let b = header.iter().position(|l| l.starts_with(first));
            if let (Some(a), Some(b)) = (a, b) {
                header.swap(a, b);
            }
        }
        let hunks = self
            .hunks
            .iter()
            .map(|h| Hunk {
                old: h.new,
                new: h.old,
                section: h.section.clone(),
                lines: h
                    .lines
                    .iter()
                    .map(|l| match l.as_bytes().first() {
                        Some(b'+') => format!("-{}", &l[1..]),
                        Some(b'-') => format!("+{}", &l[1..]),
                        _ => l.clone(),
                    })
                    .collect(),
            })
            .collect();
        FilePatch {
            header,
            old_path: self.new_path.clone(),
            new_path: self.old_path.clone(),
            hunks,
        }
    }

    /// The diff text of this file, exactly as parsed (or as reversed).
    pub fn render(&self) -> String {
        let mut s: String = self.header.concat();
        for h in &self.hunks {
            s.push_str(&format!("@@ -{} +{} @@{}", h.old, h.new, h.section));
            s.extend(h.lines.iter().map(String::as_str));
        }
        s
    }
}

fn reverse_header_line(line: &str) -> String {
    let swap_prefix = |from: &str, to: &str| line.strip_prefix(from).map(|r| format!("{to}{r}"));
    if let Some(rest) = line.strip_prefix("diff --git ") {
        let (a, b) = split_git_paths(rest.trim_end_matches('\n'));
        return format!("diff --git a/{b} b/{a}\n");
    }
    if let Some(rest) = line.strip_prefix("index ") {
        if let Some((ids, mode)) = rest.split_once("..").map(|(a, r)| {
            let (b, mode) = r.split_once(' ').unwrap_or((r.trim_end_matches('\n'), ""));
            (format!("{}..{a}", b.trim_end_matches('\n')), mode.to_string())
        }) {
            return if mode.is_empty() {
                format!("index {ids}\n")
            } else {
                format!("index {ids} {mode}")
            };
        }
    }
    if let Some(name) = line.strip_prefix("--- ") {
        return format!("+++ {}", swap_side(name, "b/"));
    }
    if let Some(name) = line.strip_prefix("+++ ") {
        return format!("--- {}", swap_side(name, "a/"));
    }
    swap_prefix("new file mode ", "deleted file mode ")
        .or_else(|| swap_prefix("deleted file mode ", "new file mode "))
        .or_else(|| swap_prefix("old mode ", "new mode "))
        .or_else(|| swap_prefix("new mode ", "old mode "))
        .or_else(|| swap_prefix("rename from ", "rename to "))
        .or_else(|| swap_prefix("rename to ", "rename from "))
        .unwrap_or_else(|| line.to_string())
}

/// `a/x` becomes `b/x` (or the reverse); `/dev/null` stays.
fn swap_side(name: &str, to: &str) -> String {
    match name.get(..2) {
        Some("a/") | Some("b/") => format!("{to}{}", &name[2..]),
        _ => name.to_string(),
    }
}

/// Splits `a/X b/Y` (the `diff --git` line) into X and Y; equal halves win where names hold
/// spaces.
fn split_git_paths(rest: &str) -> (String, String) {
    let body = rest.strip_prefix("a/").unwrap_or(rest);
    if body.len() >= 3 && (body.len() - 3).is_multiple_of(2) {
        let half = (body.len() - 3) / 2;
        if body.is_char_boundary(half)
            && &body[half..half + 3] == " b/"
            && body[..half] == body[half + 3..]
        {
            return (body[..half].to_string(), body[..half].to_string());
        }
    }
    match body.split_once(" b/") {
        Some((a, b)) => (a.to_string(), b.to_string()),
        None => (body.to_string(), body.to_string()),
    }
}

/// A `---`/`+++` name: `None` for `/dev/null`, else the path without its `a/`/`b/` prefix.
fn side_path(name: &str) -> Option<String> {
    let name = name.trim_end_matches('\n');
    let name = name.split('\t').next().unwrap_or(name);
    if name == "/dev/null" {
        return None;
    }
    Some(match name.get(..2) {
        Some("a/") | Some("b/") => name[2..].to_string(),
        _ => name.to_string(),
    })
}

const HEADER_PREFIXES: [&str; 13] = [
    "index ",
    "--- ",
    "+++ ",
    "new file mode ",
    "deleted file mode ",
    "old mode ",
    "new mode ",
    "similarity index ",
    "dissimilarity index ",
    "rename from ",
    "rename to ",
    "copy from ",
    "copy to ",
];

/// Parses a whole diff text; anything after the last hunk is an error.
pub fn parse(text: &str) -> Result<Vec<FilePatch>, PatchError> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let (files, used) = parse_files(&lines)?;
    if used < lines.len() {
        return Err(PatchError::Malformed {
            line: used + 1,
            what: format!("unexpected text after the last hunk: {:?}", lines[used].trim_end()),
        });
    }
    Ok(files)
}

/// Parses file diffs from the start of `lines` for as long as they continue; returns them and
/// how many lines they took. Hunks are consumed by their line counts, so a removed line that
/// reads like a signature (`-- `) cannot end a diff early.
pub fn parse_files(lines: &[&str]) -> Result<(Vec<FilePatch>, usize), PatchError> {
    let mut files = Vec::new();
    let mut i = 0;
    while let Some(rest) = lines.get(i).and_then(|l| l.strip_prefix("diff --git ")) {
        let (a, b) = split_git_paths(rest.trim_end_matches('\n'));
        let mut f = FilePatch {
            header: vec![lines[i].to_string()],
            old_path: Some(a),
            new_path: Some(b),
            hunks: Vec::new(),
        };
        i = parse_header(lines, i + 1, &mut f)?;
        while lines.get(i).is_some_and(|l| l.starts_with("@@ -")) {
            let (hunk, next) = parse_hunk(lines, i, f.path())?;
            f.hunks.push(hunk);
            i = next;
        }
        files.push(f);
    }
    Ok((files, i))
}

fn malformed(i: usize, what: String) -> PatchError {
    PatchError::Malformed { line: i + 1, what }
}

/// The extended header lines of `f` from line `i` (modes, renames, `---`/`+++`); returns the
/// index of the first line after them. Binary diffs and copies are refused.
fn parse_header(lines: &[&str], mut i: usize, f: &mut FilePatch) -> Result<usize, PatchError> {
    while let Some(&l) = lines.get(i) {
        if l.starts_with("Binary files ") || l.starts_with("GIT binary patch") {
            return Err(PatchError::Unsupported {
                file: f.path().into(),
                what: "a binary diff".into(),
            });
        }
        if l.starts_with("copy from ") {
            return Err(PatchError::Unsupported { file: f.path().into(), what: "a copy".into() });
        }
        if !HEADER_PREFIXES.iter().any(|p| l.starts_with(p)) {
            break;
        }
        if let Some(n) = l.strip_prefix("--- ") {
            f.old_path = side_path(n);
        } else if let Some(n) = l.strip_prefix("+++ ") {
            f.new_path = side_path(n);
        } else if l.starts_with("new file mode ") {
            f.old_path = None;
        } else if l.starts_with("deleted file mode ") {
            f.new_path = None;
        } else if let Some(n) = l.strip_prefix("rename from ") {
            f.old_path = Some(n.trim_end().to_string());
        } else if let Some(n) = l.strip_prefix("rename to ") {
            f.new_path = Some(n.trim_end().to_string());
        }
        f.header.push(l.to_string());
        i += 1;
    }
    Ok(i)
}

/// The hunk of file `path` whose header is line `start`, consumed by its header's line counts;
/// returns it and the index of the line after it.
fn parse_hunk(lines: &[&str], start: usize, path: &str) -> Result<(Hunk, usize), PatchError> {
    let h = &lines[start]["@@ -".len()..];
    let (old, new, section) = parse_hunk_header(h).ok_or_else(|| {
        malformed(start, format!("bad hunk header {:?}", lines[start].trim_end()))
    })?;
    let mut i = start + 1;
    let (mut old_left, mut new_left) = (old.len, new.len);
    while old_left > 0 || new_left > 0 {
        let Some(&l) = lines.get(i) else {
            return Err(malformed(start, format!("{path} hunk ends early")));
        };
        let (o, n) = match l.as_bytes().first() {
            Some(b' ') | Some(b'\n') => (1, 1),
            Some(b'-') => (1, 0),
            Some(b'+') => (0, 1),
            Some(b'\\') => (0, 0),
            _ => {
                let what = format!("unexpected line in a {path} hunk: {:?}", l.trim_end());
                return Err(malformed(i, what));
            }
        };
        if o > old_left || n > new_left {
            return Err(malformed(i, format!("{path} hunk is longer than its header says")));
        }
        old_left -= o;
        new_left -= n;
        i += 1;
    }
    // "\ No newline at end of file" after the last counted line still belongs here.
    while lines.get(i).is_some_and(|l| l.starts_with('\\')) {
        i += 1;
    }
    let body = lines[start + 1..i].iter().map(|l| l.to_string()).collect();
    Ok((Hunk { old, new, section, lines: body }, i))
}

/// `1,3 +1,4 @@ fn x\n` (after `@@ -`) into its ranges and section.
fn parse_hunk_header(h: &str) -> Option<(Range, Range, String)> {
    let (old, rest) = h.split_once(" +")?;
    let (new, section) = rest.split_once(" @@")?;
    Some((parse_range(old)?, parse_range(new)?, section.to_string()))
}

fn parse_range(s: &str) -> Option<Range> {
    Some(match s.split_once(',') {
        Some((start, len)) => {
            Range { start: start.parse().ok()?, len: len.parse().ok()?, explicit_len: true }
        }
        None => Range { start: s.parse().ok()?, len: 1, explicit_len: false },
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
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/src/new.rs
@@ -0,0 +1,2 @@
+fn f() {}
+-- 
\\ No newline at end of file
";

    #[test]
    fn parses_and_renders_byte_identical() {
        let files = parse(DIFF).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].hunks.len(), 2);
        assert_eq!(files[0].hunks[1].old, Range { start: 10, len: 1, explicit_len: false });
        assert_eq!(files[1].old_path, None);
        assert_eq!(files[1].path(), "src/new.rs");
        assert_eq!(files[0].counts(), (3, 2));
        let text: String = files.iter().map(FilePatch::render).collect();
        assert_eq!(text, DIFF);
    }

    #[test]
    fn reversing_twice_is_identity_and_swaps_sides() {
        let files = parse(DIFF).unwrap();
        let rev: Vec<FilePatch> = files.iter().map(FilePatch::reversed).collect();
        let text: String = rev.iter().map(FilePatch::render).collect();
        assert!(text.contains("deleted file mode 100644\nindex 3333333..0000000\n--- a/src/new.rs\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-fn f() {}\n--- \n"));
        assert!(text.contains("@@ -1,4 +1,3 @@ fn main() {\n one\n+two\n-deux\n-zwei\n three\n@@ -11 +10 @@\n+ten\n-dix\n"));
        assert!(text.contains("index 2222222..1111111 100644\n--- a/src/a.rs\n+++ b/src/a.rs\n"));
        let back: String = parse(&text).unwrap().iter().map(|f| f.reversed().render()).collect();
        assert_eq!(back, DIFF);
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
    fn errors_name_the_line() {
        let short = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n";
        assert!(matches!(parse(short), Err(PatchError::Malformed { line: 4, .. })));
        let bin = "diff --git a/x b/x\nBinary files a/x and b/x differ\n";
        assert!(matches!(parse(bin), Err(PatchError::Unsupported { .. })));
    }
}
