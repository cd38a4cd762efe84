//! Value embeddings (upstream #14-#17): extra token-embedding tables whose rows are mixed into the
//! attention values of chosen layers. `[recipe.value_embed] layers` gives one character per
//! layer: a digit names the table ("012......012" shares tables 0-2 between the first and last
//! three layers, upstream #17's U-net pattern), '.' none. Upstream #63 unties the five layers'
//! tables ("01......234": five tables, each Adam's at the value embeddings' settings), so the
//! first and the last layers no longer read the same rows.
use crate::recipe::registry::{technique, Lab, Older, Technique};
use serde::{Deserialize, Serialize};
#[cfg(not(recipe_only))]
use {
    super::builder::Builder,
    super::params::{Group, ParamSet},
    tch::{nn, Tensor},
};

/// `[recipe.value_embed]`: the tables per layer and how they start (as the token embedding
/// unless one of the two says otherwise).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    /// One character per layer: a digit names the table, '.' none.
    pub layers: String,
    /// The tables start at zero (upstream #49).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub zero_init: bool,
    /// The tables start N(0, std) (upstream #70: 0.01); it wins over zero_init.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub std: Option<f64>,
}

/// The layer pattern is resampled to the lab's layers; trees before the section read
/// `value_embed_layers`, `zero_value_embeds` and `value_embed_std`.
pub const TECHNIQUE: Technique = Technique {
    lab: Lab::Fields(&[("layers", Lab::Layers)]),
    older: &[
        ("value_embed_layers", Older::Field("layers")),
        ("zero_value_embeds", Older::Field("zero_init")),
        ("value_embed_std", Older::Field("std")),
    ],
    ..technique("value_embed", &[14, 15, 17, 49, 70], &["attn_layers"])
};

#[cfg(not(recipe_only))]
pub struct ValueEmbeds {
    tables: Vec<Tensor>,       // each [Vp, C]
    layer: Vec<Option<usize>>, // table index per layer
}

#[cfg(not(recipe_only))]
impl ValueEmbeds {
    /// The value embeddings of the recipe's layer pattern: upstream #49 starts them at zero,
    /// #70 at N(0, 0.01), earlier records as the token embedding.
    pub fn build(b: &mut Builder) -> Option<ValueEmbeds> {
        let r = b.r;
        let v = r.value_embed.as_ref()?;
        let init = match (v.std, v.zero_init) {
            (Some(stdev), _) => nn::Init::Randn { mean: 0.0, stdev },
            (None, true) => nn::Init::Const(0.0),
            (None, false) => b.embed_init,
        };
        Some(ValueEmbeds::new(&mut b.ps, &v.layers, b.vp, b.c, init, b.g.value_embeds))
    }

    /// One table per distinct digit, in order of first appearance; `init` as the token embedding.
    pub fn new(
        ps: &mut ParamSet,
        pattern: &str,
        vocab: i64,
        c: i64,
        init: nn::Init,
        g: Group,
    ) -> Self {
        let mut digits: Vec<char> = Vec::new();
        let layer = pattern
            .chars()
            .map(|ch| {
                ch.is_ascii_digit().then(|| match digits.iter().position(|&d| d == ch) {
                    Some(i) => i,
                    None => {
                        digits.push(ch);
                        digits.len() - 1
                    }
                })
            })
            .collect();
        let tables = (0..digits.len())
            .map(|i| ps.add(&format!("value_embeds.{i}"), &[vocab, c], init, g))
            .collect();
        ValueEmbeds { tables, layer }
    }

    /// idx: [B, T] -> one [B, T, C] per layer (None where the layer has no table), in `kind`.
    pub fn lookup(&self, idx: &Tensor, kind: tch::Kind) -> Vec<Option<Tensor>> {
        let ve: Vec<Tensor> = self
            .tables
            .iter()
            .map(|t| Tensor::embedding(t, idx, -1, false, false).to_kind(kind))
            .collect();
        self.layer.iter().map(|l| l.map(|i| ve[i].shallow_clone())).collect()
    }
}
