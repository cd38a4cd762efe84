//! Rotary position embedding (upstream #2), in upstream #17's form: half-truncated, base 1024,
//! fp32 tables. Pairs are (x[j], x[j + D/2]); pair j turns by angle t·f_j at position t, with
//!   truncated: f_j = base^(-j/(D/4 - 1)) for j < D/4 (fp32, as upstream) and f_j = 0 for the
//!              other D/4 pairs
//!   standard:  f_j = base^(-2j/D)
//! and upstream's sign: y1 = x1·cos + x2·sin, y2 = -x1·sin + x2·cos.
//! Positions are absolute in the packed sequence; attention never crosses documents, and rotary
//! only sees differences of positions, so no reset at document starts is needed.
//!
//! Upstream #58 pairs adjacent dims instead, (x[2j], x[2j + 1]) (`interleaved`): with the
//! truncated frequencies dims 0..D/2 rotate and D/2..D stay. The scores are the same up to a
//! permutation of the head's dims; what moves is which dims are the unrotated ones (the key
//! offset's, key_offset.rs).
use crate::recipe;
use anyhow::{ensure, Result};
use tch::{Device, Kind, Tensor};

pub struct Rotary {
    cos: Tensor, // [T_max, D/2] fp32 (or the compute kind, upstream #32)
    sin: Tensor, // [T_max, D/2]
    /// Pairs are adjacent dims (upstream #58), not the two halves.
    interleaved: bool,
}

/// Every layer holds the same tables.
impl Clone for Rotary {
    fn clone(&self) -> Rotary {
        let (cos, sin) = (self.cos.shallow_clone(), self.sin.shallow_clone());
        Rotary { cos, sin, interleaved: self.interleaved }
    }
}

impl Rotary {
    pub fn new(r: &recipe::Rotary, head_dim: i64, max_len: i64, device: Device) -> Rotary {
        Rotary::from_freqs(&Rotary::freqs(r, head_dim), max_len, device)
            .with_interleaved(r.interleaved)
    }

    /// The same tables, pairing adjacent dims when `interleaved` (upstream #58).
    pub fn with_interleaved(self, interleaved: bool) -> Rotary {
        Rotary { interleaved, ..self }
    }

    /// The frequency of each of the head's D/2 pairs. The truncated ones are computed as
    /// upstream computes them, to the bit: (1/base)^linspace(0, 1, D/4) in fp32 (libtorch's
    /// linspace and pow), then D/4 zeros.
    pub fn freqs(r: &recipe::Rotary, head_dim: i64) -> Vec<f32> {
        let half = head_dim / 2;
        if r.truncated {
            let steps = Tensor::linspace(0.0, 1.0, head_dim / 4, (Kind::Float, Device::Cpu));
            let mut f = Vec::<f32>::try_from(&Tensor::pow_scalar(1.0 / r.base, &steps))
                .expect("rotary: fp32 frequencies");
            f.resize(half as usize, 0.0);
            f
        } else {
            (0..half).map(|j| r.base.powf(-2.0 * j as f64 / head_dim as f64) as f32).collect()
        }
    }

    /// fp32 tables for positions 0..max_len and the given pair frequencies.
    pub fn from_freqs(freqs: &[f32], max_len: i64, device: Device) -> Rotary {
        let f = Tensor::from_slice(freqs).to(device);
        let t = Tensor::arange(max_len, (Kind::Float, device));
        let theta = t.outer(&f); // [T_max, D/2]
        Rotary { cos: theta.cos(), sin: theta.sin(), interleaved: false }
    }

    /// The tables stored (and the rotation computed) in `kind`: bf16 on CUDA since upstream #32.
    pub fn to_kind(&self, kind: Kind) -> Rotary {
        let (cos, sin) = (self.cos.to_kind(kind), self.sin.to_kind(kind));
        Rotary { cos, sin, interleaved: self.interleaved }
    }

    /// x: [B, T, H, D] -> [B, T, H, D], token t at position t; computed in the tables' kind,
    /// returned in x's.
    pub fn apply(&self, x: &Tensor) -> Result<Tensor> {
        let (_, t, _, _) = x.size4()?;
        self.fits(t)?;
        let cos = self.cos.narrow(0, 0, t).unsqueeze(0).unsqueeze(2); // [1, T, 1, D/2]
        let sin = self.sin.narrow(0, 0, t).unsqueeze(0).unsqueeze(2);
        Ok(self.rotate(x, &cos, &sin))
    }

    /// Upstream #58's paired heads: head h of token t at position 2t + h mod 2 (upstream
    /// rotates head pairs (2g, 2g + 1) as one 2D-wide head at positions 2t and 2t + 1).
    /// x: [B, T, H, D] -> [B, T, H, D]
    pub fn apply_paired(&self, x: &Tensor) -> Result<Tensor> {
        let (_, t, h, d) = x.size4()?;
        self.fits(2 * t)?;
        let per_head = |table: &Tensor| {
            let two = table.narrow(0, 0, 2 * t).view([t, 1, 2, d / 2]); // positions 2t, 2t + 1
            two.expand([t, h / 2, 2, d / 2], false).reshape([1, t, h, d / 2])
        };
        Ok(self.rotate(x, &per_head(&self.cos), &per_head(&self.sin)))
    }

    fn fits(&self, t: i64) -> Result<()> {
        let max = self.cos.size()[0];
        ensure!(t <= max, "rotary: a sequence of {t} tokens is longer than its table ({max})");
        Ok(())
    }

    /// x: [B, T, H, D] rotated by angles whose cos, sin broadcast to [B, T, H, D/2].
    fn rotate(&self, x: &Tensor, cos: &Tensor, sin: &Tensor) -> Tensor {
        let d = x.size()[3];
        let xf = x.to_kind(self.cos.kind());
        let (x1, x2) = match self.interleaved {
            false => (xf.narrow(3, 0, d / 2), xf.narrow(3, d / 2, d / 2)),
            true => {
                let pairs = xf.unflatten(3, [d / 2, 2]); // [B, T, H, D/2, 2]
                (pairs.select(4, 0), pairs.select(4, 1))
            }
        };
        let y1 = &x1 * cos + &x2 * sin;
        let y2 = -(&x1 * sin) + &x2 * cos;
        let y = match self.interleaved {
            false => Tensor::cat(&[y1, y2], 3),
            true => Tensor::stack(&[y1, y2], 4).flatten(3, 4),
        };
        y.to_kind(x.kind())
    }
}
