//! The scalar bank: every learned scalar in one vector (upstream #24), so Adam updates it as one
//! tensor and the distributed optimizer can split it evenly. Each technique reserves its named
//! slice in build order; the vector is padded with ones to a multiple of 8. Record #29's layout
//! for L layers (`train --print-layout` prints it):
//!   [0, L)      skip           U-net skip weights (only the first L/2 are used), init 1  (#11)
//!   [L, 3L)     block_lambdas  (λ0, λ1) per layer: x <- λ0·x + λ1·x0, init (1, 0)        (#9)
//!   [3L, 5L)    value_lambdas  (sa0, sa1) per layer: v <- sa0·v + sa1·ve, init (0.5, 0.5) (#15)
//!   [5L, ...)   padding, init 1, unused
use super::params::{Group, ParamSet};
use tch::{Kind, Tensor};

/// A reserved slice of the bank.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    at: i64,
    len: i64,
}

impl Slot {
    /// Entry `k` of the slice, from the bank's tensor. 0-dim.
    pub fn get(&self, bank: &Tensor, k: usize) -> Tensor {
        debug_assert!((k as i64) < self.len);
        bank.get(self.at + k as i64)
    }

    /// The `len` entries from `k`, as a slot of their own.
    pub fn sub(&self, k: usize, len: usize) -> Slot {
        debug_assert!((k + len) as i64 <= self.len);
        Slot { at: self.at + k as i64, len: len as i64 }
    }

    /// Entries `k` and `k + 1`. 0-dim each.
    pub fn pair(&self, bank: &Tensor, k: usize) -> (Tensor, Tensor) {
        (self.get(bank, k), self.get(bank, k + 1))
    }
}

/// One named slice of the layout.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub at: usize,
    pub init: Vec<f32>,
}

/// The layout being reserved, then the bank's parameter.
#[derive(Default)]
pub struct ScalarBank {
    entries: Vec<Entry>,
    tensor: Option<Tensor>,
}

impl ScalarBank {
    /// Reserves `init.len()` scalars under `name`, after those reserved before.
    pub fn reserve(&mut self, name: &str, init: &[f32]) -> Slot {
        let at = self.len();
        self.entries.push(Entry { name: name.to_string(), at, init: init.to_vec() });
        Slot { at: at as i64, len: init.len() as i64 }
    }

    fn len(&self) -> usize {
        self.entries.iter().map(|e| e.init.len()).sum()
    }

    /// Pads the layout and creates the `scalars` parameter, if anything was reserved.
    pub fn create(&mut self, ps: &mut ParamSet, group: Group) {
        let pad = (8 - self.len() % 8) % 8;
        if self.entries.is_empty() {
            return;
        }
        if pad > 0 {
            self.reserve("padding", &vec![1.0; pad]);
        }
        let init: Vec<f32> = self.entries.iter().flat_map(|e| e.init.iter().copied()).collect();
        let all = ps.zeros("scalars", &[init.len() as i64], group);
        tch::no_grad(|| all.shallow_clone().copy_(&Tensor::from_slice(&init)));
        self.tensor = Some(all);
    }

    /// The bank's tensor [n] (an empty tensor when nothing was reserved).
    pub fn tensor(&self) -> Tensor {
        match &self.tensor {
            Some(t) => t.shallow_clone(),
            None => Tensor::zeros([0], (Kind::Float, tch::Device::Cpu)),
        }
    }

    /// The reserved slices, in order.
    pub fn layout(&self) -> &[Entry] {
        &self.entries
    }
}
