//! The recipe keys of the techniques that came after record #1. Each is absent from #1's manifest,
//! and absent means off: the newest trainer then runs exactly record #1.
use serde::{Deserialize, Serialize};

/// The MLP's nonlinearity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    /// GELU, tanh approximation (GPT-2).
    #[default]
    Gelu,
    /// relu(x)^2 (upstream #5).
    Relu2,
    /// GELU, exact (erf) form: PyTorch's `F.gelu` default (Act 1's baseline, a1).
    #[serde(rename = "gelu_erf")]
    GeluErf,
}

/// How matrices are initialised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Init {
    /// llm.c: N(0, init_std), residual projections N(0, init_std/sqrt(2L)).
    #[default]
    Normal,
    /// Upstream #19: U(-b, b) with b = sqrt(3)·0.5/sqrt(fan_in) (std 0.5/sqrt(fan_in)) for block
    /// matrices, N(0, 1) for embeddings (torch's nn.Embedding default).
    Uniform,
    /// PyTorch's nn.Linear default, U(±1/sqrt(fan_in)), for the dense layers; the embeddings
    /// N(0, init_std) over every row, padding included (Act 1's baseline, a1: `_init_weights`
    /// redraws only the embeddings).
    Torch,
    /// PyTorch's defaults throughout (Act 1 from a2, which drops `_init_weights`): the linears
    /// as `torch`, and the tied table is lm_head's nn.Linear, U(±1/sqrt(n_embd)) on every row.
    #[serde(rename = "torch_tied")]
    TorchTied,
}

impl Init {
    /// PyTorch's nn.Linear default for the dense layers (Act 1).
    pub fn is_torch(self) -> bool {
        matches!(self, Init::Torch | Init::TorchTied)
    }
}

/// Rotary position embedding (upstream #2), replacing learned positions.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Rotary {
    pub base: f64,
    /// Upstream #17: only head_dim/4 frequencies, spread from 1 to 1/base; the other quarter of
    /// the pairs is left unrotated (frequency 0).
    pub truncated: bool,
    /// Upstream #58: pairs are adjacent dims (x[2j], x[2j + 1]), so the rotated dims come
    /// first (0..D/2) and the unrotated ones last; before, pairs were (x[j], x[j + D/2]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interleaved: bool,
}

/// Logit softcap in the sigmoid form of upstream #19: z -> cap·σ((z + shift)/temperature).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Softcap {
    pub cap: f64,
    pub temperature: f64,
    /// Upstream #54's asymmetric rescale: 23·σ((z + 5)/7.5).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shift: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// Muon as Keller Jordan's script had it in autumn 2024 (Act 1's a3; src/optim/muon_classic.rs):
/// SGD momentum with Nesterov, NS5, the update scaled by sqrt(max(rows, cols)), a fused QKV as
/// three squares, no weight decay. The block matrices only; the rest stays with AdamW.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MuonClassic {
    pub lr: f64,
    pub momentum: f64,
    pub ns_steps: usize,
}
