//! The commits between two records: the series view of `records diff`.
use super::Paint;
use crate::catalog::{pr_text, Catalog};
use crate::present::report::DiffReport;
use crate::series::Record;
use anyhow::Result;

/// The commits between the two records, with titles and line counts; from newer to older they
/// are listed newest first as undone (their counts swapped). Records on two lines (#29 and a2)
/// meet at the record both descend from (#1): the commits undone from `a` back to it, then
/// those from it to `b`.
pub(super) fn view(catalog: &Catalog, report: &DiffReport, paint: Paint) -> Result<String> {
    let (a, b, meet) = (report.a.id(), report.b.id(), report.meet);
    let mut out = String::new();
    if meet != a {
        let head = format!("Commits undone from {a} back to {meet} (newest first)");
        out.push_str(&format!("{}\n", paint.bold(&head)));
        records(&mut out, catalog, &report.undone, false, paint)?;
    }
    if meet != b {
        out.push_str(&format!("{}\n", paint.bold(&format!("Commits from {meet} to {b}"))));
        records(&mut out, catalog, &report.done, true, paint)?;
    }
    Ok(out)
}

/// Each record's line and its commits' lines, forward or undone (newest first).
fn records(
    out: &mut String,
    catalog: &Catalog,
    records: &[&Record],
    forward: bool,
    paint: Paint,
) -> Result<()> {
    for r in records {
        let counts: Vec<(usize, usize)> = r.commits.iter().map(|c| c.counts()).collect();
        let (add, del) = counts.iter().fold((0, 0), |s, c| (s.0 + c.0, s.1 + c.1));
        let (add, del) = if forward { (add, del) } else { (del, add) };
        let title = &catalog.get(r.number)?.record.title;
        out.push_str(&format!(
            "  {:<4} {title}  ({} commit(s), {} {})\n",
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
    Ok(())
}
