//! Parameters, created with explicit initialisation (tch's default Linear init is
//! Kaiming-uniform; llm.c draws N(0, 0.02)) and tagged at creation with their [`Group`]: which
//! optimizer updates them, the lr multiplier, weight decay and storage dtype. Nothing downstream
//! routes a parameter by its name.
use super::precision;
use crate::recipe::Recipe;
use tch::{nn, Kind, Tensor};

/// Which optimizer updates a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opt {
    /// llm.c's AdamW over every parameter, gradients all-reduced first (record #1).
    AdamW,
    /// Upstream's sharded Adam: embeddings, head, scalars (#24 on).
    Adam,
    /// The scalar bank's own Adam with smoother betas (upstream #52).
    ScalarAdam,
    /// Muon: the matrices inside the blocks (#3 on).
    Muon,
    /// Act 1's classic Muon (a3 on): the dense blocks' matrices, beside record #1's AdamW.
    MuonClassic,
}

/// How a parameter is stored between steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    Fp32,
    /// bf16 when the matmuls run in bf16 (CUDA), fp32 otherwise (upstream #18's embeddings).
    Bf16OnCuda,
}

impl Storage {
    /// A precision choice's storage: bf16 on CUDA when `bf16`, fp32 otherwise.
    pub fn bf16_if(bf16: bool) -> Storage {
        if bf16 {
            Storage::Bf16OnCuda
        } else {
            Storage::Fp32
        }
    }
}

/// What an optimizer needs to know about a parameter beyond its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Plain,
    /// An attention layer's Q, K, V and O in one weight: Muon treats them as four matrices.
    Qkvo,
    /// A gate's matrix ([heads, channels]): NorMuon's moments per row from upstream #48.
    Gate,
    /// An MLP matrix (c_fc, c_proj): upstream #48's Polar Express splits its last product.
    Mlp,
    /// A QKVO weight whose Q and K Muon orthogonalizes in blocks of this many rows, a head
    /// pair's (upstream #80; src/optim/qk_head_pairs.rs).
    QkPairs(i64),
    /// The lm_head: upstream #53's untie copies it, with its Adam state, into `LateEmbed`.
    Head,
    /// The input embedding's own table after the untie; Adam leaves it alone until then.
    LateEmbed,
}

/// How the optimizer treats a parameter; set where the parameter is created.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Group {
    pub opt: Opt,
    pub role: Role,
    /// Multiplies the optimizer's base learning rate (upstream's `lr_mul`).
    pub lr_mul: f64,
    /// Weight decay applies (llm.c: matrices only; upstream's optimizers decay everything).
    pub decay: bool,
    /// Multiplies the optimizer's weight decay where it applies (upstream #55's `wd_mul`).
    pub wd_mul: f64,
    /// Adam's (β1, β2) for this parameter (upstream #57); None: the optimizer's.
    pub betas: Option<[f64; 2]>,
    pub storage: Storage,
}

impl Group {
    /// Stored in fp32, decaying at the optimizer's rate, no special role.
    pub fn new(opt: Opt, lr_mul: f64) -> Group {
        let storage = Storage::Fp32;
        Group { opt, role: Role::Plain, lr_mul, decay: true, wd_mul: 1.0, betas: None, storage }
    }
}

/// The groups of one recipe, resolved once: each part takes the one its tensors belong to.
#[derive(Debug, Clone, Copy)]
pub struct Groups {
    /// Token embedding tables (and record #1's positions).
    pub embed: Group,
    /// The value embeddings: the embedding's group with their own decay (upstream #55).
    pub value_embeds: Group,
    /// An untied lm_head.
    pub head: Group,
    /// The token embedding after upstream #53's untie: the head's group.
    pub late_embed: Group,
    /// The scalar bank.
    pub scalars: Group,
    /// The x0 lambdas as their own parameter (upstream #52): Adam, the scalars' lr multiplier,
    /// no decay.
    pub x0: Group,
    /// The smear gate: Muon's like the attention gates, or Adam's from upstream #52.
    pub smear: Group,
    /// Matrices inside the blocks.
    pub hidden: Group,
    /// An attention layer's QKVO weight.
    pub qkvo: Group,
    /// The MLP's c_fc and c_proj: `hidden` with their own lr multipliers (upstream #42: c_fc
    /// 2; #48: c_fc 1, c_proj 2).
    pub c_fc: Group,
    pub c_proj: Group,
    /// The small gates' matrices (attention and value-embedding gates): Muon (Adam from
    /// upstream #56), bf16 on CUDA with precision.linears.
    pub gate: Group,
    /// The skip's gate on x0 (upstream #55): Adam, its own lr multiplier, no decay.
    pub skip_gate: Group,
    /// Biases and norm weights.
    pub vector: Group,
    /// The per-sublayer lambdas (upstream #73): Adam, their own betas, no decay; the residual
    /// lambdas at the scalars' lr multiplier.
    pub lambdas: Group,
    pub resid_lambdas: Group,
}

/// A group stored in fp32 with `decay` set.
fn fp32(opt: Opt, lr_mul: f64, decay: bool) -> Group {
    Group { decay, ..Group::new(opt, lr_mul) }
}

impl Groups {
    pub fn new(r: &Recipe) -> Groups {
        match r.muon {
            None => Groups::without_muon(r),
            Some(_) => Groups::upstream(r),
        }
    }

    /// llm.c's AdamW for everything (record #1), or Act 1's classic Muon on the blocks.
    fn without_muon(r: &Recipe) -> Groups {
        let (matrix, vector) = (fp32(Opt::AdamW, 1.0, true), fp32(Opt::AdamW, 1.0, false));
        // Act 1 from a3: the block matrices to the classic Muon, which does not decay.
        let hidden = match r.muon_classic {
            Some(_) => fp32(Opt::MuonClassic, 1.0, false),
            None => matrix,
        };
        let (embed, head, scalars, gate) = (matrix, matrix, vector, matrix);
        let (x0, smear) = (vector, matrix);
        let (qkvo, c_fc, c_proj, skip_gate) = (hidden, hidden, hidden, vector);
        Groups {
            embed,
            value_embeds: embed,
            head,
            late_embed: head,
            scalars,
            x0,
            smear,
            hidden,
            qkvo,
            c_fc,
            c_proj,
            gate,
            skip_gate,
            vector,
            lambdas: vector,
            resid_lambdas: vector,
        }
    }

    /// Upstream's Muon on the block matrices and Adam on the rest, each group as a record set it.
    fn upstream(r: &Recipe) -> Groups {
        // Upstream's optimizers decay every parameter (with weight_decay 0 until #46).
        let mul = |f: fn(&_) -> f64| r.lr_mul.as_ref().map_or(1.0, f);
        let precision = precision::of(r);
        let embed_storage = Storage::bf16_if(precision.embeddings);
        let linear_storage = Storage::bf16_if(precision.linears);
        // Upstream #55 decays the value embeddings 5x and the head (with the embedding) 150x.
        let wd = r.wd_mul.as_ref();
        // Upstream #57's betas per kind of parameter.
        let betas = |f: fn(&_) -> [f64; 2]| r.adam_betas.as_ref().map(f);
        let head = Group {
            storage: linear_storage,
            wd_mul: wd.map_or(1.0, |w| w.head),
            betas: betas(|b| b.head),
            ..fp32(Opt::Adam, mul(|m| m.head), true)
        };
        let [hidden, qkvo, c_fc, c_proj] = Groups::muon_matrices(r);
        let lambda_betas = r.parallel_residuals.as_ref().map(|p| p.betas);
        let embed = Group { storage: embed_storage, ..fp32(Opt::Adam, mul(|m| m.embed), true) };
        let scalar_opt = if r.scalar_adam.is_some() { Opt::ScalarAdam } else { Opt::Adam };
        // Upstream #56 moves the attention and value-embedding gates to Adam.
        let gate_opt = if r.gates_in_adam { Opt::Adam } else { Opt::Muon };
        // Upstream #57's gate betas: the smear and skip gates' and these, the attention and
        // value-embedding gates' (Muon ignores betas before #56).
        let gate = Group {
            storage: linear_storage,
            role: Role::Gate,
            betas: betas(|b| b.gates),
            ..fp32(gate_opt, 1.0, true)
        };
        Groups {
            embed,
            value_embeds: Group {
                wd_mul: wd.map_or(1.0, |w| w.value_embeds),
                betas: betas(|b| b.value_embeds),
                ..embed
            },
            head: Group { role: Role::Head, ..head },
            late_embed: Group { role: Role::LateEmbed, ..head },
            gate,
            // Upstream #50 turns on Adam's weight decay but not for the scalars (wd_mul 0);
            // Adam's decay was 0 before, so the flag is theirs from the start.
            scalars: fp32(scalar_opt, mul(|m| m.scalars), false),
            x0: Group {
                betas: betas(|b| b.x0_lambdas),
                ..fp32(Opt::Adam, mul(|m| m.scalars), false)
            },
            // Upstream #52 moves the smear gate to Adam at lr_mul 0.01, without decay.
            smear: match r.lr_mul.as_ref().and_then(|m| m.smear_gate) {
                Some(lr_mul) => Group {
                    storage: linear_storage,
                    betas: betas(|b| b.gates),
                    ..fp32(Opt::Adam, lr_mul, false)
                },
                None => gate,
            },
            skip_gate: Group {
                storage: linear_storage,
                betas: betas(|b| b.gates),
                ..fp32(Opt::Adam, r.lr_mul.as_ref().and_then(|m| m.skip_gate).unwrap_or(1.0), false)
            },
            hidden,
            qkvo,
            c_fc,
            c_proj,
            vector: fp32(Opt::Adam, 1.0, true),
            lambdas: Group { betas: lambda_betas, ..fp32(Opt::Adam, 1.0, false) },
            resid_lambdas: Group {
                betas: lambda_betas,
                ..fp32(Opt::Adam, mul(|m| m.scalars), false)
            },
        }
    }

    /// The block matrices' groups, Muon's: hidden, QKVO, c_fc, c_proj.
    fn muon_matrices(r: &Recipe) -> [Group; 4] {
        // Upstream #57 stores the block matrices in bf16 too (Muon keeps their mantissas).
        let storage = Storage::bf16_if(precision::of(r).matrices);
        // Upstream #80: Q and K by head pairs of 2·head_dim rows.
        let qkvo_role = match r.muon.as_ref().is_some_and(|m| m.qk_head_pairs) {
            true => Role::QkPairs(2 * (r.n_embd / r.n_head) as i64),
            false => Role::Qkvo,
        };
        let lr_mul = |f: fn(&_) -> Option<f64>| r.lr_mul.as_ref().and_then(f).unwrap_or(1.0);
        let mlp = |lr| Group { role: Role::Mlp, storage, ..fp32(Opt::Muon, lr, true) };
        [
            fp32(Opt::Muon, 1.0, true),
            Group { role: qkvo_role, storage, ..fp32(Opt::Muon, 1.0, true) },
            mlp(lr_mul(|m| m.c_fc)),
            mlp(lr_mul(|m| m.c_proj)),
        ]
    }
}

/// One trainable tensor and its group.
pub struct Param {
    pub name: String,
    pub tensor: Tensor,
    pub group: Group,
}

/// Collects a model's parameters in creation order, under dotted names.
pub struct ParamSet<'a> {
    path: nn::Path<'a>,
    params: Vec<Param>,
}

impl<'a> ParamSet<'a> {
    pub fn new(path: nn::Path<'a>) -> Self {
        ParamSet { path, params: Vec::new() }
    }

    /// N(0, std).
    pub fn normal(&mut self, name: &str, dims: &[i64], std: f64, g: Group) -> Tensor {
        self.add(name, dims, nn::Init::Randn { mean: 0.0, stdev: std }, g)
    }

    pub fn zeros(&mut self, name: &str, dims: &[i64], g: Group) -> Tensor {
        self.add(name, dims, nn::Init::Const(0.0), g)
    }

    pub fn ones(&mut self, name: &str, dims: &[i64], g: Group) -> Tensor {
        self.add(name, dims, nn::Init::Const(1.0), g)
    }

    /// U(-bound, bound).
    pub fn uniform(&mut self, name: &str, dims: &[i64], bound: f64, g: Group) -> Tensor {
        self.add(name, dims, nn::Init::Uniform { lo: -bound, up: bound }, g)
    }

    pub fn add(&mut self, name: &str, dims: &[i64], init: nn::Init, group: Group) -> Tensor {
        let tensor = self.path.var(&name.replace('.', "_"), dims, init);
        debug_assert_eq!(tensor.kind(), Kind::Float);
        self.params.push(Param { name: name.to_string(), tensor: tensor.shallow_clone(), group });
        tensor
    }

    /// The parameters; those stored in bf16 on CUDA are cast when `compute` is bf16.
    pub fn into_params(mut self, compute: Kind) -> Vec<Param> {
        for p in &mut self.params {
            if p.group.storage == Storage::Bf16OnCuda && compute == Kind::BFloat16 {
                tch::no_grad(|| p.tensor.set_data(&p.tensor.to_kind(Kind::BFloat16)));
            }
        }
        self.params
    }
}
