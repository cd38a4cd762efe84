//! Record #62 as two GPUs would hold it, on two CPU `train` ranks over TCP: `--bf16` forces CUDA's
//! storage policy (bf16 embeddings, head, gates and block matrices beside fp32 Adam moments,
//! upstream #56-#57), and every collective holds to NCCL's contract (tensors on the rank's
//! device, one dtype per reduce-scatter). A bf16 gradient scattered into an fp32 buffer, which
//! would stop the first 2-GPU run at its first Adam step, stops this test.
use std::path::Path;
use std::process::{Child, Command, Stdio};

mod common;

/// #62's lab manifest with two ranks of one 2,048-token micro-batch each.
fn manifest(dir: &Path) {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/records/62.toml"))
        .unwrap()
        .replace(
            "batch_tokens = 2048\nreference_ranks = 1",
            "batch_tokens = 4096\nreference_ranks = 2",
        );
    assert!(text.contains("reference_ranks = 2\nsteps = 240"), "the [lab] table changed");
    std::fs::write(dir.join("62.toml"), text).unwrap();
}

fn rank(dir: &Path, rank: usize, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_train"))
        // Two steps: Muon alone, then Muon and Adam (Adam steps every other step from #39).
        .args(["--scale", "lab", "--steps", "2", "--cpu", "--bf16", "--manifest"])
        .arg(dir.join("62.toml"))
        .arg("--data")
        .arg(dir)
        .envs([
            ("RANK", rank.to_string()),
            ("WORLD_SIZE", "2".into()),
            ("LOCAL_RANK", rank.to_string()),
            ("LOCAL_WORLD_SIZE", "2".into()),
            ("MASTER_ADDR", "127.0.0.1".into()),
            ("MASTER_PORT", port.to_string()),
            ("OMP_NUM_THREADS", "1".into()),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn record_62_trains_on_two_ranks_with_the_gpu_storage_policy() {
    let dir = tempfile::tempdir().unwrap();
    manifest(dir.path());
    common::byte_document_shards(dir.path(), 62, 60_000);
    let port = common::free_port();
    let (r0, r1) = (rank(dir.path(), 0, port), rank(dir.path(), 1, port));
    for (r, child) in [r0, r1].into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        let (stdout, stderr) =
            (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "rank {r}:\n{stderr}\n{stdout}");
        if r == 0 {
            let losses: Vec<f64> = stdout
                .lines()
                .filter(|l| l.starts_with("step:"))
                .filter_map(|l| l.split_whitespace().find_map(|w| w.split_once("loss:")))
                .map(|(_, v)| v.parse().unwrap())
                .collect();
            assert_eq!(losses.len(), 4, "val at 0, 2 train steps, val at 2: {stdout}");
            assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
            // The val losses start near ln(320): the bf16 model is the lab's.
            assert!((losses[0] - 320f64.ln()).abs() < 0.1, "{losses:?}");
        }
    }
}
