//! AdamW as llm.c writes it (adamw.cuh), over fp32 master weights:
//!   m = b1*m + (1-b1)*g,  v = b2*v + (1-b2)*g^2,  m^ = m/(1-b1^t),  v^ = v/(1-b2^t)
//!   p = p - lr * (m^/(sqrt(v^)+eps) + wd*p)      (wd only on tensors with `decay`)
use crate::model::params::Param;
use tch::Tensor;

pub struct AdamW {
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    state: Vec<(Tensor, Tensor)>,
    t: i32,
}

impl AdamW {
    pub fn new(params: &[Param], beta1: f64, beta2: f64, eps: f64, weight_decay: f64) -> Self {
        let state = params.iter().map(|p| (p.tensor.zeros_like(), p.tensor.zeros_like())).collect();
        AdamW { beta1, beta2, eps, weight_decay, state, t: 0 }
    }

    /// One update with gradients multiplied by `grad_scale` (the clip factor).
    pub fn step(&mut self, params: &[Param], lr: f64, grad_scale: f64) {
        self.t += 1;
        let bc1 = 1.0 - self.beta1.powi(self.t);
        let bc2 = 1.0 - self.beta2.powi(self.t);
        tch::no_grad(|| {
            for (p, (m, v)) in params.iter().zip(&mut self.state) {
                let g = p.tensor.grad() * grad_scale;
                let _ = m.lerp_(&g, 1.0 - self.beta1);
                let _ = v.lerp_(&(&g * &g), 1.0 - self.beta2);
                let update = (&*m / bc1) / ((&*v / bc2).sqrt() + self.eps);
                let wd = if p.group.decay { self.weight_decay } else { 0.0 };
                let mut w = p.tensor.shallow_clone();
                let _ = w.g_sub_(&((update + &w * wd) * lr));
            }
        });
    }

    /// Deep copies of the step count and the moments.
    pub fn save(&self) -> Vec<Tensor> {
        let mut out = vec![Tensor::from(self.t as i64)];
        out.extend(self.state.iter().flat_map(|(m, v)| [m.copy(), v.copy()]));
        out
    }

    /// Puts back what [`AdamW::save`] returned.
    pub fn restore(&mut self, saved: &[Tensor]) -> anyhow::Result<()> {
        let Some((t, mv)) = saved.split_first() else { anyhow::bail!("adamw: nothing to restore") };
        anyhow::ensure!(mv.len() == 2 * self.state.len(), "adamw: saved state does not fit");
        self.t = t.int64_value(&[]) as i32;
        for ((m, v), s) in self.state.iter_mut().zip(mv.chunks(2)) {
            m.copy_(&s[0]);
            v.copy_(&s[1]);
        }
        Ok(())
    }
}

/// Global L2 norm of all gradients, and the factor that clips it to `max_norm` (llm.c: scale
/// by max_norm/norm when norm > max_norm).
pub fn clip_factor(params: &[Param], max_norm: f64) -> (f64, f64) {
    // One host read for all tensors, not one per tensor (each read waits for the GPU).
    let sq: f64 = tch::no_grad(|| {
        let per_tensor: Vec<Tensor> =
            params.iter().map(|p| p.tensor.grad().square().sum(tch::Kind::Double)).collect();
        Tensor::stack(&per_tensor, 0).sum(tch::Kind::Double).double_value(&[])
    });
    let norm = sq.sqrt();
    let scale = if max_norm > 0.0 && norm > max_norm { max_norm / norm } else { 1.0 };
    (norm, scale)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::params::{Group, Opt};
    use tch::{Device, Kind};

    fn param(values: &[f32], grad: &[f32], decay: bool) -> Param {
        let tensor = Tensor::from_slice(values).set_requires_grad(true);
        let mut g = tensor.grad();
        if !g.defined() {
            (&tensor * 0.0).sum(Kind::Float).backward();
            g = tensor.grad();
        }
        g.copy_(&Tensor::from_slice(grad));
        let group = Group { decay, ..Group::new(Opt::AdamW, 1.0) };
        Param { name: "p".into(), tensor, group }
    }

    /// Two steps computed by hand in float64.
    #[test]
    fn matches_hand_computed_steps() {
        let params = vec![param(&[1.0, -2.0], &[0.5, -1.0], true), param(&[3.0], &[2.0], false)];
        let mut opt = AdamW::new(&params, 0.9, 0.95, 1e-8, 0.1);
        opt.step(&params, 0.01, 1.0);
        // Step 1: m^ = g, v^ = g^2, so the Adam term is sign(g) (up to eps).
        let expect = |p: f64, g: f64, wd: f64| p - 0.01 * (g / (g.abs() + 1e-8) + wd * p);
        let p0: Vec<f32> = Vec::try_from(&params[0].tensor).unwrap();
        let p1: Vec<f32> = Vec::try_from(&params[1].tensor).unwrap();
        assert!((p0[0] as f64 - expect(1.0, 0.5, 0.1)).abs() < 1e-6);
        assert!((p0[1] as f64 - expect(-2.0, -1.0, 0.1)).abs() < 1e-6);
        assert!((p1[0] as f64 - expect(3.0, 2.0, 0.0)).abs() < 1e-6);
        // Step 2 with a new gradient and a clip factor of 0.5.
        let prev = p1[0] as f64;
        tch::no_grad(|| params[1].tensor.grad().copy_(&Tensor::from_slice(&[-4.0f32])));
        opt.step(&params, 0.02, 0.5);
        let (g1, g2) = (2.0f64, -2.0f64); // effective gradients of step 1 and 2
        let m = 0.9 * (0.1 * g1) + 0.1 * g2;
        let v = 0.95 * (0.05 * g1 * g1) + 0.05 * g2 * g2;
        let (mh, vh) = (m / (1.0 - 0.81), v / (1.0 - 0.9025));
        let want = prev - 0.02 * (mh / (vh.sqrt() + 1e-8));
        let got = f32::try_from(&params[1].tensor.get(0)).unwrap() as f64;
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        assert_eq!(params[0].tensor.device(), Device::Cpu);
    }

    #[test]
    fn clips_only_above_the_threshold() {
        let params = vec![param(&[0.0, 0.0], &[3.0, 4.0], true)];
        assert_eq!(clip_factor(&params, 1.0), (5.0, 0.2));
        assert_eq!(clip_factor(&params, 10.0), (5.0, 1.0));
    }
}
