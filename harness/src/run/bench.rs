//! `records bench`: the training step of each record, timed in interleaved rounds so the
//! machine's noise hits every record alike, summarised as ms/step, tokens/s and ratios.
//!
//! Each record runs its own schedule over its own budget (a step's batch, windows and stage are
//! what they are in a replay), stopped after the timed window ([`At`]: its first steps, its
//! last, or from a given step). A step's time is the difference of two consecutive
//! `train_time:` figures of the trainer's log (validation runs on a paused clock, so it is never
//! inside one), and its tokens are what the trainer's metrics.jsonl counts for that step. The
//! `warmup` steps before the window are left out. Ratios are of median step times measured in
//! the same rounds; they are what compares across machines, the absolute times are this
//! machine's.
use crate::catalog::RecordId;
use crate::verdict::runlog::RunLog;
use crate::verdict::stats;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;

/// Where in a record's schedule the timed steps sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// Right after the warmup steps: the first stage (cheap: nothing later runs).
    First,
    /// The last steps of the budget: the last stage, at the full batch (runs the whole budget).
    Last,
    /// The warmup, then the timed steps, from this step on.
    Step(u64),
}

impl std::str::FromStr for At {
    type Err = String;
    fn from_str(s: &str) -> Result<At, String> {
        match s {
            "first" => Ok(At::First),
            "last" => Ok(At::Last),
            n => n.parse().map(At::Step).map_err(|_| format!("`{n}`: use first, last or a step")),
        }
    }
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            At::First => write!(f, "first"),
            At::Last => write!(f, "last"),
            At::Step(n) => write!(f, "from step {n}"),
        }
    }
}

/// The steps one run times: those after `skip` up to `stop`, where the trainer stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Window {
    pub skip: u64,
    pub stop: u64,
}

impl At {
    /// The window of `warmup` + `timed` steps in a budget of `budget` steps.
    pub fn window(self, budget: u64, warmup: u64, timed: u64) -> Result<Window> {
        let need = warmup + timed;
        let start = match self {
            At::First => 0,
            At::Last => budget.saturating_sub(need),
            At::Step(n) => n,
        };
        if start + need > budget {
            bail!(
                "{warmup} warmup + {timed} timed steps {self} do not fit in a budget of {budget} steps"
            );
        }
        Ok(Window { skip: start + warmup, stop: start + need })
    }
}

/// H100 SXM bf16 dense peak, TFLOP/s: the MFU denominator unless `--peak-tflops` says otherwise.
pub const H100_BF16_TFLOPS: f64 = 989.0;

/// The per-step times (ms) of one run's log, leaving out its steps up to `warmup`.
pub fn step_times(log: &RunLog, warmup: u64) -> Result<Vec<f64>> {
    if warmup == 0 {
        bail!("--warmup must be at least 1: the first step's time has no earlier figure to differ from");
    }
    let mut points: Vec<(u64, f64)> =
        log.train.iter().filter_map(|p| Some((p.step, p.train_time_ms?))).collect();
    points.sort_by_key(|p| p.0);
    let times: Vec<f64> = points
        .windows(2)
        .filter(|w| w[1].0 == w[0].0 + 1 && w[1].0 > warmup)
        .map(|w| w[1].1 - w[0].1)
        .collect();
    if times.is_empty() {
        bail!("the log has no timed step after the {warmup} warmup steps");
    }
    Ok(times)
}

/// A `# key: value` header of our logs, parsed as a number (`# parameters: 12345`).
pub fn header_number(log: &RunLog, key: &str) -> Option<u64> {
    log.header_value(key)?.trim().parse().ok()
}

/// The tokens the steps after `skip` trained on (all ranks), from the trainer's metrics.jsonl,
/// whose train lines count tokens from the start: a step's own is the difference.
pub fn window_tokens(metrics: &Path, skip: u64) -> Result<u64> {
    let text = std::fs::read_to_string(metrics)
        .with_context(|| format!("reading {}", metrics.display()))?;
    let mut at_skip = 0;
    let mut last = None;
    for (i, line) in text.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{}:{}", metrics.display(), i + 1))?;
        if v["type"] != "train" {
            continue;
        }
        let (Some(step), Some(tokens)) = (v["step"].as_u64(), v["tokens"].as_u64()) else {
            bail!("{}:{}: a train line without step or tokens", metrics.display(), i + 1);
        };
        if step == skip {
            at_skip = tokens;
        }
        last = Some((step, tokens));
    }
    match last {
        Some((step, tokens)) if step > skip => Ok(tokens - at_skip),
        _ => bail!("{}: no train step after step {skip}", metrics.display()),
    }
}

/// Median and spread of a sample of step times (ms).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    pub n: usize,
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
    /// Median absolute deviation from the median.
    pub mad: f64,
}

impl Spread {
    pub fn of(x: &[f64]) -> Option<Spread> {
        let median = stats::median(x)?;
        let dev: Vec<f64> = x.iter().map(|v| (v - median).abs()).collect();
        Some(Spread {
            n: x.len(),
            median,
            p10: quantile(x, 0.1)?,
            p90: quantile(x, 0.9)?,
            mad: stats::median(&dev)?,
        })
    }
}

/// The `q` quantile with linear interpolation between order statistics (numpy's default).
pub fn quantile(x: &[f64], q: f64) -> Option<f64> {
    if x.is_empty() {
        return None;
    }
    let mut v = x.to_vec();
    v.sort_by(f64::total_cmp);
    let pos = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    Some(v[lo] + (v[hi] - v[lo]) * (pos - lo as f64))
}

/// What one record's runs measured, round by round.
pub struct Samples {
    pub record: RecordId,
    pub title: String,
    pub parent: Option<RecordId>,
    /// The git tree id of the trainer that ran.
    pub tree: String,
    /// Step times (ms) of each round's run.
    pub rounds: Vec<Vec<f64>>,
    /// Tokens the timed steps trained on, all rounds together.
    pub tokens: u64,
    /// The timed steps of each run in the record's own budget.
    pub window: Window,
    pub budget: u64,
    pub parameters: Option<u64>,
    pub peak_mem_allocated_mib: Option<u64>,
}

/// One record's step time against another record's, measured in the same rounds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ratio {
    /// The record compared with.
    pub of: RecordId,
    /// Median step time of this record over the other's.
    pub median: f64,
    /// The same ratio, round by round (medians of each round).
    pub rounds_min: f64,
    pub rounds_max: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RecordBench {
    pub record: RecordId,
    pub title: String,
    pub parent: Option<RecordId>,
    pub tree: String,
    pub ms_per_step: Spread,
    /// Median step time of each round.
    pub round_medians_ms: Vec<f64>,
    /// Timed steps `window.skip + 1 ..= window.stop` of `budget`.
    pub window: Window,
    pub budget: u64,
    /// Mean tokens of a timed step, as the trainer counted them (all ranks).
    pub tokens_per_step: f64,
    /// Tokens of the timed steps over their time.
    pub tokens_per_s: f64,
    pub parameters: Option<u64>,
    /// Against the first record of the series (#1), when it was benched too.
    pub ratio_to_first: Option<Ratio>,
    /// Against the record's parent, when it was benched too.
    pub ratio_to_parent: Option<Ratio>,
    /// Model FLOPs utilisation on CUDA: 6 FLOPs per parameter per token (attention scores left
    /// out) at the median step time, over the peak.
    pub mfu: Option<f64>,
    pub peak_mem_allocated_mib: Option<u64>,
}

/// Where and how the bench ran.
#[derive(Debug, Clone, Serialize)]
pub struct Setup {
    pub date_utc: String,
    /// "lab" or "full".
    pub scale: String,
    /// The trainer's device line (`cpu (2 threads)`, `cuda:0 (NVIDIA H100 ...)`).
    pub device: String,
    /// The CPU model (/proc/cpuinfo).
    pub cpu: String,
    pub rounds: u32,
    pub warmup_steps: u64,
    pub timed_steps: u64,
    /// Where in each record's schedule the timed steps sit: `first`, `last`, `from step N`.
    pub at: String,
    /// The MFU denominator on CUDA, TFLOP/s; `None` on CPU.
    pub peak_tflops: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Bench {
    #[serde(flatten)]
    pub setup: Setup,
    /// Why the times are not comparable (another timed run ran beside this one); `None` when it
    /// ran alone.
    pub time_not_comparable: Option<String>,
    pub records: Vec<RecordBench>,
}

impl Bench {
    /// Summarises `samples` (one per record, in the order benched). `first` is the series' first
    /// record, the common reference of every ratio.
    pub fn new(setup: Setup, samples: &[Samples], first: impl Into<RecordId>) -> Result<Bench> {
        let first = first.into();
        let mut records = Vec::new();
        for s in samples {
            let all: Vec<f64> = s.rounds.concat();
            let Some(ms) = Spread::of(&all) else {
                bail!("record {}: no timed steps", s.record);
            };
            let round_medians_ms = s.rounds.iter().filter_map(|r| stats::median(r)).collect();
            let tokens_per_s = s.tokens as f64 / (all.iter().sum::<f64>() / 1e3);
            let tokens_per_step = s.tokens as f64 / all.len() as f64;
            let mfu = match (setup.peak_tflops, s.parameters) {
                (Some(peak), Some(p)) => Some(6.0 * p as f64 * tokens_per_s / (peak * 1e12)),
                _ => None,
            };
            let against = |other: Option<RecordId>| {
                let o = samples.iter().find(|o| Some(o.record) == other && o.record != s.record)?;
                ratio(s, o)
            };
            records.push(RecordBench {
                record: s.record,
                title: s.title.clone(),
                parent: s.parent,
                tree: s.tree.clone(),
                ms_per_step: ms,
                round_medians_ms,
                window: s.window,
                budget: s.budget,
                tokens_per_step,
                tokens_per_s,
                parameters: s.parameters,
                ratio_to_first: against(Some(first)),
                ratio_to_parent: against(s.parent),
                mfu,
                peak_mem_allocated_mib: s.peak_mem_allocated_mib,
            });
        }
        Ok(Bench { setup, time_not_comparable: None, records })
    }

    /// A markdown table with a heading line, as docs/perf.md shows it.
    pub fn render(&self) -> String {
        let s = &self.setup;
        let mut o = String::new();
        let _ = writeln!(
            o,
            "records bench, {} scale on {} ({}), {}: {} rounds x {} timed steps per record after {} warmup steps, {} in each record's own schedule (ours, this machine)",
            s.scale, s.device, s.cpu, s.date_utc, s.rounds, s.timed_steps, s.warmup_steps, s.at
        );
        if let Some(why) = &self.time_not_comparable {
            let _ = writeln!(o, "Times NOT COMPARABLE: {why}");
        }
        let cuda = s.peak_tflops.is_some();
        let _ = write!(
            o,
            "\n| record | steps | tokens/step | ms/step (median) | p10-p90 | MAD | tokens/s | vs #1 | vs parent |"
        );
        if let Some(peak) = s.peak_tflops {
            let _ = write!(o, " MFU (of {peak} TFLOP/s) | peak memory |");
        }
        let _ = write!(o, "\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
        if cuda {
            o.push_str(" ---: | ---: |");
        }
        o.push('\n');
        for r in &self.records {
            let m = &r.ms_per_step;
            let _ = write!(
                o,
                "| {} | {}-{} of {} | {:.0} | {:.1} | {:.1}-{:.1} | {:.1} | {:.0} | {} | {} |",
                r.record,
                r.window.skip + 1,
                r.window.stop,
                r.budget,
                r.tokens_per_step,
                m.median,
                m.p10,
                m.p90,
                m.mad,
                r.tokens_per_s,
                show_ratio(r.ratio_to_first.as_ref()),
                show_ratio(r.ratio_to_parent.as_ref()),
            );
            if cuda {
                let _ = write!(
                    o,
                    " {} | {} |",
                    r.mfu.map_or("n/a".to_string(), |f| format!("{:.1}%", 100.0 * f)),
                    r.peak_mem_allocated_mib.map_or("n/a".to_string(), |m| format!("{m} MiB"))
                );
            }
            o.push('\n');
        }
        let _ = writeln!(
            o,
            "\nsteps: the timed steps in the record's own budget; tokens/step: what the trainer counted for them (the batch of that stage); vs: median step time over the other record's (lower is faster), with the range of the per-round ratios."
        );
        o
    }
}

/// `s`'s median step time over `o`'s, overall and round by round.
fn ratio(s: &Samples, o: &Samples) -> Option<Ratio> {
    let median = stats::median(&s.rounds.concat())? / stats::median(&o.rounds.concat())?;
    let per_round: Vec<f64> = s
        .rounds
        .iter()
        .zip(&o.rounds)
        .filter_map(|(a, b)| Some(stats::median(a)? / stats::median(b)?))
        .collect();
    Some(Ratio {
        of: o.record,
        median,
        rounds_min: per_round.iter().copied().fold(f64::INFINITY, f64::min),
        rounds_max: per_round.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    })
}

fn show_ratio(r: Option<&Ratio>) -> String {
    match r {
        Some(r) => format!("{:.2}x {} ({:.2}-{:.2})", r.median, r.of, r.rounds_min, r.rounds_max),
        None => "-".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let x = [4.0, 1.0, 3.0, 2.0, 5.0];
        assert_eq!(quantile(&x, 0.5), Some(3.0));
        assert_eq!(quantile(&x, 0.1), Some(1.4));
        assert!((quantile(&x, 0.9).unwrap() - 4.6).abs() < 1e-12);
        assert_eq!(quantile(&[], 0.5), None);
        let s = Spread::of(&[10.0, 11.0, 12.0, 30.0]).unwrap();
        assert_eq!((s.median, s.mad), (11.5, 1.0));
    }

    #[test]
    fn step_times_are_differences_after_warmup() {
        let log = crate::verdict::runlog::parse(
            "# recipe: {\"batch_tokens\": 2048}\n# parameters: 100\n\
             step:0/4 val_loss:5.0 train_time:0ms step_avg:0.00ms\n\
             step:1/4 train_loss:5.0 train_time:0ms step_avg:0.00ms\n\
             step:2/4 train_loss:4.0 train_time:120ms step_avg:120.00ms\n\
             step:3/4 train_loss:3.0 train_time:230ms step_avg:115.00ms\n\
             step:4/4 train_loss:2.0 train_time:350ms step_avg:116.67ms\n\
             step:4/4 val_loss:2.0 train_time:350ms step_avg:116.67ms\n",
        );
        assert_eq!(step_times(&log, 1).unwrap(), vec![120.0, 110.0, 120.0]);
        assert_eq!(step_times(&log, 2).unwrap(), vec![110.0, 120.0]);
        assert!(step_times(&log, 4).is_err(), "no step after the warmup");
        assert!(step_times(&log, 0).is_err());
        assert_eq!(header_number(&log, "parameters"), Some(100));
    }

    #[test]
    fn windows_sit_where_they_are_asked_for_in_the_budget() {
        let w = |at: At| at.window(222, 2, 8).map(|w| (w.skip, w.stop));
        assert_eq!(w(At::First).unwrap(), (2, 10));
        assert_eq!(w(At::Last).unwrap(), (214, 222));
        assert_eq!(w(At::Step(100)).unwrap(), (102, 110));
        assert!(w(At::Step(213)).is_err(), "past the budget");
        assert!(At::First.window(5, 2, 8).is_err());
        assert_eq!("last".parse::<At>(), Ok(At::Last));
        assert_eq!("148".parse::<At>(), Ok(At::Step(148)));
        assert!("middle".parse::<At>().is_err());
    }

    #[test]
    fn window_tokens_are_the_trainers_counts_of_the_timed_steps() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        let line = |step: u64, tokens: u64| {
            format!("{{\"type\":\"train\",\"step\":{step},\"loss\":5.0,\"lr\":0.1,\"tokens\":{tokens},\"train_time_ms\":1.0}}\n")
        };
        // A stage change after step 2: 688 tokens a step, then 1,360.
        let text = [line(1, 688), line(2, 1376), line(3, 2736), line(4, 4096)].concat();
        std::fs::write(&path, format!("{{\"type\":\"val\",\"step\":0,\"val_loss\":5.0}}\n{text}"))
            .unwrap();
        assert_eq!(window_tokens(&path, 2).unwrap(), 2 * 1360);
        assert_eq!(window_tokens(&path, 0).unwrap(), 4096);
        assert!(window_tokens(&path, 4).is_err());
    }

    #[test]
    fn ratios_compare_medians_of_the_same_rounds() {
        let sample = |record, parent, rounds: Vec<Vec<f64>>| Samples {
            record,
            title: String::new(),
            parent,
            tree: String::new(),
            tokens: 1000 * rounds.iter().map(Vec::len).sum::<usize>() as u64,
            rounds,
            window: Window { skip: 1, stop: 3 },
            budget: 250,
            parameters: Some(1_000_000),
            peak_mem_allocated_mib: None,
        };
        let setup = Setup {
            date_utc: String::new(),
            scale: "lab".into(),
            device: "cpu".into(),
            cpu: String::new(),
            rounds: 2,
            warmup_steps: 1,
            timed_steps: 2,
            at: "first".into(),
            peak_tflops: None,
        };
        let a = sample(1.into(), None, vec![vec![100.0, 100.0], vec![200.0, 200.0]]);
        let b = sample(29.into(), Some(1.into()), vec![vec![150.0, 150.0], vec![300.0, 300.0]]);
        let bench = Bench::new(setup, &[a, b], 1).unwrap();
        let (one, new) = (&bench.records[0], &bench.records[1]);
        assert!(one.ratio_to_first.is_none(), "no ratio of a record to itself");
        let r = new.ratio_to_first.as_ref().unwrap();
        assert_eq!((r.of, r.median, r.rounds_min, r.rounds_max), (1.into(), 1.5, 1.5, 1.5));
        assert_eq!(new.ratio_to_parent, new.ratio_to_first);
        // 4,000 tokens in 0.9 s.
        assert!((new.tokens_per_s - 4000.0 / 0.9).abs() < 1e-9, "{}", new.tokens_per_s);
        assert!(new.mfu.is_none(), "no MFU on CPU");
        let table = bench.render();
        assert!(
            table.contains(
                "| #29 | 2-3 of 250 | 1000 | 225.0 | 150.0-300.0 | 75.0 | 4444 | 1.50x #1 (1.50-1.50) |"
            ),
            "{table}"
        );
    }
}
