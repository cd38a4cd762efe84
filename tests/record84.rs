//! The techniques of upstream #64-#84 (record #84's span), each against hand-derived or float64
//! values.
mod common;

use trainer::recipe::Scale;

/// #64: W_O is drawn with Q, K and V, U(±bound) with bound = √3·0.5/√C (qkv_init_mul 1), not
/// zero; the MLP's c_proj stays zero.
#[test]
fn attention_output_starts_uniform() {
    let r = common::record_with(63, "uniform_attn_out = true\nqkv_init_mul = 1.0", Scale::Lab);
    let (_, params, _vs) = common::build(&r);
    let c = r.n_embd as i64;
    let bound = 3f64.sqrt() * 0.5 / (c as f64).sqrt();
    for p in params.iter().filter(|p| p.name.ends_with("qkvo_w")) {
        let w = p.tensor.view([4 * c, c]);
        for (k, rows) in w.split(c, 0).iter().enumerate() {
            let max = rows.abs().max().double_value(&[]);
            assert!(max <= bound && max > 0.9 * bound, "{} block {k}: max {max}", p.name);
        }
    }
    let zero = |n: &str| {
        params
            .iter()
            .filter(|p| p.name.ends_with(n))
            .all(|p| p.tensor.abs().max().double_value(&[]) == 0.0)
    };
    assert!(zero("c_proj"));
}

