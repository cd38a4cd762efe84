//! The MLP of upstream #5 on: C -> 4C -> relu(x)^2 -> C, no biases. Both matrices are stored
//! as [C, 4C] (upstream #27 stores c_fc transposed), so Muon batches all 2L of them as one
//! shape; from upstream #48 both are stored tall, [4C, C] (`tall_matrices`).
//!
//! Upstream #59 fuses x·c_fcᵀ, the relu and the square into one Triton GEMM whose epilogue
//! writes both pre = x·c_fcᵀ and post = relu(pre)² (bf16), and a backward kernel that multiplies
//! the incoming gradient by 2·relu(pre) as it leaves the matmul: one pass over the [T, 4C]
//! activations instead of three. The math and the saved tensors are the same, so ours stays
//! libtorch's linear, relu and square, and autograd saves what it needs (pre's relu, post).
use super::builder::Builder;
use super::fp8_mlp::{self, fp8_up_projection};
use super::params::{Group, ParamSet};
use anyhow::Result;
use tch::Tensor;

pub struct Relu2Mlp {
    c_fc: Tensor,   // [C, 4C], used as x @ c_fc; tall: [4C, C], x @ c_fcᵀ
    c_proj: Tensor, // [C, 4C], used as h @ c_projᵀ; tall: [4C, C], h @ c_proj
    tall: bool,
    /// The up-projection in FP8 during training (upstream #84; fp8_mlp.rs).
    fp8_up: bool,
}

impl Relu2Mlp {
    /// The recipe's ReLU² MLP named `name`, FP8 up-projection when it has it (upstream #84).
    pub fn build(b: &mut Builder, name: &str) -> Relu2Mlp {
        let r = b.r;
        let shape = (r.zero_proj, r.tall_matrices);
        let m = Relu2Mlp::new(&mut b.ps, name, b.c, b.bound, shape, (b.g.c_fc, b.g.c_proj));
        if fp8_mlp::up(r) {
            m.with_fp8_up()
        } else {
            m
        }
    }

    /// `bound`: the uniform init of c_fc; c_proj is zero when `zero_proj` (upstream #5) and
    /// shares c_fc's init otherwise. `groups`: c_fc's and c_proj's (upstream #42 gives c_fc
    /// twice the lr).
    pub fn new(
        ps: &mut ParamSet,
        name: &str,
        c: i64,
        bound: f64,
        (zero_proj, tall): (bool, bool),
        (g_fc, g_proj): (Group, Group),
    ) -> Self {
        let shape = if tall { [4 * c, c] } else { [c, 4 * c] };
        let c_fc = ps.uniform(&format!("{name}.c_fc"), &shape, bound, g_fc);
        let c_proj = if zero_proj {
            ps.zeros(&format!("{name}.c_proj"), &shape, g_proj)
        } else {
            ps.uniform(&format!("{name}.c_proj"), &shape, bound, g_proj)
        };
        Relu2Mlp { c_fc, c_proj, tall, fp8_up: false }
    }

    /// The up-projection runs in FP8 in training (upstream #84; needs the tall layout).
    pub fn with_fp8_up(self) -> Relu2Mlp {
        Relu2Mlp { fp8_up: true, ..self }
    }

    /// x: [B, T, C] -> [B, T, C]
    pub fn forward(&self, x: &Tensor, training: bool) -> Result<Tensor> {
        let k = x.kind();
        let (c_fc, c_proj) = (self.c_fc.to_kind(k), self.c_proj.to_kind(k));
        if self.fp8_up && training {
            let (b, t, c) = x.size3()?;
            let pre = fp8_up_projection(&x.reshape([-1, c]), &self.c_fc)?; // [B·T, 4C]
            let h = pre.view([b, t, -1]).relu().square(); // [B, T, 4C]
            return Ok(h.matmul(&c_proj));
        }
        if self.tall {
            let h = x.linear(&c_fc, None::<Tensor>).relu().square(); // [B, T, 4C]
            return Ok(h.matmul(&c_proj));
        }
        let h = x.matmul(&c_fc).relu().square(); // [B, T, 4C]
        Ok(h.matmul(&c_proj.tr()))
    }
}
