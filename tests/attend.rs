//! The attention API's CPU path (SDPA with an explicit mask) against a float64 reference written
//! out query by query: causal, windows, document boundaries across rows, causality, gradients.
use tch::{Device, Kind, Tensor};
use trainer::model::attend::{attend, attend_with, Docs, Kernel, Pattern};

const F64: (Kind, Device) = (Kind::Double, Device::Cpu);

/// What the reference masks: `bounds` are document offsets over the flattened B*T tokens.
struct Spec<'a> {
    causal: bool,
    window: Option<i64>,
    bounds: Option<&'a [i64]>,
    scale: Option<f64>,
}

impl Spec<'_> {
    fn pattern(&self) -> Pattern {
        Pattern {
            causal: self.causal,
            window: self.window,
            docs: self.bounds.map(|b| {
                let lengths: Vec<i64> = b.windows(2).map(|w| w[1] - w[0]).collect();
                Docs::from_lengths(&lengths, Device::Cpu).unwrap()
            }),
            scale: self.scale,
        }
    }

    /// Whether flattened token `n` may see token `m` (rows of `t` tokens are the documents when
    /// no bounds are given).
    fn allowed(&self, n: i64, m: i64, t: i64) -> bool {
        let doc = |x: i64| match self.bounds {
            Some(b) => b.iter().filter(|&&e| e <= x).count(),
            None => (x / t) as usize,
        };
        doc(n) == doc(m) && (!self.causal || m <= n) && self.window.is_none_or(|w| n - m <= w)
    }
}

/// Float64 attention, one query at a time: scores of the allowed keys, softmax written out,
/// weighted sum of their values. Differentiable, so its autograd is the gradient reference.
fn reference(q: &Tensor, k: &Tensor, v: &Tensor, spec: &Spec) -> Tensor {
    let (b, h, t, d) = q.size4().unwrap();
    let scale = spec.scale.unwrap_or(1.0 / (d as f64).sqrt());
    let flat = |x: &Tensor, head: i64| x.select(1, head).reshape([b * t, d]).to_kind(Kind::Double);
    let heads: Vec<Tensor> = (0..h)
        .map(|head| {
            let (qh, kh, vh) = (flat(q, head), flat(k, head), flat(v, head));
            let rows: Vec<Tensor> = (0..b * t)
                .map(|n| {
                    let keys: Vec<i64> = (0..b * t).filter(|&m| spec.allowed(n, m, t)).collect();
                    let idx = Tensor::from_slice(&keys);
                    let scores = kh.index_select(0, &idx).mv(&qh.get(n)) * scale;
                    let e = (&scores - scores.max().detach()).exp();
                    let p = &e / e.sum(Kind::Double);
                    p.unsqueeze(0).mm(&vh.index_select(0, &idx)).squeeze_dim(0)
                })
                .collect();
            Tensor::stack(&rows, 0).reshape([b, t, d])
        })
        .collect();
    Tensor::stack(&heads, 1)
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
    (a.to_kind(Kind::Double) - b.to_kind(Kind::Double)).abs().max().double_value(&[])
}

fn qkv(shape: [i64; 4], seed: i64) -> (Tensor, Tensor, Tensor) {
    tch::manual_seed(seed);
    (Tensor::randn(shape, F64), Tensor::randn(shape, F64), Tensor::randn(shape, F64))
}

/// `attend` in float64 and float32 against the reference, within `tol32` for float32.
fn check(shape: [i64; 4], spec: &Spec, what: &str) {
    let (q, k, v) = qkv(shape, 11);
    let want = reference(&q, &k, &v, spec);
    let pattern = spec.pattern();
    let got64 = attend(&q, &k, &v, &pattern).unwrap();
    assert_eq!(got64.size(), shape.to_vec(), "{what}: shape");
    let d64 = max_abs_diff(&got64, &want);
    assert!(d64 < 1e-12, "{what}: float64 differs by {d64}");
    let f32 = |x: &Tensor| x.to_kind(Kind::Float);
    let got32 = attend(&f32(&q), &f32(&k), &f32(&v), &pattern).unwrap();
    assert_eq!(got32.kind(), Kind::Float);
    let d32 = max_abs_diff(&got32, &want);
    assert!(d32 < 2e-6, "{what}: float32 differs by {d32}");
}

#[test]
fn dense_causal_and_full_attention_match_the_reference() {
    let causal = Spec { causal: true, window: None, bounds: None, scale: None };
    check([2, 3, 9, 4], &causal, "causal");
    let full = Spec { causal: false, ..causal };
    check([2, 3, 9, 4], &full, "non-causal");
    let scaled = Spec { scale: Some(0.3), ..causal };
    check([1, 2, 7, 8], &scaled, "causal, scale 0.3");
}

#[test]
fn the_default_pattern_is_record_one_sdpa_call_bit_for_bit() {
    tch::manual_seed(5);
    let x = || Tensor::randn([2, 4, 16, 8], (Kind::Float, Device::Cpu));
    let (q, k, v) = (x(), x(), x());
    let ours = attend(&q, &k, &v, &Pattern::default()).unwrap();
    let sdpa =
        Tensor::scaled_dot_product_attention(&q, &k, &v, None::<Tensor>, 0.0, true, None, false);
    assert!(ours.equal(&sdpa));
}

#[test]
fn windows_match_the_reference() {
    // T = 9: window 0 is the token itself, 8 reaches the whole row, 20 is past it.
    for window in [0, 1, 3, 8, 20] {
        let spec = Spec { causal: true, window: Some(window), bounds: None, scale: None };
        check([2, 2, 9, 4], &spec, &format!("causal window {window}"));
    }
    let two_sided = Spec { causal: false, window: Some(2), bounds: None, scale: None };
    check([2, 2, 9, 4], &two_sided, "non-causal window 2");
}

#[test]
fn a_window_changes_the_result_and_a_long_one_does_not() {
    let (q, k, v) = qkv([1, 2, 12, 4], 3);
    let causal = attend(&q, &k, &v, &Pattern::default()).unwrap();
    let with = |w| {
        let p = Pattern { window: Some(w), ..Pattern::default() };
        attend(&q, &k, &v, &p).unwrap()
    };
    assert!(max_abs_diff(&with(1), &causal) > 1e-2);
    assert!(max_abs_diff(&with(11), &causal) < 1e-12);
    assert!(max_abs_diff(&with(100), &causal) < 1e-12);
}

#[test]
fn documents_across_rows_match_the_reference() {
    // B = 3 rows of T = 8 flatten to 24 tokens. [0,5) [5,6) [6,13) [13,16) [16,24): a document of
    // one token, and one that runs from row 0 into row 1.
    let bounds = [0, 5, 6, 13, 16, 24];
    for (causal, window) in [(true, None), (true, Some(2)), (false, None), (true, Some(0))] {
        let spec = Spec { causal, window, bounds: Some(&bounds), scale: None };
        check([3, 2, 8, 4], &spec, &format!("docs {bounds:?}, causal {causal}, window {window:?}"));
    }
    // Two long documents that each cross a row boundary.
    let crossing = [0, 1, 11, 24];
    let spec = Spec { causal: true, window: None, bounds: Some(&crossing), scale: None };
    check([3, 2, 8, 4], &spec, "docs [0, 1, 11, 24]");
}

#[test]
fn documents_are_not_rows() {
    // One document over two rows: the second row's queries see the first row's keys.
    let (q, k, v) = qkv([2, 1, 4, 4], 9);
    let per_row = attend(&q, &k, &v, &Pattern::default()).unwrap();
    let joined = Pattern {
        docs: Some(Docs::from_lengths(&[8], Device::Cpu).unwrap()),
        ..Pattern::default()
    };
    let joined = attend(&q, &k, &v, &joined).unwrap();
    assert!(max_abs_diff(&per_row.get(0), &joined.get(0)) < 1e-12);
    assert!(max_abs_diff(&per_row.get(1), &joined.get(1)) > 1e-2);
    // Boundaries at the rows give back per-row attention.
    let rows = Pattern {
        docs: Some(Docs::from_lengths(&[4, 4], Device::Cpu).unwrap()),
        ..Pattern::default()
    };
    assert!(max_abs_diff(&attend(&q, &k, &v, &rows).unwrap(), &per_row) < 1e-12);
}

/// Outputs at flattened positions `keep` are unchanged, and some of `moved` change, when token
/// `bump` of q, k and v is changed.
fn assert_isolated(pattern: &Pattern, shape: [i64; 4], bump: i64, keep: &[i64], moved: &[i64]) {
    let (q, k, v) = qkv(shape, 21);
    let (b, h, t, d) = (shape[0], shape[1], shape[2], shape[3]);
    let flat = |y: Tensor| y.transpose(1, 2).reshape([b * t, h * d]);
    let before = flat(attend(&q, &k, &v, pattern).unwrap());
    let poke = |x: &Tensor| {
        let x = x.copy();
        let _ = x.select(0, bump / t).select(1, bump % t).g_add_scalar_(5.0);
        x
    };
    let after = flat(attend(&poke(&q), &poke(&k), &poke(&v), pattern).unwrap());
    for &n in keep {
        let d = max_abs_diff(&before.get(n), &after.get(n));
        assert_eq!(d, 0.0, "output {n} changed by {d} when token {bump} changed");
    }
    let changed =
        moved.iter().map(|&n| max_abs_diff(&before.get(n), &after.get(n))).fold(0.0, f64::max);
    assert!(changed > 1e-3, "changing token {bump} moved nothing");
}

#[test]
fn future_tokens_do_not_reach_earlier_outputs() {
    let keep: Vec<i64> = (0..6).collect();
    let moved: Vec<i64> = (6..10).collect();
    assert_isolated(&Pattern::default(), [1, 2, 10, 4], 6, &keep, &moved);
    let windowed = Pattern { window: Some(2), ..Pattern::default() };
    // Window 2: token 3 reaches outputs 3, 4, 5 only.
    let keep: Vec<i64> = (0..3).chain(6..10).collect();
    assert_isolated(&windowed, [1, 2, 10, 4], 3, &keep, &[3, 4, 5]);
}

#[test]
fn other_documents_do_not_see_a_changed_token() {
    // Docs [0,5) [5,6) [6,13) [13,16) over 2 rows of 8; token 7 is in the third document.
    let lengths = [5, 1, 7, 3];
    let in_doc: Vec<i64> = (6..13).collect();
    let outside: Vec<i64> = (0..6).chain(13..16).collect();
    for causal in [true, false] {
        let pattern = Pattern {
            causal,
            docs: Some(Docs::from_lengths(&lengths, Device::Cpu).unwrap()),
            ..Pattern::default()
        };
        let keep: Vec<i64> =
            if causal { outside.iter().copied().chain([6]).collect() } else { outside.clone() };
        assert_isolated(&pattern, [2, 2, 8, 4], 7, &keep, &in_doc);
    }
}

/// Gradients of q, k, v through `attend` (float64 and float32) against the reference's autograd.
fn check_gradients(shape: [i64; 4], spec: &Spec, what: &str) {
    let (q0, k0, v0) = qkv(shape, 31);
    let weights = Tensor::randn(shape, F64);
    let grads = |kind: Kind, run: &dyn Fn(&Tensor, &Tensor, &Tensor) -> Tensor| {
        let leaf = |x: &Tensor| x.to_kind(kind).detach().set_requires_grad(true);
        let (q, k, v) = (leaf(&q0), leaf(&k0), leaf(&v0));
        (run(&q, &k, &v).to_kind(Kind::Double) * &weights).sum(Kind::Double).backward();
        [q.grad(), k.grad(), v.grad()]
    };
    let pattern = spec.pattern();
    let want = grads(Kind::Double, &|q, k, v| reference(q, k, v, spec));
    let ours64 = grads(Kind::Double, &|q, k, v| attend(q, k, v, &pattern).unwrap());
    let ours32 = grads(Kind::Float, &|q, k, v| attend(q, k, v, &pattern).unwrap());
    for (i, name) in ["dq", "dk", "dv"].iter().enumerate() {
        assert!(want[i].abs().max().double_value(&[]) > 1e-2, "{what}: {name} is ~0");
        let d64 = max_abs_diff(&ours64[i], &want[i]);
        let d32 = max_abs_diff(&ours32[i], &want[i]);
        assert!(d64 < 1e-11, "{what}: float64 {name} differs by {d64}");
        assert!(d32 < 1e-5, "{what}: float32 {name} differs by {d32}");
    }
}

#[test]
fn gradients_match_the_reference_autograd() {
    let bounds = [0, 5, 6, 13, 16];
    let specs = [
        (true, None, None, "causal"),
        (true, Some(2), None, "causal window 2"),
        (true, None, Some(&bounds[..]), "docs"),
        (false, Some(1), Some(&bounds[..]), "non-causal docs, window 1"),
    ];
    for (causal, window, bounds, what) in specs {
        let spec = Spec { causal, window, bounds, scale: None };
        check_gradients([2, 2, 8, 4], &spec, what);
    }
}

#[test]
fn bad_inputs_are_clear_errors() {
    let (q, k, v) = qkv([2, 2, 8, 4], 1);
    let err = |p: &Pattern| attend(&q, &k, &v, p).unwrap_err().to_string();
    let wrong_total = Pattern {
        docs: Some(Docs::from_lengths(&[5, 6], Device::Cpu).unwrap()),
        ..Pattern::default()
    };
    assert!(err(&wrong_total).contains("cover 11 tokens but the batch has B*T = 16"));
    let negative = Pattern { window: Some(-1), ..Pattern::default() };
    assert!(err(&negative).contains("window must be >= 0"));
    let e = attend(&q, &k.narrow(2, 0, 4), &v, &Pattern::default()).unwrap_err();
    assert!(e.to_string().contains("must all be [B, H, T, D]"), "{e}");
    let e = attend_with(&q, &k, &v, &Pattern::default(), Kernel::Flash).unwrap_err();
    assert!(e.to_string().contains("CUDA only"), "{e:#}");

    let docs_err = |t: Tensor| Docs::new(&t).unwrap_err().to_string();
    assert!(docs_err(Tensor::from_slice(&[0i64, 4])).contains("int32"));
    assert!(docs_err(Tensor::from_slice(&[0i32])).contains("n_docs + 1"));
    assert!(docs_err(Tensor::from_slice(&[1i32, 4])).contains("start at 0"));
    assert!(docs_err(Tensor::from_slice(&[0i32, 5, 3])).contains("3 after 5"));
    let docs = Docs::from_lengths(&[3, 1, 12], Device::Cpu).unwrap();
    assert_eq!((docs.total(), docs.max_len()), (16, 12));
}

/// The CPU path attends in blocks of 256 queries: documents and windows that straddle the
/// blocks, and the zero-length documents that pad upstream's cu_seqlens, match the reference.
#[test]
fn packed_sequences_longer_than_a_query_block_match_the_reference() {
    let bounds = [0, 100, 300, 301, 520, 700, 700, 700];
    for (causal, window) in [(true, Some(40)), (true, None), (false, Some(300)), (true, Some(0))] {
        let spec = Spec { causal, window, bounds: Some(&bounds), scale: Some(0.12) };
        check([1, 2, 700, 4], &spec, &format!("packed, causal {causal}, window {window:?}"));
    }
}
