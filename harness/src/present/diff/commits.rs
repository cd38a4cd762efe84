//! The commits between two records: the series view of `records diff`.
use super::Paint;
use crate::catalog::{pr_text, Catalog};
use crate::series::Series;
use anyhow::Result;

/// The commits between the two records, with titles and line counts; from newer to older they
/// are listed newest first as undone (their counts swapped).
pub(super) fn view(
    catalog: &Catalog,
    series: &Series,
    a: u32,
    b: u32,
    paint: Paint,
) -> Result<String> {
    let forward = series.position(a)? <= series.position(b)?;
    let (older, newer) = if forward { (a, b) } else { (b, a) };
    let mut records: Vec<_> = series.between(older, newer)?.iter().collect();
    let mut out = if forward {
        format!("{}\n", paint.bold(&format!("Commits from #{a} to #{b}")))
    } else {
        records.reverse();
        format!(
            "{}\n",
            paint.bold(&format!("Commits undone from #{a} back to #{b} (newest first)"))
        )
    };
    if records.is_empty() {
        out.push_str("  (none: same record)\n");
    }
    for r in records {
        let counts: Vec<(usize, usize)> = r.commits.iter().map(|c| c.counts()).collect();
        let (add, del) = counts.iter().fold((0, 0), |s, c| (s.0 + c.0, s.1 + c.1));
        let (add, del) = if forward { (add, del) } else { (del, add) };
        let title = &catalog.get(r.number)?.record.title;
        out.push_str(&format!(
            "  #{:<3} {title}  ({} commit(s), {} {})\n",
            r.number,
            r.commits.len(),
            paint.green(&format!("+{add}")),
            paint.red(&format!("-{del}"))
        ));
        let mut commits: Vec<_> = r.commits.iter().zip(&counts).enumerate().collect();
        if !forward {
            commits.reverse();
        }
        let upstream = &catalog.get(r.number)?.upstream;
        for (k, (c, &(ca, cd))) in commits {
            let (ca, cd) = if forward { (ca, cd) } else { (cd, ca) };
            // The upstream record the commit ports, when the manifest lists it: its time.
            let named = c.upstream();
            let when = upstream
                .iter()
                .find(|u| Some(u.number) == named)
                .map_or(String::new(), |u| format!("  [{}, {}]", u.time_text, pr_text(u.pr)));
            out.push_str(&format!(
                "       {}/{} {}  {} {}{when}\n",
                k + 1,
                r.commits.len(),
                c.subject,
                paint.green(&format!("+{ca}")),
                paint.red(&format!("-{cd}"))
            ));
        }
    }
    Ok(out)
}
