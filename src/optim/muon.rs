//! Muon: SGD with Nesterov momentum whose update is orthogonalized by Newton–Schulz
//! (record #3) or Polar Express (upstream #38), then normalized per neuron by NorMuon
//! (upstream #41) when the recipe says so; distributed as in record #29.
//!
//! Params of equal shape form a group; each group is walked in chunks of `world` params. Per
//! chunk the ranks reduce-scatter the stacked local grads (Op::Avg), so rank r receives the
//! averaged grad of the chunk's r-th param and alone keeps its momentum and runs Newton–Schulz
//! on it (record #6: each rank orthogonalizes a subset). The chunk's updates are then
//! all-gathered (record #15) and applied on every rank.
//!
//! ```text
//! buf ← μ·buf + (1−μ)·g          (lerp form, #15; in the param's dtype)
//! u   ← (1−μ)·g + μ·buf          (Nesterov)
//! o   ← NS5(u)                   (or Polar Express; then NorMuon's normalize(o, s, β2))
//! p   ← p·(1 − lr·wd) − lr·lr_mul·max(1, rows/cols)^½·o      (lr includes the schedule)
//! ```
//! Weight decay applies to the params whose group decays (upstream: all of them); from upstream
//! #43 it is cautious and coupled to the lr (src/optim/cautious_wd.rs).
//!
//! Precision, as upstream's: the momentum buffer is `zeros_like(grad)`, so a bf16 param (#32's
//! gates on CUDA) has a bf16 buffer; the update is NS5's output in its kind (bf16 on CUDA)
//! times the lr in fp32, and a bf16 param takes it in fp32, rounded once when stored.
//!
//! Upstream #36 stores each layer's QKVO weight as (768, 3072), the MLP matrices' shape, so that
//! attention and MLP share one reduce-scatter, and orthogonalizes it viewed as (4, 768, 768):
//! Q, K, V and O separately. Ours keeps [4, C, C] until upstream #48 makes both tall
//! ([4C, C], `tall_matrices`), and orthogonalizes any QKVO weight viewed as [4, C, C];
//! params are grouped by shape; #36's custom group sizes ([1, 10, 16, 16] on 8 GPUs, the
//! smallest first) decide which rank orthogonalizes which matrix and how much padding the
//! collectives carry, not the update, which is the same per parameter.
use crate::recipe::registry::{technique, Lab, Technique};
use serde::{Deserialize, Serialize};
#[cfg(not(recipe_only))]
use {
    super::newton_schulz::orthogonalize,
    super::param_table::ParamRow,
    super::{cautious_wd, mantissa, normuon, polar_express, qk_head_pairs},
    crate::dist::{Collectives, Op},
    crate::model::params::{Param, Role},
    anyhow::{bail, ensure, Context, Result},
    tch::{Kind, Tensor},
};

/// `[recipe.muon]`: Muon for the hidden matrices (upstream #3, #4, #9, #13, #15, #24), every
/// tensor of two or more dims inside the blocks; the other tensors go to Adam with the recipe's
/// lr, betas and eps. The optimizer reads this section as it is.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub lr: f64,
    pub weight_decay: f64,
    pub ns_steps: usize,
    /// Momentum warms up linearly from `momentum_start` to `momentum` over `momentum_warmup` steps.
    pub momentum: f64,
    pub momentum_start: f64,
    pub momentum_warmup: u64,
    /// Momentum falls linearly back to `momentum_start` over the last this many steps
    /// (upstream #39: 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub momentum_cooldown: Option<u64>,
    /// NorMuon: the orthogonalized update normalized per neuron by a running second moment
    /// with this decay (upstream #41: 0.95; src/optim/normuon.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta2: Option<f64>,
    /// Cautious weight decay, coupled to the scheduled lr (upstream #43;
    /// src/optim/cautious_wd.rs).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cautious_wd: bool,
    /// NorMuon's moments per gate row, one per head (upstream #48 fixed the gates'
    /// orientation; before, their shape made them per column).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gate_rows: bool,
    /// Which matrices' Polar Express takes its last product B·X on its own and then adds a·X,
    /// two kernels for baddbmm's one (upstream #48, for speed): the same sum, but in bf16 the
    /// product is rounded before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_product: Option<SplitProduct>,
    /// A QKVO weight's lr factor √max(1, rows/cols) from one of its C x C matrices (1), not
    /// from the tall [4C, C] (2): upstream #61's unified optimizer takes it from the chunk it
    /// orthogonalizes, which halves the attention's lr and decay.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub qkvo_square: bool,
    /// Q and K orthogonalized per head pair ([2·head_dim, C] blocks) with NorMuon's moments
    /// per column, V and O as C x C matrices per row (upstream #80's qk and vo banks).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub qk_head_pairs: bool,
    /// How the update is orthogonalized: Newton–Schulz (#3) or Polar Express (#38).
    #[serde(default, skip_serializing_if = "Orthogonalizer::is_newton_schulz")]
    pub orthogonalizer: Orthogonalizer,
}

/// The matrices of [`Section::split_product`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitProduct {
    /// The MLP's c_fc and c_proj (upstream #48's `label == 'mlp'`).
    Mlp,
    /// Matrices of more than 1,024 rows as stored (upstream #61's `is_large_matrix`): at full
    /// size the MLP's (3,072 x 768) again, at lab size none.
    Large,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Orthogonalizer {
    /// The fixed quintic (3.4445, -4.7750, 2.0315), `ns_steps` times.
    #[default]
    NewtonSchulz,
    /// Five tuned quintics (src/optim/polar_express.rs); `ns_steps` is not read.
    PolarExpress,
}

impl Orthogonalizer {
    fn is_newton_schulz(&self) -> bool {
        *self == Orthogonalizer::NewtonSchulz
    }
}

impl Section {
    /// Record #3's Muon at `lr` (NS5, no NorMuon, no caution) with `weight_decay`, for a step
    /// driven by hand (the momentum comes from the caller's plan, so its schedule is zero).
    pub fn plain(lr: f64, weight_decay: f64) -> Section {
        Section {
            lr,
            weight_decay,
            ns_steps: 5,
            momentum: 0.95,
            momentum_start: 0.95,
            momentum_warmup: 0,
            momentum_cooldown: None,
            beta2: None,
            cautious_wd: false,
            gate_rows: false,
            split_product: None,
            qkvo_square: false,
            qk_head_pairs: false,
            orthogonalizer: Orthogonalizer::NewtonSchulz,
        }
    }
}

/// Its lab rule: ns_steps counts Newton-Schulz iterations, not training steps, and keeps its
/// value; the momentum's warmup and cooldown are step counts.
pub const TECHNIQUE: Technique = Technique {
    lab: Lab::Fields(&[
        ("momentum_warmup", Lab::Steps),
        ("momentum_cooldown", Lab::Steps),
        ("ns_steps", Lab::Kept),
    ]),
    ..technique("muon", &[3, 4, 6, 8, 9, 13, 15, 24, 32, 36, 39, 41, 43, 48, 61, 78, 80], &[])
};

/// What a run adds to the section: how the parameters are stored and what Newton–Schulz
/// computes in.
#[cfg(not(recipe_only))]
#[derive(Debug, Clone, Copy)]
pub struct Storage {
    /// bf16 params keep the low half of their fp32 value, and the momentum and second moment
    /// are fp32 (upstream #57's bf16 block matrices); else a bf16 param (#32's gates) is stored
    /// rounded and its state is bf16.
    pub mantissa: bool,
    /// bf16 on CUDA, fp32 on CPU.
    pub kind: Kind,
}

#[cfg(not(recipe_only))]
pub struct Muon {
    params: Vec<Param>,
    /// Indices into `params`, one list per distinct shape, in first-appearance order.
    groups: Vec<Vec<usize>>,
    cfg: Section,
    storage: Storage,
    /// Momentum buffer (param shape and dtype) of each param this rank owns; `None` elsewhere.
    bufs: Vec<Option<Tensor>>,
    /// NorMuon's second moment ([.., 1, cols], the momentum's dtype) of each param this rank
    /// owns.
    seconds: Vec<Option<Tensor>>,
    /// V and O's, when Q and K go by head pairs (upstream #80).
    seconds_vo: Vec<Option<Tensor>>,
    /// The low 16 bits of each bf16 param's fp32 value (upstream #57; mantissa.rs); None for
    /// the others.
    mantissas: Vec<Option<Tensor>>,
}

#[cfg(not(recipe_only))]
impl Muon {
    pub fn new(params: Vec<Param>, cfg: &Section, storage: Storage) -> Result<Muon> {
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for (i, p) in params.iter().enumerate() {
            let shape = p.tensor.size();
            ensure!(shape.len() >= 2, "muon: {} has shape {shape:?}; Muon needs ≥ 2-D", p.name);
            match groups.iter_mut().find(|g| params[g[0]].tensor.size() == shape) {
                Some(group) => group.push(i),
                None => groups.push(vec![i]),
            }
        }
        let bufs = params.iter().map(|_| None).collect();
        let seconds = params.iter().map(|_| None).collect();
        let seconds_vo = params.iter().map(|_| None).collect();
        let mantissas = params
            .iter()
            .map(|p| {
                let t = &p.tensor;
                let keep = storage.mantissa && t.kind() == Kind::BFloat16;
                keep.then(|| t.zeros_like().to_kind(Kind::Int16))
            })
            .collect();
        let cfg = cfg.clone();
        Ok(Muon { params, groups, cfg, storage, bufs, seconds, seconds_vo, mantissas })
    }

    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// One step from each rank's local grads; `lr_factor` is the schedule's multiplier and
    /// `momentum` this step's μ. Every rank must call it.
    pub fn step(
        &mut self,
        coll: &mut dyn Collectives,
        lr_factor: f64,
        momentum: f64,
    ) -> Result<()> {
        let (rank, world) = (coll.rank(), coll.world());
        for p in &self.params {
            ensure!(p.tensor.grad().defined(), "muon: {} has no gradient", p.name);
        }
        let lr = self.cfg.lr * lr_factor;
        if world == 1 {
            return tch::no_grad(|| self.step_alone(lr, momentum));
        }
        tch::no_grad(|| {
            for group in self.groups.clone() {
                let first = &self.params[group[0]].tensor;
                let (shape, kind, device) = (first.size(), first.kind(), first.device());
                let shape_factor = self.shape_factor(group[0]);
                let stacked_shape: Vec<i64> =
                    std::iter::once(world as i64).chain(shape.iter().copied()).collect();
                for chunk in group.chunks(world) {
                    // [world, ...]: the chunk's grads, zeros where the last chunk runs short.
                    let grads: Vec<Tensor> = (0..world)
                        .map(|j| match chunk.get(j) {
                            Some(&i) => self.params[i].tensor.grad(),
                            None => Tensor::zeros(shape.as_slice(), (kind, device)),
                        })
                        .collect();
                    let mut g = Tensor::zeros(shape.as_slice(), (kind, device));
                    coll.reduce_scatter(&mut g, &Tensor::stack(&grads, 0), Op::Avg)
                        .context("muon: reduce_scatter of grads")?;
                    let update = match chunk.get(rank) {
                        Some(&i) => self.update(i, &g, (lr, shape_factor), momentum),
                        None => Tensor::zeros(shape.as_slice(), (Kind::Float, device)),
                    };
                    let mut updates =
                        Tensor::zeros(stacked_shape.as_slice(), (Kind::Float, device));
                    coll.all_gather(&mut updates, &update)
                        .context("muon: all_gather of updates")?;
                    // Upstream decays and updates on the owning rank and all-gathers the params;
                    // applying the gathered update on every rank is the same arithmetic.
                    for (j, &i) in chunk.iter().enumerate() {
                        self.apply(i, lr, &updates.get(j as i64))?;
                    }
                }
            }
            Ok(())
        })
    }

    /// One rank: the same arithmetic without the stacking, zeros and collectives (with one
    /// rank a reduce-scatter and an all-gather are copies), which cost as much as Newton–Schulz
    /// itself on the lab's small matrices.
    fn step_alone(&mut self, lr: f64, momentum: f64) -> Result<()> {
        for i in 0..self.params.len() {
            let grad = self.params[i].tensor.grad();
            let shape_factor = self.shape_factor(i);
            let update = self.update(i, &grad, (lr, shape_factor), momentum);
            self.apply(i, lr, &update)?;
        }
        Ok(())
    }

    /// Param `i`'s momentum step and orthogonalized update from its averaged grad `g` (the
    /// param's dtype), scaled by lr (schedule included), the param's multiplier and the shape
    /// factor; fp32.
    fn update(
        &mut self,
        i: usize,
        g: &Tensor,
        (lr, shape_factor): (f64, f64),
        momentum: f64,
    ) -> Tensor {
        // Upstream #57's momentum is fp32 (`zeros_like(.., dtype=torch.float32)`).
        let g = g.to_kind(self.state_kind(i));
        let buf = self.bufs[i].get_or_insert_with(|| g.zeros_like());
        let _ = buf.lerp_(&g, 1.0 - momentum);
        let u = g.lerp(buf, momentum);
        let shape = g.size();
        let cols = shape[shape.len() - 1];
        let rows = u.reshape([-1, cols]); // [R, cols]: every piece is a band of these rows
        let mut done = Vec::new();
        for (k, piece) in self.pieces(i).into_iter().enumerate() {
            let band = rows.narrow(0, piece.first, piece.rows).reshape(piece.view.as_slice());
            done.push(self.orthogonalized(&band, (i, k), piece.dim).reshape([-1, cols]));
        }
        let o = if done.len() == 1 { done.swap_remove(0) } else { Tensor::cat(&done, 0) };
        let o = o.reshape(shape.as_slice());
        let eff_lr = lr * self.params[i].group.lr_mul * shape_factor;
        o.to_kind(Kind::Float) * eff_lr
    }

    /// The dtype of param `i`'s momentum and second moment: fp32 with #57's mantissas, else the
    /// param's (upstream's `zeros_like`: bf16 for #32's gates on CUDA).
    fn state_kind(&self, i: usize) -> Kind {
        match self.storage.mantissa {
            true => Kind::Float,
            false => self.params[i].tensor.kind(),
        }
    }

    /// Whether param `i`'s Polar Express, on matrices of `view` ([.., rows, cols]), splits its
    /// last product: the MLP's (upstream #48), or any of more than 1,024 rows (#61).
    fn split(&self, i: usize, view: &[i64]) -> bool {
        match self.cfg.split_product {
            Some(SplitProduct::Mlp) => self.params[i].group.role == Role::Mlp,
            Some(SplitProduct::Large) => view[view.len() - 2] > 1024,
            None => false,
        }
    }

    /// `u` ([.., rows, cols]) orthogonalized, then normalized by NorMuon over `dim` with
    /// param i's second moment number k (two from upstream #80: Q/K's and V/O's); fp32.
    fn orthogonalized(&mut self, u: &Tensor, (i, k): (usize, usize), dim: i64) -> Tensor {
        let split = self.split(i, &u.size());
        let o = match self.cfg.orthogonalizer {
            Orthogonalizer::NewtonSchulz => orthogonalize(u, self.cfg.ns_steps, self.storage.kind),
            Orthogonalizer::PolarExpress => {
                polar_express::orthogonalize(u, self.storage.kind, split)
            }
        };
        let Some(beta2) = self.cfg.beta2 else { return o };
        let view = o.size();
        // Upstream #42's moment is `zeros_like` the update: a bf16 gate's is bf16 (#41: fp32);
        // #57's is fp32 again, as its momentum.
        let kind = self.state_kind(i);
        let seconds = if k == 0 { &mut self.seconds } else { &mut self.seconds_vo };
        let s = seconds[i].get_or_insert_with(|| {
            normuon::second_moment(&view, dim).to_device(o.device()).to_kind(kind)
        });
        normuon::normalize(&o, s, beta2, dim)
    }

    /// Decays param `i` (when its group decays) and subtracts `update` (fp32), in fp32: a bf16
    /// param with its mantissa (upstream #57), or rounded once when stored (#32's gates).
    fn apply(&self, i: usize, lr: f64, update: &Tensor) -> Result<()> {
        let param = &self.params[i];
        let Some(lo) = &self.mantissas[i] else {
            let mut p = param.tensor.to_kind(Kind::Float);
            self.decay_and_update(i, lr, &mut p, update)?;
            param.tensor.shallow_clone().f_copy_(&p)?;
            return Ok(());
        };
        let mut p32 = mantissa::join(&param.tensor, lo);
        self.decay_and_update(i, lr, &mut p32, update)?;
        let (hi, low) = mantissa::split(&p32);
        param.tensor.shallow_clone().f_copy_(&hi)?;
        lo.shallow_clone().f_copy_(&low)?;
        Ok(())
    }

    fn decay_and_update(&self, i: usize, lr: f64, p: &mut Tensor, update: &Tensor) -> Result<()> {
        let group = &self.params[i].group;
        let wd = if group.decay { self.cfg.weight_decay } else { 0.0 };
        if self.cfg.cautious_wd {
            let eff_lr = lr * group.lr_mul * self.shape_factor(i);
            return cautious_wd::step(p, update, eff_lr * lr * wd);
        }
        let _ = p.f_mul_scalar_(1.0 - lr * wd)?;
        let _ = p.f_sub_(update)?;
        Ok(())
    }

    /// Deep copies of the state, four tensors per param: its momentum buffer, NorMuon's two
    /// second moments and the mantissa, each an empty tensor where this rank holds none.
    /// Upstream saves around its untimed warmup steps.
    pub fn save(&self) -> Vec<Tensor> {
        let none = || Tensor::zeros([0], (Kind::Float, tch::Device::Cpu));
        let copy = |b: &Option<Tensor>| b.as_ref().map_or_else(none, Tensor::copy);
        let seconds = self.seconds.iter().zip(&self.seconds_vo);
        let state = self.bufs.iter().zip(seconds).zip(&self.mantissas);
        state.flat_map(|((b, (s, v)), m)| [copy(b), copy(s), copy(v), copy(m)]).collect()
    }

    /// Puts back what [`Muon::save`] returned.
    pub fn restore(&mut self, saved: &[Tensor]) -> Result<()> {
        if saved.len() != 4 * self.params.len() {
            bail!("muon: restore got {} tensors for {} params", saved.len(), self.params.len());
        }
        let seconds = self.seconds.iter_mut().zip(self.seconds_vo.iter_mut());
        let state = self.bufs.iter_mut().zip(seconds).zip(&self.mantissas);
        for (((buf, (second, vo)), lo), (s, p)) in state.zip(saved.chunks(4).zip(&self.params)) {
            *buf = match s[0].numel() {
                0 => None,
                _ if s[0].size() == p.tensor.size() => Some(s[0].copy()),
                _ => bail!("muon: saved state {:?} does not fit {}", s[0].size(), p.name),
            };
            *second = (s[1].numel() > 0).then(|| s[1].copy());
            *vo = (s[2].numel() > 0).then(|| s[2].copy());
            if let Some(lo) = lo {
                tch::no_grad(|| lo.shallow_clone().f_copy_(&s[3]))?;
            }
        }
        Ok(())
    }
}

#[cfg(not(recipe_only))]
/// A band of a parameter's rows that Muon orthogonalizes on its own, as matrices of `view`,
/// normalized by NorMuon over `dim` with a second moment of its own.
pub(super) struct Piece {
    /// Rows of the parameter viewed as [R, cols].
    pub(super) first: i64,
    pub(super) rows: i64,
    pub(super) view: Vec<i64>,
    pub(super) dim: i64,
}

#[cfg(not(recipe_only))]
impl Muon {
    /// How param `i`'s update is orthogonalized: Q and K by head pairs ([2·head_dim, C] blocks,
    /// moments per column) and V, O as two C x C matrices from upstream #80; Q, K, V and O as
    /// four matrices from upstream #36; anything else whole.
    fn pieces(&self, i: usize) -> Vec<Piece> {
        let p = &self.params[i];
        let (shape, role) = (p.tensor.size(), p.group.role);
        let (n, cols) = (shape.len(), shape[shape.len() - 1]);
        let all_rows = shape[..n - 1].iter().product::<i64>();
        match role {
            Role::QkPairs(block) => qk_head_pairs::pieces(cols, block),
            Role::Qkvo => {
                let dim = normuon::reduced_dim(&shape, false);
                vec![Piece { first: 0, rows: all_rows, view: vec![4, -1, cols], dim }]
            }
            _ => {
                let dim = normuon::reduced_dim(&shape, self.cfg.gate_rows && role == Role::Gate);
                vec![Piece { first: 0, rows: all_rows, view: shape, dim }]
            }
        }
    }

    /// `train --print-params`'s header line for Muon.
    pub fn describe(&self) -> String {
        let c = &self.cfg;
        format!(
            "muon: lr {} weight_decay {}{} {:?} ({} steps){}",
            c.lr,
            c.weight_decay,
            if c.cautious_wd { " (cautious)" } else { "" },
            c.orthogonalizer,
            c.ns_steps,
            c.beta2.map_or(String::new(), |b| format!(", NorMuon beta2 {b}"))
        )
    }

    /// The rows of `train --print-params` for Muon's params.
    pub fn rows(&self) -> Vec<ParamRow> {
        let pieces = |i: usize| {
            let cols = *self.params[i].tensor.size().last().unwrap_or(&1);
            let text: Vec<String> = self
                .pieces(i)
                .iter()
                .map(|piece| {
                    let mut view = piece.view.clone();
                    if let Some(unknown) = view.iter().position(|&d| d == -1) {
                        let known: i64 = view.iter().filter(|&&d| d != -1).product();
                        view[unknown] = piece.rows * cols / known;
                    }
                    let view: Vec<String> = view.iter().map(i64::to_string).collect();
                    match self.cfg.beta2 {
                        Some(_) => format!("{} dim {}", view.join("x"), piece.dim),
                        None => view.join("x"),
                    }
                })
                .collect();
            text.join(" + ")
        };
        self.params
            .iter()
            .enumerate()
            .map(|(i, p)| ParamRow {
                name: p.name.clone(),
                shape: p.tensor.size(),
                storage: p.tensor.kind(),
                optimizer: "muon",
                lr_mul: p.group.lr_mul * self.shape_factor(i),
                wd_mul: if p.group.decay { 1.0 } else { 0.0 },
                betas: None,
                eps: None,
                state: self.state_kind(i),
                muon_blocks: pieces(i),
            })
            .collect()
    }

    /// Param `i`'s √max(1, rows/cols); upstream #61 takes a QKVO weight's from one of its
    /// four C x C matrices (1), where before it took the whole [4C, C]'s (2).
    fn shape_factor(&self, i: usize) -> f64 {
        let p = &self.params[i];
        match (p.group.role, self.cfg.qkvo_square) {
            (Role::Qkvo | Role::QkPairs(_), true) => 1.0,
            _ => shape_factor(&p.tensor.size()),
        }
    }
}

#[cfg(not(recipe_only))]
/// Muon's √max(1, rows/cols): tall matrices take larger steps.
fn shape_factor(shape: &[i64]) -> f64 {
    let (rows, cols) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    (rows as f64 / cols as f64).max(1.0).sqrt()
}
