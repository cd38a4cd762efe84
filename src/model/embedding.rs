//! The token embedding and what turns it into the residual stream's start x0: record #1's
//! learned positions added to it, or upstream #8's RMSNorm of it (positions then come from
//! rotary inside attention), after upstream #34's smear when the recipe has it.
use super::builder::Builder;
use super::embed_norm;
use super::params::{Group, ParamSet};
use super::smear::Smear;
use crate::recipe::Init;
use tch::{nn, Kind, Tensor};

pub struct Embedding {
    table: Tensor, // [Vp, C]; also the head when tied
    /// [Vp, C] the table read once the embedding is untied from the head (upstream #53).
    untied: Option<Tensor>,
    positions: Option<Tensor>, // [T_max, C] learned positions (record #1)
    /// x0 = RMSNorm(x0) with this eps (upstream #8).
    norm_eps: Option<f64>,
    smear: Option<Smear>,
}

impl Embedding {
    /// The recipe's embedding: its own table, or `shared` (the head's weight, upstream #51),
    /// with #53's untied table, record #1's learned positions or #8's norm.
    pub fn build(b: &mut Builder, shared: Option<&Tensor>) -> Embedding {
        let r = b.r;
        // llm.c initialises only the first vocab_size rows; the padding rows stay zero (Act 1's
        // `_init_weights` draws them all).
        let sizes = (r.vocab_size as i64, b.vp, b.c);
        let zero_padding = r.init == Init::Normal;
        let mut embed = match shared {
            Some(w) => Embedding::from_table(w.shallow_clone()),
            None => Embedding::new(&mut b.ps, sizes, b.embed_init, zero_padding, b.g.embed),
        };
        // Upstream #53: a table of its own from the untie on, overwritten then by the head's.
        if r.head_embed.as_ref().is_some_and(|h| h.untie_at.is_some()) {
            let table = b.ps.add("embed", &[b.vp, b.c], b.embed_init, b.g.late_embed);
            embed = embed.with_untied(table);
        }
        if r.rotary.is_none() {
            embed = embed.with_positions(&mut b.ps, r.max_seq_len as i64, r.init_std, b.g.embed);
        }
        if r.embed_norm {
            embed = embed.with_norm(r.ln_eps);
        }
        embed
    }

    /// `table` starts from `init`; llm.c's padding rows (past `vocab`) are zeroed when
    /// `zero_padding`.
    pub fn new(
        ps: &mut ParamSet,
        (vocab, padded, c): (i64, i64, i64),
        init: nn::Init,
        zero_padding: bool,
        g: Group,
    ) -> Embedding {
        let table = ps.add("embed", &[padded, c], init, g);
        if zero_padding {
            tch::no_grad(|| {
                let _ = table.narrow(0, vocab, padded - vocab).zero_();
            });
        }
        Embedding { table, untied: None, positions: None, norm_eps: None, smear: None }
    }

    /// The embedding reads `table`, a parameter created elsewhere: the head's weight when
    /// upstream #51 ties them again.
    pub fn from_table(table: Tensor) -> Embedding {
        Embedding { table, untied: None, positions: None, norm_eps: None, smear: None }
    }

    /// The table read after the untie (upstream #53): a copy of the head's, made then.
    pub fn with_untied(mut self, table: Tensor) -> Self {
        self.untied = Some(table);
        self
    }

    /// Adds learned positions: N(0, std) for `max_len` positions.
    pub fn with_positions(mut self, ps: &mut ParamSet, max_len: i64, std: f64, g: Group) -> Self {
        let c = self.table.size()[1];
        self.positions = Some(ps.normal("wpe", &[max_len, c], std, g));
        self
    }

    pub fn with_norm(mut self, eps: f64) -> Self {
        self.norm_eps = Some(eps);
        self
    }

    pub fn with_smear(mut self, smear: Smear) -> Self {
        self.smear = Some(smear);
        self
    }

    /// The [Vp, C] table, for a tied head.
    pub fn table(&self) -> Tensor {
        self.table.shallow_clone()
    }

    /// idx: [B, T] -> x0 [B, T, C] in `compute`; `bank`: the scalar bank (smear's λ);
    /// `split`: read the untied table.
    pub fn forward(&self, idx: &Tensor, compute: Kind, bank: &Tensor, split: bool) -> Tensor {
        let table = match &self.untied {
            Some(t) if split => t,
            _ => &self.table,
        };
        let mut x = Tensor::embedding(table, idx, -1, false, false);
        if let Some(wpe) = &self.positions {
            let pos = Tensor::arange(idx.size()[1], (Kind::Int64, idx.device()));
            x = &x + Tensor::embedding(wpe, &pos, -1, false, false);
        }
        let mut x = x.to_kind(compute);
        if let Some(s) = &self.smear {
            x = s.forward(&x, bank);
        }
        match self.norm_eps {
            Some(eps) => embed_norm::x0(&x, eps),
            None => x,
        }
    }
}
