//! A record's predicted step as `review`, `diff`, `walk` and the site print it: always labelled
//! **predicted** (the time model, `records cost`), on its machine, with its change from the
//! parent where both run on the same machine.
use crate::catalog::{Catalog, RecordId};
use crate::cost::model::{Model, PredictedStep};
use crate::text::figures::{ms, ms_change};

/// `+4.24 ms (+7.5%)`: the change of the predicted step from `before` to `after`.
pub fn delta(before: &PredictedStep, after: &PredictedStep) -> String {
    ms_change(before.ms_per_step, after.ms_per_step)
}

/// `60.71 ms/step on 8×H100 SXM, +4.24 ms (+7.5%) vs #80 (56.47 ms)`.
pub fn line(own: &PredictedStep, parent: Option<(RecordId, &PredictedStep)>) -> String {
    let mut out = format!("{}/step on {}", ms(own.ms_per_step), own.machine);
    if let Some((p, before)) = parent {
        out.push_str(&format!(", {} vs {p} ({})", delta(before, own), ms(before.ms_per_step)));
    }
    out
}

/// Record `id`'s line against `parent`, or why the model gives none (no hardware file for its
/// machine, a recipe its trainer cannot read): a page still reads without its prediction.
pub fn line_for(
    model: &anyhow::Result<Model>,
    catalog: &Catalog,
    id: RecordId,
    parent: Option<RecordId>,
) -> String {
    let predicted = model
        .as_ref()
        .map_err(|e| format!("{e:#}"))
        .and_then(|m| m.with_parent(catalog, id, parent).map_err(|e| format!("{e:#}")));
    match predicted {
        Ok((own, before)) => line(&own, parent.zip(before.as_ref())),
        Err(why) => format!("not predicted: {why}"),
    }
}

/// What the figure is, for a reader who meets it first on a page.
pub const LABEL: &str = "time model: counted from the recipe, `records cost`; not measured";

#[cfg(test)]
mod tests {
    use super::*;

    fn step(ms: f64) -> PredictedStep {
        PredictedStep { ms_per_step: ms, train_time_s: ms * 1.485, machine: "8×H100 SXM".into() }
    }

    #[test]
    fn a_line_names_the_machine_and_the_change_from_the_parent() {
        assert_eq!(line(&step(60.71), None), "60.71 ms/step on 8×H100 SXM");
        assert_eq!(
            line(&step(60.0), Some((80.into(), &step(50.0)))),
            "60.00 ms/step on 8×H100 SXM, +10.00 ms (+20.0%) vs #80 (50.00 ms)"
        );
        assert_eq!(delta(&step(50.0), &step(49.5)), "−0.50 ms (−1.0%)");
    }
}
