//! Where a step's time goes, read from the trainer's Kineto trace (`train --profile`).
//!
//! Each `step N | stage` range of the trace is split into categories that add up to its wall
//! time. On CPU every op's self time (its duration less its children's, so nothing counts twice)
//! goes to one category, decided by the ranges around it and its name:
//! - `communication: ...` ranges: communication (waiting for other ranks included);
//! - the `optimizer` range: its matmuls are the orthogonalisation (Newton–Schulz; Adam has
//!   none), the rest is the updates (Adam, momentum, copies);
//! - `attention` ranges (masks and kernel) and the backward of what ran in them, matched by the
//!   autograd sequence number Kineto records on both;
//! - matmuls (`mm`, `addmm`, `bmm`, `baddbmm`, ...), then every other op;
//! - data: from the step's start to the model's first op, the token embedding lookup that begins
//!   every record's forward (the loader runs there, ops and host code alike);
//! - host overhead/idle: the rest of the wall time, where no op runs (our Rust code, waiting).
//!
//! On CUDA the figures are GPU kernel time, each kernel in the category of the op that launched
//! it (Kineto's `External id`), and host overhead/idle is the wall time the GPU had no kernel.
use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

pub mod render;

/// What a step's time is spent on, in table order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Category {
    Attention,
    Matmul,
    OtherOps,
    Orthogonalisation,
    OptimizerUpdates,
    Communication,
    Data,
    Host,
}

impl Category {
    pub const ALL: [Category; 8] = [
        Category::Attention,
        Category::Matmul,
        Category::OtherOps,
        Category::Orthogonalisation,
        Category::OptimizerUpdates,
        Category::Communication,
        Category::Data,
        Category::Host,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Category::Attention => "attention (masks, kernel, its backward)",
            Category::Matmul => "matmul (forward, backward)",
            Category::OtherOps => "elementwise, norms, copies, loss",
            Category::Orthogonalisation => "optimizer: orthogonalisation",
            Category::OptimizerUpdates => "optimizer: Adam, momentum, updates",
            Category::Communication => "communication",
            Category::Data => "data",
            Category::Host => "host overhead/idle",
        }
    }
}

/// One profiled step: its range's name, wall time and the split of it.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// The step number (1-based, as the log's `step:N`).
    pub step: u64,
    /// What the step runs (`windows 112/48`, `every step`): steps of one stage are alike.
    pub stage: String,
    pub wall_ms: f64,
    pub ms: BTreeMap<Category, f64>,
}

const STEP_PREFIX: &str = "step ";
const OPTIMIZER: &str = "optimizer";
const ATTENTION: &str = "attention";
const COMMUNICATION: &str = "communication: ";
const BACKWARD: &str = "autograd::engine::evaluate_function: ";
/// The op every record's forward starts with: the token embedding lookup.
const FIRST_MODEL_OP: &str = "aten::embedding";

fn is_matmul(op: &str) -> bool {
    let name = op.strip_prefix("aten::").unwrap_or(op);
    matches!(
        name,
        "mm" | "addmm"
            | "bmm"
            | "baddbmm"
            | "addbmm"
            | "matmul"
            | "linear"
            | "_scaled_mm"
            | "mv"
            | "addmv"
            | "dot"
    )
}

/// A slice of the trace (`ph: "X"`), times in µs as Kineto writes them.
#[derive(Debug, Clone)]
struct Event {
    name: String,
    cat: String,
    tid: String,
    ts: f64,
    dur: f64,
    seq: Option<i64>,
    external: Option<i64>,
}

impl Event {
    fn end(&self) -> f64 {
        self.ts + self.dur
    }
}

/// The steps of the trace at `path`.
pub fn read(path: &Path) -> Result<Vec<Step>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    steps(&text).with_context(|| format!("trace {}", path.display()))
}

/// The steps of a Chrome trace JSON written by Kineto with our ranges.
pub fn steps(json: &str) -> Result<Vec<Step>> {
    let root: Value = serde_json::from_str(json).context("not JSON")?;
    let Some(list) = root.get("traceEvents").and_then(Value::as_array) else {
        bail!("no traceEvents list: not a Chrome trace");
    };
    let events: Vec<Event> = list.iter().filter_map(event).collect();
    let cpu: Vec<&Event> =
        events.iter().filter(|e| e.cat == "cpu_op" || e.cat == "user_annotation").collect();
    let kernels: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e.cat.as_str(), "kernel" | "gpu_memcpy" | "gpu_memset"))
        .collect();
    let tree = Tree::new(&cpu);
    let steps: Vec<usize> = (0..cpu.len())
        .filter(|&i| cpu[i].cat == "user_annotation" && step_of(cpu[i]).is_some())
        .collect();
    if steps.is_empty() {
        bail!("no `step N | stage` range: not a trace of `train --profile`");
    }
    let attention_seqs = tree.attention_seqs();
    let mut out = Vec::new();
    for &s in &steps {
        let (step, stage) = step_of(cpu[s]).expect("filtered above");
        let data_end = tree
            .children(s)
            .find(|&c| cpu[c].name == FIRST_MODEL_OP)
            .map_or(cpu[s].ts, |c| cpu[c].ts);
        let mut ms: BTreeMap<Category, f64> = Category::ALL.iter().map(|&c| (c, 0.0)).collect();
        if kernels.is_empty() {
            tree.split_cpu(s, data_end, &attention_seqs, &mut ms);
        } else {
            tree.split_gpu(s, data_end, &attention_seqs, &kernels, &mut ms);
        }
        out.push(Step { step, stage, wall_ms: cpu[s].dur / 1e3, ms });
    }
    Ok(out)
}

fn event(v: &Value) -> Option<Event> {
    if v.get("ph")?.as_str()? != "X" {
        return None;
    }
    let args = v.get("args");
    let arg = |k: &str| args.and_then(|a| a.get(k)).and_then(Value::as_i64);
    Some(Event {
        name: v.get("name")?.as_str()?.to_string(),
        cat: v.get("cat").and_then(Value::as_str).unwrap_or_default().to_string(),
        tid: format!("{}/{}", v.get("pid")?, v.get("tid")?),
        ts: v.get("ts")?.as_f64()?,
        dur: v.get("dur")?.as_f64()?,
        seq: arg("Sequence number"),
        external: arg("External id"),
    })
}

/// `step 12 | windows 112/48` → (12, "windows 112/48").
fn step_of(e: &Event) -> Option<(u64, String)> {
    let (n, stage) = e.name.strip_prefix(STEP_PREFIX)?.split_once(" | ")?;
    Some((n.trim().parse().ok()?, stage.trim().to_string()))
}

/// The CPU slices nested per thread: who encloses whom, and each slice's self time.
struct Tree<'a> {
    ev: &'a [&'a Event],
    parent: Vec<Option<usize>>,
    self_us: Vec<f64>,
}

impl<'a> Tree<'a> {
    fn new(ev: &'a [&'a Event]) -> Tree<'a> {
        let mut order: Vec<usize> = (0..ev.len()).collect();
        // Parents first: by thread, start, then the longer slice.
        order.sort_by(|&a, &b| {
            (&ev[a].tid, ev[a].ts)
                .partial_cmp(&(&ev[b].tid, ev[b].ts))
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(ev[b].dur.total_cmp(&ev[a].dur))
        });
        let mut parent = vec![None; ev.len()];
        let mut self_us: Vec<f64> = ev.iter().map(|e| e.dur).collect();
        let mut stack: Vec<usize> = Vec::new();
        for &i in &order {
            // Kineto rounds to ns; a child may poke out of its parent by that much.
            while let Some(&top) = stack.last() {
                if ev[top].tid == ev[i].tid && ev[i].ts < ev[top].end() - 1e-3 {
                    break;
                }
                stack.pop();
            }
            if let Some(&p) = stack.last() {
                parent[i] = Some(p);
                self_us[p] -= ev[i].dur.min(ev[p].end() - ev[i].ts);
            }
            stack.push(i);
        }
        Tree { ev, parent, self_us }
    }

    fn children(&self, p: usize) -> impl Iterator<Item = usize> + '_ {
        let mut kids: Vec<usize> =
            (0..self.ev.len()).filter(|&i| self.parent[i] == Some(p)).collect();
        kids.sort_by(|&a, &b| self.ev[a].ts.total_cmp(&self.ev[b].ts));
        kids.into_iter()
    }

    fn ancestors(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(self.parent[i], |&p| self.parent[p])
    }

    /// The sequence numbers of forward ops that ran inside an attention range: their backward
    /// carries the same number.
    fn attention_seqs(&self) -> HashSet<i64> {
        (0..self.ev.len())
            .filter(|&i| self.ev[i].cat == "cpu_op" && !self.ev[i].name.starts_with(BACKWARD))
            .filter(|&i| self.ancestors(i).any(|a| self.ev[a].name == ATTENTION))
            .filter_map(|i| self.ev[i].seq)
            .collect()
    }

    /// The category of slice `i` (an op or one of our ranges) of a step whose data phase ends
    /// at `data_end`; `None` for the step range itself.
    fn category(&self, i: usize, data_end: f64, attention: &HashSet<i64>) -> Option<Category> {
        let e = self.ev[i];
        if step_of(e).is_some() {
            return None;
        }
        let up: Vec<&Event> =
            std::iter::once(i).chain(self.ancestors(i)).map(|a| self.ev[a]).collect();
        if up.iter().any(|a| a.name.starts_with(COMMUNICATION)) {
            return Some(Category::Communication);
        }
        if up.iter().any(|a| a.name == OPTIMIZER) {
            let matmul = e.cat == "cpu_op" && is_matmul(&e.name);
            return Some(if matmul {
                Category::Orthogonalisation
            } else {
                Category::OptimizerUpdates
            });
        }
        let backward = up.iter().find(|a| a.name.starts_with(BACKWARD));
        let in_attention = match backward {
            Some(b) => b.seq.is_some_and(|s| attention.contains(&s)),
            None => up.iter().any(|a| a.name == ATTENTION),
        };
        if in_attention {
            return Some(Category::Attention);
        }
        if backward.is_none() && e.end() <= data_end + 1e-3 {
            return Some(Category::Data);
        }
        Some(if is_matmul(&e.name) { Category::Matmul } else { Category::OtherOps })
    }

    fn descendants(&self, s: usize) -> Vec<usize> {
        (0..self.ev.len()).filter(|&i| self.ancestors(i).any(|a| a == s)).collect()
    }

    /// CPU: self times of the step's slices; the step range's own self time is data before
    /// `data_end` and host overhead after.
    fn split_cpu(
        &self,
        s: usize,
        data_end: f64,
        attention: &HashSet<i64>,
        ms: &mut BTreeMap<Category, f64>,
    ) {
        let mut data_ops = 0.0;
        for i in self.descendants(s) {
            let Some(c) = self.category(i, data_end, attention) else { continue };
            *ms.entry(c).or_default() += self.self_us[i] / 1e3;
            if c == Category::Data {
                data_ops += self.self_us[i];
            }
        }
        let data_gap = (data_end - self.ev[s].ts - data_ops).max(0.0);
        *ms.entry(Category::Data).or_default() += data_gap / 1e3;
        *ms.entry(Category::Host).or_default() += (self.self_us[s] - data_gap).max(0.0) / 1e3;
    }

    /// CUDA: kernel time by the category of the op that launched each kernel; the wall time
    /// without a kernel is host overhead/idle.
    fn split_gpu(
        &self,
        s: usize,
        data_end: f64,
        attention: &HashSet<i64>,
        kernels: &[&Event],
        ms: &mut BTreeMap<Category, f64>,
    ) {
        let step = self.ev[s];
        // The op that launched a kernel: the innermost cpu_op with its External id.
        let mut launcher: HashMap<i64, usize> = HashMap::new();
        for i in (0..self.ev.len()).filter(|&i| self.ev[i].cat == "cpu_op") {
            if let Some(x) = self.ev[i].external {
                launcher.insert(x, i);
            }
        }
        let mut busy = 0.0;
        for k in kernels.iter().filter(|k| k.ts >= step.ts && k.ts < step.end()) {
            let dur = k.dur.min(step.end() - k.ts);
            let c = k
                .external
                .and_then(|x| launcher.get(&x))
                .and_then(|&i| self.category(i, data_end, attention))
                .unwrap_or(Category::OtherOps);
            *ms.entry(c).or_default() += dur / 1e3;
            busy += dur;
        }
        *ms.entry(Category::Host).or_default() += (step.dur - busy).max(0.0) / 1e3;
    }
}

/// Mean ms per step of each category over the steps of one stage.
#[derive(Debug, Clone, Serialize)]
pub struct StageTable {
    pub stage: String,
    /// The profiled steps of this stage (1-based).
    pub steps: Vec<u64>,
    pub wall_ms: f64,
    pub ms: BTreeMap<Category, f64>,
}

/// The steps grouped by stage, in the order the stages first ran.
pub fn by_stage(steps: &[Step]) -> Vec<StageTable> {
    let mut out: Vec<StageTable> = Vec::new();
    for s in steps {
        let t = match out.iter().position(|t| t.stage == s.stage) {
            Some(i) => &mut out[i],
            None => {
                out.push(StageTable {
                    stage: s.stage.clone(),
                    steps: Vec::new(),
                    wall_ms: 0.0,
                    ms: BTreeMap::new(),
                });
                out.last_mut().expect("just pushed")
            }
        };
        t.steps.push(s.step);
        t.wall_ms += s.wall_ms;
        for (&c, &v) in &s.ms {
            *t.ms.entry(c).or_default() += v;
        }
    }
    for t in &mut out {
        let n = t.steps.len() as f64;
        t.wall_ms /= n;
        t.ms.values_mut().for_each(|v| *v /= n);
    }
    out
}

/// Mean ms per step of each category over every profiled step, whatever its stage.
pub fn overall(steps: &[Step]) -> StageTable {
    let all: Vec<Step> = steps.iter().map(|s| Step { stage: "all".into(), ..s.clone() }).collect();
    let mut t = by_stage(&all).pop().unwrap_or(StageTable {
        stage: String::new(),
        steps: Vec::new(),
        wall_ms: 0.0,
        ms: BTreeMap::new(),
    });
    let mut stages: Vec<&str> = Vec::new();
    for s in steps {
        if !stages.contains(&s.stage.as_str()) {
            stages.push(&s.stage);
        }
    }
    t.stage = stages.join(", ");
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmuls_are_named_by_their_aten_op() {
        assert!(
            is_matmul("aten::baddbmm") && is_matmul("aten::mm") && is_matmul("aten::_scaled_mm")
        );
        assert!(!is_matmul("aten::mul") && !is_matmul("aten::mm_backward"));
    }

    #[test]
    fn the_step_range_names_its_number_and_stage() {
        let e = |name: &str| Event {
            name: name.into(),
            cat: "user_annotation".into(),
            tid: "1/1".into(),
            ts: 0.0,
            dur: 1.0,
            seq: None,
            external: None,
        };
        assert_eq!(step_of(&e("step 12 | windows 112/48")), Some((12, "windows 112/48".into())));
        assert_eq!(step_of(&e("step x | every step")), None);
        assert_eq!(step_of(&e("optimizer")), None);
    }
}
