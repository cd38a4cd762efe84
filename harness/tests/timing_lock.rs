//! The machine-wide timing lock between real processes: this test binary re-runs itself as a
//! lock holder (a helper "test" that only acts with `TIMING_LOCK_ROLE` set), then a second
//! process must wait for it, or with --no-lock run beside it, both sides then saying that their
//! times are not comparable. The real `records replay` and `records bench` show it in the verdict
//! and in bench.json.
use records::run::timing_lock::TimingLock;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Not a test of its own: the body of a helper process. Takes the lock at `TIMING_LOCK` (with
/// --no-lock when the role is `intruder`), creates `<dir>/<role>.ready`, waits for
/// `<dir>/<role>.go`, then writes what `not_comparable` says into `<dir>/<role>.verdict`.
#[test]
fn helper_process() {
    let Ok(role) = std::env::var("TIMING_LOCK_ROLE") else {
        return;
    };
    let dir = PathBuf::from(std::env::var("TIMING_LOCK_DIR").unwrap());
    // As the CLI does: its messages go through tracing to stderr.
    records::logging::init(false);
    if role == "builder" {
        let _mark = records::run::timing_lock::building().unwrap();
        std::fs::write(dir.join(format!("{role}.ready")), "").unwrap();
        wait_for(&dir.join(format!("{role}.go")), Duration::from_secs(120));
        std::fs::write(dir.join(format!("{role}.verdict")), "built").unwrap();
        return;
    }
    let lock = TimingLock::acquire(role == "intruder").unwrap();
    std::fs::write(dir.join(format!("{role}.ready")), "").unwrap();
    wait_for(&dir.join(format!("{role}.go")), Duration::from_secs(120));
    let verdict = lock.not_comparable().unwrap().unwrap_or_else(|| "comparable".to_string());
    std::fs::write(dir.join(format!("{role}.verdict")), verdict).unwrap();
}

fn wait_for(path: &Path, limit: Duration) {
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < limit, "{} did not appear", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn spawn(role: &str, dir: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "helper_process", "--nocapture", "--test-threads", "1"])
        .env("TIMING_LOCK_ROLE", role)
        .env("TIMING_LOCK_DIR", dir)
        .env("RECORDS_TIMING_LOCK", dir.join("timing.lock"))
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn finish(child: Child, role: &str, dir: &Path) -> (String, String) {
    std::fs::write(dir.join(format!("{role}.go")), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{role} failed: {stderr}");
    (std::fs::read_to_string(dir.join(format!("{role}.verdict"))).unwrap(), stderr)
}

#[test]
fn a_second_run_waits_for_the_holder_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let holder = spawn("holder", dir.path());
    wait_for(&dir.path().join("holder.ready"), Duration::from_secs(60));
    let holder_pid = holder.id();
    let waiter = spawn("waiter", dir.path());
    // The waiter must still be waiting a while later: no ready file while the holder holds it.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!dir.path().join("waiter.ready").exists(), "the second run did not wait");
    let (verdict, _) = finish(holder, "holder", dir.path());
    assert_eq!(verdict, "comparable");
    wait_for(&dir.path().join("waiter.ready"), Duration::from_secs(60));
    let (verdict, stderr) = finish(waiter, "waiter", dir.path());
    assert_eq!(verdict, "comparable", "it ran after the holder, alone");
    assert!(
        stderr.contains(&format!(
            "waiting for the timing lock {}",
            dir.path().join("timing.lock").display()
        )) && stderr.contains(&format!("held by pid {holder_pid} (")),
        "the message names the holder's pid: {stderr}"
    );
}

#[test]
fn a_run_without_the_lock_and_the_holder_both_say_not_comparable() {
    let dir = tempfile::tempdir().unwrap();
    let holder = spawn("holder", dir.path());
    wait_for(&dir.path().join("holder.ready"), Duration::from_secs(60));
    let holder_pid = holder.id();
    let intruder = spawn("intruder", dir.path());
    wait_for(&dir.path().join("intruder.ready"), Duration::from_secs(60));
    let intruder_pid = intruder.id();
    let (verdict, stderr) = finish(intruder, "intruder", dir.path());
    assert!(stderr.contains("--no-lock: running beside pid"), "{stderr}");
    assert!(
        verdict.starts_with(&format!("ran with --no-lock while pid {holder_pid} (")),
        "{verdict}"
    );
    // The intruder is gone, but it ran during the holder's run.
    let (verdict, _) = finish(holder, "holder", dir.path());
    assert!(
        verdict.starts_with(&format!("pid {intruder_pid} ("))
            && verdict.contains("ran with --no-lock beside this run for ")
            && verdict.contains(" s of its "),
        "how long of the holder's run it overlapped: {verdict}"
    );
    // A later run alone is comparable again.
    let alone = spawn("alone", dir.path());
    wait_for(&dir.path().join("alone.ready"), Duration::from_secs(60));
    assert_eq!(finish(alone, "alone", dir.path()).0, "comparable");
}

#[test]
fn a_trainer_built_beside_a_timed_run_makes_its_times_not_comparable() {
    let dir = tempfile::tempdir().unwrap();
    let holder = spawn("holder", dir.path());
    wait_for(&dir.path().join("holder.ready"), Duration::from_secs(60));
    // A build does not wait for the lock: it registers beside the holder.
    let builder = spawn("builder", dir.path());
    wait_for(&dir.path().join("builder.ready"), Duration::from_secs(60));
    let builder_pid = builder.id();
    finish(builder, "builder", dir.path());
    let (verdict, _) = finish(holder, "holder", dir.path());
    assert!(
        verdict.starts_with(&format!("pid {builder_pid} ("))
            && verdict.contains("built a trainer beside this run"),
        "{verdict}"
    );
}
