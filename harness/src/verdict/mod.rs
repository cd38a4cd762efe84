//! The verdict on a replay: did our runs reach the record's target loss within its step budget,
//! how long did they take on this machine, and how does that compare with the parent record
//! re-timed here. Official (upstream 8×H100) figures are carried alongside, always labelled.
use crate::text::figures;
use runlog::RunLog;
use serde::{Deserialize, Serialize};
use stats::{Summary, TTest, Welch};

mod render;
pub mod runlog;
pub mod stats;

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
    /// The log's name, for runs judged from logs given on the command line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// This run's step budget: the replay's, or the one a log states (`step:N/M`).
    /// `None` in verdicts written before budgets were per run: then [`Verdict::steps`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u64>,
    /// Step of the last validation line.
    pub final_step: Option<u64>,
    /// Loss of the last validation line; `None` without one or when it was `nan`.
    pub final_val_loss: Option<f64>,
    /// Train time at the last validation line (upstream's record figure), else at the last step.
    pub train_time_s: Option<f64>,
    /// The last validation happened at the step budget (or, for a log, at the target, where
    /// the run stopped: track 3 counts the steps to the target).
    pub finished: bool,
    pub first_at_target: Option<Hit>,
    pub peak_mem_allocated_mib: Option<u64>,
}

impl RunResult {
    /// `stops_at_target`: a run that validated at or below the target and logged no step after
    /// it finished there (upstream's track 3 stops at the target, before its schedule's end).
    fn of(log: &RunLog, target: f64, steps: u64, stops_at_target: bool) -> RunResult {
        let last = log.final_val();
        let last_train_time = log.train.iter().rev().find_map(|p| p.train_time_ms);
        let stopped_at_target = stops_at_target
            && last.is_some_and(|v| {
                v.step < steps
                    && v.val_loss <= target
                    && log.train.last().is_none_or(|t| t.step <= v.step)
            });
        RunResult {
            name: None,
            steps: Some(steps),
            final_step: last.map(|v| v.step),
            final_val_loss: last.map(|v| v.val_loss).filter(|l| l.is_finite()),
            train_time_s: last
                .and_then(|v| v.train_time_ms)
                .or(last_train_time)
                .map(|ms| ms / 1000.0),
            finished: last.is_some_and(|v| v.step == steps) || stopped_at_target,
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
    /// Where the target comes from, when it is not upstream's 3.28 for the reason the command
    /// line gives (a lab log judged against its record's lab target).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_from: Option<String>,
    /// The step budget: the replay's; for logs, the largest of theirs (see
    /// [`Verdict::common_steps`]).
    pub steps: u64,
    /// The record's official time on upstream's 8×H100, seconds; `None` for logs judged on
    /// their own (`records verdict`).
    #[serde(default)]
    pub official_time_s: Option<f64>,
    /// Where the official time was set when not on upstream's 8×H100 (Act 1: `2×RTX4090`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub official_hardware: Option<String>,
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
    /// The runs are logs given on the command line, not replays on this machine.
    #[serde(default)]
    pub from_logs: bool,
    /// Why our times are not comparable with other runs on this machine (another timed run ran
    /// beside them, see `timing_lock`); `None` when they ran alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_not_comparable: Option<String>,
    /// The CPU the lab runs ran on (`lab_target::this_cpu`), whose lab target judged them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// The reference record (`#1`, `#29`, `a1`) when this run measured the lab target it would
    /// be judged against (that record's first whole-budget replay on this CPU): the run is the
    /// baseline, and `reached` says nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sets_target: Option<String>,
}

impl Verdict {
    /// Judges `runs` (ours, this machine) against `target_loss` within `steps` steps, the
    /// replay's budget.
    pub fn new(
        runs: &[RunLog],
        target_loss: f64,
        official_time_s: f64,
        steps: u64,
    ) -> Result<Verdict, VerdictError> {
        let results = runs.iter().map(|r| RunResult::of(r, target_loss, steps, false)).collect();
        let mut v = Verdict::of_results(results, target_loss)?;
        v.official_time_s = Some(official_time_s);
        v.from_logs = false;
        Ok(v)
    }

    /// Judges any run logs (upstream's, or a user's own GPU runs) against `target_loss`, with
    /// no official time to compare with. Each log is judged by its own step budget, the one its
    /// `step:N/M` lines state; logs that state none (llm.c's `s:N`) by `steps`, else by the
    /// last validation step of the longest of them.
    pub fn of_logs(
        runs: &[RunLog],
        target_loss: f64,
        steps: Option<u64>,
    ) -> Result<Verdict, VerdictError> {
        let unstated = runs.iter().filter(|r| r.stated_steps().is_none());
        let fallback = steps.unwrap_or_else(|| {
            unstated.filter_map(|l| l.final_val()).map(|v| v.step).max().unwrap_or(0)
        });
        let results = runs
            .iter()
            .map(|r| {
                let budget = r.stated_steps().unwrap_or(fallback);
                RunResult::of(r, target_loss, budget, true)
            })
            .collect();
        Verdict::of_results(results, target_loss)
    }

    fn of_results(results: Vec<RunResult>, target_loss: f64) -> Result<Verdict, VerdictError> {
        if results.is_empty() {
            return Err(VerdictError::NoRuns);
        }
        let losses: Vec<f64> = results.iter().filter_map(|r| r.final_val_loss).collect();
        let times_s: Vec<f64> = results.iter().filter_map(|r| r.train_time_s).collect();
        let loss = Summary::of(&losses);
        let identical = loss.as_ref().is_some_and(|s| s.std == Some(0.0));
        let loss_test =
            if identical { None } else { stats::ttest_1samp_less(&losses, target_loss) };
        let (reached, reason) = judge(&results, loss.as_ref(), loss_test, target_loss);
        Ok(Verdict {
            target_loss,
            steps: results.iter().filter_map(|r| r.steps).max().unwrap_or(0),
            target_from: None,
            official_time_s: None,
            official_hardware: None,
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
            from_logs: true,
            time_not_comparable: None,
            cpu: None,
            sets_target: None,
        })
    }

    /// The budget every run shares, `None` when the logs' budgets differ.
    pub fn common_steps(&self) -> Option<u64> {
        let mut budgets = self.runs.iter().map(|r| r.steps.unwrap_or(self.steps));
        let first = budgets.next()?;
        budgets.all(|b| b == first).then_some(first)
    }

    /// Says where the target comes from (a lab log's record), shown under the verdict.
    pub fn target_from(mut self, from: Option<String>) -> Verdict {
        self.target_from = from;
        self
    }

    /// Names the hardware of the official time, when it is not upstream's 8×H100.
    pub fn official_on(mut self, hardware: Option<String>) -> Verdict {
        self.official_hardware = hardware;
        self
    }

    /// Names the CPU the lab runs ran on.
    pub fn on_cpu(mut self, cpu: &str) -> Verdict {
        self.cpu = Some(cpu.to_string());
        self
    }

    /// Marks our runs as lab scale: the official time is then shown only as context.
    pub fn at_lab_scale(mut self) -> Verdict {
        self.lab_scale = true;
        self
    }

    /// Marks the run as reference record `record`'s replay that set its own target: its
    /// verdict is the baseline, and `next` says what to run for a verdict that means something.
    pub fn setting_the_target(mut self, record: &str, next: &str) -> Verdict {
        self.sets_target = Some(record.to_string());
        self.reason = format!(
            "the target every later lab verdict of its era on this CPU is judged against, not a \
             result: nothing was compared. Next: {next}"
        );
        self
    }

    /// The verdict in one word, as its header says it: BASELINE, REACHED or NOT REACHED.
    pub fn word(&self) -> &'static str {
        match (self.sets_target.is_some(), self.reached) {
            (true, _) => "BASELINE",
            (false, true) => "REACHED",
            (false, false) => "NOT REACHED",
        }
    }

    /// The same in running text: `baseline`, `reached`, `NOT REACHED`.
    pub fn mark(&self) -> &'static str {
        match (self.sets_target.is_some(), self.reached) {
            (true, _) => "baseline",
            (false, true) => "reached",
            (false, false) => "NOT REACHED",
        }
    }

    /// Marks our times as not comparable, saying why.
    pub fn time_not_comparable(mut self, why: Option<String>) -> Verdict {
        self.time_not_comparable = why;
        self
    }

    /// Adds the comparison with `baseline`: the parent record's runs, re-timed on this machine.
    pub fn with_baseline(mut self, baseline: &[RunLog]) -> Verdict {
        let results: Vec<RunResult> = baseline
            .iter()
            .map(|r| RunResult::of(r, self.target_loss, self.steps, false))
            .collect();
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
}

/// `reached` and its reason.
fn judge(
    runs: &[RunResult],
    loss: Option<&Summary>,
    test: Option<TTest>,
    target: f64,
) -> (bool, String) {
    let unfinished: Vec<&RunResult> = runs.iter().filter(|r| !r.finished).collect();
    if let Some(first) = unfinished.first() {
        let who = match runs.len() {
            1 => "the run".to_string(),
            n => format!("{} of {n} runs", unfinished.len()),
        };
        let same = unfinished.iter().all(|r| r.steps == first.steps);
        return match first.steps {
            Some(steps) if same => (false, format!("{who} did not validate at step {steps}")),
            _ => (false, format!("{who} did not validate at the last step of their budget")),
        };
    }
    let Some(loss) = loss.filter(|l| l.n == runs.len()) else {
        return (false, "a run ended with a val loss of nan".to_string());
    };
    let mean = figures::loss(loss.mean);
    if loss.mean > target {
        return (false, format!("mean val loss {mean} is above {target}"));
    }
    match test {
        None if loss.n >= 2 => (
            true,
            format!(
                "all {} runs ended at val loss {mean} ≤ {target}; identical losses (same seed?) \
                 make the t-test meaningless, so this counts as one run",
                loss.n
            ),
        ),
        None => (
            true,
            format!("one run: val loss {mean} ≤ {target} (run more to test p < {P_THRESHOLD})"),
        ),
        Some(t) => {
            let below = t.p < P_THRESHOLD;
            let verdict = if below { "below" } else { "not below" };
            (
                below,
                format!(
                    "mean val loss {mean} ≤ {target}; {}, {verdict} {P_THRESHOLD}",
                    t.stated(target)
                ),
            )
        }
    }
}

impl TTest {
    /// The one-sided one-sample test of the speedrun's loss rule, stated as what it is:
    /// `one-sided t-test of mean < 3.28: p = 0.0001 (t = −8.80, df = 6)`.
    pub fn stated(&self, target: f64) -> String {
        format!(
            "one-sided t-test of mean < {target}: p = {} (t = {}, df = {})",
            figures::p_value(self.p),
            figures::t_stat(self.t),
            figures::dof(self.df)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loss_test_says_what_it_tests() {
        let t = TTest { t: -8.8012, df: 6.0, p: 0.000_06 };
        let want = "one-sided t-test of mean < 3.28: p = 0.0001 (t = −8.80, df = 6)";
        assert_eq!(t.stated(3.28), want);
    }
}
