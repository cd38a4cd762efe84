//! `records replay` under faults (issue 11), on the series fixture with a fake `train` binary
//! that cargo really builds: a final move into results/ that fails, SIGINT/SIGTERM/SIGKILL
//! during a run and SIGTERM during the tree build, token ids beyond the vocabulary, a CUDA
//! replay without the CUDA setup, and flag values that cannot work.
mod series_fixture;

use series_fixture::{stderr, Fixture};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The fake trainer: writes a run log like ours, or waits to be signalled.
const TRAIN: &str = r##"use std::io::Write;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let out = std::path::PathBuf::from(&args[args.iter().position(|a| a == "--out").unwrap() + 1]);
    std::fs::create_dir_all(&out).unwrap();
    let mode = std::env::var("FAKE_TRAIN").unwrap_or_default();
    if mode == "libtorch" {
        // The libtorch this binary was built against, as cargo passed it.
        std::fs::write(std::env::var("FAKE_OUT").unwrap(), option_env!("LIBTORCH").unwrap_or("")).unwrap();
    }
    if mode == "block" {
        std::fs::write(std::env::var("FAKE_PID").unwrap(), std::process::id().to_string()).unwrap();
        std::thread::sleep(std::time::Duration::from_secs(600));
    }
    let arg = |name: &str| args[args.iter().position(|a| a == name).unwrap() + 1].clone();
    let record = std::path::Path::new(&arg("--manifest")).file_stem().unwrap().to_str().unwrap().to_string();
    let loss = std::env::var("FAKE_LOSS").unwrap_or_else(|_| "2.0000".into());
    let mut log = std::fs::File::create(out.join("train.log")).unwrap();
    writeln!(log, "# scale: {}\n# record: {}", arg("--scale"), record.trim_start_matches('0')).unwrap();
    writeln!(log, "step:0/100 val_loss:5.0000 train_time:0ms step_avg:0.00ms").unwrap();
    writeln!(log, "step:100/100 val_loss:{loss} train_time:1000ms step_avg:10.00ms").unwrap();
    if mode == "block-dest" {
        // Occupy the folder the run is moved to, so the final rename fails.
        let tmp = out.parent().unwrap();
        let id = tmp.file_name().unwrap().to_str().unwrap().trim_start_matches(".tmp-");
        let dest = tmp.with_file_name(id);
        std::fs::create_dir_all(&dest).unwrap();
        std::fs::write(dest.join("occupied"), "").unwrap();
    }
}
"##;

/// A build script that, when asked, reports its pid and builds for a long time.
const SLOW_BUILD: &str = r#"fn main() {
    if let Ok(p) = std::env::var("FAKE_BUILD_PID") {
        std::fs::write(p, std::process::id().to_string()).unwrap();
        std::thread::sleep(std::time::Duration::from_secs(300));
    }
}
"#;

struct Lab {
    f: Fixture,
    target: tempfile::TempDir,
    data: PathBuf,
    results: PathBuf,
}

impl Lab {
    fn new(slow_build: bool) -> Lab {
        let f = Fixture::new();
        // A tree build cleans the trainer, corpus and records packages, so the workspace has
        // all three (inside the files that make a trainer tree).
        f.write(
            "Cargo.toml",
            "[workspace]\nmembers = [\".\", \"corpus\", \"src/stub_records\"]\n\n[package]\nname = \"trainer\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        );
        for (dir, name) in [("corpus", "corpus"), ("src/stub_records", "records")] {
            f.write(
                &format!("{dir}/Cargo.toml"),
                &format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"),
            );
            f.write(&format!("{dir}/src/lib.rs"), "");
        }
        f.write("src/bin/train.rs", TRAIN);
        if slow_build {
            f.write("build.rs", SLOW_BUILD);
        }
        let m = f.read("records/01.toml");
        f.write(
            "records/01.toml",
            &format!("{m}\n[lab_target]\nval_loss = 2.5\nmeasured = \"fixture\"\n"),
        );
        let data = f.root().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let toks: Vec<u16> = (0..4096).map(|i| (i % 256) as u16).collect();
        corpus::shard::write_shard(&data.join("x_train_000001.bin"), &toks).unwrap();
        corpus::shard::write_shard(&data.join("x_val_000000.bin"), &toks).unwrap();
        // The fake trainer is this fixture's series now: record its trees, as `series import`
        // does, or every replay refuses a tree that is not the recorded one.
        records::series::recorded::record(f.root()).unwrap();
        let results = f.root().join("results");
        Lab { f, target: tempfile::tempdir().unwrap(), data, results }
    }

    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut c = self.f.command();
        c.args(args)
            .args(["--data", self.data.to_str().unwrap()])
            .args(["--results", self.results.to_str().unwrap()])
            .env("CARGO_TARGET_DIR", self.target.path())
            .env("LIBTORCH", "/nonexistent") // the fake trainer links no libtorch
            .envs(env.iter().copied());
        c
    }

    fn replay(&self, env: &[(&str, &str)]) -> Output {
        self.command(&["replay", "1"], env).output().unwrap()
    }

    fn spawn(&self, env: &[(&str, &str)]) -> Child {
        self.command(&["replay", "1"], env)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// The folders under results/01/.
    fn runs(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.results.join("01"))
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        names.sort();
        names
    }
}

/// Waits for `file` to hold a pid (the build can take a while on a loaded machine).
fn wait_for_pid(file: &Path, child: &mut Child) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        if let Some(pid) = std::fs::read_to_string(file).ok().and_then(|s| s.trim().parse().ok()) {
            return pid;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            panic!("records ended early ({status:?}): {err}");
        }
        assert!(Instant::now() < deadline, "no pid in {}", file.display());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether `pid` still runs (a zombie waiting for its reaper counts as gone).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s[s.rfind(')')? + 1..].split_whitespace().next().map(|st| st != "Z"))
        .unwrap_or(false)
}

fn gone_within(pid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while running(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

fn kill(pid: u32, sig: i32) {
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
}

#[test]
fn a_failed_final_move_keeps_the_run_and_the_next_replay_finishes_it() {
    let lab = Lab::new(false);
    let out = lab.replay(&[("FAKE_TRAIN", "block-dest")]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("moving results into") && err.contains("the finished run is kept in"),
        "{err}"
    );
    println!("move failed: {}", err.lines().last().unwrap());
    let runs = lab.runs();
    let tmp = runs.iter().find(|r| r.starts_with(".tmp-")).expect("the run was deleted");
    let kept = lab.results.join("01").join(tmp);
    assert!(kept.join("run-1/train.log").exists() && kept.join("verdict.json").exists());

    // Clear the obstacle: the next replay moves the kept run into place, then does its own.
    let id = tmp.trim_start_matches(".tmp-");
    std::fs::remove_dir_all(lab.results.join("01").join(id)).unwrap();
    let out = lab.replay(&[("FAKE_TRAIN", "finish")]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("moved a finished run that process") && err.contains(id), "{err}");
    println!("next replay: {}", err.lines().find(|l| l.contains("moved a finished")).unwrap());
    let runs = lab.runs();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert!(runs.iter().all(|r| !r.starts_with(".tmp-")), "{runs:?}");
    assert!(lab.results.join("01").join(id).join("run-1/train.log").exists());
}

#[test]
fn signals_stop_the_ranks_and_remove_the_temporaries() {
    let lab = Lab::new(false);
    for (sig, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        let pid_file = lab.f.root().join(format!("trainer-{name}.pid"));
        let mut child =
            lab.spawn(&[("FAKE_TRAIN", "block"), ("FAKE_PID", pid_file.to_str().unwrap())]);
        let trainer = wait_for_pid(&pid_file, &mut child);
        assert!(lab.runs().iter().any(|r| r.starts_with(".tmp-")));
        kill(child.id(), sig);
        let out = child.wait_with_output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(128 + sig), "{err}");
        assert!(
            err.contains(&format!("records: stopped by {name}")) && err.contains("removed"),
            "{err}"
        );
        println!("{name}: {}", err.lines().last().unwrap());
        assert!(gone_within(trainer, Duration::from_secs(5)), "the rank outlived records");
        assert_eq!(lab.runs(), Vec::<String>::new(), "temporaries left");
    }

    // SIGKILL cannot be handled: the rank dies with records, and the next replay sweeps.
    let pid_file = lab.f.root().join("trainer-kill.pid");
    let mut child = lab.spawn(&[("FAKE_TRAIN", "block"), ("FAKE_PID", pid_file.to_str().unwrap())]);
    let trainer = wait_for_pid(&pid_file, &mut child);
    let killed = child.id();
    kill(killed, libc::SIGKILL);
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    assert!(gone_within(trainer, Duration::from_secs(5)), "the rank outlived records");
    assert!(lab.runs().iter().any(|r| r.starts_with(".tmp-")));
    let out = lab.replay(&[("FAKE_TRAIN", "finish")]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let want = format!("left by an interrupted replay (process {killed} is gone)");
    assert!(err.contains("records: removed ") && err.contains(&want), "{err}");
    println!("sweep: {}", err.lines().find(|l| l.contains("interrupted")).unwrap());
    assert!(lab.runs().iter().all(|r| !r.starts_with(".tmp-")), "{:?}", lab.runs());
}

#[test]
fn sigterm_during_the_tree_build_stops_cargo_and_its_children() {
    let lab = Lab::new(true);
    let pid_file = lab.f.root().join("build.pid");
    let mut child = lab.spawn(&[("FAKE_BUILD_PID", pid_file.to_str().unwrap())]);
    let build_script = wait_for_pid(&pid_file, &mut child);
    kill(child.id(), libc::SIGTERM);
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10), "{err}");
    assert!(err.contains("records: stopped by SIGTERM: 1 child process(es) stopped"), "{err}");
    assert!(gone_within(build_script, Duration::from_secs(5)), "cargo's build script lives on");
}

#[test]
fn token_ids_beyond_the_vocabulary_name_the_shard_the_position_and_the_id() {
    let lab = Lab::new(false);
    let m = lab
        .f
        .read("records/01.toml")
        .replace("[lab]\nsteps = 100\n", "[lab]\nsteps = 100\nvocab_size = 257\n");
    lab.f.write("records/01.toml", &m);
    let mut toks: Vec<u16> = vec![7; 2048];
    toks[1500] = 300;
    corpus::shard::write_shard(&lab.data.join("x_train_000001.bin"), &toks).unwrap();
    // replay, bench and profile run the same check before they build or launch anything.
    for command in ["replay", "bench", "profile"] {
        let out = lab.command(&[command, "1"], &[]).output().unwrap();
        let err = stderr(&out);
        assert!(!out.status.success(), "{command}");
        assert!(
            err.contains("x_train_000001.bin: token 1500 is id 300, outside the vocabulary of 257"),
            "{command}: {err}"
        );
        assert!(!err.contains("building the trainer"), "{command}: checked after the build: {err}");
        assert!(!lab.f.root().join("target/records/trees/01").exists(), "{command} materialized");
        println!("{command} ids: {err}");
    }
}

#[test]
fn a_tree_builds_against_the_libtorch_of_records_venv() {
    let lab = Lab::new(false);
    let venv = tempfile::tempdir().unwrap();
    std::fs::create_dir(venv.path().join("libtorch")).unwrap();
    let seen = venv.path().join("seen");
    let mut cmd = lab.command(
        &["replay", "1", "--steps", "3"],
        &[("FAKE_TRAIN", "libtorch"), ("FAKE_OUT", seen.to_str().unwrap())],
    );
    let out = cmd.env_remove("LIBTORCH").env("RECORDS_VENV", venv.path()).output().unwrap();
    assert!(seen.exists(), "the trainer did not run: {}", stderr(&out));
    let seen = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(Path::new(&seen), venv.path().join("libtorch"));
}

/// The targets `results/lab-targets.json` keeps: (cpu, record, val loss).
fn kept_targets(lab: &Lab) -> Vec<(String, u64, f64)> {
    let text = std::fs::read_to_string(lab.results.join("lab-targets.json")).unwrap_or_default();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let rows = json["targets"].as_array().cloned().unwrap_or_default();
    rows.iter()
        .map(|t| {
            let cpu = t["cpu"].as_str().unwrap().to_string();
            (cpu, t["record"].as_u64().unwrap(), t["val_loss"].as_f64().unwrap())
        })
        .collect()
}

#[test]
fn the_lab_target_is_measured_once_per_cpu_and_named_in_the_verdict() {
    let lab = Lab::new(false);
    let on = |cpu: &str, loss: &str, args: &[&str]| {
        let env = [("RECORDS_CPU", cpu), ("FAKE_LOSS", loss)];
        let out = lab.command(args, &env).output().unwrap();
        assert!(out.status.success(), "{args:?} on {cpu}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The reference record's own whole-budget replay measures its CPU's target, and says it is
    // the baseline, not a verdict.
    let out = on("CPU A", "2.1000", &["replay", "1"]);
    assert!(
        out.contains("BASELINE: this run sets #1's lab target on CPU A: 2.1\n")
            && out.contains("#1's lab result on CPU A")
            && out.contains("nothing was compared. Next: `records replay 29`")
            && !out.contains("REACHED"),
        "{out}"
    );
    let verdict = std::fs::read_dir(lab.results.join("01")).unwrap().next().unwrap().unwrap();
    let verdict = std::fs::read_to_string(verdict.path().join("verdict.json")).unwrap();
    assert!(verdict.contains("\"sets_target\": \"#1\""), "{verdict}");
    // Kept: a later replay on the same CPU is judged against it, not against its own loss.
    let out = on("CPU A", "2.2000", &["replay", "1"]);
    assert!(out.contains("NOT REACHED (target val loss 2.1 "), "{out}");
    // A shortened run measures nothing and says the target is another machine's.
    let out = on("CPU B", "2.0000", &["replay", "1", "--steps", "3"]);
    assert!(
        out.contains("target val loss 2.5 ") && out.contains("CPU B has no lab target"),
        "{out}"
    );
    assert_eq!(kept_targets(&lab), [("CPU A".into(), 1, 2.1)]);
    // A record judged by another's target on a new CPU replays that record first, once.
    let out = on("CPU C", "2.3000", &["replay", "29"]);
    assert!(out.contains("#1 Record 1 title") && out.contains("#29 Record 29 title"), "{out}");
    assert!(out.contains("#1's lab result on CPU C"), "{out}");
    assert_eq!(kept_targets(&lab)[1], ("CPU C".into(), 1, 2.3));
    let replays = |n: &str| std::fs::read_dir(lab.results.join(n)).unwrap().count();
    assert_eq!((replays("01"), replays("29")), (4, 1));
    // A log is judged against the target of the CPU its replay ran on, not this one's.
    let run = std::fs::read_dir(lab.results.join("29")).unwrap().next().unwrap().unwrap().path();
    let log = run.join("run-1/train.log");
    let out = lab.f.records_with(&["verdict", log.to_str().unwrap()], &[("RECORDS_CPU", "CPU A")]);
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.contains("target val loss 2.3 ")
            && out.contains("its replay's verdict.json names the CPU"),
        "{out}"
    );
    println!("{out}");
}

#[test]
fn gpus_without_the_cuda_setup_is_one_clear_line_before_any_build() {
    let lab = Lab::new(false);
    let venv = tempfile::tempdir().unwrap();
    std::fs::write(venv.path().join(".records-setup-2.11.0"), "").unwrap();
    let out = lab
        .command(
            &["replay", "1", "--gpus", "1"],
            &[("RECORDS_VENV", venv.path().to_str().unwrap())],
        )
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(!out.status.success());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--gpus needs the CUDA wheels") && err.contains("scripts/setup.sh --cuda"),
        "{err}"
    );
    println!("gpus: {err}");
}

#[test]
fn flag_values_that_cannot_work_are_refused_naming_the_flag() {
    let lab = Lab::new(false);
    for (args, flag) in [
        (&["--steps", "0"][..], "--steps <STEPS>"),
        (&["--ranks", "0"], "--ranks <RANKS>"),
        (&["--gpus", "0"], "--gpus <GPUS>"),
        (&["--runs", "0"], "--runs <RUNS>"),
        (&["--nnodes", "0"], "--nnodes <NNODES>"),
    ] {
        let out = lab.command(&[&["replay", "1"][..], args].concat(), &[]).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("invalid value '0' for '{flag}': must be at least 1")),
            "{args:?}: {err}"
        );
        assert!(!err.contains("records/") && !err.contains("rank(s) per node"), "{err}");
    }
    for (args, want) in [
        (&["--node-rank", "1"][..], "--node-rank 1 must be below --nnodes 1"),
        (&["--nnodes", "2"], "--master-addr is needed with --nnodes 2"),
    ] {
        let out = lab.command(&[&["replay", "1"][..], args].concat(), &[]).output().unwrap();
        let err = stderr(&out);
        assert!(!out.status.success() && err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("building the trainer"), "{err}");
    }
    let out = lab.command(&["replay", "1", "--steps", "0"], &[]).output().unwrap();
    println!("steps: {}", stderr(&out).lines().next().unwrap());
    // The budget's default is the record's own, not one number for all.
    let help = Fixture::new().command().args(["replay", "--help"]).output();
    let help = String::from_utf8(help.unwrap().stdout).unwrap();
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(help.contains("[default: the record's, from its manifest"), "{help}");
    assert!(!help.contains("default: 250"), "{help}");
}
