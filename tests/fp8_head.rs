//! The FP8 lm_head on the CPU (quantize, dequantize, fp32 matmul; `_scaled_mm` on CUDA):
//! agreement with a hand-written float64 quantize-dequantize reference, closeness to the fp32
//! matmul and its gradients, the e5m2 rounding of the incoming gradient, and what the casts do
//! out of range.
use tch::{Device, Kind, Tensor};
use trainer::model::fp8_head::{fp8_linear, Fp8Scales};

const CPU32: (Kind, Device) = (Kind::Float, Device::Cpu);

/// Power-of-two scales: dividing by them is exact, so rounding is the only error.
const POW2: Fp8Scales = Fp8Scales { x: 0.125, w: 1.0 / 512.0, grad: 1.0 / 256.0 };

fn values(t: &Tensor) -> Vec<f64> {
    Vec::<f64>::try_from(&t.to_kind(Kind::Double).flatten(0, -1)).unwrap()
}

/// Round-to-nearest-even onto a float grid with `mant` mantissa bits and smallest normal
/// exponent `min_exp` (subnormals below it): e4m3fn is (3, -6), e5m2 is (2, -14). In range only.
fn round_fp8(v: f64, mant: i32, min_exp: i32) -> f64 {
    if v == 0.0 {
        return 0.0;
    }
    let ulp = 2f64.powi((v.abs().log2().floor() as i32).max(min_exp) - mant);
    (v / ulp).round_ties_even() * ulp
}

/// [r, c] = Σ_k a[r, k]·b[c, k] in float64 (row-major slices).
fn matmul_nt(a: &[f64], b: &[f64], rows: usize, cols: usize, k: usize) -> Vec<f64> {
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            out[r * cols + c] = (0..k).map(|i| a[r * k + i] * b[c * k + i]).sum();
        }
    }
    out
}

fn transpose(a: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    (0..cols * rows).map(|i| a[(i % rows) * cols + i / rows]).collect()
}

/// Integer multiples of 1/4 in [-lim, lim] times `scale`, fp32 (exact).
fn quarters(shape: &[i64], lim: i64, scale: f64) -> Tensor {
    Tensor::randint_low(-4 * lim, 4 * lim + 1, shape, CPU32) / 4.0 * scale
}

/// fp8_linear on leaf copies of x and w, backward of Σ out·g: (out, grad_x, grad_w).
fn run(x: &Tensor, w: &Tensor, s: &Fp8Scales, g: &Tensor) -> (Tensor, Tensor, Tensor) {
    let x = x.detach().copy().set_requires_grad(true);
    let w = w.detach().copy().set_requires_grad(true);
    let out = fp8_linear(&x, &w, s).unwrap();
    (out.to_kind(Kind::Float) * g).sum(Kind::Float).backward();
    (out.detach(), x.grad(), w.grad())
}

/// (cosine similarity, ‖a − b‖ / ‖b‖) in float64.
fn compare(a: &Tensor, b: &Tensor) -> (f64, f64) {
    let (a, b) = (a.to_kind(Kind::Double), b.to_kind(Kind::Double));
    let cos = (&a * &b).sum(Kind::Double).double_value(&[])
        / (a.norm().double_value(&[]) * b.norm().double_value(&[]));
    (cos, (&a - &b).norm().double_value(&[]) / b.norm().double_value(&[]))
}

#[test]
fn scaled_mm_has_a_per_tensor_fp8_kernel_on_the_cpu() {
    // The op the CUDA path calls, on the CPU as a reference: mixed e5m2·e4m3, dims not
    // multiples of 16.
    tch::manual_seed(1);
    let a = (Tensor::randn([3, 5], CPU32) * 8.0).to_kind(Kind::Float8e5m2);
    let b = (Tensor::randn([4, 5], CPU32) * 8.0).to_kind(Kind::Float8e4m3fn);
    let (sa, sb) = (Tensor::scalar_tensor(0.75, CPU32), Tensor::scalar_tensor(0.0625, CPU32));
    let out = a
        .f_internal_scaled_mm(&b.tr(), &sa, &sb, None::<Tensor>, None, Kind::Float, false)
        .unwrap();
    let want: Vec<f64> =
        matmul_nt(&values(&a), &values(&b), 3, 4, 5).iter().map(|v| v * 0.75 * 0.0625).collect();
    for (o, w) in values(&out).iter().zip(&want) {
        assert!((o - w).abs() <= 1e-5 * w.abs().max(1.0), "{o} vs {w}");
    }
    let fast = a
        .f_internal_scaled_mm(&b.tr(), &sa, &sb, None::<Tensor>, None, Kind::BFloat16, true)
        .unwrap();
    assert_eq!(fast.kind(), Kind::BFloat16);
    assert_eq!(values(&fast), values(&out.to_kind(Kind::BFloat16)));
}

#[test]
fn scales_for_width_768_are_record_29s() {
    let s = Fp8Scales::for_width(768, 2f64.powi(-9), 1.0 / 448.0);
    assert!((s.x - 0.06185895741317419).abs() < 1e-16, "{}", s.x);
    assert_eq!((s.w, s.grad), (0.001953125, 0.002232142857142857));
}

#[test]
fn forward_and_backward_equal_a_float64_quantize_dequantize_reference() {
    tch::manual_seed(2);
    let (n, c, v) = (5usize, 8usize, 6usize);
    // Multiples of 1/4 up to 12 before scaling: many are off the fp8 grids (e4m3: 8.25 -> 8,
    // 9.5 -> 10 by ties-to-even; e5m2: 4.5 -> 4, 11 -> 12), and the sums of the rounded products
    // (lowest bit 2^-10, below 2^11) are exact in fp32, so equality is the right check.
    let x = quarters(&[n as i64, c as i64], 12, POW2.x);
    let w = quarters(&[v as i64, c as i64], 12, POW2.w);
    let g = quarters(&[n as i64, v as i64], 12, POW2.grad);
    let (out, grad_x, grad_w) = run(&x, &w, &POW2, &g);

    let q = |t: &Tensor, s: f64, mant, min_exp| -> Vec<f64> {
        values(t).iter().map(|a| round_fp8(a / s, mant, min_exp)).collect()
    };
    let (xq, wq, gq) = (q(&x, POW2.x, 3, -6), q(&w, POW2.w, 3, -6), q(&g, POW2.grad, 2, -14));
    assert_ne!(xq, values(&(&x / POW2.x)), "no x value was off the e4m3 grid");
    assert_ne!(gq, values(&(&g / POW2.grad)), "no g value was off the e5m2 grid");
    let scaled = |m: Vec<f64>, k: f64| -> Vec<f64> { m.iter().map(|a| a * k).collect() };

    let want_out = scaled(matmul_nt(&xq, &wq, n, v, c), POW2.x * POW2.w);
    let want_gx = scaled(matmul_nt(&gq, &transpose(&wq, v, c), n, c, v), POW2.grad * POW2.w);
    let want_gw = scaled(
        matmul_nt(&transpose(&gq, n, v), &transpose(&xq, n, c), v, c, n),
        POW2.x * POW2.grad,
    );
    assert_eq!(values(&out), want_out, "forward");
    assert_eq!(values(&grad_x), want_gx, "grad x");
    assert_eq!(values(&grad_w), want_gw, "grad w");
}

#[test]
fn with_record_29s_scales_the_cpu_path_is_the_dequantized_product_in_float64() {
    // Non-power-of-two scales (x: 16/448, grad: 1/448), as the lab runs: the quantized values
    // times their scale rounded to fp32 (what the CPU path multiplies by), multiplied in
    // float64, must match the fp32 result to fp32 accumulation error.
    tch::manual_seed(6);
    let (n, c, v) = (24usize, 256usize, 40usize);
    let (x, w, s) = head_data(n as i64, c as i64, v as i64);
    let g = Tensor::randn([n as i64, v as i64], CPU32) * 0.02;
    let (out, grad_x, grad_w) = run(&x, &w, &s, &g);
    let f32s = |k: f64| f64::from(k as f32);
    // Dequantized operands: libtorch's own casts (checked against round_fp8 above), exact.
    let dq = |t: &Tensor, k: f64, kind: Kind| -> Vec<f64> {
        values(&(t / k).to_kind(kind)).iter().map(|a| a * f32s(k)).collect()
    };
    let xq = dq(&x, s.x, Kind::Float8e4m3fn);
    let wq = dq(&w, s.w, Kind::Float8e4m3fn);
    let gq = dq(&g, s.grad, Kind::Float8e5m2);
    let check = |name: &str, got: &Tensor, want: Vec<f64>| {
        let got = values(got);
        let scale = want.iter().fold(0f64, |m, a| m.max(a.abs()));
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-6 * scale, "{name}: {a} vs {b} (max |value| {scale})");
        }
    };
    check("forward", &out, matmul_nt(&xq, &wq, n, v, c));
    check("grad x", &grad_x, matmul_nt(&gq, &transpose(&wq, v, c), n, c, v));
    check("grad w", &grad_w, matmul_nt(&transpose(&gq, n, v), &transpose(&xq, n, c), v, c, n));
}

/// RMS-normed rows [n, c] (as the head sees them), weights [v, c] of std 0.05, upstream scales.
fn head_data(n: i64, c: i64, v: i64) -> (Tensor, Tensor, Fp8Scales) {
    let x = Tensor::randn([n, c], CPU32);
    let x = &x / x.square().mean_dim(-1, true, Kind::Float).sqrt();
    (
        x,
        Tensor::randn([v, c], CPU32) * 0.05,
        Fp8Scales::for_width(c as usize, 2f64.powi(-9), 1.0 / 448.0),
    )
}

#[test]
fn forward_is_within_fp8_error_of_the_fp32_matmul() {
    tch::manual_seed(3);
    let (x, w, s) = head_data(32, 128, 48);
    let out = fp8_linear(&x, &w, &s).unwrap();
    assert_eq!((out.size(), out.kind()), (vec![32, 48], Kind::Float));
    let (cos, rel) = compare(&out, &x.matmul(&w.tr()));
    assert!(cos > 0.998 && rel < 0.06, "cos {cos}, relative error {rel}");
    assert!(rel > 1e-3, "relative error {rel}: the inputs were not quantized");
}

#[test]
fn gradients_are_close_to_those_of_the_fp32_matmul() {
    tch::manual_seed(4);
    let (x, w, s) = head_data(32, 128, 48);
    let g = Tensor::randn([32, 48], CPU32) * 0.01;
    let (_, grad_x, grad_w) = run(&x, &w, &s, &g);

    let (xr, wr) = (x.copy().set_requires_grad(true), w.copy().set_requires_grad(true));
    (xr.matmul(&wr.tr()) * &g).sum(Kind::Float).backward();
    for (name, ours, want) in [("grad x", &grad_x, xr.grad()), ("grad w", &grad_w, wr.grad())] {
        assert_eq!(ours.size(), want.size(), "{name}");
        let (cos, rel) = compare(ours, &want);
        assert!(cos > 0.99 && rel < 0.1, "{name}: cos {cos}, relative error {rel}");
    }
}

#[test]
fn bf16_input_gives_bf16_output_and_grad_x_but_an_fp32_grad_w() {
    tch::manual_seed(5);
    let (x, w, s) = head_data(16, 64, 32);
    let g = Tensor::randn([16, 32], CPU32) * 0.01;
    let (out, grad_x, grad_w) = run(&x.to_kind(Kind::BFloat16), &w, &s, &g);
    assert_eq!(out.kind(), Kind::BFloat16);
    assert_eq!((grad_x.kind(), grad_x.size()), (Kind::BFloat16, vec![16, 64]));
    assert_eq!((grad_w.kind(), grad_w.size()), (Kind::Float, w.size()));
    let (cos, rel) = compare(&out, &x.matmul(&w.tr()));
    assert!(cos > 0.998 && rel < 0.06, "cos {cos}, relative error {rel}");
}

#[test]
fn the_incoming_gradient_is_rounded_to_e5m2() {
    // x_f8 = w_f8 = 1 everywhere. g/s.grad = 1.375 is exact in fp32 and e4m3 but is the tie
    // between e5m2's 1.25 and 1.5, so e5m2 (ties to even) makes it 1.5.
    let (n, c, v) = (2, 3, 4);
    let x = Tensor::full([n, c], POW2.x, CPU32);
    let w = Tensor::full([v, c], POW2.w, CPU32);
    let g = Tensor::full([n, v], 1.375 * POW2.grad, CPU32);
    let (_, grad_x, grad_w) = run(&x, &w, &POW2, &g);
    let gx = 1.5 * v as f64 * POW2.grad * POW2.w;
    let gw = 1.5 * n as f64 * POW2.grad * POW2.x;
    assert_eq!(values(&grad_x), vec![gx; (n * c) as usize]);
    assert_eq!(values(&grad_w), vec![gw; (v * c) as usize]);
}

#[test]
fn casts_round_into_range_but_do_not_saturate() {
    // e4m3fn: 464 is the tie between 448 and (absent) 480 and rounds to 448; beyond that NaN.
    let big = Tensor::from_slice(&[448.0f32, 464.0, 465.0, 480.0, 1e4, f32::INFINITY, -500.0]);
    let e4 = values(&big.to_kind(Kind::Float8e4m3fn));
    assert_eq!(e4[..2], [448.0, 448.0]);
    assert!(e4[2..].iter().all(|v| v.is_nan()), "{e4:?}");
    // e5m2 keeps infinity: past 57,344 (+ half an ulp) it overflows to ±inf.
    let e5 = values(&Tensor::from_slice(&[57344.0f32, 61440.0, -1e5]).to_kind(Kind::Float8e5m2));
    assert_eq!(e5, [57344.0, f64::INFINITY, f64::NEG_INFINITY]);

    // So one input entry past the scale's range poisons its row of logits, and only that row.
    let x = Tensor::full([2, 4], POW2.x, CPU32);
    let _ = x.get(1).get(2).fill_(500.0 * POW2.x);
    let out = fp8_linear(&x, &Tensor::full([3, 4], POW2.w, CPU32), &POW2).unwrap();
    assert!(values(&out.get(1)).iter().all(|v| v.is_nan()));
    assert_eq!(values(&out.get(0)), vec![4.0 * POW2.x * POW2.w; 3]);
}

#[test]
fn bad_shapes_and_weight_kinds_are_clear_errors() {
    let x = Tensor::zeros([4, 8], CPU32);
    let err = fp8_linear(&x, &Tensor::zeros([3, 6], CPU32), &POW2).unwrap_err();
    assert!(err.to_string().contains("x [4, 8] and w [3, 6]"), "{err:#}");
    let err = fp8_linear(&x, &Tensor::zeros([3, 8], (Kind::Half, Device::Cpu)), &POW2).unwrap_err();
    assert!(err.to_string().contains("fp32 or bf16 parameter"), "{err:#}");
}

/// Upstream #32 stores the head in bf16: the forward quantises from bf16, and the weight's
/// gradient comes back in bf16 (the fp32 product rounded once).
#[test]
fn a_bf16_weight_gets_a_bf16_gradient() {
    let x = Tensor::randn([4, 16], CPU32) * 0.5;
    let w32 = (Tensor::randn([8, 16], CPU32) * 0.01).to_kind(Kind::BFloat16).to_kind(Kind::Float);
    let wb = w32.to_kind(Kind::BFloat16).set_requires_grad(true);
    let w32 = w32.set_requires_grad(true);
    let (o32, ob) = (fp8_linear(&x, &w32, &POW2).unwrap(), fp8_linear(&x, &wb, &POW2).unwrap());
    assert!(o32.equal(&ob), "the same quantised forward");
    o32.sum(Kind::Float).backward();
    ob.sum(Kind::Float).backward();
    assert_eq!(wb.grad().kind(), Kind::BFloat16);
    assert!(wb.grad().equal(&w32.grad().to_kind(Kind::BFloat16)));
}
