//! The techniques of upstream #39-#46 (record #46's span), each against hand-derived or float64
//! values, on record #29's recipe with the keys added.
mod common;

use common::{build, record_29_with};
use tch::{Kind, Tensor};
use trainer::dist::single::Single;
use trainer::model::params::Opt;
use trainer::optim::optimizer::Optimizer;
use trainer::optim::schedule::Schedule;
use trainer::recipe::Scale;

fn adam_values(opt: &Optimizer) -> Vec<Tensor> {
    let adam = opt.params().into_iter().filter(|p| p.group.opt == Opt::Adam);
    adam.map(|p| p.tensor.detach().copy()).collect()
}

/// Sets every parameter's gradient to (or, `add`, adds) a fixed pseudo-random tensor of `seed`.
fn grads(opt: &Optimizer, seed: i64, add: bool) {
    tch::manual_seed(seed);
    for p in opt.params() {
        let g = Tensor::randn(p.tensor.size(), (Kind::Float, p.tensor.device())) * 1e-2;
        let mut grad = p.tensor.grad();
        if !grad.defined() {
            // A backward defines it.
            (p.tensor.shallow_clone() * 0.0).sum(Kind::Float).backward();
            grad = p.tensor.grad();
        }
        tch::no_grad(|| {
            if add {
                let _ = grad.f_add_(&g).unwrap();
            } else {
                grad.copy_(&g);
            }
        });
    }
}

/// #39: Adam waits on even steps, keeping its gradients, and on the odd step updates from the
/// sum of both steps' gradients, as one Adam step (t = 1) on that sum would.
#[test]
fn adam_steps_on_odd_steps_from_two_steps_of_gradients() {
    let every_2 = record_29_with("adam_every = 2", Scale::Lab);
    let every_1 = record_29_with("", Scale::Lab);
    let (_m, params, _vs) = build(&every_2);
    let mut opt = Optimizer::new(params, &every_2, Kind::Float).unwrap();
    let (_m1, params1, _vs1) = build(&every_1);
    let mut one = Optimizer::new(params1, &every_1, Kind::Float).unwrap();
    let (s2, s1) = (Schedule::new(&every_2), Schedule::new(&every_1));
    let before = adam_values(&opt);
    let mut coll = Single;

    grads(&opt, 1, false);
    opt.step(&mut coll, &s2.at(0)).unwrap();
    for (a, b) in adam_values(&opt).iter().zip(&before) {
        assert!(a.equal(b), "Adam must not step on step 0");
    }
    let adam = opt.params().into_iter().find(|p| p.group.opt == Opt::Adam).unwrap();
    assert!(adam.tensor.grad().abs().sum(Kind::Double).double_value(&[]) > 0.0, "grads kept");
    let muon = opt.params().into_iter().find(|p| p.group.opt == Opt::Muon).unwrap();
    assert_eq!(muon.tensor.grad().abs().sum(Kind::Double).double_value(&[]), 0.0);

    grads(&opt, 2, true);
    opt.step(&mut coll, &s2.at(1)).unwrap();
    grads(&one, 1, false);
    grads(&one, 2, true);
    assert_eq!(s1.at(0).lr_factor, s2.at(1).lr_factor);
    one.step(&mut coll, &s1.at(0)).unwrap();
    for (a, b) in adam_values(&opt).iter().zip(&adam_values(&one)) {
        assert!(a.allclose(b, 1e-6, 1e-7, false), "Adam's step on the summed gradients");
    }
}
