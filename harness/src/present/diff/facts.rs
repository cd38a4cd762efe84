//! The two records side by side: upstream's facts, the time model's predicted step, and this
//! machine's lab result of each.
use crate::catalog::Manifest;
use crate::cost::model::{Model, PredictedStep};
use crate::present::predicted;
use crate::run::replays::{self, Replay};
use crate::text::figures;
use crate::text::table::{Format, Table};
use anyhow::Result;
use std::path::Path;

/// The two records side by side: upstream's facts, and this machine's lab result of
/// each when there is one (final val loss and train time, ours).
pub(super) fn view(root: &Path, a: &Manifest, b: &Manifest) -> Result<String> {
    let (ra, rb) = (&a.record, &b.record);
    let change = |x: f64, y: f64, f: fn(f64) -> String| {
        format!("{} ({})", f(y - x), figures::pct_delta(100.0 * (y - x) / x))
    };
    let head = [String::new(), ra.id().to_string(), rb.id().to_string(), "change".into()];
    let mut t = Table::new(head).left(3);
    let time = |r: &crate::catalog::RecordFacts| {
        format!("{} ({})", r.official_time_text, figures::secs(r.official_time_s))
    };
    let hardware = match (ra.track.def().hardware, rb.track.def().hardware) {
        (x, y) if x == y => format!("official time ({x})"),
        (x, y) => format!("official time ({x}; {y})"),
    };
    t.row([
        hardware,
        time(ra),
        time(rb),
        change(ra.official_time_s, rb.official_time_s, figures::secs_delta),
    ]);
    t.row([
        "steps".into(),
        ra.steps.to_string(),
        rb.steps.to_string(),
        change(ra.steps as f64, rb.steps as f64, figures::count_delta),
    ]);
    // An upstream record inside a step has no token count (upstream's table gives none).
    if ra.tokens > 0 && rb.tokens > 0 {
        t.row([
            "tokens".into(),
            format!("{:.1}M", ra.tokens as f64 / 1e6),
            format!("{:.1}M", rb.tokens as f64 / 1e6),
            change(ra.tokens as f64, rb.tokens as f64, figures::millions_delta),
        ]);
    }
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    if let (Some(x), Some(y)) = (mean(&a.evidence.val_losses), mean(&b.evidence.val_losses)) {
        let n = |m: &Manifest| m.evidence.val_losses.len();
        t.row([
            "official mean val loss".into(),
            format!("{} ({} logs)", figures::loss(x), n(a)),
            format!("{} ({} logs)", figures::loss(y), n(b)),
            figures::loss_delta(y - x),
        ]);
    }
    t.row(predicted_row(root, a, b));
    t.row(["date".into(), ra.date.clone(), rb.date.clone(), String::new()]);
    let results = crate::paths::results_dir(root);
    let (la, lb) = (replays::lab_result_in(&results, a)?, replays::lab_result_in(&results, b)?);
    if la.is_some() || lb.is_some() {
        let cell = |r: &Option<Replay>, f: &dyn Fn(&crate::verdict::Verdict) -> Option<String>| {
            r.as_ref().and_then(|r| r.verdict.as_ref()).and_then(f).unwrap_or("not replayed".into())
        };
        let loss = |v: &crate::verdict::Verdict| {
            v.loss.as_ref().map(|l| {
                let (mean, target) = (figures::loss(l.mean), figures::loss(v.target_loss));
                format!("{mean} ({} {target})", v.mark())
            })
        };
        let time = |v: &crate::verdict::Verdict| {
            v.time_s.as_ref().map(|t| format!("{} / {} steps", figures::secs(t.mean), v.steps))
        };
        t.row([
            "ours, lab: final val loss".into(),
            cell(&la, &loss),
            cell(&lb, &loss),
            String::new(),
        ]);
        t.row(["ours, lab: train time".into(), cell(&la, &time), cell(&lb, &time), String::new()]);
    }
    let mut out = t.render(Format::Text);
    if la.is_some() || lb.is_some() {
        out.push_str("  ours, lab: the newest replay on this machine over the record's whole lab budget (records replay N); its times are not comparable with the official ones\n");
    }
    Ok(out)
}

/// The time model's step of each, and the change where both run on one machine; why not, where
/// the model cannot predict them (no hardware file, a recipe the trainer cannot read).
fn predicted_row(root: &Path, a: &Manifest, b: &Manifest) -> [String; 4] {
    let both = Model::load(root)
        .and_then(|model| Ok((model.predict_manifest(a)?, model.predict_manifest(b)?)));
    let (pa, pb) = match both {
        Ok(both) => both,
        Err(e) => {
            let why = format!("not predicted: {e:#}");
            return ["predicted step (time model)".into(), why, String::new(), String::new()];
        }
    };
    // A step on another machine (a1's 2×RTX 4090 against #1's 8×H100) does not compare.
    let same = pa.machine == pb.machine;
    let cell = |p: &PredictedStep| match same {
        true => figures::ms(p.ms_per_step),
        false => format!("{} on {}", figures::ms(p.ms_per_step), p.machine),
    };
    let (label, change) = match same {
        true => {
            (format!("predicted step ({}; time model)", pb.machine), predicted::delta(&pa, &pb))
        }
        false => ("predicted step (time model, each on its machine)".into(), "not compared".into()),
    };
    [label, cell(&pa), cell(&pb), change]
}
