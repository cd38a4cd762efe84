//! The harness tests beside what a user's runs leave: a scratch copy of the checkout gets a
//! `results/` (lab targets of this CPU and of another one, a cut metrics.jsonl, a verdict),
//! shards and a tree with the right id but broken code, and a held timing lock; the environment
//! gets the variables a user may export (`RECORDS_CPU`, `RECORDS_ROOT`, `PAGER`, ...; not
//! `RECORDS_STATE`, which scripts/test unsets, as the tests' own library calls take their state
//! from it as the CLI does). Every
//! other harness test then runs with that copy as its checkout and must still pass: a test that
//! read any of it would judge a run against the wrong target, build the broken tree or wait on
//! the lock.
use std::fs::File;
use std::path::Path;
use std::process::Command;

mod sandbox;

/// Writes `text` to `root/rel`, making its folders.
fn plant(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The `tree = "..."` of records/NN.toml.
fn tree_id(root: &Path, n: &str) -> String {
    let text = std::fs::read_to_string(root.join(format!("records/{n}.toml"))).unwrap();
    let table: toml::Table = toml::from_str(&text).unwrap();
    table["record"]["tree"].as_str().unwrap().to_string()
}

/// What a user's runs could have left in the checkout `root`.
fn leave_a_users_runs(root: &Path) {
    let cpu = records::run::lab_target::this_cpu();
    let target = |cpu: &str, record: &str, tree: &str, loss: f64| {
        format!(
            "{{\"cpu\": {cpu:?}, \"record\": {record}, \"tree\": {tree:?}, \"val_loss\": {loss}, \
             \"run\": \"20261201-000000-1-lab\"}}"
        )
    };
    let (t1, t29) = (tree_id(root, "01"), tree_id(root, "29"));
    let targets = [
        target(&cpu, "1", &t1, 9.5),
        target(&cpu, "29", &t29, 0.25),
        target("Planted CPU (a user's RECORDS_CPU)", "1", &t1, 0.5),
        target("Another CPU (family 6 model 85, 2 cores)", "29", &t29, 7.5),
    ];
    plant(root, "results/lab-targets.json", &format!("{{\"targets\": [{}]}}", targets.join(",")));
    for (n, loss) in [("01", "2.4000"), ("29", "1.7000")] {
        let run = format!("results/{n}/20261201-000000-1-lab");
        let log = format!("step:250/250 val_loss:{loss} train_time:1000ms step_avg:4.00ms\n");
        plant(root, &format!("{run}/run-1/train.log"), &log[..log.len() / 2]);
        plant(root, &format!("{run}/run-1/metrics.jsonl"), "{\"type\":\"val\",\"step\":0,\"val_lo");
        plant(root, &format!("{run}/verdict.json"), "{\"target_loss\": 2.4, \"steps\":");
    }
    plant(root, "results/walk/29-38-250/walk.json", "{\"stops\": [");
    plant(root, "data/default/default.json", "{\"train_tokens\": 1}");
    plant(root, "data/default/default_train_000001.bin", "not a shard");
    plant(root, "data/default/default_val_000000.bin", "not a shard");
    plant(root, "target/records/upstream/58.toml", "[record]\nnumber = 58\n");
    for (n, id) in [("01", &t1), ("29", &t29)] {
        let tree = format!("target/records/trees/{n}");
        plant(root, &format!("{tree}/.records-tree"), &format!("{id}\n"));
        plant(root, &format!("{tree}/Cargo.toml"), "[package]\nname = \"edited\"\n");
        plant(root, &format!("{tree}/src/lib.rs"), "compile_error!(\"a user's edited tree\");\n");
    }
    plant(root, "home/.config/records", "a user's $HOME");
}

/// The harness's test binaries, as cargo built them for this run (no build: they are fresh).
fn harness_test_binaries() -> Vec<String> {
    let mut cargo = Command::new(env!("CARGO"));
    cargo.args(["test", "--workspace", "--no-run", "--message-format=json", "--quiet"]);
    if !cfg!(debug_assertions) {
        cargo.arg("--release");
    }
    let out = cargo.current_dir(env!("CARGO_MANIFEST_DIR")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let harness = format!("path+file://{}", env!("CARGO_MANIFEST_DIR"));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["package_id"].as_str().is_some_and(|p| p.starts_with(&harness)))
        .filter(|m| m["profile"]["test"] == true) // not the CLI itself
        .filter_map(|m| m["executable"].as_str().map(String::from))
        .collect()
}

#[test]
fn hermetic_harness_tests_pass_beside_a_users_leftovers() {
    let copy = sandbox::scratch_checkout();
    leave_a_users_runs(copy.path());
    // A timing lock held for the whole run: a test that waited on a lock it did not make hangs.
    let lock_path = copy.path().join("results/timing.lock");
    let held = File::create(&lock_path).unwrap();
    held.lock().unwrap();
    let binaries = harness_test_binaries();
    assert!(binaries.len() > 10, "found only {binaries:?}");
    let (mut passed, mut failures) = (0, Vec::new());
    for bin in &binaries {
        let out = Command::new(bin)
            .args(["--skip", "hermetic"])
            .current_dir(copy.path().join("harness"))
            .env("RECORDS_TEST_CHECKOUT", copy.path())
            .env_remove("RECORDS_TEST_SKIPS")
            .env("RECORDS_ROOT", copy.path())
            .env("RECORDS_CPU", "Planted CPU (a user's RECORDS_CPU)")
            .env("RECORDS_TIMING_LOCK", &lock_path)
            .env("RECORDS_LOG", "trace")
            .env("RECORDS_DIST_TIMEOUT_S", "1")
            .env("PAGER", "false")
            .env("COLUMNS", "20")
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let result = stdout.lines().rev().find(|l| l.starts_with("test result: "));
        let count = |what: &str| -> u32 {
            let field = result.and_then(|r| r.split("; ").find(|f| f.ends_with(what)));
            field.and_then(|f| f.split_whitespace().rev().nth(1)?.parse().ok()).unwrap_or(0)
        };
        passed += count(" passed");
        if !out.status.success() {
            // libtest's own account of each failure (the panic messages), else what it said.
            let why = stdout.find("\nfailures:\n").map_or(&stdout[..], |i| &stdout[i..]);
            failures.push(format!("{bin}:\n{why}\n{}", String::from_utf8_lossy(&out.stderr)));
        }
    }
    assert!(failures.is_empty(), "beside a user's leftovers:\n{}", failures.join("\n"));
    assert!(passed > 100, "{passed} tests ran in {} binaries", binaries.len());
    eprintln!("{passed} harness tests passed beside a user's leftovers");
}
