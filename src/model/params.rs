//! Parameters with their optimizer group, created with explicit initialisation (tch's default
//! Linear init is Kaiming-uniform; llm.c draws N(0, 0.02)).
use tch::{nn, Kind, Tensor};

/// One trainable tensor and how the optimizer treats it.
pub struct Param {
    pub name: String,
    pub tensor: Tensor,
    /// Weight decay applies (llm.c: 2-D tensors only).
    pub decay: bool,
    /// Multiplies the optimizer's base learning rate for this tensor (upstream's `lr_mul`).
    pub lr_mul: f64,
}

/// Collects a model's parameters in creation order, under dotted names.
pub struct ParamSet<'a> {
    path: nn::Path<'a>,
    params: Vec<Param>,
}

impl<'a> ParamSet<'a> {
    pub fn new(path: nn::Path<'a>) -> Self {
        ParamSet { path, params: Vec::new() }
    }

    /// N(0, std) for matrices, zeros or ones for vectors.
    pub fn normal(&mut self, name: &str, dims: &[i64], std: f64) -> Tensor {
        self.add(name, dims, nn::Init::Randn { mean: 0.0, stdev: std })
    }

    pub fn zeros(&mut self, name: &str, dims: &[i64]) -> Tensor {
        self.add(name, dims, nn::Init::Const(0.0))
    }

    pub fn ones(&mut self, name: &str, dims: &[i64]) -> Tensor {
        self.add(name, dims, nn::Init::Const(1.0))
    }

    /// U(-bound, bound).
    pub fn uniform(&mut self, name: &str, dims: &[i64], bound: f64) -> Tensor {
        self.add(name, dims, nn::Init::Uniform { lo: -bound, up: bound })
    }

    /// Sets the lr multiplier of the parameter added last.
    pub fn lr_mul(&mut self, mul: f64) {
        if let Some(p) = self.params.last_mut() {
            p.lr_mul = mul;
        }
    }

    pub fn add(&mut self, name: &str, dims: &[i64], init: nn::Init) -> Tensor {
        let tensor = self.path.var(&name.replace('.', "_"), dims, init);
        debug_assert_eq!(tensor.kind(), Kind::Float);
        self.params.push(Param {
            name: name.to_string(),
            tensor: tensor.shallow_clone(),
            decay: dims.len() == 2,
            lr_mul: 1.0,
        });
        tensor
    }

    pub fn into_params(self) -> Vec<Param> {
        self.params
    }
}
