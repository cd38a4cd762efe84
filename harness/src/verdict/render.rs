//! The verdict as people read it: aligned tables on a terminal, pipe tables with `--format md`.
//! Every figure is labelled with whose it is: ours (this machine), the logs given, or official
//! (upstream 8×H100).
use super::{BaselineDelta, Verdict};
use crate::text::figures::{self, count};
use crate::text::table::{Format, Table};
use std::fmt::Write;

impl Verdict {
    /// The report: verdict line and reason, summary table, official context, one row per run,
    /// and the comparison with the re-timed parent.
    pub fn render(&self, format: Format) -> String {
        let md = format == Format::Markdown;
        let mut o = String::new();
        let target = self.target_loss;
        let within = match self.common_steps() {
            Some(steps) => count(steps as usize, "step"),
            None => "each log's own step budget".to_string(),
        };
        let head = match (&self.sets_target, &self.cpu) {
            (Some(r), Some(cpu)) => {
                format!("BASELINE: this run sets {r}'s lab target on {cpu}: {target}")
            }
            _ => format!("Verdict: {} (target val loss {target} within {within})", self.word()),
        };
        let from = self.target_from.as_ref().map(|f| format!("target: {f}"));
        if md {
            let from = from.map(|f| format!("{f}\n\n")).unwrap_or_default();
            let _ = writeln!(o, "**{head}**\n\n{from}{}\n", self.reason);
        } else {
            let from = from.map(|f| format!("  {f}\n")).unwrap_or_default();
            let _ = writeln!(o, "{head}\n{from}  {}\n", self.reason);
        }
        if let Some(why) = &self.time_not_comparable {
            let _ = writeln!(o, "Times NOT COMPARABLE: {why}\n");
        }
        o.push_str(&self.summary().render(format));
        o.push('\n');
        if let Some(official) = self.official_time_s {
            let hardware = self.official_hardware.as_deref().unwrap_or("8×H100");
            let _ = write!(
                o,
                "Official (upstream {hardware}): record time {}",
                figures::secs(official)
            );
            match &self.time_s {
                _ if self.lab_scale => {
                    o.push_str(" at full scale, for context; a lab-scale time is not comparable\n");
                }
                Some(t) if official > 0.0 => {
                    let _ = writeln!(o, "; ours/official mean time = {:.2}×", t.mean / official);
                }
                _ => o.push('\n'),
            }
            o.push('\n');
        }
        let _ = writeln!(o, "{}:{}", self.whose_runs(), if md { "\n" } else { "" });
        o.push_str(&self.runs_table().render(format));
        if let Some(b) = &self.baseline {
            o.push('\n');
            self.render_baseline(&mut o, b, format);
        }
        o
    }

    fn whose(&self) -> &'static str {
        if self.from_logs {
            "these logs"
        } else {
            "ours (this machine)"
        }
    }

    fn whose_runs(&self) -> &'static str {
        if self.from_logs {
            "Runs (these logs)"
        } else {
            "Runs (ours, this machine)"
        }
    }

    fn summary(&self) -> Table {
        let mut t = Table::new(["", self.whose()]);
        t.row(["runs".to_string(), self.runs.len().to_string()]);
        if let Some(l) = &self.loss {
            t.row(["mean val loss".to_string(), figures::loss(l.mean)]);
            if let Some(std) = l.std {
                t.row(["val loss sample std".to_string(), figures::loss(std)]);
            }
        }
        let test = match self.loss_test {
            Some(test) => test.stated(self.target_loss),
            None => "t-test: needs two or more runs with different losses".to_string(),
        };
        // The test's wording is its own label; it spans the row.
        let (label, value) = test.split_once(": ").unwrap_or((&test, ""));
        t.row([label, value]);
        if let Some(s) = &self.time_s {
            t.row(["mean train time".to_string(), figures::secs(s.mean)]);
            if let Some(std) = s.std {
                t.row(["train time sample std".to_string(), figures::secs(std)]);
                t.row(["median train time".to_string(), figures::secs(s.median)]);
                t.row([
                    "train time range".to_string(),
                    format!("{} – {}", figures::secs(s.min), figures::secs(s.max)),
                ]);
            }
        }
        t
    }

    fn runs_table(&self) -> Table {
        let target = self.target_loss;
        let mut t = Table::new([
            "run".to_string(),
            "final step".to_string(),
            "final val loss".to_string(),
            "train time".to_string(),
            format!("first val ≤ {target}"),
        ])
        .left(4);
        for (i, r) in self.runs.iter().enumerate() {
            let budget = r.steps.unwrap_or(self.steps);
            let step = match r.final_step {
                Some(s) if r.finished && s < budget => format!("{s}/{budget} (stopped at target)"),
                Some(s) if r.finished => format!("{s}/{budget}"),
                Some(s) => format!("{s}/{budget} (unfinished)"),
                None => "no val line".to_string(),
            };
            let hit = match &r.first_at_target {
                Some(h) => match h.train_time_s {
                    Some(s) => format!("step {} at {}", h.step, figures::secs(s)),
                    None => format!("step {}", h.step),
                },
                None => "never".to_string(),
            };
            t.row([
                r.name.clone().unwrap_or_else(|| (i + 1).to_string()),
                step,
                r.final_val_loss.map_or("n/a".to_string(), figures::loss),
                r.train_time_s.map_or("n/a".to_string(), figures::secs),
                hit,
            ]);
        }
        t
    }

    fn render_baseline(&self, o: &mut String, b: &BaselineDelta, format: Format) {
        let md = format == Format::Markdown;
        let _ = writeln!(
            o,
            "Vs baseline (the parent record re-timed on this machine, interleaved):{}",
            if md { "\n" } else { "" }
        );
        let mut t = Table::new(["", "baseline (parent)", "candidate"]);
        t.row(["runs".to_string(), b.runs.to_string(), self.runs.len().to_string()]);
        let na = || "n/a".to_string();
        t.row([
            "mean val loss".to_string(),
            b.loss.as_ref().map_or_else(na, |l| figures::loss(l.mean)),
            self.loss.as_ref().map_or_else(na, |l| figures::loss(l.mean)),
        ]);
        t.row([
            "mean train time".to_string(),
            b.time_s.as_ref().map_or_else(na, |s| figures::secs(s.mean)),
            self.time_s.as_ref().map_or_else(na, |s| figures::secs(s.mean)),
        ]);
        o.push_str(&t.render(format));
        o.push('\n');
        let bullet = "- ";
        if let (Some(base), Some(cand)) = (&b.time_s, &self.time_s) {
            let d = cand.mean - base.mean;
            let _ = writeln!(
                o,
                "{bullet}train time: {} ({}), speedup {:.3}×",
                figures::secs_delta(d),
                figures::pct_delta(100.0 * d / base.mean),
                base.mean / cand.mean
            );
        }
        if let (Some(base), Some(cand)) = (&b.loss, &self.loss) {
            let _ = writeln!(o, "{bullet}val loss: {}", figures::loss_delta(cand.mean - base.mean));
        }
        match &b.time {
            Some(w) => {
                let _ = writeln!(
                    o,
                    "{bullet}Welch's t-test of candidate time < baseline time: p = {} (t = {}, df = {}); two-sided p = {}",
                    figures::p_value(w.p_less),
                    figures::t_stat(w.t),
                    figures::dof(w.df),
                    figures::p_value(w.p_two_sided)
                );
            }
            None => {
                let _ = writeln!(
                    o,
                    "{bullet}Welch's t-test of time: needs two or more timed runs on each side"
                );
            }
        }
        if let Some(w) = &b.loss_delta {
            let _ = writeln!(
                o,
                "{bullet}Welch's two-sided t-test of candidate val loss = baseline val loss: p = {} (t = {}, df = {})",
                figures::p_value(w.p_two_sided),
                figures::t_stat(w.t),
                figures::dof(w.df)
            );
        }
    }
}
