//! Parse a training log, upstream's or ours, into train and validation points.
//!
//! Step lines in every era (anchors §2.3):
//! - llm.c: `s:0 trl:11.0091 lr:0.000001 norm:15.37` and `s:19560 tel:3.2722`;
//! - Oct 2024 – Jan 2025: `step:2/6200 train_loss:8.6834 train_time:75965ms step_avg:nanms`
//!   and `step:6200/6200 val_loss:3.2785 train_time:1339067ms step_avg:216.33ms`;
//! - current: `step:1920/1920 train_time:119602ms step_avg:62.29ms`, the same with `val_loss:`,
//!   and a final `peak memory allocated: 29863 MiB reserved: 44438 MiB`;
//! - track 3 (optimization): `step:3350/3350 val_loss:3.27839 train_time:492.485s
//!   step_avg:147.03ms`, times in seconds, and fields of each submission's own after the known
//!   ones (`val_avg_loss:3.28630 val_ema_loss:3.28063`, `ema_beta:0`, `handoff:keep`);
//! - ours: the current format, optionally with `train_loss:` on train lines, after a block of
//!   `# key: value` header lines at the top.
//!
//! Upstream logs begin with the whole source code and an nvidia-smi table, so a line counts only
//! when it *starts* with a step field and every field is a `key:value` pair whose known keys
//! parse; anything else is skipped. Skipped lines that start like a step line are kept in
//! [`RunLog::unread`], so a log in a format nobody taught us fails clearly instead of silently.
//!
//! A log is read up to its last newline: a last line without one was cut while it was written
//! (a copy stopped early, a disk filled up), and its figures may be cut too (`val_loss:3.2` of
//! `val_loss:3.2783`), so it is kept aside in [`RunLog::cut`] and never counted.
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainPoint {
    pub step: u64,
    /// `None` in llm.c logs (`s:N`).
    pub total_steps: Option<u64>,
    pub loss: Option<f64>,
    pub train_time_ms: Option<f64>,
    pub step_avg_ms: Option<f64>,
    pub lr: Option<f64>,
    pub norm: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValPoint {
    pub step: u64,
    pub total_steps: Option<u64>,
    /// NaN when the log says `nan` (a diverged run).
    pub val_loss: f64,
    pub train_time_ms: Option<f64>,
    pub step_avg_ms: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunLog {
    pub train: Vec<TrainPoint>,
    pub val: Vec<ValPoint>,
    pub peak_mem_allocated_mib: Option<u64>,
    pub peak_mem_reserved_mib: Option<u64>,
    /// Our logs' leading `# key: value` lines, in order.
    pub header: Vec<(String, String)>,
    /// Lines that start like a step line (`step:N`, `s:N`) but did not parse: (line number,
    /// line).
    #[serde(default)]
    pub unread: Vec<(usize, String)>,
    /// The last line when the text does not end with a newline: (line number, line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<(usize, String)>,
    /// Step lines that contradict the lines before them (steps going backwards, a second
    /// budget, a step past its budget, a negative loss): (line number, what is wrong). A verdict
    /// refuses a log with any: its figures would belong to two runs, or to none.
    #[serde(skip)]
    pub faults: Vec<(usize, String)>,
}

impl RunLog {
    /// The last validation point in the log.
    pub fn final_val(&self) -> Option<&ValPoint> {
        self.val.last()
    }

    /// The first validation point whose loss is at or below `target`.
    pub fn first_val_at_or_below(&self, target: f64) -> Option<&ValPoint> {
        self.val.iter().find(|v| v.val_loss <= target)
    }

    /// The value of header key `key` (the first one, if repeated).
    pub fn header_value(&self, key: &str) -> Option<&str> {
        self.header.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The record our log is of, as written: `# record_id:` (the harness names a record off
    /// the main track so, `a3`), else the trainer's `# record:` (its manifest's file stem as a
    /// number, `29`; `?` where the stem is none); `None` without either.
    pub fn record(&self) -> Option<&str> {
        self.header_value("record_id").or_else(|| self.header_value("record"))
    }

    /// The step budget the log states: the `M` of its `step:N/M` lines (the largest, should
    /// they differ); `None` for llm.c's `s:N` lines.
    pub fn stated_steps(&self) -> Option<u64> {
        let val = self.val.iter().filter_map(|v| v.total_steps);
        val.chain(self.train.iter().filter_map(|t| t.total_steps)).max()
    }
}

/// Parses a log up to its last newline (see [`RunLog::cut`]). Lines that match no known format
/// are ignored.
pub fn parse(text: &str) -> RunLog {
    let (whole, tail) = text.split_at(text.rfind('\n').map_or(0, |i| i + 1));
    let mut log = RunLog::default();
    let mut in_header = true;
    let mut lines = 0;
    let mut order = Order::default();
    for (i, line) in whole.lines().enumerate() {
        lines = i + 1;
        let line = line.trim_end();
        if in_header {
            if line.is_empty() {
                continue;
            }
            if let Some(kv) = header_line(line) {
                log.header.push(kv);
                continue;
            }
            in_header = false;
        }
        if let Some(step) = step_line(line) {
            if let Some(fault) = order.check(&step, i + 1) {
                log.faults.push((i + 1, fault));
            }
            match step {
                Step::Train(p) => log.train.push(p),
                Step::Val(p) => log.val.push(p),
            }
        } else if let Some((alloc, reserved)) = peak_memory_line(line) {
            log.peak_mem_allocated_mib = Some(alloc);
            log.peak_mem_reserved_mib = reserved.or(log.peak_mem_reserved_mib);
        } else if looks_like_step(line) {
            log.unread.push((i + 1, line.to_string()));
        }
    }
    if !tail.trim().is_empty() {
        log.cut = Some((lines + 1, tail.to_string()));
    }
    log
}

/// What the step lines so far said, to catch one that contradicts them.
#[derive(Default)]
struct Order {
    /// The budget of the first `step:N/M` line and its line number.
    budget: Option<(u64, usize)>,
    val: Option<u64>,
    train: Option<u64>,
}

impl Order {
    fn check(&mut self, step: &Step, line: usize) -> Option<String> {
        let (n, total, loss, what) = match step {
            Step::Train(p) => (p.step, p.total_steps, p.loss, "train_loss"),
            Step::Val(p) => (p.step, p.total_steps, Some(p.val_loss), "val_loss"),
        };
        if let Some(m) = total {
            match self.budget {
                None => self.budget = Some((m, line)),
                Some((first, at)) if first != m => {
                    return Some(format!(
                        "`step:{n}/{m}` counts to {m}, but line {at} counted to {first}: two runs \
                         in one file? Give each run its own log"
                    ))
                }
                Some(_) => {}
            }
            if n > m {
                return Some(format!("step {n} is past the budget of {m} steps its line states"));
            }
        }
        if let Some(l) = loss.filter(|l| *l < 0.0) {
            return Some(format!("{what} {l} is negative; a cross-entropy loss never is"));
        }
        let (last, kind) = match step {
            Step::Train(_) => (&mut self.train, "train"),
            Step::Val(_) => (&mut self.val, "validation"),
        };
        let fault = match *last {
            Some(prev) if n < prev => Some(format!(
                "{kind} step {n} comes after step {prev}: the steps go backwards (two runs in one \
                 file?)"
            )),
            Some(prev) if n == prev && kind == "validation" => {
                Some(format!("a second validation line for step {n}"))
            }
            _ => None,
        };
        *last = Some(n);
        fault
    }
}

/// Reads `path` for a verdict: a log without a single validation line is an error that says
/// what was expected and shows the first step line it could not read; so is a log whose step
/// lines contradict each other (see [`RunLog::faults`]), naming the first such line.
pub fn parse_for_verdict(path: &Path) -> anyhow::Result<RunLog> {
    let log = parse_file(path)?;
    if let Some((n, fault)) = log.faults.first() {
        anyhow::bail!("{}:{n}: {fault}", path.display());
    }
    if log.val.is_empty() {
        let mut msg = format!(
            "{}: no validation line found (expected `step:N/M val_loss:X train_time:Tms|Ts ...` or \
             llm.c's `s:N tel:X`)",
            path.display()
        );
        if let Some((n, line)) = log.unread.first() {
            msg.push_str(&format!("; line {n} is not understood: `{}`", clip(line)));
        }
        if let Some(cut) = &log.cut {
            msg.push_str(&format!("; {}", cut_text(cut)));
        }
        anyhow::bail!(msg);
    }
    Ok(log)
}

/// `line N ends without a newline ...`: what a warning or an error says of a cut last line.
pub fn cut_text((n, line): &(usize, String)) -> String {
    format!(
        "line {n} ends without a newline, so the log was cut inside it and it is not read: `{}`",
        clip(line)
    )
}

/// A long line cut for a message, with control characters and bytes that were not UTF-8
/// (U+FFFD) escaped, so a binary file's bytes never reach the terminal.
pub fn clip(line: &str) -> String {
    let shown = |c: char| c.is_control() || c == char::REPLACEMENT_CHARACTER;
    let mut out: String = line
        .chars()
        .take(100)
        .map(|c| if shown(c) { c.escape_unicode().to_string() } else { c.to_string() })
        .collect();
    if line.chars().nth(100).is_some() {
        out.push('…');
    }
    out
}

/// `step:<digit>` or `s:<digit>` at the start of the line.
fn looks_like_step(line: &str) -> bool {
    let rest = line.strip_prefix("step:").or_else(|| line.strip_prefix("s:"));
    rest.is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
}

/// Reads and parses `path`. Bytes that are not UTF-8 (a log cut inside a character, a stray
/// byte in the source code it prints) become U+FFFD: no step line is lost to them.
pub fn parse_file(path: &Path) -> anyhow::Result<RunLog> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read run log {}", path.display()))?;
    Ok(parse(&String::from_utf8_lossy(&bytes)))
}

/// `# key: value` with a key of one word.
fn header_line(line: &str) -> Option<(String, String)> {
    let rest = line.strip_prefix("# ")?;
    let (key, value) = rest.split_once(':')?;
    let ok = !key.is_empty()
        && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    ok.then(|| (key.to_string(), value.trim().to_string()))
}

enum Step {
    Train(TrainPoint),
    Val(ValPoint),
}

/// A step line: whitespace-separated `key:value` fields, the first `s:N` or `step:N/M`.
/// Returns `None` if any field fails to parse, so code that merely mentions `step:` is skipped.
fn step_line(line: &str) -> Option<Step> {
    let mut fields = line.split_whitespace().map(|f| f.split_once(':'));
    let (step, total_steps) = match fields.next()?? {
        ("s", n) => (n.parse().ok()?, None),
        ("step", n) => {
            let (a, b) = n.split_once('/')?;
            (a.parse().ok()?, Some(b.parse().ok()?))
        }
        _ => return None,
    };
    let mut p = TrainPoint {
        step,
        total_steps,
        loss: None,
        train_time_ms: None,
        step_avg_ms: None,
        lr: None,
        norm: None,
    };
    let mut val_loss = None;
    for field in fields {
        let (key, value) = field?;
        match key {
            "trl" | "train_loss" => p.loss = number(value)?,
            // A diverged run prints `val_loss:nan`; keep it so the run's last word is not lost.
            "tel" | "val_loss" => val_loss = Some(number(value)?.unwrap_or(f64::NAN)),
            "train_time" => p.train_time_ms = millis(value)?,
            "step_avg" => p.step_avg_ms = millis(value)?,
            "lr" => p.lr = number(value)?,
            "norm" => p.norm = number(value)?,
            // A submission's own figures (track 3: `val_ema_loss:`, `ema_beta:`, `handoff:`).
            _ if is_key(key) && !value.is_empty() => {}
            _ => return None,
        }
    }
    Some(match val_loss {
        Some(loss) => Step::Val(ValPoint {
            step: p.step,
            total_steps: p.total_steps,
            val_loss: loss,
            train_time_ms: p.train_time_ms,
            step_avg_ms: p.step_avg_ms,
        }),
        None => Step::Train(p),
    })
}

/// A duration in milliseconds from `12ms` or, as track 3 prints it, `0.012s`.
fn millis(value: &str) -> Option<Option<f64>> {
    match value.strip_suffix("ms") {
        Some(ms) => number(ms),
        None => Some(number(value.strip_suffix('s')?)?.map(|s| s * 1000.0)),
    }
}

/// A field name: a letter, then letters, digits and underscores.
fn is_key(key: &str) -> bool {
    key.starts_with(|c: char| c.is_ascii_alphabetic())
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A number: `Some(None)` for `nan` (upstream prints `step_avg:nanms` early on), `None` when it
/// does not parse.
fn number(s: &str) -> Option<Option<f64>> {
    if s.eq_ignore_ascii_case("nan") {
        return Some(None);
    }
    let v: f64 = s.parse().ok()?;
    // Rust also accepts "inf" and "NaN" spellings; keep only finite figures.
    Some(v.is_finite().then_some(v))
}

/// `peak memory allocated: A MiB reserved: R MiB`, or the 2024 form
/// `peak memory consumption: A MiB`.
fn peak_memory_line(line: &str) -> Option<(u64, Option<u64>)> {
    if let Some(rest) = line.strip_prefix("peak memory allocated: ") {
        let (alloc, rest) = rest.split_once(" MiB reserved: ")?;
        let reserved = rest.strip_suffix(" MiB")?;
        return Some((alloc.parse().ok()?, Some(reserved.parse().ok()?)));
    }
    let alloc = line.strip_prefix("peak memory consumption: ")?.strip_suffix(" MiB")?;
    Some((alloc.parse().ok()?, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_and_numbers() {
        assert_eq!(number("nan"), Some(None));
        assert_eq!(number("3.5"), Some(Some(3.5)));
        assert_eq!(number("inf"), Some(None));
        assert_eq!(number("x"), None);
    }

    #[test]
    fn header_keys_are_single_words() {
        assert_eq!(header_line("# tree: abc123"), Some(("tree".into(), "abc123".into())));
        assert_eq!(header_line("# a note: with spaces"), None);
        assert_eq!(header_line("#record: 1"), None);
    }

    #[test]
    fn code_mentioning_step_is_not_a_step() {
        for line in [
            "print0(f\"step:{step}/{train_steps} val_loss:{val_loss:.4f}\")",
            "step:{step}/{args.num_iterations} val_loss:{val_loss:.4f} train_time:{t:.0f}ms",
            "step:5/10 val_loss:3.2 train_time:12ms extra words",
            "s:12 tel:",
            "steps:3/4 val_loss:3.0",
            "step:5/10 val_loss:3.2 train_time:12",
            "step:5/10 val_loss:3.2 {extra}:1",
        ] {
            assert!(step_line(line).is_none(), "{line}");
        }
    }

    #[test]
    fn times_in_milliseconds_or_seconds() {
        assert_eq!(millis("75965ms"), Some(Some(75965.0)));
        assert_eq!(millis("nanms"), Some(None));
        assert_eq!(millis("492.485s"), Some(Some(492485.0)));
        assert_eq!(millis("492.485"), None);
        assert_eq!(millis("12min"), None);
    }

    #[test]
    fn step_looking_lines() {
        assert!(looks_like_step("step:12/20 val_loss:1..2"));
        assert!(looks_like_step("s:3 tel:x"));
        assert!(!looks_like_step("step:{step}/{n}"));
        assert!(!looks_like_step("    step:1/2 val_loss:3.0"));
    }

    #[test]
    fn peak_memory_forms() {
        assert_eq!(
            peak_memory_line("peak memory allocated: 29863 MiB reserved: 44438 MiB"),
            Some((29863, Some(44438)))
        );
        assert_eq!(peak_memory_line("peak memory consumption: 37620 MiB"), Some((37620, None)));
        assert_eq!(peak_memory_line("peak memory allocated: lots"), None);
    }
}
