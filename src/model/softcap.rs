//! Logit softcap in upstream #19's sigmoid form: z -> cap·σ(z/temperature), in fp32.
//! With cap 30 and temperature 7.5 this is 15·tanh(z/15) + 15: logits live in (0, 30), and the
//! shift by 15 changes no softmax. Upstream #54 makes it asymmetric: 23·σ((z + 5)/7.5). The
//! curve's midpoint moves to z = −5 and its top to 23, so the many negative logits (the tokens
//! that are not next) sit on the steep part, while a confident positive logit saturates sooner:
//! more resolution where the softmax's denominator lives.
use crate::recipe::Softcap;
use tch::{Kind, Tensor};

/// z: any shape -> same shape, fp32.
pub fn softcap(z: &Tensor, s: &Softcap) -> Tensor {
    softcap_in(&z.to_kind(Kind::Float), s)
}

/// The same in z's own kind (upstream #37: bf16 in training).
pub fn softcap_in(z: &Tensor, s: &Softcap) -> Tensor {
    if s.shift == 0.0 {
        return (z / s.temperature).sigmoid() * s.cap;
    }
    ((z + s.shift) / s.temperature).sigmoid() * s.cap
}
