//! Loss curves: what to draw (a record's official val curve, this machine's replays, two records
//! overlaid) and two ways to draw it, inline SVG for the site (`svg`, plotters) and braille for
//! the terminal (`term`, textplots). Every chart says on its axes whose figures they are
//! (official: upstream's logs; ours: this machine) and at which scale (full or lab).
pub mod svg;
pub mod term;

use crate::catalog::{Manifest, RecordId, Track, TARGET_VAL_LOSS};
use crate::run::replays::Replay;
use crate::verdict::runlog::ValPoint;

/// What the x axis counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum XAxis {
    Step,
    Seconds,
    /// The record numbers of a track, along a walk (`records walk`).
    Record(Track),
}

impl XAxis {
    /// Steps and seconds count from 0; record numbers start at the walk's first record.
    pub fn from_zero(self) -> bool {
        !matches!(self, XAxis::Record(_))
    }
}

/// What the y axis measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum YAxis {
    ValLoss,
    /// Upstream's record time.
    Seconds,
}

/// Whose figures a chart shows, and at which scale.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Source {
    /// Upstream's logs: full scale on upstream's hardware.
    Official,
    /// This machine's replays at lab scale.
    OursLab,
    /// This machine's replays at full scale.
    OursFull,
}

impl Source {
    pub fn describe(self) -> &'static str {
        match self {
            Source::Official => "official, full scale",
            Source::OursLab => "ours, lab scale",
            Source::OursFull => "ours, full scale",
        }
    }
}

/// One curve: (x, val loss) points in x order.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// Draw a marker at each point (the official curves' few logged points).
    pub markers: bool,
}

/// A horizontal line: a target loss.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub label: String,
    pub loss: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub x: XAxis,
    pub y: YAxis,
    pub source: Source,
    pub curves: Vec<Curve>,
    pub targets: Vec<Target>,
    /// How the x values were obtained when that is not obvious (an estimated time axis).
    pub x_note: Option<String>,
}

impl Chart {
    /// The x axis description: what is counted, whose figures, which scale.
    pub fn x_label(&self) -> String {
        let what = match self.x {
            XAxis::Step => "step",
            XAxis::Seconds => "training time (s)",
            XAxis::Record(track) => track.def().unit,
        };
        format!("{what} ({})", self.source.describe())
    }

    pub fn y_label(&self) -> String {
        match self.y {
            YAxis::ValLoss => "val loss".to_string(),
            YAxis::Seconds => "record time (s)".to_string(),
        }
    }

    /// Record `m`'s official val curve against 3.28; `None` where the manifest has no curve, or,
    /// by time, no official train times.
    pub fn official(m: &Manifest, x: XAxis) -> Option<Chart> {
        let curve = official_curve(m, x)?;
        Some(Chart {
            title: format!("{} official val loss", m.id()),
            x,
            y: YAxis::ValLoss,
            source: Source::Official,
            curves: vec![curve],
            targets: vec![full_target()],
            x_note: (x == XAxis::Seconds).then(|| estimated_time_note(m)),
        })
    }

    /// Two records' official curves overlaid; `None` when neither has one on this axis.
    pub fn official_pair(a: &Manifest, b: &Manifest, x: XAxis) -> Option<Chart> {
        let curves: Vec<Curve> = [a, b].iter().filter_map(|m| official_curve(m, x)).collect();
        if curves.len() < 2 {
            return None;
        }
        Some(Chart {
            title: format!("{} and {} official val loss", a.id(), b.id()),
            x,
            y: YAxis::ValLoss,
            source: Source::Official,
            curves,
            targets: vec![full_target()],
            x_note: (x == XAxis::Seconds)
                .then(|| format!("{} {}", estimated_time_note(a), estimated_time_note(b))),
        })
    }

    /// This machine's replays of one record at one scale (`lab` true: lab scale, with the lab
    /// target `lab_target`); `None` without a replay that has val points.
    pub fn ours(
        number: RecordId,
        replays: &[Replay],
        lab: bool,
        lab_target: Option<f64>,
        x: XAxis,
    ) -> Option<Chart> {
        let runs: Vec<(String, &[ValPoint])> = replays
            .iter()
            .filter(|r| r.lab == lab)
            .flat_map(|r| {
                r.runs.iter().map(move |run| (format!("{} {}", r.id, run.name), &run.val[..]))
            })
            .collect();
        Chart::runs(number, &runs, lab, lab_target, x)
    }

    /// Our runs' val curves, each (label, val points); `None` without a val point.
    pub fn runs(
        number: RecordId,
        runs: &[(String, &[ValPoint])],
        lab: bool,
        lab_target: Option<f64>,
        x: XAxis,
    ) -> Option<Chart> {
        let curves: Vec<Curve> = runs
            .iter()
            .filter_map(|(label, val)| {
                let points: Vec<(f64, f64)> = val
                    .iter()
                    .filter(|v| v.val_loss.is_finite())
                    .filter_map(|v| match x {
                        XAxis::Step | XAxis::Record(_) => Some((v.step as f64, v.val_loss)),
                        XAxis::Seconds => v.train_time_ms.map(|ms| (ms / 1000.0, v.val_loss)),
                    })
                    .collect();
                (!points.is_empty()).then(|| Curve { label: label.clone(), points, markers: false })
            })
            .collect();
        if curves.is_empty() {
            return None;
        }
        let targets = match (lab, lab_target) {
            (true, Some(t)) => vec![Target { label: format!("lab target {t}"), loss: t }],
            (true, None) => Vec::new(),
            (false, _) => vec![full_target()],
        };
        Some(Chart {
            title: format!("{number} our replays"),
            x,
            y: YAxis::ValLoss,
            source: if lab { Source::OursLab } else { Source::OursFull },
            curves,
            targets,
            x_note: None,
        })
    }
}

/// Two records' lab results on this machine, overlaid by step, against the lab target;
/// `None` unless both have val points.
pub fn lab_pair(pair: [(RecordId, &Replay); 2], lab_target: Option<f64>) -> Option<Chart> {
    let runs: Vec<(String, &[ValPoint])> = pair
        .iter()
        .flat_map(|(n, r)| {
            r.runs.iter().map(move |run| (format!("{n} lab ({})", r.id), &run.val[..]))
        })
        .collect();
    let chart = Chart::runs(pair[1].0, &runs, true, lab_target, XAxis::Step)?;
    let two = chart.curves.len() >= 2;
    two.then(|| Chart {
        title: format!("{} and {}: our lab results", pair[0].0, pair[1].0),
        ..chart
    })
}

fn full_target() -> Target {
    Target { label: format!("target {TARGET_VAL_LOSS}"), loss: TARGET_VAL_LOSS }
}

/// Record `m`'s official val curve by step, or by time where the manifest has official train
/// times: the logs give val losses by step only, so a step's time is estimated as step × the
/// mean official step time (mean train time / steps).
pub fn official_curve(m: &Manifest, x: XAxis) -> Option<Curve> {
    let e = &m.evidence;
    if e.val_curve.is_empty() {
        return None;
    }
    let per_step = match x {
        XAxis::Step | XAxis::Record(_) => 1.0,
        XAxis::Seconds => crate::verdict::stats::mean(&e.train_times_s)? / m.record.steps as f64,
    };
    Some(Curve {
        label: format!("{} {}", m.id(), m.record.title),
        points: e.val_curve.iter().map(|&(s, l)| (s as f64 * per_step, l)).collect(),
        markers: true,
    })
}

fn estimated_time_note(m: &Manifest) -> String {
    let mean = crate::verdict::stats::mean(&m.evidence.train_times_s).unwrap_or(f64::NAN);
    format!(
        "{}: time estimated as step × {:.1} ms (official mean train time {mean:.3} s / {} steps).",
        m.id(),
        1000.0 * mean / m.record.steps as f64,
        m.record.steps
    )
}
