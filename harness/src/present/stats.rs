//! `records series stats`: per upstream-record commit, the lines in its own module, in tests and
//! in shared files (named), then each shared file's use and how many commits stay home.
use crate::series::stats::{shared_use, CommitStats, Kind, GOAL_SHARED_LINES};
use crate::text::table::{Format, Table};

/// `+a −r` of some files.
fn counts<'f>(files: impl Iterator<Item = &'f crate::series::stats::FileLines>) -> String {
    let (a, r) = files.fold((0, 0), |(a, r), f| (a + f.added, r + f.removed));
    if a + r == 0 {
        "-".into()
    } else {
        format!("+{a} −{r}")
    }
}

/// The commits, one row each: the upstream record, its holder, own, tests, shared (with the
/// files' lines).
pub fn commits(stats: &[CommitStats], format: Format) -> String {
    let head = ["upstream", "patch", "own module", "tests", "shared", "shared files"];
    let mut t = Table::new(head).left(1).left(5);
    for c in stats {
        let shared: Vec<String> = (c.of_kind(Kind::Shared))
            .map(|f| format!("{} {}", short(&f.path), f.lines()))
            .collect();
        t.row([
            c.upstream.map_or("-".into(), |k| format!("#{k}")),
            format!("{}.patch", c.holder.slug()),
            counts(c.of_kind(Kind::Own)),
            counts(c.of_kind(Kind::Test)),
            c.shared_lines().to_string(),
            shared.join(", "),
        ]);
    }
    t.render(format)
}

/// `src/model/gpt.rs` → `model/gpt.rs`: the table's last column stays readable.
fn short(path: &str) -> &str {
    path.strip_prefix("src/").unwrap_or(path)
}

/// The summary: how many commits stay in their own module within the goal, and each shared
/// file's use. ARCHITECTURE.md holds its markdown, and a test keeps it equal to this.
pub fn summary(stats: &[CommitStats], format: Format) -> String {
    let home = stats.iter().filter(|c| c.stays_home()).count();
    let shared: usize = stats.iter().map(CommitStats::shared_lines).sum();
    let mut out = format!(
        "{home} of {} commits stay in their own module plus at most {GOAL_SHARED_LINES} shared \
         lines; {shared} lines in shared files in all.\n\n",
        stats.len()
    );
    let mut t = Table::new(["shared file", "commits", "added", "removed", "what it holds"]).left(4);
    for u in shared_use(stats) {
        t.row([
            format!("`{}`", u.path),
            u.commits.to_string(),
            format!("+{}", u.added),
            format!("−{}", u.removed),
            u.why.to_string(),
        ]);
    }
    out.push_str(&t.render(format));
    out
}
