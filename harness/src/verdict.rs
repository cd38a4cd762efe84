//! The verdict on a replay: did our runs reach the record's target loss within its step budget,
//! how long did they take on this machine, and how does that compare with the parent record
//! re-timed here. Official (upstream 8×H100) figures are carried alongside, always labelled.
use crate::runlog::RunLog;
use crate::stats::{self, Summary, TTest, Welch};
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// The significance level of the speedrun's loss rule (track 1, rule 2).
pub const P_THRESHOLD: f64 = 0.01;

#[derive(Debug, thiserror::Error)]
pub enum VerdictError {
    #[error("no run logs to judge; run the record at least once")]
    NoRuns,
}

/// The first validation at or below the target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    pub step: u64,
    pub train_time_s: Option<f64>,
}

/// One of our runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Step of the last validation line.
    pub final_step: Option<u64>,
    /// Loss of the last validation line; `None` without one or when it was `nan`.
    pub final_val_loss: Option<f64>,
    /// Train time at the last validation line (upstream's record figure), else at the last step.
    pub train_time_s: Option<f64>,
    /// The last validation happened at the step budget.
    pub finished: bool,
    pub first_at_target: Option<Hit>,
    pub peak_mem_allocated_mib: Option<u64>,
}

impl RunResult {
    fn of(log: &RunLog, target: f64, steps: u64) -> RunResult {
        let last = log.final_val();
        let last_train_time = log.train.iter().rev().find_map(|p| p.train_time_ms);
        RunResult {
            final_step: last.map(|v| v.step),
            final_val_loss: last.map(|v| v.val_loss).filter(|l| l.is_finite()),
            train_time_s: last
                .and_then(|v| v.train_time_ms)
                .or(last_train_time)
                .map(|ms| ms / 1000.0),
            finished: last.is_some_and(|v| v.step == steps),
            first_at_target: log
                .first_val_at_or_below(target)
                .map(|v| Hit { step: v.step, train_time_s: v.train_time_ms.map(|ms| ms / 1000.0) }),
            peak_mem_allocated_mib: log.peak_mem_allocated_mib,
        }
    }
}

/// The parent record re-timed on this machine, against our runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineDelta {
    pub runs: usize,
    pub loss: Option<Summary>,
    pub time_s: Option<Summary>,
    /// Welch on train time, candidate (ours) minus baseline; `p_less` is "the candidate is faster".
    pub time: Option<Welch>,
    /// Welch on final val loss, candidate minus baseline.
    pub loss_delta: Option<Welch>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub target_loss: f64,
    /// The step budget.
    pub steps: u64,
    /// The record's official time on upstream's 8×H100, seconds.
    pub official_time_s: f64,
    pub runs: Vec<RunResult>,
    /// Final val losses of the runs that have one (ours).
    pub losses: Vec<f64>,
    /// Train times of the runs that have one, seconds (ours).
    pub times_s: Vec<f64>,
    pub loss: Option<Summary>,
    pub time_s: Option<Summary>,
    /// One-sided one-sample t-test of the losses against the target; present with two or more
    /// losses that are not all identical.
    pub loss_test: Option<TTest>,
    pub reached: bool,
    /// Why `reached` is what it is, in one line.
    pub reason: String,
    pub baseline: Option<BaselineDelta>,
    /// Our runs were lab scale, so their times are not comparable with the official time.
    pub lab_scale: bool,
    /// Why our times are not comparable with other runs on this machine (another timed run ran
    /// beside them, see `timing_lock`); `None` when they ran alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_not_comparable: Option<String>,
}

impl Verdict {
    /// Judges `runs` (ours, this machine) against `target_loss` within `steps` steps.
    pub fn new(
        runs: &[RunLog],
        target_loss: f64,
        official_time_s: f64,
        steps: u64,
    ) -> Result<Verdict, VerdictError> {
        if runs.is_empty() {
            return Err(VerdictError::NoRuns);
        }
        let results: Vec<RunResult> =
            runs.iter().map(|r| RunResult::of(r, target_loss, steps)).collect();
        let losses: Vec<f64> = results.iter().filter_map(|r| r.final_val_loss).collect();
        let times_s: Vec<f64> = results.iter().filter_map(|r| r.train_time_s).collect();
        let loss = Summary::of(&losses);
        let identical = loss.as_ref().is_some_and(|s| s.std == Some(0.0));
        let loss_test =
            if identical { None } else { stats::ttest_1samp_less(&losses, target_loss) };
        let (reached, reason) = judge(&results, loss.as_ref(), loss_test, target_loss, steps);
        Ok(Verdict {
            target_loss,
            steps,
            official_time_s,
            runs: results,
            time_s: Summary::of(&times_s),
            losses,
            times_s,
            loss,
            loss_test,
            reached,
            reason,
            baseline: None,
            lab_scale: false,
            time_not_comparable: None,
        })
    }

    /// Marks our runs as lab scale: the official time is then shown only as context.
    pub fn at_lab_scale(mut self) -> Verdict {
        self.lab_scale = true;
        self
    }

    /// Marks our times as not comparable, saying why.
    pub fn time_not_comparable(mut self, why: Option<String>) -> Verdict {
        self.time_not_comparable = why;
        self
    }

    /// Adds the comparison with `baseline`: the parent record's runs, re-timed on this machine.
    pub fn with_baseline(mut self, baseline: &[RunLog]) -> Verdict {
        let results: Vec<RunResult> =
            baseline.iter().map(|r| RunResult::of(r, self.target_loss, self.steps)).collect();
        let losses: Vec<f64> = results.iter().filter_map(|r| r.final_val_loss).collect();
        let times: Vec<f64> = results.iter().filter_map(|r| r.train_time_s).collect();
        self.baseline = Some(BaselineDelta {
            runs: baseline.len(),
            loss: Summary::of(&losses),
            time_s: Summary::of(&times),
            time: stats::welch(&times, &self.times_s),
            loss_delta: stats::welch(&losses, &self.losses),
        });
        self
    }

    /// A text block in the style of upstream's statistics.md. Every figure is labelled "ours"
    /// (this machine) or "official" (upstream 8×H100).
    pub fn render(&self) -> String {
        let mut o = String::new();
        let target = self.target_loss;
        let _ = writeln!(
            o,
            "Verdict: {} (target val loss {target} within {} steps)",
            if self.reached { "REACHED" } else { "NOT REACHED" },
            self.steps
        );
        let _ = writeln!(o, "  {}", self.reason);
        if let Some(why) = &self.time_not_comparable {
            let _ = writeln!(o, "  Times NOT COMPARABLE: {why}");
        }
        let _ = writeln!(o);
        let _ = writeln!(o, "| metric | ours (this machine) |");
        let _ = writeln!(o, "| --- | ---: |");
        let _ = writeln!(o, "| runs | {} |", self.runs.len());
        if let Some(l) = &self.loss {
            let _ = writeln!(o, "| mean val loss | {:.10} |", l.mean);
            let _ = writeln!(o, "| val loss sample std | {} |", opt(l.std, 10, ""));
        }
        let _ = writeln!(
            o,
            "| one-sided p vs {target} | {} |",
            opt(self.loss_test.map(|t| t.p), 10, "")
        );
        if let Some(t) = &self.time_s {
            let _ = writeln!(o, "| mean train time | {:.6} s |", t.mean);
            let _ = writeln!(o, "| train time sample std | {} |", opt(t.std, 6, " s"));
            let _ = writeln!(o, "| median train time | {:.3} s |", t.median);
            let _ = writeln!(o, "| train time range | {:.3}-{:.3} s |", t.min, t.max);
        }
        let _ = writeln!(o);
        let _ = write!(o, "Official (upstream 8×H100): record time {:.3} s", self.official_time_s);
        match &self.time_s {
            _ if self.lab_scale => {
                o.push_str(" at full scale, for context; a lab-scale time is not comparable\n");
            }
            Some(t) if self.official_time_s > 0.0 => {
                let _ = writeln!(
                    o,
                    "; ours/official mean time = {:.2}×",
                    t.mean / self.official_time_s
                );
            }
            _ => o.push('\n'),
        }
        let _ = writeln!(o);
        let _ = writeln!(o, "Runs (ours):");
        let _ = writeln!(
            o,
            "| run | final step | final val loss | train time | first val ≤ {target} |"
        );
        let _ = writeln!(o, "| ---: | ---: | ---: | ---: | --- |");
        for (i, r) in self.runs.iter().enumerate() {
            let step = match r.final_step {
                Some(s) if r.finished => format!("{s}/{}", self.steps),
                Some(s) => format!("{s}/{} (unfinished)", self.steps),
                None => "no val line".to_string(),
            };
            let hit = match &r.first_at_target {
                Some(h) => format!("step {} at {}", h.step, opt(h.train_time_s, 3, " s")),
                None => "never".to_string(),
            };
            let _ = writeln!(
                o,
                "| {} | {step} | {} | {} | {hit} |",
                i + 1,
                opt(r.final_val_loss, 4, ""),
                opt(r.train_time_s, 3, " s"),
            );
        }
        let _ = writeln!(o);
        let _ = writeln!(o, "Losses (ours): {}", list(&self.losses, 4));
        let _ = writeln!(o, "Times (ours, s): {}", list(&self.times_s, 3));
        if let Some(b) = &self.baseline {
            render_baseline(&mut o, b, self);
        }
        o
    }
}

/// `reached` and its reason.
fn judge(
    runs: &[RunResult],
    loss: Option<&Summary>,
    test: Option<TTest>,
    target: f64,
    steps: u64,
) -> (bool, String) {
    let unfinished = runs.iter().filter(|r| !r.finished).count();
    if unfinished > 0 {
        return (
            false,
            format!("{unfinished} of {} runs did not validate at step {steps}", runs.len()),
        );
    }
    let Some(loss) = loss.filter(|l| l.n == runs.len()) else {
        return (false, "a run ended with a val loss of nan".to_string());
    };
    if loss.mean > target {
        return (false, format!("mean val loss {:.4} is above {target}", loss.mean));
    }
    match test {
        None if loss.n >= 2 => (
            true,
            format!(
                "all {} runs ended at val loss {:.4} <= {target}; identical losses (same seed?) \
                 make the t-test meaningless, so this counts as one run",
                loss.n, loss.mean
            ),
        ),
        None => (
            true,
            format!(
                "one run: val loss {:.4} <= {target} (run more to test p < {P_THRESHOLD})",
                loss.mean
            ),
        ),
        Some(t) if t.p < P_THRESHOLD => (
            true,
            format!(
                "mean val loss {:.4} <= {target} with one-sided p = {:.4} < {P_THRESHOLD}",
                loss.mean, t.p
            ),
        ),
        Some(t) => (
            false,
            format!(
                "mean val loss {:.4} <= {target} but one-sided p = {:.4} is not below {P_THRESHOLD}",
                loss.mean, t.p
            ),
        ),
    }
}

fn render_baseline(o: &mut String, b: &BaselineDelta, v: &Verdict) {
    let _ = writeln!(o);
    let _ =
        writeln!(o, "Vs baseline (parent record re-timed on this machine, ours; {} runs):", b.runs);
    if let Some(l) = &b.loss {
        let _ = writeln!(o, "- baseline mean val loss: {:.10}", l.mean);
    }
    if let Some(t) = &b.time_s {
        let _ = writeln!(o, "- baseline mean train time: {:.6} s", t.mean);
        if let Some(c) = &v.time_s {
            let d = c.mean - t.mean;
            let _ = writeln!(
                o,
                "- delta train time: {d:+.6} s ({:+.6}%), speedup {:.8}×",
                100.0 * d / t.mean,
                t.mean / c.mean
            );
        }
    }
    if let (Some(l), Some(c)) = (&b.loss, &v.loss) {
        let _ = writeln!(o, "- delta val loss: {:+.10}", c.mean - l.mean);
    }
    match &b.time {
        Some(w) => {
            let _ = writeln!(
                o,
                "- Welch t candidate time vs baseline time: {:.3}; two-sided p: {:.1e}; one-sided p (candidate faster): {:.1e}",
                w.t, w.p_two_sided, w.p_less
            );
        }
        None => {
            let _ = writeln!(o, "- Welch test on time: needs two or more timed runs on each side");
        }
    }
    if let Some(w) = &b.loss_delta {
        let _ = writeln!(
            o,
            "- Welch two-sided p candidate loss vs baseline loss: {:.7}",
            w.p_two_sided
        );
    }
}

fn opt(v: Option<f64>, decimals: usize, unit: &str) -> String {
    match v {
        Some(x) => format!("{x:.decimals$}{unit}"),
        None => "n/a".to_string(),
    }
}

fn list(v: &[f64], decimals: usize) -> String {
    let items: Vec<String> = v.iter().map(|x| format!("{x:.decimals$}")).collect();
    format!("[{}]", items.join(", "))
}
