//! The code diff of two trees as text: the report's files and hunks (libgit2's), painted, and
//! their stat.
use super::Paint;
use crate::series::patch::FilePatch;

/// One unified diff section per changed file.
pub(super) fn view(files: &[FilePatch], paint: Paint) -> String {
    let mut out = String::new();
    for f in files {
        let (a, b) = f.side_names();
        let path = f.path();
        out.push_str(&paint.bold(&format!("diff --git a/{path} b/{path}")));
        out.push('\n');
        if f.old_path.is_some() && f.new_path.is_some() && f.old_mode != f.new_mode {
            out.push_str(&format!("mode {:o} → {:o}\n", f.old_mode, f.new_mode));
        }
        if !f.hunks.is_empty() {
            out.push_str(&paint.bold(&format!("--- {a}\n+++ {b}")));
            out.push('\n');
        }
        for h in &f.hunks {
            out.push_str(&paint.cyan(&h.header()));
            out.push('\n');
            for line in &h.lines {
                out.push_str(&paint.diff_line(line));
            }
        }
    }
    out
}

/// The files a diff touched and their line counts.
pub(super) fn stat_view(files: &[FilePatch]) -> String {
    if files.is_empty() {
        return String::new();
    }
    let width = files.iter().map(|f| f.path().len()).max().unwrap_or(0);
    let mut out = String::from("  Files:\n");
    let (mut add, mut del) = (0, 0);
    for f in files {
        let (a, d) = f.counts();
        out.push_str(&format!("    {:<width$}  +{a} -{d}\n", f.path()));
        (add, del) = (add + a, del + d);
    }
    out.push_str(&format!("    {} file(s) changed, +{add} -{del}\n", files.len()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::series::patch;

    #[test]
    fn a_diff_prints_changed_new_and_deleted_files_with_their_stat() {
        let diff = "diff --git a/a.rs b/a.rs\nindex 1111111..2222222 100644\n--- a/a.rs\n+++ b/a.rs\n@@ -1,2 +1,2 @@\n one\n-two\n+2\ndiff --git a/gone.rs b/gone.rs\ndeleted file mode 100644\nindex 3333333..0000000\n--- a/gone.rs\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\ndiff --git a/new.rs b/new.rs\nnew file mode 100644\nindex 0000000..4444444\n--- /dev/null\n+++ b/new.rs\n@@ -0,0 +1 @@\n+y\n";
        let files = patch::parse(diff).unwrap();
        let text = view(&files, Paint(false));
        assert!(
            text.contains("--- a/a.rs\n+++ b/a.rs\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "diff --git a/gone.rs b/gone.rs\n--- a/gone.rs\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
            ),
            "{text}"
        );
        assert!(text.contains("+++ b/new.rs\n@@ -0,0 +1 @@\n+y\n"), "{text}");
        let stat = stat_view(&files);
        assert!(stat.contains("    a.rs     +1 -1\n    gone.rs  +0 -1\n"), "{stat}");
        assert!(stat.contains("3 file(s) changed, +2 -2"), "{stat}");
    }

    #[test]
    fn colour_only_when_asked() {
        assert_eq!(Paint(false).diff_line("+x\n"), "+x\n");
        assert_eq!(Paint(true).diff_line("-x\n"), "\x1b[31m-x\x1b[0m\n");
    }
}
