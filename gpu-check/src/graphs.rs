//! One lab-size training step eager against its CUDA-graph replay: time, and the loss and
//! optimizer state of one replay against one eager step from the same state.
use crate::adamw::Fused;
use crate::model::{batch, build, zero_grads, Model, RECORD_1};
use crate::table::Row;
use crate::util::{max_abs, Ctx, WARMUP};
use anyhow::{Context, Result};
use tch::{Kind, Tensor};
use trainer::recipe::Scale;
use trainer::shim::{CudaGraph, CudaStream};

/// What the graph holds: the whole step, or fwd+bwd when capturing the whole step failed.
#[derive(PartialEq)]
enum Captured {
    WholeStep,
    FwdBwdOnly,
}

pub fn check(ctx: &Ctx) -> Result<Vec<Row>> {
    let s = SmallStep::new(ctx)?;
    let r = &s.m.recipe;
    let what = format!(
        "{}L d{} V{} B{}×T{}",
        r.n_layer, r.n_embd, r.padded_vocab_size, r.batch_rows, r.seq_len
    );
    let eager_ms = ctx.time_ms(|| s.run(true).map(drop))?;
    // torch.cuda.graph's recipe: warm up on a side stream before capturing.
    let main = CudaStream::current(ctx.index)?;
    let side = CudaStream::from_pool(ctx.index, false)?;
    side.wait_stream(&main)?;
    side.set_current()?;
    let warm = (0..WARMUP).try_for_each(|_| s.run(true).map(drop));
    main.set_current()?;
    main.wait_stream(&side)?;
    warm?;

    // One eager step from a saved state, to compare the replay against.
    let start = s.state();
    let eager_loss = s.run(true)?.double_value(&[]);
    let eager_state = s.state();
    s.restore(&start);
    ctx.sync();

    let mut graph = CudaGraph::new()?;
    let (loss, captured) = match graph.capture(ctx.index, || s.run(true)) {
        Ok(loss) => (loss, Captured::WholeStep),
        Err(full) => {
            graph = CudaGraph::new()?;
            let loss = graph.capture(ctx.index, || s.run(false)).with_context(|| {
                format!("capturing fwd+bwd after the full step failed ({full:#})")
            })?;
            (loss, Captured::FwdBwdOnly)
        }
    };
    graph.replay()?;
    ctx.sync();
    let replay_loss = loss.double_value(&[]);
    let loss_delta = (replay_loss - eager_loss).abs();
    let same = match captured {
        Captured::WholeStep => format!(
            "replay vs eager from one state: loss Δ {loss_delta:.2e}, state max Δ {:.2e}",
            max_state_diff(&s.state(), &eager_state)
        ),
        Captured::FwdBwdOnly => format!("replay vs eager loss Δ {loss_delta:.2e}"),
    };
    let replay_ms = ctx.time_ms(|| graph.replay())?;
    let (scope, eager_note) = match captured {
        Captured::WholeStep => {
            ("the whole step (zero grads, fwd, bwd, fused AdamW)", String::new())
        }
        Captured::FwdBwdOnly => {
            let fwd_bwd = ctx.time_ms(|| s.run(false).map(drop))?;
            (
                "fwd+bwd only: capturing the full step failed",
                format!(" (eager fwd+bwd only: {fwd_bwd:.2} ms)"),
            )
        }
    };
    Ok(vec![Row::new(
        format!("CUDA graph: one step, {what}"),
        format!(
            "eager {eager_ms:.2} ms{eager_note}, replay {replay_ms:.2} ms ({:.1}×)",
            eager_ms / replay_ms
        ),
        format!("captured {scope} on a side stream after warmup; {same}"),
    )])
}

/// One training step of the lab-size model with device-side state only (fused AdamW, no
/// host reads), so the whole step can be captured.
struct SmallStep {
    m: Model,
    x: Tensor,
    y: Tensor,
    opt: Fused,
}

impl SmallStep {
    fn new(ctx: &Ctx) -> Result<SmallStep> {
        let m = build(ctx, RECORD_1, Scale::Lab)?;
        let r = &m.recipe;
        let (x, y) = batch(ctx, r, [r.batch_rows as i64, r.seq_len as i64]);
        let opt = Fused::new(&m, ctx);
        Ok(SmallStep { m, x, y, opt })
    }

    /// Zero the gradients, forward, backward and (with `update`) the fused AdamW step;
    /// returns the loss tensor without reading it.
    fn run(&self, update: bool) -> Result<Tensor> {
        zero_grads(&self.m.params);
        let loss = self.m.model.loss(&self.x, &self.y, &Default::default())?;
        loss.f_backward()?;
        if update {
            self.opt.step(&self.m)?;
        }
        Ok(loss)
    }

    /// Every tensor a step changes besides the gradients.
    fn state(&self) -> Vec<Tensor> {
        self.opt.tensors().map(|t| t.detach().copy()).collect()
    }

    /// Copies `state` back in place (graph replays use these addresses).
    fn restore(&self, state: &[Tensor]) {
        tch::no_grad(|| {
            for (t, s) in self.opt.tensors().zip(state) {
                t.shallow_clone().copy_(s);
            }
        });
    }
}

fn max_state_diff(a: &[Tensor], b: &[Tensor]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| max_abs(&(x.to_kind(Kind::Float) - y.to_kind(Kind::Float))))
        .fold(0.0, f64::max)
}
