//! Rotary position embedding (upstream #2), in upstream #17's form: half-truncated, base 1024,
//! fp32 tables. Pairs are (x[j], x[j + D/2]); pair j turns by angle t·f_j at position t, with
//!   truncated: f_j = base^(-j/(D/4 - 1)) for j < D/4 and f_j = 0 for the other D/4 pairs
//!   standard:  f_j = base^(-2j/D)
//! and upstream's sign: y1 = x1·cos + x2·sin, y2 = -x1·sin + x2·cos.
//! Positions are absolute in the packed sequence; attention never crosses documents, and rotary
//! only sees differences of positions, so no reset at document starts is needed.
use crate::recipe;
use anyhow::{ensure, Result};
use tch::{Device, Kind, Tensor};

pub struct Rotary {
    cos: Tensor, // [T_max, D/2] fp32 (or the compute kind, upstream #32)
    sin: Tensor, // [T_max, D/2]
}

/// Every layer holds the same tables.
impl Clone for Rotary {
    fn clone(&self) -> Rotary {
        Rotary { cos: self.cos.shallow_clone(), sin: self.sin.shallow_clone() }
    }
}

impl Rotary {
    pub fn new(r: &recipe::Rotary, head_dim: i64, max_len: i64, device: Device) -> Rotary {
        Rotary::from_freqs(&Rotary::freqs(r, head_dim), max_len, device)
    }

    /// The frequency of each of the head's D/2 pairs.
    pub fn freqs(r: &recipe::Rotary, head_dim: i64) -> Vec<f32> {
        let half = head_dim / 2;
        if r.truncated {
            let q = head_dim / 4;
            (0..half)
                .map(|j| {
                    let e = if q > 1 { j as f64 / (q - 1) as f64 } else { 0.0 };
                    if j < q {
                        r.base.powf(-e) as f32
                    } else {
                        0.0
                    }
                })
                .collect()
        } else {
            (0..half).map(|j| r.base.powf(-2.0 * j as f64 / head_dim as f64) as f32).collect()
        }
    }

    /// fp32 tables for positions 0..max_len and the given pair frequencies.
    pub fn from_freqs(freqs: &[f32], max_len: i64, device: Device) -> Rotary {
        let f = Tensor::from_slice(freqs).to(device);
        let t = Tensor::arange(max_len, (Kind::Float, device));
        let theta = t.outer(&f); // [T_max, D/2]
        Rotary { cos: theta.cos(), sin: theta.sin() }
    }

    /// The tables stored (and the rotation computed) in `kind`: bf16 on CUDA since upstream #32.
    pub fn to_kind(&self, kind: Kind) -> Rotary {
        Rotary { cos: self.cos.to_kind(kind), sin: self.sin.to_kind(kind) }
    }

    /// x: [B, T, H, D] -> [B, T, H, D], computed in the tables' kind, returned in x's.
    pub fn apply(&self, x: &Tensor) -> Result<Tensor> {
        let (_, t, _, d) = x.size4()?;
        let max = self.cos.size()[0];
        ensure!(t <= max, "rotary: a sequence of {t} tokens is longer than its table ({max})");
        let cos = self.cos.narrow(0, 0, t).unsqueeze(0).unsqueeze(2); // [1, T, 1, D/2]
        let sin = self.sin.narrow(0, 0, t).unsqueeze(0).unsqueeze(2);
        let xf = x.to_kind(self.cos.kind());
        let (x1, x2) = (xf.narrow(3, 0, d / 2), xf.narrow(3, d / 2, d / 2));
        let y1 = &x1 * &cos + &x2 * &sin;
        let y2 = -(&x1 * &sin) + &x2 * &cos;
        Ok(Tensor::cat(&[y1, y2], 3).to_kind(x.kind()))
    }
}
