//! How sublayers join the residual stream: #73's lambdas per sublayer against a float64 loop
//! over every element, and #77's attention over the backout's saved output, through a block.
mod common;

use tch::{nn, Device, Kind, Tensor};
use trainer::model::attention::Attention;
use trainer::model::block::{Attn, Block, BlockIn, Ffn, Residual};
use trainer::model::dense::Dense;
use trainer::model::norm::Norm;
use trainer::model::parallel_residuals::{Inits, ParallelResiduals};
use trainer::model::params::{Group, Groups, Opt, ParamSet};
use trainer::recipe::Scale;

const L: i64 = 3;

fn values(t: &Tensor) -> Vec<f64> {
    Vec::<f64>::try_from(t.to_kind(Kind::Double).flatten(0, -1)).unwrap()
}

/// The lambdas of a 3-layer model set to distinct values: (resid [L, 2], post [L, 2], x0 [L],
/// bigram [L]), each as the float64 numbers the loop uses.
fn lambdas(vs: &nn::VarStore) -> (ParallelResiduals, [Vec<f64>; 4]) {
    let mut ps = ParamSet::new(vs.root());
    let g = Group::new(Opt::Adam, 1.0);
    let p = ParallelResiduals::new(&mut ps, L, Inits { resid: 1.0, bigram: 0.0 }, (g, g));
    let params = ps.into_params(Kind::Float);
    let set = |name: &str, seed: f64| {
        let t = &params.iter().find(|q| q.name == name).unwrap().tensor;
        let n = t.numel() as i64;
        let v = (Tensor::arange(n, (Kind::Float, Device::Cpu)) * 0.37 + seed)
            .sin()
            .view(t.size().as_slice());
        tch::no_grad(|| t.shallow_clone().copy_(&v));
        values(t)
    };
    let l = [set("resid_lambdas", 1.0), set("post_lambdas", 2.0), set("x0_lambdas", 3.0)];
    let b = set("bigram_lambdas", 4.0);
    (p, [l[0].clone(), l[1].clone(), l[2].clone(), b])
}

fn randn(seed: i64) -> Tensor {
    tch::manual_seed(seed);
    Tensor::randn([2, 3, 4], (Kind::Double, Device::Cpu))
}

/// #73: x ← r_a·x + p_a·a + x0λ·x0 + bigλ·x0b after attention (no bigram row at layer 0, which
/// gets it before), x ← r_m·x + p_m·m after the MLP; element by element in float64.
#[test]
fn per_sublayer_lambdas_match_a_float64_loop() {
    let vs = nn::VarStore::new(Device::Cpu);
    let (p, [resid, post, x0l, bigl]) = lambdas(&vs);
    let (x, a, m, x0, x0b) = (randn(1), randn(2), randn(3), randn(4), randn(5));
    let (xv, av, mv, x0v, bv) = (values(&x), values(&a), values(&m), values(&x0), values(&x0b));
    let start = values(&p.start(&x0, Some(&x0b)));
    for e in 0..xv.len() {
        assert!((start[e] - (x0v[e] + bigl[0] * bv[e])).abs() < 1e-12, "start, element {e}");
    }
    for i in 0..L as usize {
        let got_a = values(&p.after_attention(i, &x, &a, &x0, Some(&x0b)));
        let got_m = values(&p.after_mlp(i, &x, &m));
        for e in 0..xv.len() {
            let bigram = if i > 0 { bigl[i] * bv[e] } else { 0.0 };
            let want_a = resid[2 * i] * xv[e] + post[2 * i] * av[e] + x0l[i] * x0v[e] + bigram;
            let want_m = resid[2 * i + 1] * xv[e] + post[2 * i + 1] * mv[e];
            assert!((got_a[e] - want_a).abs() < 1e-12, "layer {i} attention, element {e}");
            assert!((got_m[e] - want_m).abs() < 1e-12, "layer {i} MLP, element {e}");
        }
    }
}

/// A record #1 block of width 8: dense attention, no MLP.
fn attention_block(vs: &nn::VarStore) -> Block {
    let mut ps = ParamSet::new(vs.root());
    let r = common::record(1, Scale::Lab);
    let g = Groups::new(&r);
    let dense = Dense::new(&trainer::recipe::Recipe { init_std: 0.3, ..r });
    tch::manual_seed(77);
    let attn = Attn::Dense(Attention::new(&mut ps, "attn", (8, 2), (&dense, None), &g));
    let norm = || Norm::Rms { eps: 1e-6 };
    Block { norm_1: norm(), attn, norm_2: norm(), mlp: Ffn::None }
}

/// #77: with `attend_over`, attention reads the saved output k and its result joins the stream
/// x: the block's step from x is its step from k, moved onto x.
#[test]
fn attention_over_the_backouts_output_joins_the_stream() {
    let vs = nn::VarStore::new(Device::Cpu);
    let block = attention_block(&vs);
    let bank = Tensor::zeros([1], (Kind::Float, Device::Cpu));
    let (x, k) = (randn(6).view([2, 3, 4]), randn(7).view([2, 3, 4]));
    let (x, k) =
        (x.repeat([1, 1, 2]).to_kind(Kind::Float), k.repeat([1, 1, 2]).to_kind(Kind::Float));
    let input = |attend_over| BlockIn {
        layer: 0,
        ve: None,
        bank: &bank,
        docs: None,
        windows: ((0, 0), 0),
        training: false,
        x0: &x,
        x0b: None,
        attend_over,
    };
    let rule = Residual::Add;
    let a_k = block.forward(k.copy(), &input(None), &rule).unwrap() - &k; // Attn(norm k)
    let got = block.forward(x.copy(), &input(Some(&k)), &rule).unwrap();
    assert!((&got - &x).allclose(&a_k, 1e-5, 1e-6, false), "x + Attn(norm k)");
    let own = block.forward(x.copy(), &input(None), &rule).unwrap();
    assert!(!got.allclose(&own, 1e-3, 1e-3, false), "not the stream's own attention");
}
