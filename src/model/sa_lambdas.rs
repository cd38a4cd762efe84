//! The attention lambdas (sa0, sa1) of each layer, learned in the scalar bank, and where they
//! act, which upstream moved twice:
//! - upstream #15 on (`values`): v <- sa0·v + sa1·ve, init (0.5, 0.5);
//! - upstream #47 (`qkv`): sa0 scales the QKV weight instead, W_qkv <- sa0·W_qkv, and
//!   v <- v + sa1·ve. q and k are RMS-normed right after, so sa0 still only scales v, but
//!   scaling the [3C, C] weight costs less than scaling the [T, C] values;
//! - upstream #48 (`qkv_o`): sa1 moves onto the output projection, W_o <- sa1·W_o, init 1, and
//!   the value embedding is added unscaled: v <- v + ve.
use crate::recipe::registry::{technique, Technique};
use serde::{Deserialize, Serialize};
#[cfg(not(recipe_only))]
use {
    super::builder::Builder,
    super::scalars::{ScalarBank, Slot},
    tch::Tensor,
};

/// `sa_lambdas = "qkv_o"`: where each layer's attention lambdas (sa0, sa1) act.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Place {
    /// Upstream #15: v <- sa0·v + sa1·ve.
    #[default]
    Values,
    /// Upstream #47: sa0 scales the QKV weight; v <- v + sa1·ve.
    Qkv,
    /// Upstream #48: sa0 scales the QKV weight, sa1 the output weight; v <- v + ve.
    QkvO,
}

pub const TECHNIQUE: Technique = technique("sa_lambdas", &[47, 48], &["attn_layers"]);

#[cfg(not(recipe_only))]
/// One layer's (sa0, sa1).
#[derive(Clone, Copy)]
pub struct LayerLambdas {
    slot: Slot,
    place: Place,
}

#[cfg(not(recipe_only))]
/// The lambdas windowed attention reads, when the recipe has it.
pub fn build(b: &mut Builder) -> Option<Vec<LayerLambdas>> {
    let r = b.r;
    r.attn_layers.as_ref().map(|_| reserve(&mut b.scalars, b.l, r.sa_lambdas))
}

#[cfg(not(recipe_only))]
/// Reserves (sa0, sa1) for each of `n_layer` layers; returns each layer's.
pub fn reserve(bank: &mut ScalarBank, n_layer: usize, place: Place) -> Vec<LayerLambdas> {
    let sa1 = if place == Place::QkvO { 1.0 } else { 0.5 };
    let slot = bank.reserve("value_lambdas", &[0.5, sa1].repeat(n_layer));
    (0..n_layer).map(|i| LayerLambdas { slot: slot.sub(2 * i, 2), place }).collect()
}

#[cfg(not(recipe_only))]
impl LayerLambdas {
    /// The QKV weight [3C, C] the layer multiplies by.
    pub fn qkv_weight(&self, w: &Tensor, bank: &Tensor) -> Tensor {
        match self.place {
            Place::Values => w.shallow_clone(),
            Place::Qkv | Place::QkvO => w * self.slot.get(bank, 0),
        }
    }

    /// v, ve: [B, T, H, D] -> v with the value embedding mixed in.
    pub fn values(&self, v: &Tensor, ve: Option<&Tensor>, bank: &Tensor) -> Tensor {
        let (sa0, sa1) = self.slot.pair(bank, 0);
        match (self.place, ve) {
            (Place::Values, Some(ve)) => v * sa0 + ve * sa1,
            (Place::Values, None) => v * sa0,
            (Place::Qkv, Some(ve)) => v + ve * sa1,
            (Place::QkvO, Some(ve)) => v + ve,
            (_, None) => v.shallow_clone(),
        }
    }

    /// The output weight [C, C] the layer multiplies by.
    pub fn out_weight(&self, w: &Tensor, bank: &Tensor) -> Tensor {
        match self.place {
            Place::QkvO => w * self.slot.get(bank, 1),
            _ => w.shallow_clone(),
        }
    }
}
