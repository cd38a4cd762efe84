//! The time model against upstream's logs: every record with a logged train time, predicted
//! from its recipe on its own machine; the fit of the six constants on the named records; the
//! held-out error and the sign of each consecutive Δ time.
use super::achieved::Fractions;
use super::hardware::Hardware;
use super::record::{self, Costed, Stage};
use crate::catalog::{Catalog, RecordId, Track};
use anyhow::Result;
use serde::Serialize;

/// A record with a logged time, its stages counted once (a prediction is then a sum).
pub struct Case {
    pub costed: Costed,
    pub hardware: Hardware,
    stages: Vec<Stage>,
}

impl Case {
    pub fn logged_s(&self) -> f64 {
        self.costed.logged.map_or(f64::NAN, |l| l.train_time_s)
    }

    /// Predicted train time in seconds with the fractions `f`.
    pub fn predicted_s(&self, f: &Fractions) -> f64 {
        let ms: f64 = self
            .stages
            .iter()
            .map(|s| s.steps as f64 * super::predict::step_ms(&s.work, &self.hardware, f).total())
            .sum();
        ms / 1e3
    }

    pub fn timed_steps(&self) -> u64 {
        self.stages.iter().map(|s| s.steps).sum()
    }

    /// The timed steps in `[a, b)` and their predicted milliseconds with the fractions `f`.
    fn predicted_between(&self, (a, b): (u64, u64), f: &Fractions) -> (u64, f64) {
        let mut out = (0, 0.0);
        for s in &self.stages {
            let (lo, hi) = (s.first_step.max(a), (s.first_step + s.steps).min(b));
            if hi > lo {
                out.0 += hi - lo;
                out.1 +=
                    (hi - lo) as f64 * super::predict::step_ms(&s.work, &self.hardware, f).total();
            }
        }
        out
    }

    /// Each span between consecutive validations of its curve log: the logged time over its
    /// timed steps against the predicted (a span the clock does not run in is left out).
    pub fn spans(&self, f: &Fractions) -> Vec<Span> {
        (self.costed.time_curve.windows(2))
            .filter_map(|w| {
                let ((a, ta), (b, tb)) = (w[0], w[1]);
                let (steps, predicted_ms) = self.predicted_between((a, b), f);
                (steps > 0).then(|| {
                    let logged = (tb - ta) * 1e3 / steps as f64;
                    let predicted = predicted_ms / steps as f64;
                    Span {
                        steps: (a, b),
                        logged_ms_per_step: logged,
                        predicted_ms_per_step: predicted,
                        error: predicted / logged - 1.0,
                    }
                })
            })
            .collect()
    }
}

/// Steps `[a, b)` of a record's run between two validations of its log.
#[derive(Debug, Clone, Serialize)]
pub struct Span {
    pub steps: (u64, u64),
    pub logged_ms_per_step: f64,
    pub predicted_ms_per_step: f64,
    /// predicted / logged − 1.
    pub error: f64,
}

/// Every record with a logged time: the main track's records and the upstream records inside
/// their steps, by number, then the other tracks' records.
pub fn cases(catalog: &Catalog, machines: &[Hardware]) -> Result<Vec<Case>> {
    let mut ids: Vec<RecordId> = catalog.track(Track::Main).map(|m| m.id()).collect();
    ids.extend(catalog.inside_steps().iter().map(|(_, u)| RecordId::main(u.number)));
    ids.sort();
    ids.extend(catalog.records().iter().map(|m| m.id()).filter(|id| !id.is_main()));
    let mut out = Vec::new();
    for id in ids {
        let costed = record::of(catalog, id)?;
        if costed.logged.is_none() {
            continue;
        }
        let (hw, gpus) = costed.machine(machines)?;
        let stages = costed.stages(gpus);
        out.push(Case { hardware: hw.clone(), stages, costed });
    }
    Ok(out)
}

/// The fractions that minimise Σ ln²(predicted / logged) over `fit`, by coordinate descent on
/// a log scale from a fixed start (deterministic: the same cases give the same constants).
pub fn fit(fit: &[&Case]) -> Fractions {
    let loss = |f: &Fractions| -> f64 {
        fit.iter().map(|c| (c.predicted_s(f) / c.logged_s()).ln().powi(2)).sum()
    };
    let mut f = Fractions {
        matmul: 0.5,
        fp8: 0.5,
        attention: 0.3,
        memory: 0.5,
        comm: 0.5,
        overhead_ms: 1.0,
    };
    let steps = [0.5, 0.8, 0.9, 0.97, 0.99, 1.01, 1.03, 1.1, 1.25, 2.0];
    for _ in 0..200 {
        let before = loss(&f);
        for k in 0..6 {
            let mut best = (loss(&f), f);
            for m in steps {
                let mut g = f;
                let x = field(&mut g, k);
                *x = if k == 5 { (*x * m).clamp(0.0, 100.0) } else { (*x * m).clamp(0.01, 1.0) };
                let l = loss(&g);
                if l < best.0 {
                    best = (l, g);
                }
            }
            f = best.1;
        }
        if (before - loss(&f)).abs() < 1e-12 {
            break;
        }
    }
    f
}

fn field(f: &mut Fractions, k: usize) -> &mut f64 {
    match k {
        0 => &mut f.matmul,
        1 => &mut f.fp8,
        2 => &mut f.attention,
        3 => &mut f.memory,
        4 => &mut f.comm,
        _ => &mut f.overhead_ms,
    }
}

/// One row of the validation table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub record: String,
    pub hardware: String,
    pub logs: usize,
    pub logged_ms_per_step: f64,
    pub predicted_ms_per_step: f64,
    /// predicted / logged − 1.
    pub error: f64,
    pub fitted: bool,
    pub same_math: Option<String>,
    /// Stage by stage: each span between validations of its curve log, where it has one.
    pub spans: Vec<Span>,
}

/// The held-out spans of one machine's records.
#[derive(Debug, Clone, Serialize)]
pub struct SpanSummary {
    pub hardware: String,
    pub spans: usize,
    pub median_abs_error: f64,
}

/// A consecutive pair whose logged train time moves by more than 2%.
#[derive(Debug, Clone, Serialize)]
pub struct Pair {
    pub from: String,
    pub to: String,
    pub logged_delta: f64,
    pub predicted_delta: f64,
    pub sign_right: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub rows: Vec<Row>,
    pub held_out: usize,
    pub median_abs_error: f64,
    /// Over the held-out records' spans between validations, per machine: Act 1's hundreds of
    /// spans on 2×RTX 4090 would drown the main track's few.
    pub spans: Vec<SpanSummary>,
    pub pairs: Vec<Pair>,
}

pub fn report(cases: &[Case], fitted_on: &[String], f: &Fractions) -> Report {
    // (logged, predicted) train time per case, counted once: a prediction walks every step.
    let times: Vec<(f64, f64)> = cases.iter().map(|c| (c.logged_s(), c.predicted_s(f))).collect();
    let rows: Vec<Row> = cases
        .iter()
        .zip(&times)
        .map(|(c, &(logged, predicted))| {
            let steps = c.timed_steps().max(1) as f64;
            Row {
                record: c.costed.id.to_string(),
                hardware: c.costed.hardware.clone(),
                logs: c.costed.logged.map_or(0, |l| l.logs),
                logged_ms_per_step: logged * 1e3 / steps,
                predicted_ms_per_step: predicted * 1e3 / steps,
                error: predicted / logged - 1.0,
                fitted: fitted_on.contains(&c.costed.id.to_string()),
                same_math: c.costed.same_math.clone(),
                spans: c.spans(f),
            }
        })
        .collect();
    let held_out = || rows.iter().filter(|r| !r.fitted);
    let errors: Vec<f64> = held_out().map(|r| r.error.abs()).collect();
    let mut machines: Vec<&str> = held_out().map(|r| r.hardware.as_str()).collect();
    machines.dedup();
    let spans = (machines.into_iter())
        .map(|hw| {
            let on = held_out().filter(|r| r.hardware == hw);
            let errors: Vec<f64> = on.flat_map(|r| &r.spans).map(|s| s.error.abs()).collect();
            SpanSummary {
                hardware: hw.to_string(),
                spans: errors.len(),
                median_abs_error: median(errors),
            }
        })
        .filter(|s| s.spans > 0)
        .collect();
    Report {
        held_out: errors.len(),
        median_abs_error: median(errors),
        spans,
        pairs: pairs(cases, &times),
        rows,
    }
}

/// The median of `x` (NaN for none): the mean of the middle two for an even count.
pub fn median(mut x: Vec<f64>) -> f64 {
    x.sort_by(f64::total_cmp);
    match x.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => x[n / 2],
        n => (x[n / 2 - 1] + x[n / 2]) / 2.0,
    }
}

/// Consecutive records of one track (in the table's order) whose logged time moves > 2%.
fn pairs(cases: &[Case], times: &[(f64, f64)]) -> Vec<Pair> {
    let id = |i: usize| &cases[i].costed.id;
    (1..cases.len())
        .filter(|&i| id(i - 1).is_main() == id(i).is_main())
        .filter_map(|i| {
            let ((l0, p0), (l1, p1)) = (times[i - 1], times[i]);
            let (logged, predicted) = (l1 / l0 - 1.0, p1 / p0 - 1.0);
            (logged.abs() > 0.02).then(|| Pair {
                from: id(i - 1).to_string(),
                to: id(i).to_string(),
                logged_delta: logged,
                predicted_delta: predicted,
                sign_right: predicted != 0.0 && predicted.signum() == logged.signum(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::{achieved, hardware, predict};

    #[test]
    fn the_spans_of_a_curve_log_add_up_to_its_run_and_a_span_in_one_stage_is_that_stage() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let catalog = Catalog::load(&root).unwrap();
        let machines = hardware::all(&root).unwrap();
        let f = achieved::read(&root).unwrap().fractions;
        let all = cases(&catalog, &machines).unwrap();
        let c = all.iter().find(|c| c.costed.id == RecordId::main(84)).unwrap();
        let spans = c.spans(&f);
        let curve = &c.costed.time_curve;
        assert_eq!(spans.len(), curve.len() - 1);
        // #84 times every step, so the spans' steps are the run's and their times its total.
        let steps = |s: &Span| (s.steps.1 - s.steps.0) as f64;
        let predicted: f64 = spans.iter().map(|s| s.predicted_ms_per_step * steps(s)).sum();
        let logged: f64 = spans.iter().map(|s| s.logged_ms_per_step * steps(s)).sum();
        assert!((predicted - 1e3 * c.predicted_s(&f)).abs() < 1e-6, "{predicted}");
        assert!((logged - 1e3 * curve[curve.len() - 1].1).abs() < 1e-6, "{logged}");
        // Steps 0-250 lie in the first stage (0-481): the span's step is that stage's.
        let first = &c.stages[0];
        assert!(first.first_step == 0 && first.steps > 250);
        let ms = predict::step_ms(&first.work, &c.hardware, &f).total();
        assert_eq!(spans[0].steps, (0, 250));
        assert!((spans[0].predicted_ms_per_step - ms).abs() < 1e-9);
        assert!((spans[0].logged_ms_per_step - curve[1].1 * 1e3 / 250.0).abs() < 1e-9);
    }
}
