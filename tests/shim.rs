//! The libtorch shim on the CPU: fused AdamW against a float64 reference, custom autograd
//! Functions against autograd and finite differences, Kineto traces, c10d TCPStore rendezvous
//! over loopback, and the clear errors of the CUDA-only parts.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tch::{Device, Kind, Tensor};
use trainer::shim::{self, AdamWConfig, FlashOptions, TcpStore};

const CPU64: (Kind, Device) = (Kind::Double, Device::Cpu);
const CPU32: (Kind, Device) = (Kind::Float, Device::Cpu);
const TIMEOUT: Duration = Duration::from_secs(20);

/// Max |a - b|, compared on the CPU in float64.
fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
    let f64_cpu = |t: &Tensor| t.to(Device::Cpu).to_kind(Kind::Double);
    (f64_cpu(a) - f64_cpu(b)).abs().max().double_value(&[])
}

// ---- fused AdamW --------------------------------------------------------------------------

/// torch's AdamW step in float64: decoupled decay, then bias-corrected Adam.
fn adamw_reference(
    p: &mut Tensor,
    m: &mut Tensor,
    v: &mut Tensor,
    g: &Tensor,
    t: i32,
    c: AdamWConfig,
) {
    *p = &*p * (1.0 - c.lr * c.weight_decay);
    *m = &*m * c.beta1 + g * (1.0 - c.beta1);
    *v = &*v * c.beta2 + g * g * (1.0 - c.beta2);
    let bc1 = 1.0 - c.beta1.powi(t);
    let bc2 = 1.0 - c.beta2.powi(t);
    let denom = v.sqrt() / bc2.sqrt() + c.eps;
    *p = &*p - &*m / denom * (c.lr / bc1);
}

#[test]
fn fused_adamw_on_cpu_matches_a_float64_reference() {
    check_fused_adamw(Device::Cpu, 2e-6);
}

/// Three fused steps on `device` against [`adamw_reference`] on the CPU, within `tol`.
fn check_fused_adamw(device: Device, tol: f64) {
    tch::manual_seed(7);
    let f32_on = (Kind::Float, device);
    let cfg = AdamWConfig { lr: 0.02, beta1: 0.9, beta2: 0.95, weight_decay: 0.1, eps: 1e-8 };
    let shapes: [&[i64]; 3] = [&[4, 5], &[7], &[2, 3, 3]];
    let params: Vec<Tensor> = shapes.iter().map(|s| Tensor::randn(*s, f32_on)).collect();
    let zeros = || -> Vec<Tensor> { params.iter().map(Tensor::zeros_like).collect() };
    let (exp_avgs, exp_avg_sqs) = (zeros(), zeros());
    let steps: Vec<Tensor> = params.iter().map(|_| Tensor::zeros([], f32_on)).collect();
    let initial: Vec<Tensor> = params.iter().map(Tensor::copy).collect();
    let mut p64: Vec<Tensor> =
        params.iter().map(|p| p.to(Device::Cpu).to_kind(Kind::Double)).collect();
    let mut m64: Vec<Tensor> = p64.iter().map(Tensor::zeros_like).collect();
    let mut v64: Vec<Tensor> = p64.iter().map(Tensor::zeros_like).collect();

    for t in 1..=3 {
        let grads: Vec<Tensor> = shapes.iter().map(|s| Tensor::randn(*s, f32_on)).collect();
        shim::fused_adamw_(&params, &grads, &exp_avgs, &exp_avg_sqs, &steps, cfg).unwrap();
        for i in 0..params.len() {
            let g64 = grads[i].to(Device::Cpu).to_kind(Kind::Double);
            adamw_reference(&mut p64[i], &mut m64[i], &mut v64[i], &g64, t, cfg);
        }
    }
    for i in 0..params.len() {
        assert_eq!(steps[i].double_value(&[]), 3.0, "step counter {i}");
        let d = max_abs_diff(&params[i], &p64[i]);
        assert!(d < tol, "param {i} differs from the float64 reference by {d}");
        let dm = max_abs_diff(&exp_avgs[i], &m64[i]);
        let dv = max_abs_diff(&exp_avg_sqs[i], &v64[i]);
        assert!(dm < tol && dv < tol, "moments {i}: {dm} {dv}");
        // The steps really moved the weights (about lr each), so the comparison is not vacuous.
        assert!(max_abs_diff(&params[i], &initial[i]) > 0.03, "param {i} barely moved");
    }
}

#[test]
fn fused_adamw_rejects_lists_of_different_lengths() {
    let p = vec![Tensor::zeros([3], CPU32)];
    let err = shim::fused_adamw_(
        &p,
        &[],
        &[],
        &[],
        &[],
        AdamWConfig { lr: 1e-3, beta1: 0.9, beta2: 0.95, weight_decay: 0.0, eps: 1e-8 },
    )
    .unwrap_err();
    assert!(err.to_string().contains("1 params"), "{err:#}");
}

#[test]
fn fused_adamw_reports_libtorch_errors_instead_of_aborting() {
    let p = vec![Tensor::zeros([3], CPU32)];
    let g = vec![Tensor::zeros([4], CPU32)]; // wrong shape: libtorch throws
    let m = vec![Tensor::zeros([3], CPU32)];
    let v = vec![Tensor::zeros([3], CPU32)];
    let s = vec![Tensor::zeros([], CPU32)];
    let cfg = AdamWConfig { lr: 1e-3, beta1: 0.9, beta2: 0.95, weight_decay: 0.0, eps: 1e-8 };
    let err = shim::fused_adamw_(&p, &g, &m, &v, &s, cfg).unwrap_err();
    assert!(err.to_string().starts_with("fused_adamw_: tensor 0: param [3], grad [4]"), "{err:#}");
    let g = vec![Tensor::zeros([3], CPU64)]; // a dtype the kernel rejects itself
    let err = shim::fused_adamw_(&p, &g, &m, &v, &s, cfg).unwrap_err();
    assert!(err.to_string().starts_with("fused_adamw_: "), "{err:#}");
}

// ---- CUDA-only parts on the CPU -------------------------------------------------------------

#[test]
fn flash_attention_on_the_cpu_is_a_clear_error() {
    let q = Tensor::randn([1, 8, 2, 16], CPU32);
    let opts = FlashOptions { causal: true, ..Default::default() };
    let err = shim::flash_attention(&q, &q, &q, &opts).unwrap_err();
    assert!(err.to_string().contains("CUDA only"), "{err:#}");
    let bad = Tensor::randn([8, 16], CPU32);
    let err = shim::flash_attention(&bad, &bad, &bad, &opts).unwrap_err();
    assert!(err.to_string().contains("(B, T, H, D)"), "{err:#}");
}

#[test]
fn memory_stats_need_a_cuda_device() {
    let err = shim::memory_stats(Device::Cpu).unwrap_err();
    assert!(err.to_string().contains("only for CUDA"), "{err:#}");
    assert!(shim::reset_peak(Device::Cpu).is_err());
}

#[cfg(target_arch = "x86_64")]
#[test]
fn flush_denormal_zeroes_denormals_on_this_thread() {
    // A thread of its own: the setting is per thread (MXCSR) and must not leak into other tests.
    std::thread::spawn(|| {
        let tiny = Tensor::from_slice(&[1e-40f32]);
        assert!(shim::set_flush_denormal(true));
        assert_eq!((&tiny * 1.0f64).double_value(&[0]), 0.0);
        assert!(shim::set_flush_denormal(false));
        assert!((&tiny * 1.0f64).double_value(&[0]) > 0.0);
    })
    .join()
    .unwrap();
}

// ---- custom autograd Functions ---------------------------------------------------------------

/// y = 3x² through Rust callbacks, saving x; dy/dx = 6x.
fn three_x_squared(x: &Tensor) -> Tensor {
    shim::custom_function(
        std::slice::from_ref(x),
        |inputs| Ok((&inputs[0] * &inputs[0] * 3.0, vec![inputs[0].shallow_clone()])),
        |grads, saved| Ok(vec![&grads[0] * &saved[0] * 6.0]),
    )
    .unwrap()
}

#[test]
fn custom_function_matches_autograd_of_the_plain_expression() {
    tch::manual_seed(3);
    let x = Tensor::randn([5, 3], CPU64).set_requires_grad(true);
    let w = Tensor::randn([5, 3], CPU64);
    let y = three_x_squared(&x);
    assert!(y.requires_grad());
    (&y * &w).sum(Kind::Double).backward();
    let ours = x.grad().copy();

    let x2 = x.detach().copy().set_requires_grad(true);
    let y2 = &x2 * &x2 * 3.0;
    (&y2 * &w).sum(Kind::Double).backward();
    assert!(max_abs_diff(&y, &y2) < 1e-12);
    assert!(max_abs_diff(&ours, &x2.grad()) < 1e-12, "{ours} vs {}", x2.grad());
}

#[test]
fn custom_function_gradient_matches_finite_differences() {
    tch::manual_seed(4);
    let x0 = Tensor::randn([6], CPU64);
    let w = Tensor::randn([6], CPU64);
    let loss = |x: &Tensor| (three_x_squared(x) * &w).sum(Kind::Double);
    let x = x0.copy().set_requires_grad(true);
    loss(&x).backward();
    let grad = x.grad();
    let h = 1e-6;
    for i in 0..6 {
        let bump = Tensor::zeros([6], CPU64).index_fill(0, &Tensor::from_slice(&[i]), h);
        let up = tch::no_grad(|| loss(&(&x0 + &bump)).double_value(&[]));
        let down = tch::no_grad(|| loss(&(&x0 - &bump)).double_value(&[]));
        let numeric = (up - down) / (2.0 * h);
        let analytic = grad.double_value(&[i]);
        assert!((numeric - analytic).abs() < 1e-6, "x[{i}]: {numeric} vs {analytic}");
    }
}

#[test]
fn custom_function_with_two_inputs_and_a_nondifferentiable_one() {
    let a = Tensor::from_slice(&[1.0f64, 2.0, 3.0]).set_requires_grad(true);
    let b = Tensor::from_slice(&[4.0f64, 5.0, 6.0]);
    let y = shim::custom_function(
        &[a.shallow_clone(), b.shallow_clone()],
        |t| Ok((&t[0] * &t[1], vec![t[1].shallow_clone()])),
        |g, saved| Ok(vec![&g[0] * &saved[0], Tensor::new()]),
    )
    .unwrap();
    y.sum(Kind::Double).backward();
    assert_eq!(Vec::<f64>::try_from(&a.grad()).unwrap(), vec![4.0, 5.0, 6.0]);
    assert!(!b.grad().defined());
}

#[test]
fn custom_function_errors_and_panics_come_back_as_errors() {
    let x = Tensor::ones([2], CPU64).set_requires_grad(true);
    let err = shim::custom_function(
        std::slice::from_ref(&x),
        |_| anyhow::bail!("no fp8 on this device"),
        |_, _| Ok(vec![]),
    )
    .unwrap_err();
    assert!(err.to_string().contains("no fp8 on this device"), "{err:#}");

    let err =
        shim::custom_function(std::slice::from_ref(&x), |_| panic!("boom"), |_, _| Ok(vec![]))
            .unwrap_err();
    assert!(err.to_string().contains("panicked"), "{err:#}");

    let y = shim::custom_function(
        std::slice::from_ref(&x),
        |t| Ok((t[0].copy(), vec![])),
        |_, _| anyhow::bail!("backward not ready"),
    )
    .unwrap();
    let err = y.sum(Kind::Double).f_backward().unwrap_err();
    assert!(err.to_string().contains("backward not ready"), "{err}");

    let y = shim::custom_function(
        std::slice::from_ref(&x),
        |t| Ok((t[0].copy(), vec![])),
        |_, _| Ok(vec![]), // one gradient too few
    )
    .unwrap();
    let err = y.sum(Kind::Double).f_backward().unwrap_err();
    assert!(err.to_string().contains("returned 0 gradients for 1 inputs"), "{err}");
}

#[test]
fn custom_function_frees_its_closures_with_the_graph() {
    let alive = Arc::new(AtomicUsize::new(0));
    let token = Arc::clone(&alive);
    let x = Tensor::ones([3], CPU64).set_requires_grad(true);
    let y = shim::custom_function(
        std::slice::from_ref(&x),
        move |t| {
            token.fetch_add(1, Ordering::SeqCst);
            Ok((t[0].copy(), vec![]))
        },
        |g, _| Ok(vec![g[0].shallow_clone()]),
    )
    .unwrap();
    assert_eq!(alive.load(Ordering::SeqCst), 1, "forward ran once");
    assert_eq!(Arc::strong_count(&alive), 2, "the graph holds the closures");
    drop(y);
    assert_eq!(Arc::strong_count(&alive), 1, "dropping the graph freed them");
}

// ---- Kineto profiler -----------------------------------------------------------------------

#[test]
fn profiler_writes_a_chrome_trace_with_the_user_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.json");
    shim::profiler_start(false, true).unwrap();
    {
        let _outer = shim::Range::new("shim-test-outer");
        let a = Tensor::randn([64, 64], CPU32);
        let _inner = shim::Range::new("shim-test-inner");
        let _ = a.matmul(&a).sum(Kind::Float);
    }
    shim::profiler_stop(&path).unwrap();

    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().expect("traceEvents array");
    let names: Vec<&str> = events.iter().filter_map(|e| e["name"].as_str()).collect();
    for want in ["shim-test-outer", "shim-test-inner", "aten::matmul"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let outer = events.iter().find(|e| e["name"] == "shim-test-outer").unwrap();
    assert_eq!(outer["cat"], "user_annotation");

    let err = format!("{:#}", shim::profiler_stop(&path).unwrap_err());
    assert!(err.contains("profiler_stop: ") && err.contains("not running"), "{err}");
}

// ---- c10d TCPStore -------------------------------------------------------------------------

#[test]
fn tcp_store_two_clients_meet_through_one_server() {
    let server = TcpStore::new("127.0.0.1", 0, 3, true, TIMEOUT).unwrap();
    let port = server.port().unwrap();
    assert_ne!(port, 0);
    let ranks: Vec<_> = (0..2)
        .map(|rank| {
            std::thread::spawn(move || {
                let store = TcpStore::new("127.0.0.1", port, 3, false, TIMEOUT).unwrap();
                store.set(&format!("id/{rank}"), format!("rank{rank}").as_bytes()).unwrap();
                let n = store.add("arrived", 1).unwrap();
                store.wait(&["id/0", "id/1"], Some(TIMEOUT)).unwrap();
                let other = store.get(&format!("id/{}", 1 - rank)).unwrap();
                (n, String::from_utf8(other).unwrap())
            })
        })
        .collect();
    let mut arrivals = Vec::new();
    for (rank, handle) in ranks.into_iter().enumerate() {
        let (n, other) = handle.join().unwrap();
        assert_eq!(other, format!("rank{}", 1 - rank));
        arrivals.push(n);
    }
    arrivals.sort();
    assert_eq!(arrivals, vec![1, 2]);
    assert_eq!(server.add("arrived", 0).unwrap(), 2);
    assert!(server.check(&["id/0", "id/1"]).unwrap());
    assert!(!server.check(&["id/2"]).unwrap());
    let err = server.wait(&["id/2"], Some(Duration::from_millis(200))).unwrap_err();
    assert!(err.to_string().contains("store wait"), "{err:#}");
}

#[test]
fn rendezvous_without_agent_store_rank0_hosts() {
    let rank0 = TcpStore::rendezvous("127.0.0.1", 0, 0, 2, false, TIMEOUT).unwrap();
    let port = rank0.port().unwrap();
    let rank1 = std::thread::spawn(move || {
        let store = TcpStore::rendezvous("127.0.0.1", port, 1, 2, false, TIMEOUT).unwrap();
        store.barrier("start", 2).unwrap();
        store.get("uid").unwrap()
    });
    rank0.set("uid", &[7u8; 128]).unwrap();
    rank0.barrier("start", 2).unwrap();
    assert_eq!(rank1.join().unwrap(), vec![7u8; 128]);
    // Keys live under records/ in the shared store.
    let raw = TcpStore::new("127.0.0.1", port, 2, false, TIMEOUT).unwrap();
    assert!(raw.check(&["records/uid"]).unwrap());
    assert!(!raw.check(&["uid"]).unwrap());
}

#[test]
fn rendezvous_with_agent_store_every_rank_is_a_client() {
    // torchrun's agent hosts the store; both ranks connect to it.
    let agent = TcpStore::new("127.0.0.1", 0, 2, true, TIMEOUT).unwrap();
    let port = agent.port().unwrap();
    let ranks: Vec<_> = (0..2)
        .map(|rank| {
            std::thread::spawn(move || {
                let store =
                    TcpStore::rendezvous("127.0.0.1", port, rank, 2, true, TIMEOUT).unwrap();
                store.set(&format!("rank{rank}"), b"here").unwrap();
                store.barrier("start", 2).unwrap();
            })
        })
        .collect();
    for r in ranks {
        r.join().unwrap();
    }
    assert!(agent.check(&["records/rank0", "records/rank1"]).unwrap());
}

#[test]
fn rendezvous_with_agent_store_does_not_host_on_rank0() {
    // No agent listening: rank 0 must fail to connect rather than start a server itself.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let err = TcpStore::rendezvous("127.0.0.1", port, 0, 2, true, Duration::from_secs(2))
        .err()
        .expect("rank 0 must not host under the agent store");
    let msg = format!("{err:#}");
    assert!(msg.contains("rank 0 of 2: rendezvous"), "{msg}");
    assert!(msg.contains(&format!("connecting to 127.0.0.1:{port}")), "{msg}");
}

// ---- CUDA (`--features cuda`): the link on any machine, the rest on a GPU ---------------------

#[cfg(feature = "cuda")]
mod cuda {
    use super::*;
    use trainer::shim::{CudaGraph, CudaStream, ProcessGroupNccl, ReduceOp, Varlen};

    /// The tests below need a GPU; on a CPU machine each is reported as skipped.
    fn gpu() -> bool {
        let ok = tch::Cuda::is_available();
        if !ok {
            skip("no CUDA device");
        }
        ok
    }

    /// Marks the running test as skipped, saying why, on stderr and in the file
    /// `RECORDS_TEST_SKIPS` names: scripts/test counts it as skipped, never as passed.
    fn skip(why: &str) {
        let test = std::thread::current().name().unwrap_or("a test").to_string();
        let line = format!("shim::{test}: {why}\n");
        eprint!("SKIPPED: {line}");
        if let Some(file) = std::env::var_os("RECORDS_TEST_SKIPS") {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().create(true).append(true).open(file).unwrap();
            f.write_all(line.as_bytes()).unwrap();
        }
    }

    const GPU: Device = Device::Cuda(0);
    const BF16: (Kind, Device) = (Kind::BFloat16, GPU);

    #[test]
    fn the_cuda_feature_loads_libtorch_cuda() {
        assert!(tch::utils::has_cudart(), "libtorch_cuda.so was not linked");
    }

    #[test]
    fn cuda_calls_without_a_device_are_errors() {
        if tch::Cuda::is_available() {
            return skip("a CUDA device is present; this checks the errors without one");
        }
        assert!(CudaStream::from_pool(0, false).is_err());
        assert!(CudaGraph::new().is_err());
        assert!(shim::memory_stats(GPU).is_err());
    }

    /// SDPA over (B, T, H, D) inputs with an optional boolean "may attend" mask.
    fn sdpa(q: &Tensor, k: &Tensor, v: &Tensor, causal: bool, mask: Option<&Tensor>) -> Tensor {
        let t = |x: &Tensor| x.transpose(1, 2);
        Tensor::scaled_dot_product_attention(&t(q), &t(k), &t(v), mask, 0.0, causal, None, false)
            .transpose(1, 2)
    }

    fn rel_diff(a: &Tensor, b: &Tensor) -> f64 {
        max_abs_diff(a, b) / max_abs_diff(b, &Tensor::zeros_like(b)).max(1e-6)
    }

    #[test]
    fn flash_attention_matches_sdpa_dense_and_windowed_with_gradients() {
        if !gpu() {
            return;
        }
        tch::manual_seed(11);
        let (b, t, h, d) = (2, 128, 4, 64);
        let rand = || Tensor::randn([b, t, h, d], BF16);
        let (q, k, v) = (rand(), rand(), rand());
        let w = Tensor::randn([b, t, h, d], BF16);

        let dense = FlashOptions { causal: true, ..Default::default() };
        let ours = shim::flash_attention(&q, &k, &v, &dense).unwrap();
        assert_eq!(ours.size(), vec![b, t, h, d]);
        assert!(max_abs_diff(&ours, &sdpa(&q, &k, &v, true, None)) < 1e-2);

        // Window: key j is visible from query i when i - 16 <= j <= i.
        let i = Tensor::arange(t, (Kind::Int64, GPU)).unsqueeze(1);
        let j = Tensor::arange(t, (Kind::Int64, GPU)).unsqueeze(0);
        let mask = j.le_tensor(&i).logical_and(&(&i - &j).le(16));
        let windowed = FlashOptions { window_left: Some(16), window_right: Some(0), ..dense };
        let ours = shim::flash_attention(&q, &k, &v, &windowed).unwrap();
        let reference = sdpa(&q, &k, &v, false, Some(&mask));
        assert!(max_abs_diff(&ours, &reference) < 1e-2);

        // Gradients through FlashAttentionBackward0 against SDPA's, from fresh leaves.
        let grads = |attend: &dyn Fn(&Tensor, &Tensor, &Tensor) -> Tensor| {
            let [q, k, v] = [&q, &k, &v].map(|x| x.detach().set_requires_grad(true));
            (attend(&q, &k, &v) * &w).sum(Kind::Float).backward();
            [q.grad(), k.grad(), v.grad()]
        };
        let ours = grads(&|q, k, v| shim::flash_attention(q, k, v, &windowed).unwrap());
        let theirs = grads(&|q, k, v| sdpa(q, k, v, false, Some(&mask)));
        for (name, (a, b)) in ["dq", "dk", "dv"].iter().zip(ours.iter().zip(theirs.iter())) {
            let r = rel_diff(a, b);
            assert!(r < 2e-2, "{name}: relative difference {r}");
        }
    }

    #[test]
    fn flash_attention_varlen_matches_per_document_sdpa() {
        if !gpu() {
            return;
        }
        tch::manual_seed(12);
        let (h, d) = (4, 64);
        let docs = [37i64, 91];
        let total: i64 = docs.iter().sum();
        let q = Tensor::randn([total, h, d], BF16);
        let (k, v) = (Tensor::randn([total, h, d], BF16), Tensor::randn([total, h, d], BF16));
        let cu = Tensor::from_slice(&[0i32, 37, 128]).to(GPU);
        let varlen = Varlen { cu_seqlens_q: &cu, cu_seqlens_k: &cu, max_q: 91, max_k: 91 };
        let opts = FlashOptions { causal: true, varlen: Some(varlen), ..Default::default() };
        let ours = shim::flash_attention(&q, &k, &v, &opts).unwrap();
        assert_eq!(ours.size(), vec![total, h, d]);
        let mut start = 0;
        for len in docs {
            let doc = |x: &Tensor| x.narrow(0, start, len).unsqueeze(0);
            let reference = sdpa(&doc(&q), &doc(&k), &doc(&v), true, None).squeeze_dim(0);
            let got = ours.narrow(0, start, len);
            assert!(max_abs_diff(&got, &reference) < 1e-2, "document at {start}");
            start += len;
        }
    }

    #[test]
    fn fused_adamw_on_cuda_matches_a_float64_reference() {
        if !gpu() {
            return;
        }
        check_fused_adamw(GPU, 1e-5);
    }

    #[test]
    fn memory_stats_follow_allocations() {
        if !gpu() {
            return;
        }
        let mib64 = 64 << 20;
        let before = shim::memory_stats(GPU).unwrap();
        let big = Tensor::zeros([mib64 / 4], (Kind::Float, GPU));
        let during = shim::memory_stats(GPU).unwrap();
        assert!(during.allocated - before.allocated >= mib64, "{before:?} -> {during:?}");
        assert!(during.reserved >= during.allocated);
        assert!(during.peak_allocated >= during.allocated);
        drop(big);
        shim::reset_peak(GPU).unwrap();
        let after = shim::memory_stats(GPU).unwrap();
        assert!(after.peak_allocated < during.peak_allocated, "{during:?} -> {after:?}");
    }

    #[test]
    fn pool_streams_become_current_and_sync_back() {
        if !gpu() {
            return;
        }
        let default = CudaStream::current(0).unwrap();
        let side = CudaStream::from_pool(0, false).unwrap();
        assert!(!side.raw().is_null());
        assert_ne!(side, default);
        side.wait_stream(&default).unwrap();
        side.set_current().unwrap();
        assert_eq!(CudaStream::current(0).unwrap(), side);
        let x = Tensor::ones([1 << 20], (Kind::Float, GPU)) * 3.0; // queued on `side`
        default.set_current().unwrap();
        default.wait_stream(&side).unwrap();
        side.synchronize().unwrap();
        assert_eq!(x.sum(Kind::Float).double_value(&[]), 3.0 * (1 << 20) as f64);
    }

    #[test]
    fn cuda_graph_replays_on_new_inputs() {
        if !gpu() {
            return;
        }
        let mut x = Tensor::randn([4096], (Kind::Float, GPU));
        let mut graph = CudaGraph::new().unwrap();
        let y = graph.capture(0, || Ok(&x * 2.0 + 1.0)).unwrap();
        let fresh = Tensor::randn([4096], (Kind::Float, GPU));
        x.copy_(&fresh);
        graph.replay().unwrap();
        tch::Cuda::synchronize(0);
        assert!(max_abs_diff(&y, &(&fresh * 2.0 + 1.0)) < 1e-6);
        // An error inside the capture still ends it and restores the stream.
        let before = CudaStream::current(0).unwrap();
        let mut failed = CudaGraph::new().unwrap();
        assert!(failed.capture(0, || -> anyhow::Result<()> { anyhow::bail!("no") }).is_err());
        assert_eq!(CudaStream::current(0).unwrap(), before);
    }

    #[test]
    fn nccl_world_of_one_runs_every_collective() {
        if !gpu() {
            return;
        }
        let store = TcpStore::rendezvous("127.0.0.1", 0, 0, 1, false, TIMEOUT).unwrap();
        let pg = ProcessGroupNccl::new(&store, 0, 1, 0).unwrap();
        let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0]).to(GPU);
        pg.all_reduce(&t, ReduceOp::Sum).unwrap().wait().unwrap();
        pg.all_reduce(&t, ReduceOp::Avg).unwrap().wait().unwrap();
        let out = Tensor::zeros([3], (Kind::Float, GPU));
        pg.reduce_scatter(&out, &t, ReduceOp::Sum).unwrap().wait().unwrap();
        let gathered = Tensor::zeros([3], (Kind::Float, GPU));
        pg.all_gather(&gathered, &out).unwrap().wait().unwrap();
        pg.broadcast(&gathered, 0).unwrap().wait().unwrap();
        pg.barrier().unwrap();
        assert_eq!(Vec::<f32>::try_from(&gathered.to(Device::Cpu)).unwrap(), vec![1.0, 2.0, 3.0]);
    }

    #[test]
    fn profiler_traces_cuda_kernels() {
        if !gpu() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.json");
        shim::profiler_start(true, false).unwrap();
        {
            let _range = shim::Range::new("shim-test-gpu");
            let a = Tensor::randn([256, 256], (Kind::Float, GPU));
            let _ = a.matmul(&a);
            tch::Cuda::synchronize(0);
        }
        shim::profiler_stop(&path).unwrap();
        let trace: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let cats: Vec<&str> = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["cat"].as_str())
            .collect();
        for want in ["kernel", "user_annotation", "gpu_user_annotation"] {
            assert!(cats.contains(&want), "no {want} event in the trace");
        }
    }
}
