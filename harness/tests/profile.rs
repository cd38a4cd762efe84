//! `records profile`: the categories of a hand-written Kineto trace, and the real CLI on the lab
//! corpus: record #29's and #1's own trainers traced for two steps, the categories adding up to
//! the trainer's own step time, the traces loadable, the two tables side by side.
use records::profile::{self, Category};
use serde_json::{json, Value};

mod sandbox;

fn op(name: &str, ts: f64, dur: f64, seq: Option<i64>, ext: Option<i64>) -> Value {
    let mut args = json!({});
    if let Some(s) = seq {
        args["Sequence number"] = json!(s);
    }
    if let Some(x) = ext {
        args["External id"] = json!(x);
    }
    json!({"ph": "X", "cat": "cpu_op", "name": name, "pid": 7, "tid": 7, "ts": ts, "dur": dur, "args": args})
}

fn range(name: &str, ts: f64, dur: f64) -> Value {
    json!({"ph": "X", "cat": "user_annotation", "name": name, "pid": 7, "tid": 7, "ts": ts, "dur": dur})
}

fn ms(step: &profile::Step, c: Category) -> f64 {
    (step.ms[&c] * 1e3).round() // µs, as written below
}

#[test]
fn a_cpu_step_splits_by_ranges_and_op_names_into_self_times() {
    let events = vec![
        json!({"ph": "M", "name": "process_name", "pid": 7}),
        op("aten::zeros", -500.0, 100.0, None, None), // before the step (validation): left out
        range("step 3 | windows 112/48", 0.0, 1000.0),
        op("aten::zeros", 10.0, 20.0, None, None), // the loader, before the model's first op
        op("aten::embedding", 50.0, 30.0, Some(1), None),
        op("aten::linear", 100.0, 100.0, Some(2), None),
        op("aten::addmm", 105.0, 90.0, Some(2), None),
        range("attention", 220.0, 100.0),
        op("aten::eq", 225.0, 20.0, Some(7), None),
        op("aten::_scaled_dot_product_flash_attention_for_cpu", 250.0, 60.0, Some(8), None),
        op("aten::mul", 330.0, 20.0, Some(9), None),
        op("autograd::engine::evaluate_function: SdpaBackward0", 400.0, 50.0, Some(8), None),
        op("aten::_scaled_dot_product_flash_attention_for_cpu_backward", 405.0, 40.0, None, None),
        op("autograd::engine::evaluate_function: AddmmBackward0", 460.0, 60.0, Some(2), None),
        op("aten::mm", 465.0, 50.0, None, None),
        range("optimizer", 600.0, 300.0),
        op("aten::baddbmm", 610.0, 100.0, None, None),
        op("aten::lerp_", 720.0, 50.0, None, None),
        range("communication: all_reduce", 800.0, 80.0),
        op("aten::copy_", 810.0, 10.0, None, None),
        range("step 4 | windows 176/80", 1000.0, 500.0),
        op("aten::embedding", 1000.0, 400.0, Some(20), None),
    ];
    let steps = profile::steps(&json!({ "traceEvents": events }).to_string()).unwrap();
    assert_eq!(steps.len(), 2);
    let s = &steps[0];
    assert_eq!((s.step, s.stage.as_str(), s.wall_ms), (3, "windows 112/48", 1.0));
    // Masks and kernel in the range, and the kernel's backward by its sequence number.
    assert_eq!(ms(s, Category::Attention), 150.0);
    // addmm 90 + linear's own 10, and the backward's mm.
    assert_eq!(ms(s, Category::Matmul), 150.0);
    // embedding, mul, and the MmBackward node's own 10.
    assert_eq!(ms(s, Category::OtherOps), 60.0);
    assert_eq!(ms(s, Category::Orthogonalisation), 100.0);
    // lerp_ 50 + the optimizer range's own 70 (host code of the optimizer).
    assert_eq!(ms(s, Category::OptimizerUpdates), 120.0);
    assert_eq!(ms(s, Category::Communication), 80.0);
    // The loader's op and the 30 µs between it and the embedding.
    assert_eq!(ms(s, Category::Data), 50.0);
    assert_eq!(ms(s, Category::Host), 290.0);
    let sum: f64 = s.ms.values().sum();
    assert!((sum - s.wall_ms).abs() < 1e-9, "the rows add up to the step: {sum}");

    let stages = profile::by_stage(&steps);
    assert_eq!(stages.len(), 2, "one table per stage");
    assert_eq!((stages[1].steps.as_slice(), stages[1].ms[&Category::OtherOps]), (&[4][..], 0.4));
    let all = profile::overall(&steps);
    assert_eq!((all.wall_ms, all.stage.as_str()), (0.75, "windows 112/48, windows 176/80"));
}

#[test]
fn a_cuda_step_counts_kernel_time_by_the_op_that_launched_it() {
    let kernel = |ts: f64, dur: f64, ext: i64| {
        json!({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 9, "ts": ts, "dur": dur,
               "args": {"External id": ext}})
    };
    let events = vec![
        range("step 1 | every step", 0.0, 1000.0),
        op("aten::embedding", 5.0, 10.0, None, Some(10)),
        range("attention", 90.0, 20.0),
        op("aten::_efficient_attention_forward", 100.0, 5.0, None, Some(11)),
        op("aten::mm", 300.0, 5.0, None, Some(12)),
        kernel(150.0, 200.0, 11),
        kernel(400.0, 300.0, 12),
    ];
    let steps = profile::steps(&json!({ "traceEvents": events }).to_string()).unwrap();
    let s = &steps[0];
    assert_eq!((ms(s, Category::Attention), ms(s, Category::Matmul)), (200.0, 300.0));
    assert_eq!(ms(s, Category::Host), 500.0, "the GPU's idle time");
}

#[test]
fn a_file_that_is_not_a_profile_trace_is_refused() {
    let err = profile::steps("{\"x\": 1}").unwrap_err().to_string();
    assert!(err.contains("no traceEvents"), "{err}");
    let no_steps = json!({"traceEvents": [op("aten::mm", 0.0, 1.0, None, None)]}).to_string();
    let err = profile::steps(&no_steps).unwrap_err().to_string();
    assert!(err.contains("no `step N | stage` range"), "{err}");
}

#[test]
fn profile_of_29_against_1_adds_up_to_the_step_time_and_writes_traces() {
    let sandbox = sandbox::Sandbox::new();
    let out = sandbox.run(&["profile", "29", "--compare", "1", "--steps", "2", "-v"]);
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "profile failed:\n{stderr}\n{stdout}");
    assert!(!stderr.contains("gpuGetDeviceCount"), "Kineto's GPU probe on a CPU: {stderr}");
    for step in ["materialize #29", "build #1", "launch #29", "parse #1"] {
        assert!(stderr.contains(&format!("records: {step}: ")), "-v times {step}: {stderr}");
    }
    assert!(stdout.contains("#29 (lab,") && stdout.contains("#1 (lab,"), "{stdout}");

    let run =
        std::fs::read_dir(sandbox.results().join("profile")).unwrap().next().unwrap().unwrap();
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(run.path().join("profile.json")).unwrap())
            .unwrap();
    for r in json["records"].as_array().unwrap() {
        let n = r["record"].as_u64().unwrap();
        let log: Vec<f64> =
            r["log_step_ms"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(log.len(), 2, "#{n}: two traced steps");
        let log_mean = log.iter().sum::<f64>() / 2.0;
        // The trace itself loads, and its steps add up to the trainer's own clock.
        let trace = run.path().join(r["traces"][0].as_str().unwrap());
        let steps = profile::read(&trace).unwrap();
        assert_eq!(steps.len(), 2, "#{n}");
        let sum: f64 = steps.iter().flat_map(|s| s.ms.values()).sum::<f64>() / 2.0;
        assert!((sum - log_mean).abs() <= 0.05 * log_mean, "#{n}: rows {sum} ms, log {log_mean}");
        // Each row the trainer's named ranges feed holds time: a renamed range (`attention`,
        // `optimizer`) leaves its row empty and fails here.
        let total = |c: Category| -> f64 { steps.iter().map(|s| s.ms[&c]).sum() };
        for c in [Category::Attention, Category::Matmul, Category::OptimizerUpdates] {
            assert!(total(c) > 0.0, "#{n}: no time in {c:?}: {:?}", steps[0].ms);
        }
        let ortho = total(Category::Orthogonalisation);
        assert_eq!(ortho > 0.0, n == 29, "#{n}: only Muon orthogonalises ({ortho} ms)");
    }
}
