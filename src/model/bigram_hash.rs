//! Bigram hash embedding (upstream #62): a large table indexed by a hash of each token and the
//! one before it, added to the residual stream before every layer with a learned weight per
//! layer. It hands the model the identity of the bigram for free, which attention would
//! otherwise have to build (the key offset of #49 and the smear of #34 approximate it).
//! ```text
//! rows = 5·Vp; m = rows − 1                        (251,520 and 251,519 at full scale)
//! h[0] = m                                         a reserved row for each sequence's start
//! h[1] = (36313·x[1] XOR 27191·m) mod m            upstream overwrites h[0] before hashing
//! h[t] = (36313·x[t] XOR 27191·x[t−1]) mod m       products in int32 (wrapping), mod ≥ 0
//! x_in(i) ← x_in(i) + λ_i·table[h]                 λ_i in the scalar bank, init 0.1; table zero
//! ```
//! Document starts hash with the previous document's last token (upstream: masking them was
//! slower and no better). Upstream hashes on the CPU in its loader (#62), on the GPU from #68 and
//! on the CPU again from #71, into pinned memory; the integers are the same, ours hash on the
//! device.
use crate::recipe::registry::{technique, Lab, Technique};
use serde::{Deserialize, Serialize};
#[cfg(not(recipe_only))]
use {
    super::builder::Builder,
    super::params::{Group, ParamSet},
    super::scalars::{ScalarBank, Slot},
    tch::{Kind, Tensor},
};

/// `[recipe.bigram_hash]`: the table's size and the layers' weight on it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    /// Table rows per padded vocabulary entry (5: 251,520 rows).
    pub rows_per_vocab: usize,
    /// Each layer's weight on it at init (#62: 0.1; #73: 0.05).
    pub lambda: f64,
}

/// The table is in the value embeddings' group (Adam lr_mul, betas and decay as theirs); at lab
/// scale it keeps `rows_per_vocab`, its rows following the lab's vocabulary.
pub const TECHNIQUE: Technique = Technique {
    lab: Lab::Fields(&[("rows_per_vocab", Lab::Kept)]),
    ..technique("bigram_hash", &[62], &["value_embed", "muon"])
};

#[cfg(not(recipe_only))]
const MUL_TOKEN: i64 = 36_313;
#[cfg(not(recipe_only))]
const MUL_PREVIOUS: i64 = 27_191;

#[cfg(not(recipe_only))]
pub struct BigramHash {
    table: Tensor, // [rows, C]
    /// λ_i of each layer in the scalar bank; upstream #73 moves them out (parallel_residuals.rs).
    lambdas: Option<Slot>,
}

#[cfg(not(recipe_only))]
impl BigramHash {
    /// The recipe's bigram table; its lambdas in the bank until upstream #73 moves them into
    /// the residual rule.
    pub fn build(b: &mut Builder) -> Option<BigramHash> {
        let r = b.r;
        let h = r.bigram_hash.as_ref()?;
        let rows = (h.rows_per_vocab as i64) * b.vp;
        let table = BigramHash::new(&mut b.ps, (rows, b.c), b.g.value_embeds);
        Some(match r.parallel_residuals {
            Some(_) => table,
            None => table.with_bank_lambdas(&mut b.scalars, b.l, h.lambda as f32),
        })
    }

    pub fn new(ps: &mut ParamSet, (rows, c): (i64, i64), g: Group) -> BigramHash {
        BigramHash { table: ps.zeros("bigram_embed", &[rows, c], g), lambdas: None }
    }

    /// The layers' weights in the scalar bank, `lambda` at init (upstream #62).
    pub fn with_bank_lambdas(self, bank: &mut ScalarBank, n_layer: usize, lambda: f32) -> Self {
        let lambdas = Some(bank.reserve("bigram_lambdas", &vec![lambda; n_layer]));
        BigramHash { lambdas, ..self }
    }

    /// idx: [B, T] -> [B, T] int64 rows of the table, each row of idx one sequence.
    pub fn hash(idx: &Tensor, rows: i64) -> Tensor {
        let (b, t) = (idx.size()[0], idx.size()[1]);
        let m = rows - 1;
        let x = idx.to_kind(Kind::Int);
        let start = Tensor::full([b, 2.min(t)], m, (Kind::Int, idx.device()));
        let prev = Tensor::cat(&[start, x.narrow(1, 1, (t - 2).max(0))], 1); // [m, m, x1, ...]
        let h = (x * MUL_TOKEN).bitwise_xor_tensor(&(prev * MUL_PREVIOUS)).remainder(m);
        let h = Tensor::cat(
            &[Tensor::full([b, 1], m, (Kind::Int, idx.device())), h.narrow(1, 1, t - 1)],
            1,
        );
        h.to_kind(Kind::Int64)
    }

    /// idx: [B, T] -> the table's rows [B, T, C] in `kind`, added before every layer.
    pub fn lookup(&self, idx: &Tensor, kind: Kind) -> Tensor {
        let h = BigramHash::hash(idx, self.table.size()[0]);
        Tensor::embedding(&self.table, &h, -1, false, false).to_kind(kind)
    }

    /// x, x0b: [B, T, C] -> x + λ_i·x0b with the bank's λ_i (x itself when they live elsewhere)
    pub fn add(&self, i: usize, x: &Tensor, x0b: &Tensor, bank: &Tensor) -> Tensor {
        match &self.lambdas {
            Some(l) => x + x0b * l.get(bank, i),
            None => x.shallow_clone(),
        }
    }
}
