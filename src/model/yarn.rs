//! YaRN (upstream #31): when the long window grows during training, rotary's low frequencies
//! are interpolated so the angles the model learnt over the old window span the new one, and
//! the softmax scale grows with the log of the window.
//!
//! For a growth from `old` to `new` tokens, with α = 1, β = 32 (upstream):
//! ```text
//! rot_j = old·f_j / 2π                      turns of pair j within the old window
//! s     = old / new
//! w_j   = clamp((rot_j − α) / (β − α), 0, 1)
//! f_j  ← f_j · (s + w_j·(1 − s))            ≥ β turns: kept; ≤ α turns: scaled by s
//! scale ← scale · (g·ln(new/old) + 1)       g = 0.2
//! ```
//! The changes compound (3 → 7 → 11 → 13 blocks), and a smaller window resets to the base
//! tables: the untimed warmup cycles the windows and ends back at the first. Every layer shares
//! one `Yarn`; the first layer of a step that sees a new window updates it, inside the step.
use crate::recipe::registry::{technique, Technique};
use serde::{Deserialize, Serialize};
#[cfg(not(recipe_only))]
use {
    super::rotary::Rotary,
    std::f32::consts::PI,
    std::sync::{Arc, Mutex},
    tch::{Device, Kind},
};

/// `[recipe.yarn]`: the interpolation's bounds in turns and the softmax scale's growth.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    /// At most this many turns within the old window: scaled by old/new (1).
    pub alpha: f64,
    /// At least this many: kept (32).
    pub beta: f64,
    /// g in the scale's growth g·ln(new/old) + 1 (0.2).
    pub scale_growth: f64,
}

/// It stretches rotary over the windows' schedule, from attn_scale.
pub const TECHNIQUE: Technique = technique("yarn", &[31], &["rotary", "windows", "attn_scale"]);

#[cfg(not(recipe_only))]
#[derive(Clone)]
pub struct Yarn {
    cfg: Section,
    base: Base,
    state: Arc<Mutex<State>>,
}

#[cfg(not(recipe_only))]
/// What `reset` returns to.
#[derive(Clone)]
struct Base {
    freqs: Vec<f32>,
    window: i64,
    scale: f64,
    max_len: i64,
    device: Device,
    kind: Kind,
    /// Rotary's pairs are adjacent dims (upstream #58).
    interleaved: bool,
}

#[cfg(not(recipe_only))]
struct State {
    window: i64,
    freqs: Vec<f32>,
    rotary: Rotary,
    scale: f64,
}

#[cfg(not(recipe_only))]
impl Yarn {
    /// `freqs`: rotary's base frequencies (pairs of the head); `window`: the first long window
    /// in tokens; `scale`: the softmax scale there; tables of `max_len` positions in `kind`.
    pub fn new(
        cfg: &Section,
        freqs: Vec<f32>,
        (window, scale): (i64, f64),
        (max_len, device, kind): (i64, Device, Kind),
    ) -> Yarn {
        let base = Base { freqs, window, scale, max_len, device, kind, interleaved: false };
        let state = Arc::new(Mutex::new(State::base(&base)));
        Yarn { cfg: cfg.clone(), base, state }
    }

    /// The same, its tables pairing adjacent dims (upstream #58).
    pub fn with_interleaved(self, interleaved: bool) -> Yarn {
        let base = Base { interleaved, ..self.base };
        let state = Arc::new(Mutex::new(State::base(&base)));
        Yarn { base, state, ..self }
    }

    /// Rotary tables and softmax scale for a step whose long window is `window` tokens.
    pub fn at(&self, window: i64) -> (Rotary, f64) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if window < s.window {
            *s = State::base(&self.base);
        }
        if window > s.window {
            let (old, new) = (s.window, window);
            s.freqs = grow(&s.freqs, old, new, (self.cfg.alpha, self.cfg.beta));
            s.scale *= self.cfg.scale_growth * (new as f64 / old as f64).ln() + 1.0;
            s.rotary = self.base.tables(&s.freqs);
            s.window = new;
        }
        (s.rotary.clone(), s.scale)
    }

    /// The frequencies now in use (for tests and `--print-schedule`).
    pub fn freqs(&self) -> Vec<f32> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).freqs.clone()
    }
}

#[cfg(not(recipe_only))]
impl Base {
    fn tables(&self, freqs: &[f32]) -> Rotary {
        let r = Rotary::from_freqs(freqs, self.max_len, self.device).to_kind(self.kind);
        r.with_interleaved(self.interleaved)
    }
}

#[cfg(not(recipe_only))]
impl State {
    fn base(b: &Base) -> State {
        State {
            window: b.window,
            freqs: b.freqs.clone(),
            rotary: b.tables(&b.freqs),
            scale: b.scale,
        }
    }
}

#[cfg(not(recipe_only))]
/// One YaRN growth of the frequencies from `old` to `new` tokens, in fp32 as upstream.
pub fn grow(freqs: &[f32], old: i64, new: i64, (alpha, beta): (f64, f64)) -> Vec<f32> {
    let s = (old as f64 / new as f64) as f32;
    let (alpha, beta) = (alpha as f32, beta as f32);
    freqs
        .iter()
        .map(|&f| {
            let turns = f * old as f32 / (2.0 * PI);
            let w = ((turns - alpha) / (beta - alpha)).clamp(0.0, 1.0);
            f * (s + w * (1.0 - s))
        })
        .collect()
}
