//! A walk as a person reads it: a table of what each record changed and what it bought (the
//! official time; the predicted time per step, from the time model; ours: the lab val loss at
//! equal steps), so a reader sees whether a change bought steps, time per step, or both; and two
//! charts over the records, the lab loss stepping down (or up) beside upstream's time.
use super::plot::{Chart, Curve, Source, Target, XAxis, YAxis};
use super::predicted;
use crate::catalog::RecordId;
use crate::run::walk::{Stop, Walk};
use crate::text::figures::{loss, loss_delta, ms, secs, secs_delta};
use crate::text::table::{clip, Format, Table};
use crate::verdict::stats;

/// The hardware of the official times of the walk's track: 8×H100 on the main track.
fn hardware(walk: &Walk) -> String {
    walk.from.track.def().hardware.replacen('x', "×", 1)
}

/// The table's columns.
pub const COLUMNS: usize = 7;

/// The machine the stops' steps are predicted on (each on its own: one per track).
fn machine(walk: &Walk) -> String {
    let named = walk.stops.iter().find_map(|s| s.predicted.as_ref());
    named.map_or_else(|| hardware(walk), |p| p.machine.clone())
}

/// The table's header, for `walk` of `runs` seeds at `steps`.
pub fn header(walk: &Walk) -> [String; COLUMNS] {
    let runs = walk.seeds.len();
    let per = if runs > 1 { format!(", mean ± sd of {runs} seeds") } else { String::new() };
    [
        "record".to_string(),
        "what changed".to_string(),
        format!("official ({})", hardware(walk)),
        "Δ official".to_string(),
        format!("Δ predicted/step ({})", machine(walk)),
        format!("lab val @{} (ours{per})", walk.steps),
        "Δ lab (ours, paired by seed)".to_string(),
    ]
}

/// One row per stop: the record, what it changed, its official time and delta, our lab val
/// loss and its delta from the stop before.
pub fn rows(walk: &Walk) -> Vec<[String; COLUMNS]> {
    (walk.stops.iter().enumerate())
        .map(|(i, s)| {
            let changed = match (i, s.same_math, s.same_at_lab) {
                (0, _, _) => "(start)".to_string(),
                (_, true, _) => "= same math".to_string(),
                (_, _, true) => format!("= at lab scale: {}", s.changed),
                _ => s.changed.clone(),
            };
            let before = i.checked_sub(1).map(|b| &walk.stops[b]);
            let (d_official, d_predicted, d_lab) = match before {
                None => (String::new(), own_predicted(s), String::new()),
                Some(b) => (
                    secs_delta(s.official_s - b.official_s),
                    predicted_delta(b, s),
                    spread(&walk.deltas(i), loss_delta),
                ),
            };
            [
                format!("{} {}", s.number, s.title),
                changed,
                secs(s.official_s),
                d_official,
                d_predicted,
                spread(&s.losses(), loss),
                d_lab,
            ]
        })
        .collect()
}

/// The first stop's predicted step, where the deltas below it start.
fn own_predicted(s: &Stop) -> String {
    s.predicted.as_ref().map_or(String::new(), |p| format!("{}/step", ms(p.ms_per_step)))
}

/// `+4.24 ms (+7.5%)`, or `-` where a stop has no prediction.
fn predicted_delta(before: &Stop, after: &Stop) -> String {
    match (&before.predicted, &after.predicted) {
        (Some(b), Some(a)) => predicted::delta(b, a),
        _ => "-".into(),
    }
}

/// The whole way from the first stop to the last, in one line.
pub fn total(walk: &Walk) -> String {
    let (a, b) = (&walk.stops[0], &walk.stops[walk.stops.len() - 1]);
    let per_step = match (&a.predicted, &b.predicted) {
        (Some(pa), Some(pb)) => format!(
            ", predicted step {} ({} -> {})",
            predicted::delta(pa, pb),
            ms(pa.ms_per_step),
            ms(pb.ms_per_step)
        ),
        _ => String::new(),
    };
    format!(
        "{} -> {}: official {} ({} -> {}){per_step}, lab val loss {} at {} steps (ours, {}).",
        a.number,
        b.number,
        secs_delta(b.official_s - a.official_s),
        secs(a.official_s),
        secs(b.official_s),
        spread(&walk.total(), loss_delta),
        walk.steps,
        walk.cpu
    )
}

/// The walk's table, a total line, and the largest moves.
pub fn render(walk: &Walk, format: Format) -> String {
    let mut t = Table::new(header(walk)).left(1);
    for mut row in rows(walk) {
        row[0] = clip(&row[0], 38);
        row[1] = clip(&row[1], 44);
        t.row(row);
    }
    let legend = legend(walk).map_or(String::new(), |l| format!("{l}\n"));
    format!("{}\n{legend}{PREDICTED_NOTE}\n{}\n{}", t.render(format), total(walk), moves(walk))
}

/// What the predicted column is, under every walk's table.
pub const PREDICTED_NOTE: &str = "Δ predicted/step: the time model's step at full scale on the \
     record's machine (counted from each recipe, `records cost N`; not measured): the official Δ \
     is the steps' change times the step, plus the step's change times the steps.";

/// What "= at lab scale" means, for a table that has such a row.
pub fn legend(walk: &Walk) -> Option<&'static str> {
    let any = walk.stops.iter().skip(1).any(|s| s.same_at_lab && !s.same_math);
    any.then_some(
        "= at lab scale: the lab runs the stop before's recipe at this budget (the keys it set \
         differ at full scale only, or are bf16 choices the fp32 lab does not make), so its \
         curve is the same.",
    )
}

/// "mean" for one run, "mean ± sd" for several.
fn spread(x: &[f64], f: fn(f64) -> String) -> String {
    match (stats::mean(x), stats::std(x)) {
        (Some(m), Some(sd)) if x.len() > 1 => format!("{} ± {sd:.4}", f(m)),
        (Some(m), _) => f(m),
        _ => "-".into(),
    }
}

/// The three largest lab moves, each against the noise where several seeds measure it.
pub fn moves(walk: &Walk) -> String {
    let mut d: Vec<(RecordId, f64, Option<f64>)> = (1..walk.stops.len())
        .map(|i| {
            let x = walk.deltas(i);
            (walk.stops[i].number, stats::mean(&x).unwrap_or(0.0), stats::std(&x))
        })
        .collect();
    d.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()));
    let top: Vec<String> = d
        .iter()
        .take(3)
        .map(|(n, m, sd)| match sd.filter(|_| walk.seeds.len() > 1) {
            Some(sd) => format!("{n} {} (sd {sd:.4})", loss_delta(*m)),
            None => format!("{n} {}", loss_delta(*m)),
        })
        .collect();
    let noise = match walk.seeds.len() {
        1 => "one seed: the lab's noise is about ±0.01; `--runs 3` measures it",
        _ => "paired by seed",
    };
    format!("largest lab moves: {} ({noise})\n", top.join(", "))
}

/// The two charts: the lab val loss at equal steps (ours; each seed and their mean), and
/// upstream's record time (official), both by record number.
pub fn charts(walk: &Walk, lab_target: Option<f64>) -> [Chart; 2] {
    let by_record = |f: &dyn Fn(&Stop) -> f64| -> Vec<(f64, f64)> {
        walk.stops.iter().map(|s| (f64::from(s.number.n), f(s))).collect()
    };
    let mut curves = vec![Curve {
        label: format!("lab val loss at step {} (mean)", walk.steps),
        points: by_record(&|s| s.mean_loss()),
        markers: true,
    }];
    if walk.seeds.len() > 1 {
        curves.extend(walk.seeds.iter().enumerate().map(|(i, seed)| Curve {
            label: format!("seed {seed}"),
            points: by_record(&|s| s.runs[i].val_loss),
            markers: false,
        }));
    }
    let loss = Chart {
        title: format!("{} -> {}: lab val loss at equal steps", walk.from, walk.to),
        x: XAxis::Record(walk.from.track),
        y: YAxis::ValLoss,
        source: Source::OursLab,
        curves,
        targets: lab_target
            .map(|t| Target { label: format!("lab target {t}"), loss: t })
            .into_iter()
            .collect(),
        x_note: Some(format!("ours: {}", walk.cpu)),
    };
    let time = Chart {
        title: format!("{} -> {}: official record time", walk.from, walk.to),
        x: XAxis::Record(walk.from.track),
        y: YAxis::Seconds,
        source: Source::Official,
        curves: vec![Curve {
            label: format!("record time ({})", hardware(walk)),
            points: by_record(&|s| s.official_s),
            markers: true,
        }],
        targets: Vec::new(),
        x_note: None,
    };
    [loss, time]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::model::PredictedStep;
    use crate::run::walk::Run;

    fn stop(n: u32, same: bool, official: f64, losses: &[f64]) -> Stop {
        // A step that shrinks with the official time, so the deltas differ stop to stop.
        let predicted = PredictedStep {
            ms_per_step: official / 2.0,
            train_time_s: official,
            machine: "8×H100 SXM".into(),
        };
        Stop {
            number: n.into(),
            title: format!("record {n}"),
            changed: if same { "same math".into() } else { format!("key{n}") },
            same_math: same,
            same_at_lab: same,
            official_s: official,
            predicted: Some(predicted),
            tree: "t".into(),
            runs: (losses.iter().enumerate())
                .map(|(i, &v)| Run { seed: i as u64, val_loss: v, train_time_ms: 1.0, val: vec![] })
                .collect(),
        }
    }

    #[test]
    fn deltas_are_paired_by_seed_and_the_table_marks_same_math() {
        let walk = Walk {
            from: 54.into(),
            to: 56.into(),
            steps: 240,
            seeds: vec![0, 1],
            cpu: "cpu X".into(),
            stops: vec![
                stop(54, false, 120.0, &[1.90, 1.80]),
                stop(55, false, 115.0, &[1.85, 1.77]),
                stop(56, true, 114.0, &[1.85, 1.77]),
            ],
        };
        // Paired: 55 - 54 per seed is -0.05 and -0.03, mean -0.04.
        let d = walk.deltas(1);
        assert!((d[0] + 0.05).abs() < 1e-12 && (d[1] + 0.03).abs() < 1e-12, "{d:?}");
        let text = render(&walk, Format::Markdown);
        assert!(text.contains("−0.0400 ± 0.0141"), "{text}");
        assert!(text.contains("= same math"), "{text}");
        assert!(text.contains("−5.0 s"), "{text}");
        // 55's predicted step from 54's: (115 - 120) / 2 ms, of 60 ms.
        let d = (115.0 - 120.0) / 2.0;
        let want = format!("{:+.2} ms ({:+.1}%)", d, 100.0 * d / 60.0).replace('-', "−");
        assert!(text.contains(&want), "{want} in {text}");
        assert!(text.contains("Δ predicted/step (8×H100 SXM)"), "{text}");
        assert!(text.contains("predicted step −3.00 ms (−5.0%) (60.00 ms -> 57.00 ms)"), "{text}");
        assert!(text.contains("largest lab moves: #55 −0.0400 (sd 0.0141)"), "{text}");
        let [l, t] = charts(&walk, Some(1.8));
        let (x, y) = l.curves[0].points[1];
        assert!(x == 55.0 && (y - 1.81).abs() < 1e-12, "{:?}", l.curves[0].points);
        assert_eq!(l.curves.len(), 3);
        assert_eq!(t.curves[0].points[2], (56.0, 114.0));
        assert_eq!(l.x_label(), "upstream record (ours, lab scale)");
        let act1 = Walk { from: "a1".parse().unwrap(), to: "a3".parse().unwrap(), ..walk };
        assert_eq!(charts(&act1, None)[1].x_label(), "Act 1 step (official, full scale)");
    }
}
