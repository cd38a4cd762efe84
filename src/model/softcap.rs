//! Logit softcap in upstream #19's sigmoid form: z -> cap·σ(z/temperature), in fp32.
//! With cap 30 and temperature 7.5 this is 15·tanh(z/15) + 15: logits live in (0, 30), and the
//! shift by 15 changes no softmax.
use crate::recipe::Softcap;
use tch::{Kind, Tensor};

/// z: any shape -> same shape, fp32.
pub fn softcap(z: &Tensor, s: &Softcap) -> Tensor {
    softcap_in(&z.to_kind(Kind::Float), s)
}

/// The same in z's own kind (upstream #37: bf16 in training).
pub fn softcap_in(z: &Tensor, s: &Softcap) -> Tensor {
    (z / s.temperature).sigmoid() * s.cap
}
