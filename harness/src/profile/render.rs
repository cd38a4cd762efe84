//! "Where the time goes": one table per stage, or two records side by side.
use super::{Category, StageTable};
use crate::text::table::{Format, Table};

/// A record's profiled steps under one heading.
pub struct Profiled<'a> {
    /// `#29 (lab, cpu (2 threads))`.
    pub title: String,
    pub table: &'a StageTable,
}

fn pct(part: f64, whole: f64) -> String {
    if whole > 0.0 {
        format!("{:.1}%", 100.0 * part / whole)
    } else {
        "-".into()
    }
}

fn ms(x: f64) -> String {
    format!("{x:.1}")
}

/// The heading of one stage's table: which steps, and the wall time the rows add up to.
pub fn heading(p: &Profiled) -> String {
    let t = p.table;
    let steps: Vec<String> = t.steps.iter().map(u64::to_string).collect();
    format!("{}: {} (steps {}): {} ms/step", p.title, t.stage, steps.join(", "), ms(t.wall_ms))
}

/// Rows by category: ms per step and percent of the step, then the total.
pub fn table(t: &StageTable, format: Format) -> String {
    let mut out = Table::new(["where the time goes", "ms/step", "%"]);
    for c in Category::ALL {
        let v = t.ms.get(&c).copied().unwrap_or(0.0);
        out.row([c.label().to_string(), ms(v), pct(v, t.wall_ms)]);
    }
    let sum: f64 = t.ms.values().sum();
    out.row(["step (sum of the rows)".to_string(), ms(sum), pct(sum, t.wall_ms)]);
    out.render(format)
}

/// Two records' tables side by side, with the difference per step.
pub fn compare(a: &Profiled, b: &Profiled, format: Format) -> String {
    let (ta, tb) = (a.table, b.table);
    // The headings above name the device; the columns only the record.
    let short = |p: &Profiled| p.title.split_whitespace().next().unwrap_or_default().to_string();
    let mut out = Table::new([
        "where the time goes".to_string(),
        format!("{} ms/step", short(a)),
        "%".into(),
        format!("{} ms/step", short(b)),
        "%".into(),
        "difference ms".into(),
    ]);
    let cell = |t: &StageTable, c: Category| t.ms.get(&c).copied().unwrap_or(0.0);
    for c in Category::ALL {
        let (x, y) = (cell(ta, c), cell(tb, c));
        out.row([
            c.label().to_string(),
            ms(x),
            pct(x, ta.wall_ms),
            ms(y),
            pct(y, tb.wall_ms),
            format!("{:+.1}", x - y),
        ]);
    }
    let (sa, sb): (f64, f64) = (ta.ms.values().sum(), tb.ms.values().sum());
    out.row([
        "step (sum of the rows)".to_string(),
        ms(sa),
        pct(sa, ta.wall_ms),
        ms(sb),
        pct(sb, tb.wall_ms),
        format!("{:+.1}", sa - sb),
    ]);
    out.render(format)
}
