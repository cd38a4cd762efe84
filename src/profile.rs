//! `train --profile DIR`: Kineto's Chrome trace of the run's last few steps, with our named
//! ranges around the phases of a step (`step N | stage`, `optimizer`, `attention`,
//! `communication: ...`), which `records profile` reads to say where the time goes.
//!
//! The window is process-wide, as the profiler it drives is: `train` sets it once, the loop asks
//! it at every step.
use crate::optim::schedule::Plan;
use crate::shim::{self, Range};
use anyhow::{anyhow, Context, Result};
use std::path::PathBuf;
use std::sync::OnceLock;

/// Which steps to profile and where the trace goes.
#[derive(Debug, Clone)]
pub struct Window {
    /// The trace is written to `dir/trace-rank<rank>.json`.
    pub dir: PathBuf,
    /// The first profiled step (0-based, as `Plan::step`) and how many follow it.
    pub first: u64,
    pub steps: u64,
    pub rank: usize,
    /// Also trace CUDA kernels.
    pub cuda: bool,
}

static WINDOW: OnceLock<Window> = OnceLock::new();

/// Sets the window; once per process.
pub fn set(window: Window) -> Result<()> {
    WINDOW.set(window).map_err(|_| anyhow!("the profile window is already set"))
}

/// The range of the step `plan` describes (starting the profiler at the window's first step), or
/// `None` outside the window. The name says the step's stage, so steps group by what they run.
pub fn begin_step(plan: &Plan) -> Result<Option<Range>> {
    let Some(w) = WINDOW.get().filter(|w| (w.first..w.first + w.steps).contains(&plan.step)) else {
        return Ok(None);
    };
    if plan.step == w.first {
        shim::profiler_start(w.cuda, false)?;
        tracing::debug!("train: profiling steps {}..={}", w.first + 1, w.first + w.steps);
    }
    let stage = stage(&format!("{plan:?}"));
    Ok(Some(Range::new(&format!("step {} | {stage}", plan.step + 1))))
}

/// What the step runs that changes by stage (windows, batch), not step by step: the plan's
/// fields but its number, lr and momentum. Read from its `Debug` form, as every record's tree
/// has its own `Plan` and this file is in all of them.
fn stage(plan_debug: &str) -> String {
    let fields = plan_debug.split_once('{').map_or("", |(_, f)| f.trim_end_matches('}'));
    let mut kept = Vec::new();
    let mut depth = 0;
    let mut field = String::new();
    for ch in fields.chars().chain([',']) {
        match ch {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                let f = std::mem::take(&mut field);
                let name = f.split(':').next().unwrap_or_default().trim();
                if !f.trim().is_empty() && !matches!(name, "step" | "lr_factor" | "momentum") {
                    kept.push(f.trim().to_string());
                }
                continue;
            }
            _ => {}
        }
        field.push(ch);
    }
    if kept.is_empty() {
        "every step".to_string()
    } else {
        kept.join(", ")
    }
}

/// Closes a step's range; after the window's last step, stops the profiler and writes the trace
/// (to a temp file first, so a trace that exists is whole).
pub fn end_step(range: Option<Range>, step: u64) -> Result<()> {
    drop(range);
    let Some(w) = WINDOW.get().filter(|w| step + 1 == w.first + w.steps) else { return Ok(()) };
    std::fs::create_dir_all(&w.dir).with_context(|| format!("--profile {}", w.dir.display()))?;
    let path = w.dir.join(format!("trace-rank{}.json", w.rank));
    let tmp = path.with_extension("json.tmp");
    shim::profiler_stop(&tmp)?;
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
    tracing::info!("train: trace of rank {} written to {}", w.rank, path.display());
    Ok(())
}

/// Runs `f` inside the named range.
pub fn ranged<T>(name: &str, f: impl FnOnce() -> T) -> T {
    let _range = Range::new(name);
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stage_is_what_stays_within_a_stage() {
        let plan = "Plan { step: 4, lr_factor: 0.5, momentum: Some(0.9), windows: (112, 48) }";
        assert_eq!(stage(plan), "windows: (112, 48)");
        assert_eq!(stage("Plan { step: 4, lr_factor: 0.5 }"), "every step");
    }
}
