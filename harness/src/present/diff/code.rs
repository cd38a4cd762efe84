//! The code diff of two trees: one unified diff per changed file, and its stat.
use super::Paint;
use similar::{ChangeTag, TextDiff};
use std::collections::BTreeMap;

/// Files of a tree: path → (mode, content).
pub type Files = BTreeMap<String, (i32, Vec<u8>)>;

/// Lines added and removed in one file.
#[derive(Debug, Clone, PartialEq)]
pub struct FileStat {
    pub path: String,
    pub added: usize,
    pub removed: usize,
}

/// The unified diff from `old` to `new` (one section per changed file) and its stat.
pub fn code_diff(old: &Files, new: &Files, paint: Paint) -> (String, Vec<FileStat>) {
    let mut out = String::new();
    let mut stats = Vec::new();
    let paths: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    for path in paths {
        let (o, n) = (old.get(path), new.get(path));
        if o == n {
            continue;
        }
        let a_name = if o.is_some() { format!("a/{path}") } else { "/dev/null".into() };
        let b_name = if n.is_some() { format!("b/{path}") } else { "/dev/null".into() };
        out.push_str(&paint.bold(&format!("diff {a_name} {b_name}")));
        out.push('\n');
        if let (Some((om, _)), Some((nm, _))) = (o, n) {
            if om != nm {
                out.push_str(&format!("mode {om:o} → {nm:o}\n"));
            }
        }
        let (ob, nb) = (o.map_or(&[][..], |x| &x.1), n.map_or(&[][..], |x| &x.1));
        let (Ok(ot), Ok(nt)) = (std::str::from_utf8(ob), std::str::from_utf8(nb)) else {
            out.push_str(&format!("Binary files {a_name} and {b_name} differ\n"));
            stats.push(FileStat { path: path.clone(), added: 0, removed: 0 });
            continue;
        };
        let td = TextDiff::from_lines(ot, nt);
        let mut stat = FileStat { path: path.clone(), added: 0, removed: 0 };
        if ot != nt {
            out.push_str(&paint.bold(&format!("--- {a_name}\n+++ {b_name}")));
            out.push('\n');
        }
        for hunk in td.unified_diff().context_radius(3).iter_hunks() {
            out.push_str(&paint.cyan(&hunk.header().to_string()));
            out.push('\n');
            for change in hunk.iter_changes() {
                let sign = match change.tag() {
                    ChangeTag::Delete => {
                        stat.removed += 1;
                        '-'
                    }
                    ChangeTag::Insert => {
                        stat.added += 1;
                        '+'
                    }
                    ChangeTag::Equal => ' ',
                };
                out.push_str(&paint.diff_line(&format!("{sign}{}", change.to_string_lossy())));
                if change.missing_newline() {
                    out.push_str("\n\\ No newline at end of file\n");
                }
            }
        }
        stats.push(stat);
    }
    (out, stats)
}

/// The files a diff touched and their line counts.
pub(super) fn stat_view(stats: &[FileStat]) -> String {
    if stats.is_empty() {
        return String::new();
    }
    let width = stats.iter().map(|s| s.path.len()).max().unwrap_or(0);
    let mut out = String::from("  Files:\n");
    for s in stats {
        out.push_str(&format!("    {:<width$}  +{} -{}\n", s.path, s.added, s.removed));
    }
    let (add, del) = stats.iter().fold((0, 0), |t, s| (t.0 + s.added, t.1 + s.removed));
    out.push_str(&format!("    {} file(s) changed, +{add} -{del}\n", stats.len()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::present::diff::Paint;

    fn files(list: &[(&str, &str)]) -> Files {
        list.iter().map(|(p, t)| (p.to_string(), (0o100644, t.as_bytes().to_vec()))).collect()
    }

    #[test]
    fn code_diff_covers_changed_new_and_deleted_files() {
        let old = files(&[("a.rs", "one\ntwo\n"), ("gone.rs", "x\n"), ("same.rs", "s\n")]);
        let new = files(&[("a.rs", "one\n2\n"), ("new.rs", "y\n"), ("same.rs", "s\n")]);
        let (text, stats) = code_diff(&old, &new, Paint(false));
        assert!(
            text.contains("--- a/a.rs\n+++ b/a.rs\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"),
            "{text}"
        );
        assert!(text.contains("--- a/gone.rs\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"), "{text}");
        assert!(text.contains("+++ b/new.rs\n@@ -0,0 +1 @@\n+y\n"), "{text}");
        assert!(!text.contains("same.rs"));
        let a = stats.iter().find(|s| s.path == "a.rs").unwrap();
        assert_eq!((a.added, a.removed), (1, 1));
    }

    #[test]
    fn colour_only_when_asked() {
        assert_eq!(Paint(false).diff_line("+x\n"), "+x\n");
        assert_eq!(Paint(true).diff_line("-x\n"), "\x1b[31m-x\x1b[0m\n");
    }
}
