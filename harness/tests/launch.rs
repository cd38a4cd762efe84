//! The rank launcher against real processes (`sh -c` scripts standing in for `train`).
use records::run::launch::{launch, ExitInfo, LaunchError, LaunchOpts, Line, Stream};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

/// What a job returned, and every line the callback saw as (rank, stream, text).
type Outcome = (Result<Vec<ExitInfo>, LaunchError>, Vec<(usize, Stream, String)>);

/// Runs `script` under `sh -c` as `nproc` ranks; `$D` is `dir` in the script.
fn run_sh(dir: &Path, script: &str, nproc: usize, opts: LaunchOpts) -> Outcome {
    let mut opts = opts;
    opts.env.push(("D".into(), dir.as_os_str().to_owned()));
    let args: Vec<OsString> = vec!["-c".into(), script.into()];
    let mut lines = Vec::new();
    let result = launch(Path::new("/bin/sh"), &args, nproc, &opts, |l: Line<'_>| {
        lines.push((l.rank, l.stream, l.text.to_string()))
    });
    (result, lines)
}

/// The `KEY=value` lines a rank wrote to `$D/env.$RANK`.
fn env_of(dir: &Path, rank: usize) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(dir.join(format!("env.{rank}"))).expect("rank wrote env");
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const DUMP_ENV: &str = r#"env | grep -E '^(RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|GROUP_RANK|GROUP_WORLD_SIZE|MASTER_ADDR|MASTER_PORT|OMP_NUM_THREADS|TORCHELASTIC_USE_AGENT_STORE)=' > "$D/env.$RANK""#;

/// True while `pid` names a live (or zombie) process.
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

fn pids(dir: &Path) -> Vec<i32> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("pid."))
        .map(|e| std::fs::read_to_string(e.path()).unwrap().trim().parse().unwrap())
        .collect()
}

#[test]
fn every_rank_gets_torchruns_environment_and_rank0_stdout_is_forwarded() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!("{DUMP_ENV}; echo \"out $RANK\"; echo \"err $RANK\" >&2");
    let (result, lines) = run_sh(dir.path(), &script, 3, LaunchOpts::default());
    let exits = result.expect("all ranks succeed");
    assert_eq!(exits.len(), 3);
    for (i, e) in exits.iter().enumerate() {
        assert_eq!((e.rank, e.local_rank, e.code, e.signal), (i, i, Some(0), None));
        assert_eq!(e.stderr_tail, vec![format!("err {i}")]);
    }
    let port = env_of(dir.path(), 0)["MASTER_PORT"].clone();
    assert!(port.parse::<u16>().unwrap() > 0);
    for rank in 0..3 {
        let env = env_of(dir.path(), rank);
        let want = [
            ("RANK", rank.to_string()),
            ("LOCAL_RANK", rank.to_string()),
            ("WORLD_SIZE", "3".into()),
            ("LOCAL_WORLD_SIZE", "3".into()),
            ("GROUP_RANK", "0".into()),
            ("GROUP_WORLD_SIZE", "1".into()),
            ("MASTER_ADDR", "127.0.0.1".into()),
            ("MASTER_PORT", port.clone()),
        ];
        for (k, v) in want {
            assert_eq!(env.get(k), Some(&v), "rank {rank} {k}");
        }
        assert!(!env.contains_key("TORCHELASTIC_USE_AGENT_STORE"));
    }
    let stdout: Vec<_> = lines.iter().filter(|l| l.1 == Stream::Stdout).collect();
    assert_eq!(stdout, vec![&(0, Stream::Stdout, "out 0".to_string())]);
    let mut stderr: Vec<_> =
        lines.iter().filter(|l| l.1 == Stream::Stderr).map(|l| (l.0, l.2.clone())).collect();
    stderr.sort();
    assert_eq!(stderr, (0..3).map(|r| (r, format!("err {r}"))).collect::<Vec<_>>());
}

#[test]
fn second_node_ranks_are_offset_by_node_rank() {
    let dir = tempfile::tempdir().unwrap();
    let opts = LaunchOpts {
        nnodes: 2,
        node_rank: 1,
        master_addr: Some("10.1.2.3".into()),
        master_port: Some(29555),
        ..LaunchOpts::default()
    };
    let (result, _) = run_sh(dir.path(), DUMP_ENV, 2, opts);
    let exits = result.expect("all ranks succeed");
    assert_eq!(exits.iter().map(|e| e.rank).collect::<Vec<_>>(), vec![2, 3]);
    for (local, rank) in [(0, 2), (1, 3)] {
        let env = env_of(dir.path(), rank);
        assert_eq!(env["LOCAL_RANK"], local.to_string());
        assert_eq!(env["WORLD_SIZE"], "4");
        assert_eq!(env["LOCAL_WORLD_SIZE"], "2");
        assert_eq!(env["GROUP_RANK"], "1");
        assert_eq!(env["MASTER_ADDR"], "10.1.2.3");
        assert_eq!(env["MASTER_PORT"], "29555");
    }
}

#[test]
fn a_rank_killed_by_sigkill_ends_the_job_naming_it_and_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"echo $$ > "$D/pid.$RANK"
if [ "$RANK" = 1 ]; then sleep 0.5; echo "rank one is dying" >&2; kill -9 $$; fi
exec sleep 60"#;
    let start = Instant::now();
    let (result, _) = run_sh(dir.path(), script, 3, LaunchOpts::default());
    let elapsed = start.elapsed();
    let err = result.expect_err("the job fails");
    let msg = err.to_string();
    assert!(msg.starts_with("rank 1 exited with signal 9 (SIGKILL): "), "{msg}");
    assert!(msg.contains("rank one is dying"), "{msg}");
    // The other ranks sleep for 60 s; ending well before shows they were stopped.
    assert!(elapsed < Duration::from_secs(30), "took {elapsed:?}");
    let pids = pids(dir.path());
    assert_eq!(pids.len(), 3);
    for pid in pids {
        assert!(!alive(pid), "rank process {pid} is still running");
    }
}

#[test]
fn a_rank_exiting_non_zero_is_reported_with_its_code_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"if [ "$RANK" = 2 ]; then echo "train: error: bad shard" >&2; exit 3; fi
exec sleep 60"#;
    let (result, _) = run_sh(dir.path(), script, 3, LaunchOpts::default());
    match result {
        Err(LaunchError::RankFailed { rank, how, stderr_tail }) => {
            assert_eq!(rank, 2);
            assert_eq!(how, "exited with code 3");
            assert_eq!(stderr_tail, vec!["train: error: bad shard".to_string()]);
        }
        other => panic!("expected rank 2 to fail, got {other:?}"),
    }
}

#[test]
fn a_rank_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    // `trap '' TERM` makes SIGTERM ignored, and an ignored signal stays ignored across exec.
    let script = r#"echo $$ > "$D/pid.$RANK"
if [ "$RANK" = 0 ]; then sleep 0.5; exit 1; fi
trap '' TERM
exec sleep 60"#;
    let opts = LaunchOpts { grace: Duration::from_millis(300), ..LaunchOpts::default() };
    let (result, _) = run_sh(dir.path(), script, 2, opts);
    let msg = result.expect_err("rank 0 fails").to_string();
    assert!(msg.starts_with("rank 0 exited with code 1: (no stderr output)"), "{msg}");
    for pid in pids(dir.path()) {
        assert!(!alive(pid), "rank process {pid} is still running");
    }
}

#[test]
fn a_master_port_in_use_is_refused_before_any_rank_starts() {
    let dir = tempfile::tempdir().unwrap();
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let opts = LaunchOpts { master_port: Some(port), ..LaunchOpts::default() };
    let (result, _) = run_sh(dir.path(), r#"echo $$ > "$D/pid.$RANK""#, 2, opts);
    let err = result.expect_err("port is taken");
    assert!(matches!(err, LaunchError::PortInUse { port: p, .. } if p == port));
    assert!(err.to_string().contains("already in use"), "{err}");
    assert!(pids(dir.path()).is_empty(), "no rank may start");
}

#[test]
fn bad_options_and_a_missing_binary_are_clear_errors() {
    let several_nodes = LaunchOpts { nnodes: 2, ..LaunchOpts::default() };
    let err = launch(Path::new("/bin/true"), &[], 1, &several_nodes, |_| {}).unwrap_err();
    assert!(err.to_string().contains("--master-addr"), "{err}");

    let node_out_of_range = LaunchOpts { nnodes: 2, node_rank: 2, ..LaunchOpts::default() };
    let err = launch(Path::new("/bin/true"), &[], 1, &node_out_of_range, |_| {}).unwrap_err();
    assert_eq!(err.to_string(), "--node-rank 2 must be less than --nnodes 2");

    let err = launch(Path::new("/nonexistent/train"), &[], 2, &LaunchOpts::default(), |_| {})
        .unwrap_err();
    assert!(err.to_string().starts_with("cannot start rank 0 (/nonexistent/train): "), "{err}");
}
