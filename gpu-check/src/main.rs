//! `gpu-check`: one markdown table of what a CUDA build does on this GPU. Flash attention against
//! an SDPA reference (dense, window, varlen, backward), record #1 at full shape on one GPU
//! (ms/step, tokens/s, MFU, peak memory), our AdamW against the fused one, one training step
//! eager against CUDA-graph replay, and record #29 at full shape on one GPU: one rank's training
//! step at each window stage, the 262,144-token eval forward, the FP8 head against bf16 and
//! Muon's Newton–Schulz. Every check catches its own errors, so one failure prints
//! `error: ...` in its row and the rest still run. scripts/gpu-check.sh runs it on a GPU machine:
//!
//!   gpu-check --out /tmp/gpu-check.md
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "gpu-check",
    about = "Check flash attention, records #1 and #29 at full shape, fused AdamW, CUDA graphs, \
             the FP8 head and Newton–Schulz on one GPU",
    args_override_self = true
)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
struct Args {
    /// Also write the table (markdown) to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// CUDA device index.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Rows of 1,024 tokens per step for record #1 at full shape.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(i64).range(1..=128))]
    batch: i64,
    /// Timed steps per measurement, after the warmup steps.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    steps: u32,
    /// Checks not started within this many seconds are skipped (the table stays complete).
    #[arg(long, default_value_t = 180)]
    budget_s: u64,
}

#[cfg(not(feature = "cuda"))]
fn main() -> ExitCode {
    Args::parse();
    eprintln!("gpu-check needs a CUDA build (--features cuda): cargo build --release -p gpu-check --features cuda");
    ExitCode::from(2)
}

#[cfg(feature = "cuda")]
fn main() -> ExitCode {
    let args = Args::parse();
    match gpu::run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("gpu-check: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(feature = "cuda")]
mod gpu {
    use super::Args;
    use anyhow::{anyhow, bail, ensure, Context, Result};
    use corpus::synthetic::SplitMix64;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::path::Path;
    use std::time::Instant;
    use tch::{nn, Device, Kind, Reduction, Tensor};
    use trainer::data::packed::padded_doc_slots;
    use trainer::dist::{self, RankEnv};
    use trainer::model::attend::{attend_with, Docs, Kernel, Pattern};
    use trainer::model::fp8_head::{fp8_linear, Fp8Scales};
    use trainer::model::norm::rms_norm;
    use trainer::model::params::Param;
    use trainer::model::softcap::softcap;
    use trainer::model::{Ctx as Forward, Gpt};
    use trainer::optim::adamw::{clip_factor, AdamW};
    use trainer::optim::newton_schulz::orthogonalize;
    use trainer::optim::optimizer::Optimizer;
    use trainer::optim::schedule::Schedule;
    use trainer::recipe::{Recipe, Scale};
    use trainer::shim::{self, AdamWConfig, CudaGraph, CudaStream};

    /// A record's manifest: its path (for errors) and its text.
    type Manifest = (&'static str, &'static str);
    const RECORD_1: Manifest = ("records/01.toml", include_str!("../../records/01.toml"));
    const RECORD_29: Manifest = ("records/29.toml", include_str!("../../records/29.toml"));
    /// H100/H200 SXM dense bf16 tensor-core peak (NVIDIA's spec sheets, without sparsity).
    const PEAK_FLOPS: f64 = 989e12;
    const WARMUP: usize = 3;

    struct Row {
        check: String,
        result: String,
        notes: String,
    }

    fn row(check: impl Into<String>, result: impl Into<String>, notes: impl Into<String>) -> Row {
        Row { check: check.into(), result: result.into(), notes: notes.into() }
    }

    /// Runs the checks in order; returns whether every one passed.
    pub fn run(args: &Args) -> Result<bool> {
        if !tch::Cuda::is_available() {
            bail!(
                "no CUDA device visible (tch::Cuda::is_available() is false; libtorch_cuda loaded: {}); \
                 run it on a GPU machine through scripts/gpu-check.sh",
                tch::utils::has_cudart()
            );
        }
        let count = tch::Cuda::device_count();
        if args.device as i64 >= count {
            bail!("--device {} but only {count} CUDA devices", args.device);
        }
        let ctx = Ctx {
            index: args.device,
            dev: Device::Cuda(args.device),
            batch: args.batch,
            steps: args.steps as usize,
        };
        let start = Instant::now();
        let mut rows = vec![row(
            "device",
            format!("cuda:{} of {count}", args.device),
            format!("libtorch 2.11.0 (tch 0.24); cuDNN {}", tch::Cuda::cudnn_is_available()),
        )];
        type Check = (&'static str, fn(&Ctx) -> Result<Vec<Row>>);
        let checks: [Check; 13] = [
            ("flash fwd: dense causal", flash_dense),
            ("flash fwd: causal window 64", flash_window),
            ("flash fwd: varlen documents", flash_varlen),
            ("flash fwd: varlen documents + window 64", flash_varlen_window),
            ("flash bwd: dense causal", flash_backward_dense),
            ("flash bwd: varlen documents + window 64", flash_backward_varlen),
            ("record #1 full shape", record_one),
            ("AdamW over record #1's params", adamw),
            ("CUDA graph: one lab-size step", graph),
            ("record #29, 1 GPU, one rank's batch", record_29),
            ("record #29 eval forward, 262,144 tokens", record_29_eval),
            ("FP8 head vs bf16", fp8_head),
            ("Muon Newton–Schulz (bf16)", newton_schulz),
        ];
        let mut ok = true;
        for (name, check) in checks {
            let new = if start.elapsed().as_secs() >= args.budget_s {
                ok = false;
                vec![row(
                    name,
                    "skipped",
                    format!("past the {} s budget (--budget-s)", args.budget_s),
                )]
            } else {
                guarded(|| check(&ctx))
                    .unwrap_or_else(|e| vec![row(name, format!("error: {e:#}"), "")])
            };
            for r in &new {
                ok &= !r.result.starts_with("error") && !r.result.contains("FAIL");
                eprintln!("gpu-check: {} | {}", r.check, r.result);
            }
            rows.extend(new);
            if let Some(out) = &args.out {
                write_atomically(out, &table(&rows))?;
            }
        }
        rows.push(row("total time", format!("{:.1} s", start.elapsed().as_secs_f64()), ""));
        let text = table(&rows);
        print!("{text}");
        if let Some(out) = &args.out {
            write_atomically(out, &text)?;
        }
        Ok(ok)
    }

    struct Ctx {
        index: usize,
        dev: Device,
        batch: i64,
        steps: usize,
    }

    impl Ctx {
        fn sync(&self) {
            tch::Cuda::synchronize(self.index as i64);
        }

        /// Mean ms of `f` over `steps` runs, after `WARMUP` untimed ones.
        fn time_ms(&self, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
            for _ in 0..WARMUP {
                f()?;
            }
            self.sync();
            let t0 = Instant::now();
            for _ in 0..self.steps {
                f()?;
            }
            self.sync();
            Ok(t0.elapsed().as_secs_f64() * 1e3 / self.steps as f64)
        }
    }

    /// Runs `f` with a panic turned into an error (tch's calls without `f_` panic on libtorch
    /// errors, out of memory among them).
    fn guarded<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
        catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into());
            Err(anyhow!(text))
        })
    }

    /// 262144 -> "262,144".
    fn commas(n: usize) -> String {
        let digits = n.to_string();
        let mut out = String::new();
        for (i, ch) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(ch);
        }
        out
    }

    /// "loss a → b over n steps" for the losses a timed loop read back.
    fn loss_span(losses: &[f64]) -> String {
        match (losses.first(), losses.last()) {
            (Some(a), Some(b)) => format!("loss {a:.3} → {b:.3} over {} steps", losses.len()),
            _ => String::new(),
        }
    }

    /// Peak allocated and reserved memory since the last `shim::reset_peak`.
    fn peak_memory(ctx: &Ctx) -> Result<String> {
        let mem = shim::memory_stats(ctx.dev)?;
        Ok(format!(
            "{} MiB allocated, {} MiB reserved",
            mem.peak_allocated >> 20,
            mem.peak_reserved >> 20
        ))
    }

    fn table(rows: &[Row]) -> String {
        let cell = |s: &str| s.replace('|', "\\|").replace('\n', " ");
        let mut out = String::from("| check | result | reference / notes |\n|---|---|---|\n");
        for r in rows {
            out += &format!("| {} | {} | {} |\n", cell(&r.check), cell(&r.result), cell(&r.notes));
        }
        out
    }

    fn write_atomically(path: &Path, text: &str) -> Result<()> {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
    }

    // ---- flash attention against SDPA ---------------------------------------------------------

    /// Record #1's heads over 4 rows of 1,024 tokens.
    const DENSE: [i64; 4] = [4, 12, 1024, 64];
    /// 4 rows of 256 tokens; documents of 37, 219, 300, 1 and 467 tokens (the third crosses a
    /// row boundary, the fourth is one token long).
    const PACKED: [i64; 4] = [4, 12, 256, 64];
    const DOC_LENGTHS: [i64; 5] = [37, 219, 300, 1, 467];

    fn max_abs(t: &Tensor) -> f64 {
        t.abs().max().to_kind(Kind::Double).double_value(&[])
    }

    /// Whether `err` is within bf16's rounding of values up to `scale` (2^-8 relative per
    /// rounding, a few roundings deep, so 2e-2).
    fn verdict(err: f64, scale: f64) -> (&'static str, f64) {
        let tol = 2e-2 * scale.max(1.0);
        (if err <= tol { "ok" } else { "FAIL" }, tol)
    }

    fn bf16_qkv(ctx: &Ctx, shape: [i64; 4]) -> [Tensor; 3] {
        tch::manual_seed(1234);
        [0, 1, 2].map(|_| Tensor::randn(shape, (Kind::BFloat16, ctx.dev)))
    }

    fn reference_note(pattern: &Pattern) -> &'static str {
        if pattern.window.is_none() && pattern.docs.is_none() {
            "ref: SDPA is_causal in fp32 on the same bf16 inputs"
        } else {
            "ref: SDPA with an explicit mask in fp32 on the same bf16 inputs"
        }
    }

    /// Flash forward in bf16 against the fp32 reference on the same inputs.
    fn flash_forward(ctx: &Ctx, shape: [i64; 4], pattern: Pattern, what: &str) -> Result<Vec<Row>> {
        let [q, k, v] = bf16_qkv(ctx, shape);
        let got = attend_with(&q, &k, &v, &pattern, Kernel::Flash)?;
        let f32 = |x: &Tensor| x.to_kind(Kind::Float);
        let want = attend_with(&f32(&q), &f32(&k), &f32(&v), &pattern, Kernel::Sdpa)?;
        let err = max_abs(&(f32(&got) - &want));
        let (ok, tol) = verdict(err, max_abs(&want));
        Ok(vec![row(
            format!("flash fwd: {what}"),
            format!("max abs err {err:.4} ({ok})"),
            format!("{}; tol {tol:.3}", reference_note(&pattern)),
        )])
    }

    /// dq, dk, dv of flash (bf16) against the reference's autograd (fp32), for one upstream
    /// gradient.
    fn flash_backward(
        ctx: &Ctx,
        shape: [i64; 4],
        pattern: Pattern,
        what: &str,
    ) -> Result<Vec<Row>> {
        let base = bf16_qkv(ctx, shape);
        let upstream = Tensor::randn(shape, (Kind::Float, ctx.dev));
        let grads = |kind: Kind, kernel: Kernel| -> Result<Vec<Tensor>> {
            let leaves: Vec<Tensor> =
                base.iter().map(|x| x.to_kind(kind).detach().set_requires_grad(true)).collect();
            let y = attend_with(&leaves[0], &leaves[1], &leaves[2], &pattern, kernel)?;
            (y.to_kind(Kind::Float) * &upstream).sum(Kind::Float).f_backward()?;
            Ok(leaves.iter().map(|l| l.grad().to_kind(Kind::Float)).collect())
        };
        let got = grads(Kind::BFloat16, Kernel::Flash)?;
        let want = grads(Kind::Float, Kernel::Sdpa)?;
        let mut parts = Vec::new();
        let mut all_ok = true;
        for (i, name) in ["dq", "dk", "dv"].iter().enumerate() {
            let err = max_abs(&(&got[i] - &want[i]));
            let (ok, tol) = verdict(err, max_abs(&want[i]));
            all_ok &= ok == "ok";
            parts.push(format!("{name} {err:.4} (tol {tol:.3})"));
        }
        Ok(vec![row(
            format!("flash bwd: {what}"),
            format!("max abs err {} ({})", parts.join(", "), if all_ok { "ok" } else { "FAIL" }),
            format!(
                "{}; autograd of each for one random upstream gradient",
                reference_note(&pattern)
            ),
        )])
    }

    fn docs(ctx: &Ctx) -> Result<Docs> {
        Docs::from_lengths(&DOC_LENGTHS, ctx.dev)
    }

    fn flash_dense(ctx: &Ctx) -> Result<Vec<Row>> {
        flash_forward(ctx, DENSE, Pattern::default(), "dense causal, B4 H12 T1024 D64")
    }

    fn flash_window(ctx: &Ctx) -> Result<Vec<Row>> {
        let pattern = Pattern { window: Some(64), ..Pattern::default() };
        flash_forward(ctx, DENSE, pattern, "causal window 64, B4 H12 T1024 D64")
    }

    fn flash_varlen(ctx: &Ctx) -> Result<Vec<Row>> {
        let pattern = Pattern { docs: Some(docs(ctx)?), ..Pattern::default() };
        flash_forward(ctx, PACKED, pattern, "varlen docs [37,219,300,1,467] over B4×T256, causal")
    }

    fn flash_varlen_window(ctx: &Ctx) -> Result<Vec<Row>> {
        let pattern = Pattern { window: Some(64), docs: Some(docs(ctx)?), ..Pattern::default() };
        flash_forward(ctx, PACKED, pattern, "varlen docs + window 64")
    }

    fn flash_backward_dense(ctx: &Ctx) -> Result<Vec<Row>> {
        flash_backward(ctx, DENSE, Pattern::default(), "dense causal (dq, dk, dv)")
    }

    fn flash_backward_varlen(ctx: &Ctx) -> Result<Vec<Row>> {
        let pattern = Pattern { window: Some(64), docs: Some(docs(ctx)?), ..Pattern::default() };
        flash_backward(ctx, PACKED, pattern, "varlen docs + window 64 (dq, dk, dv)")
    }

    // ---- record #1 at full shape ----------------------------------------------------------------

    struct Model {
        // Owns the parameters; model and params borrow nothing from it but must not outlive it.
        _vs: nn::VarStore,
        model: Gpt,
        params: Vec<Param>,
        recipe: Recipe,
    }

    fn recipe((path, text): Manifest, scale: Scale) -> Result<Recipe> {
        Recipe::from_manifest_str(text, scale, None).map_err(|e| anyhow!("{path}: {e:#}"))
    }

    fn build(ctx: &Ctx, manifest: Manifest, scale: Scale) -> Result<Model> {
        let recipe = recipe(manifest, scale)?;
        tch::manual_seed(recipe.seed as i64);
        let vs = nn::VarStore::new(ctx.dev);
        let (model, params) = Gpt::new(vs.root(), &recipe, Kind::BFloat16);
        Ok(Model { _vs: vs, model, params, recipe })
    }

    /// Random tokens of `shape` as inputs and targets.
    fn batch(ctx: &Ctx, r: &Recipe, shape: [i64; 2]) -> (Tensor, Tensor) {
        let vocab = r.vocab_size as i64;
        (
            Tensor::randint(vocab, shape, (Kind::Int64, ctx.dev)),
            Tensor::randint(vocab, shape, (Kind::Int64, ctx.dev)),
        )
    }

    fn zero_grads(params: &[Param]) {
        for p in params {
            let mut g = p.tensor.grad();
            if g.defined() {
                let _ = g.zero_();
            }
        }
    }

    fn record_one(ctx: &Ctx) -> Result<Vec<Row>> {
        let m = build(ctx, RECORD_1, Scale::Full)?;
        let r = &m.recipe;
        let (x, y) = batch(ctx, r, [ctx.batch, r.seq_len as i64]);
        let mut opt = AdamW::new(&m.params, r.beta1, r.beta2, r.eps, r.weight_decay);
        let mut losses = Vec::new();
        shim::reset_peak(ctx.dev)?;
        // train.rs's step: bf16 matmuls on fp32 masters, loss read back, clip, our AdamW.
        let step_ms = ctx.time_ms(|| {
            let loss = m.model.loss(&x, &y, &Default::default())?;
            loss.f_backward()?;
            losses.push(loss.double_value(&[]));
            let (_, scale) = clip_factor(&m.params, r.grad_clip);
            opt.step(&m.params, r.lr, scale);
            zero_grads(&m.params);
            Ok(())
        })?;
        let mem = peak_memory(ctx)?;
        let fwd_bwd_ms = ctx.time_ms(|| {
            m.model.loss(&x, &y, &Default::default())?.f_backward()?;
            zero_grads(&m.params);
            Ok(())
        })?;

        let tokens = (ctx.batch * r.seq_len as i64) as f64;
        let n_params: i64 = m.params.iter().map(|p| p.tensor.numel() as i64).sum();
        let wpe = (r.max_seq_len * r.n_embd) as i64;
        let (l, c, t) = (r.n_layer as f64, r.n_embd as f64, r.seq_len as f64);
        // nanoGPT's estimate_mfu: 6N per token (N without the position embedding) plus
        // 12·L·C·T for the attention scores and weighted sums.
        let flops_per_token = 6.0 * (n_params - wpe) as f64 + 12.0 * l * c * t;
        let tokens_per_s = tokens / (step_ms / 1e3);
        let mfu = flops_per_token * tokens_per_s / PEAK_FLOPS;
        let shape = format!("B{}×T{}", ctx.batch, r.seq_len);
        let first_last = loss_span(&losses);
        Ok(vec![
            row(
                format!("record #1 step (fwd+bwd+clip+AdamW), {shape}"),
                format!("{step_ms:.1} ms/step"),
                format!(
                    "mean of {} steps after {WARMUP} warmup; train.rs's step on random tokens; {first_last}",
                    ctx.steps
                ),
            ),
            row(
                format!("record #1 fwd+bwd only, {shape}"),
                format!("{fwd_bwd_ms:.1} ms"),
                "H200 probe: 49.3 ms at B16 (tch autocast), Python eager 50.1 ms",
            ),
            row(
                "record #1 throughput",
                format!("{:.0} tokens/s", tokens_per_s),
                format!(
                    "{tokens} tokens per step; 8 GPUs ≈ 8× this for the 524,288-token batch"
                ),
            ),
            row(
                "record #1 MFU",
                format!("{:.1} %", mfu * 100.0),
                format!(
                    "{:.0} MFLOP/token = 6N + 12·L·C·T (N = {:.1}M without wpe) over 989 TFLOP/s, \
                     the H100/H200 SXM bf16 dense peak",
                    flops_per_token / 1e6,
                    (n_params - wpe) as f64 / 1e6
                ),
            ),
            row(
                "record #1 peak memory",
                mem,
                "caching allocator peaks over the full steps (shim memory_stats); probe: 16.5 GB at B16",
            ),
        ])
    }

    // ---- AdamW ----------------------------------------------------------------------------------

    fn adamw(ctx: &Ctx) -> Result<Vec<Row>> {
        let m = build(ctx, RECORD_1, Scale::Full)?;
        let r = &m.recipe;
        let (x, y) = batch(ctx, r, [1, r.seq_len as i64]);
        m.model.loss(&x, &y, &Default::default())?.f_backward()?; // gradients to step with
        let mut ours = AdamW::new(&m.params, r.beta1, r.beta2, r.eps, r.weight_decay);
        let ours_ms = ctx.time_ms(|| {
            ours.step(&m.params, r.lr, 1.0);
            Ok(())
        })?;
        let fused = Fused::new(&m, ctx);
        let fused_ms = ctx.time_ms(|| fused.step(&m))?;
        let n: i64 = fused.params.iter().map(|p| p.numel() as i64).sum();
        Ok(vec![row(
            format!("AdamW over {:.1}M params ({} tensors)", n as f64 / 1e6, fused.params.len()),
            format!(
                "ours {ours_ms:.2} ms, fused {fused_ms:.2} ms ({:.1}× faster)",
                ours_ms / fused_ms
            ),
            "ours: src/optim/adamw.rs (per-tensor ops); fused: aten::_fused_adamw_ via the shim; \
             timing only; probe: fused 1.33 ms, torch::optim 18.8 ms",
        )])
    }

    /// The fused AdamW's state over a model's parameters, all on the device.
    struct Fused {
        params: Vec<Tensor>,
        exp_avgs: Vec<Tensor>,
        exp_avg_sqs: Vec<Tensor>,
        steps: Vec<Tensor>,
        cfg: AdamWConfig,
    }

    impl Fused {
        fn new(m: &Model, ctx: &Ctx) -> Fused {
            let r = &m.recipe;
            let params: Vec<Tensor> = m.params.iter().map(|p| p.tensor.shallow_clone()).collect();
            let zeros = || -> Vec<Tensor> { params.iter().map(Tensor::zeros_like).collect() };
            let (exp_avgs, exp_avg_sqs) = (zeros(), zeros());
            let steps = params.iter().map(|_| Tensor::zeros([], (Kind::Float, ctx.dev))).collect();
            let cfg = AdamWConfig {
                lr: r.lr,
                beta1: r.beta1,
                beta2: r.beta2,
                weight_decay: r.weight_decay,
                eps: r.eps,
            };
            Fused { params, exp_avgs, exp_avg_sqs, steps, cfg }
        }

        /// One update with `m`'s current gradients.
        fn step(&self, m: &Model) -> Result<()> {
            let grads: Vec<Tensor> = m.params.iter().map(|p| p.tensor.grad()).collect();
            let s = self;
            shim::fused_adamw_(&s.params, &grads, &s.exp_avgs, &s.exp_avg_sqs, &s.steps, s.cfg)
        }

        /// Every tensor an update changes.
        fn tensors(&self) -> impl Iterator<Item = &Tensor> {
            [&self.params, &self.exp_avgs, &self.exp_avg_sqs, &self.steps].into_iter().flatten()
        }
    }

    // ---- CUDA graph ---------------------------------------------------------------------------

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

    fn graph(ctx: &Ctx) -> Result<Vec<Row>> {
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
        let (loss, scope) = match graph.capture(ctx.index, || s.run(true)) {
            Ok(loss) => (loss, "the whole step (zero grads, fwd, bwd, fused AdamW)"),
            Err(full) => {
                graph = CudaGraph::new()?;
                let loss = graph.capture(ctx.index, || s.run(false)).with_context(|| {
                    format!("capturing fwd+bwd after the full step failed ({full:#})")
                })?;
                (loss, "fwd+bwd only: capturing the full step failed")
            }
        };
        graph.replay()?;
        ctx.sync();
        let replay_loss = loss.double_value(&[]);
        let same = if scope.starts_with("the whole") {
            format!(
                "replay vs eager from one state: loss Δ {:.2e}, state max Δ {:.2e}",
                (replay_loss - eager_loss).abs(),
                max_state_diff(&s.state(), &eager_state)
            )
        } else {
            format!("replay vs eager loss Δ {:.2e}", (replay_loss - eager_loss).abs())
        };
        let replay_ms = ctx.time_ms(|| graph.replay())?;
        let eager_note = if scope.starts_with("the whole") {
            String::new()
        } else {
            let fwd_bwd = ctx.time_ms(|| s.run(false).map(drop))?;
            format!(" (eager fwd+bwd only: {fwd_bwd:.2} ms)")
        };
        Ok(vec![row(
            format!("CUDA graph: one step, {what}"),
            format!(
                "eager {eager_ms:.2} ms{eager_note}, replay {replay_ms:.2} ms ({:.1}×)",
                eager_ms / replay_ms
            ),
            format!("captured {scope} on a side stream after warmup; {same}"),
        )])
    }

    // ---- record #29 at full shape -------------------------------------------------------------

    /// Mean document length of the synthetic packed sequences (exponential; FineWeb's median
    /// document is about 400 tokens).
    const MEAN_DOC: f64 = 600.0;
    /// Std of the random lm_head for the FP8 check (upstream's w scale 2^-9 fits |W| < 0.875).
    const HEAD_STD: f64 = 0.02;

    /// One packed sequence as record #29's loader makes it.
    struct Packed {
        /// [1, N] random token ids (inputs, targets).
        x: Tensor,
        y: Tensor,
        docs: Docs,
        n_docs: usize,
        /// cu_seqlens entries, padding included.
        slots: usize,
    }

    /// `n` random tokens in documents of random lengths clipped at max_doc_len (the recipe's
    /// seq_len), the last one cut at `n`; cu_seqlens padded with `n` to padded_doc_slots(n).
    fn packed(ctx: &Ctx, r: &Recipe, n: usize) -> Result<Packed> {
        let mut rng = SplitMix64(29);
        let (mut cu, mut end) = (vec![0i32], 0);
        while end < n {
            let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
            let len = ((-(1.0 - u).ln() * MEAN_DOC).ceil() as usize).clamp(1, r.seq_len);
            end = (end + len).min(n);
            cu.push(i32::try_from(end).context("document boundaries overflow int32")?);
        }
        let (n_docs, slots) = (cu.len() - 1, padded_doc_slots(n));
        ensure!(n_docs < slots, "{n_docs} documents do not fit {slots} cu_seqlens entries");
        cu.resize(slots, i32::try_from(n).context("tokens overflow int32")?);
        let docs = Docs::from_offsets(&cu, ctx.dev)?;
        let (x, y) = batch(ctx, r, [1, n as i64]);
        Ok(Packed { x, y, docs, n_docs, slots })
    }

    /// One window stage's measurement.
    struct Stage {
        ws: usize,
        /// (long, short) in tokens.
        windows: (i64, i64),
        step: u64,
        ms: f64,
    }

    fn windows_of(r: &Recipe) -> Result<&trainer::recipe::Windows> {
        r.windows.as_ref().context("records/29.toml has no window schedule")
    }

    /// One rank's training step (8 ranks upstream) on one GPU at each window stage.
    fn record_29(ctx: &Ctx) -> Result<Vec<Row>> {
        let Model { _vs, model, params, recipe: r } = build(ctx, RECORD_29, Scale::Full)?;
        let per_rank = r.batch_tokens / r.reference_ranks.max(1); // 49,152
        let seq = packed(ctx, &r, per_rank)?;
        let mut coll = dist::init(&RankEnv::single(), ctx.dev)?;
        let mut opt = Optimizer::new(params, &r, Kind::BFloat16)?;
        let schedule = Schedule::new(&r);
        let w = windows_of(&r)?;
        // train.rs's backward: the gradient of upstream's reduction="sum" over a rank's tokens.
        let grad_mult = if r.loss_sum { per_rank as f64 } else { 1.0 };
        let stages = w.schedule.len() as u64;
        let (mut losses, mut timed) = (Vec::new(), Vec::new());
        shim::reset_peak(ctx.dev)?;
        for i in 0..stages {
            // The first step of stage i: ws(step) = schedule[stages·step / (1 + steps)].
            let step = (i * (r.steps + 1)).div_ceil(stages);
            let plan = schedule.at(step);
            let windows = plan.windows;
            let fwd = Forward { docs: Some(seq.docs.clone()), windows, training: true };
            let ms = ctx.time_ms(|| {
                let loss = model.loss(&seq.x, &seq.y, &fwd)?;
                (&loss * grad_mult).f_backward()?;
                losses.push(loss.double_value(&[]));
                opt.step(coll.as_mut(), &plan)?; // DistAdam + Muon, zeroes the grads
                Ok(())
            })?;
            timed.push(Stage { ws: w.ws(step, r.steps), windows, step, ms });
        }
        let mem = peak_memory(ctx)?;
        let join =
            |f: &dyn Fn(&Stage) -> String| timed.iter().map(f).collect::<Vec<_>>().join(" / ");
        let ws = join(&|t| t.ws.to_string());
        let tokens = commas(per_rank);
        Ok(vec![
            row(
                format!("record #29, 1 GPU, one rank's batch: step at ws {ws}"),
                format!("{} ms/step", join(&|t| format!("{:.1}", t.ms))),
                format!(
                    "upstream 98.1 ms/step on 8xH100 (each rank this batch; FA3, torch.compile, \
                     Triton NS); this is one rank's work with no communication (world 1, the \
                     single backend). Step = fwd (FP8 head) + bwd of the summed loss + \
                     Optimizer::step (DistAdam + Muon) + zero grads on one packed sequence of \
                     {tokens} random tokens in {} documents (≤ {}, cu_seqlens padded to {}); \
                     steps {} of {} give the windows {} (long/short); mean of {} steps after \
                     {WARMUP} warmup per ws; {}",
                    seq.n_docs,
                    commas(r.seq_len),
                    seq.slots,
                    join(&|t| t.step.to_string()),
                    commas(r.steps as usize),
                    join(&|t| format!("{}/{}", t.windows.0, t.windows.1)),
                    ctx.steps,
                    loss_span(&losses)
                ),
            ),
            row(
                format!("record #29 throughput at ws {ws}"),
                format!("{} tokens/s", join(&|t| format!("{:.0}", per_rank as f64 / (t.ms / 1e3)))),
                format!(
                    "{tokens} tokens per step; upstream 393,216 tokens in 98.1 ms = 4.0M tokens/s \
                     on 8 GPUs, 501k per GPU"
                ),
            ),
            row(
                "record #29 peak memory",
                mem,
                "caching allocator peaks over the steps at every ws (shim memory_stats); \
                 upstream logs ≈ 34,222 MiB allocated, ≈ 49,500 MiB reserved per rank",
            ),
        ])
    }

    /// The validation forward: one rank's 262,144 tokens, bf16 head, at the final eval's windows.
    fn record_29_eval(ctx: &Ctx) -> Result<Vec<Row>> {
        let m = build(ctx, RECORD_29, Scale::Full)?;
        let r = &m.recipe;
        let n = r.val_seq_len.context("records/29.toml has no val_seq_len")?;
        let seq = packed(ctx, r, n)?;
        let w = windows_of(r)?;
        let windows = w.sizes(r.steps, r.steps);
        let fwd = Forward { docs: Some(seq.docs.clone()), windows, training: false };
        let mut loss = f64::NAN;
        shim::reset_peak(ctx.dev)?;
        // train.rs's evaluate: no_grad, the mean loss read back each call.
        let ms = guarded(|| {
            ctx.time_ms(|| {
                loss = tch::no_grad(|| m.model.loss(&seq.x, &seq.y, &fwd))?.double_value(&[]);
                Ok(())
            })
        });
        let mem = peak_memory(ctx)?;
        let logits_gb = (n * r.padded_vocab_size * 4) as f64 / 1e9;
        let what = format!(
            "one sequence, {} documents, training=false (bf16 head), no_grad, ws {} (windows \
             {}/{}, the final eval's); the logits [{n}, {}] are {logits_gb:.1} GB in fp32",
            seq.n_docs,
            w.ws(r.steps, r.steps),
            windows.0,
            windows.1,
            r.padded_vocab_size
        );
        let check = format!("record #29 eval forward, {} tokens", commas(n));
        Ok(vec![match ms {
            Ok(ms) => row(
                check,
                format!("{ms:.1} ms/call, peak {mem}"),
                format!(
                    "{what}; mean of {} calls after {WARMUP} warmup; loss {loss:.3}",
                    ctx.steps
                ),
            ),
            Err(e) => row(check, format!("error: {e:#}"), format!("{what}; peak {mem} by then")),
        }])
    }

    /// ‖a − b‖ / ‖b‖ in fp32.
    fn rel_err(a: &Tensor, b: &Tensor) -> f64 {
        let (a, b) = (a.to_kind(Kind::Float), b.to_kind(Kind::Float));
        ((a - &b).norm() / b.norm()).double_value(&[])
    }

    /// The FP8 lm_head against a bf16 matmul at one rank's training shape: forward and both
    /// gradients for the same upstream gradient, and the time of each.
    fn fp8_head(ctx: &Ctx) -> Result<Vec<Row>> {
        let r = recipe(RECORD_29, Scale::Full)?;
        let f = r.fp8_head.as_ref().context("records/29.toml has no fp8_head")?;
        let cap = r.softcap.as_ref().context("records/29.toml has no softcap")?;
        let s = Fp8Scales::for_width(r.n_embd, f.w_scale, f.grad_scale);
        let n = (r.batch_tokens / r.reference_ranks.max(1)) as i64;
        let (c, v) = (r.n_embd as i64, r.padded_vocab_size as i64);
        let bf16 = Kind::BFloat16;
        tch::manual_seed(29);
        let x = rms_norm(&Tensor::randn([n, c], (bf16, ctx.dev)), r.ln_eps); // [N, C]
        let w = Tensor::randn([v, c], (Kind::Float, ctx.dev)) * HEAD_STD; // [V, C]
        let targets = Tensor::randint(r.vocab_size as i64, [n], (Kind::Int64, ctx.dev));
        // Training's gradient of the logits: the summed CE through the softcap, at bf16 logits.
        let g = {
            let z = x.matmul(&w.to_kind(bf16).tr()).set_requires_grad(true); // [N, V]
            softcap(&z, cap)
                .cross_entropy_loss::<Tensor>(&targets, None, Reduction::Sum, -100, 0.0)
                .f_backward()?;
            z.grad()
        };
        // -> [logits, grad x, grad w]
        let run = |fp8: bool| -> Result<[Tensor; 3]> {
            let (xl, wl) = (x.detach().set_requires_grad(true), w.detach().set_requires_grad(true));
            let out =
                if fp8 { fp8_linear(&xl, &wl, &s)? } else { xl.matmul(&wl.to_kind(bf16).tr()) };
            (&out * &g).sum(Kind::Float).f_backward()?;
            Ok([out, xl.grad(), wl.grad()])
        };
        let (got, want) = (run(true)?, run(false)?);
        let errs: Vec<f64> = got.iter().zip(&want).map(|(a, b)| rel_err(a, b)).collect();
        let ok = if errs.iter().all(|&e| e < 0.1) { "ok" } else { "FAIL" };
        drop((got, want));
        let fp8_ms = ctx.time_ms(|| run(true).map(drop))?;
        let bf16_ms = ctx.time_ms(|| run(false).map(drop))?;
        let shape = format!("[{n}, {c}] × [{v}, {c}]");
        Ok(vec![
            row(
                format!("FP8 head vs bf16: error, {shape}"),
                format!(
                    "rel err fwd {:.4}, grad_x {:.4}, grad_w {:.4} ({ok})",
                    errs[0], errs[1], errs[2]
                ),
                format!(
                    "fp8_linear (e4m3 x and W, e5m2 grad; scales √768/448, 2^-9, 1/448) against \
                     a bf16 matmul's autograd on the same inputs: RMS-normed x, W ~ N(0, \
                     {HEAD_STD}²), the gradient of the summed CE through the softcap over random \
                     targets; rel err = ‖a − b‖/‖b‖; ok below 0.1"
                ),
            ),
            row(
                format!("FP8 head vs bf16: speed, {shape}"),
                format!(
                    "fwd+bwd fp8 {fp8_ms:.2} ms, bf16 {bf16_ms:.2} ms ({:.2}×)",
                    bf16_ms / fp8_ms
                ),
                "mean of each after warmup; both include the (out·g).sum() that feeds the gradient",
            ),
        ])
    }

    /// Muon's Newton–Schulz on #29's matrix shapes: time per call and the singular values it
    /// leaves.
    fn newton_schulz(ctx: &Ctx) -> Result<Vec<Row>> {
        let r = recipe(RECORD_29, Scale::Full)?;
        let ns_steps = r.muon.as_ref().context("records/29.toml has no muon")?.ns_steps;
        let c = r.n_embd as i64;
        // c_fc and c_proj of every layer; qkvo_w of every layer with attention.
        let attn = r.attn_layers.as_deref().unwrap_or("").chars().filter(|&l| l != '-').count();
        let shapes = [(vec![c, 4 * c], 2 * r.n_layer), (vec![4, c, c], attn)];
        let mut rows = Vec::new();
        for (shape, count) in shapes {
            tch::manual_seed(3);
            let u = Tensor::randn(shape.as_slice(), (Kind::Float, ctx.dev)); // Muon's fp32 update
            let ms = ctx.time_ms(|| {
                let _ = orthogonalize(&u, ns_steps, Kind::BFloat16);
                Ok(())
            })?;
            let o = orthogonalize(&u, ns_steps, Kind::BFloat16);
            let (m, n) = (shape[shape.len() - 2], shape[shape.len() - 1]);
            let (_, sv, _) =
                o.reshape([-1, m, n]).get(0).to_kind(Kind::Float).f_svd(true, false)?;
            let [lo, hi, med] = [sv.min(), sv.max(), sv.median()].map(|t| t.double_value(&[]));
            // The quintic maps [0, 1] into [0, 1.2024] (its maximum, at 0.5545), so σ stay
            // below that plus bf16 rounding; most land near 1, a few that start near 0 stay low.
            let ok = if hi <= 1.25 && (0.6..=1.25).contains(&med) { "ok" } else { "FAIL" };
            rows.push(row(
                format!("Muon Newton–Schulz (bf16), {count} × {shape:?}"),
                format!(
                    "{ms:.3} ms/call ({:.2} ms for {count}); σ ∈ [{lo:.3}, {hi:.3}], median \
                     {med:.3}, max |σ−1| {:.3} ({ok})",
                    ms * count as f64,
                    (1.0 - lo).max(hi - 1.0)
                ),
                format!(
                    "{ns_steps} NS5 steps (src/optim/newton_schulz.rs, baddbmm) on a Gaussian \
                     fp32 matrix, one call per param as Muon makes at world 1 (upstream: Triton, \
                     the params split over 8 ranks); σ of slice 0 in fp32 (svdvals); NS5 is not \
                     exact: its quintic peaks at 1.2024 and σ that start near 0 stay small \
                     (square Gaussians have some); ok: σ max ≤ 1.25, median in [0.6, 1.25]"
                ),
            ));
        }
        Ok(rows)
    }
}
