//! `records data fineweb` against a server that accepts the connection and never answers: it
//! says what it waits for, then gives up after --timeout with a retry message.
use std::net::TcpListener;
use std::time::{Duration, Instant};

mod sandbox;

#[test]
fn a_silent_server_times_out_with_a_retry_message() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accepts and holds every connection, answering nothing.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    let dest = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = sandbox::Sandbox::new()
        .records()
        .args(["data", "fineweb", "--train-shards", "1", "--timeout", "2"])
        .args(["--endpoint", &format!("http://127.0.0.1:{port}")])
        .arg("--dest")
        .arg(dest.path())
        .output()
        .unwrap();
    let waited = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let url = format!(
        "http://127.0.0.1:{port}/datasets/kjj0/fineweb10B-gpt2/resolve/main/fineweb_val_000000.bin"
    );
    assert!(err.contains(&format!("waiting for {url} (gives up after 2 s of silence)")), "{err}");
    assert!(err.contains("the server sent no answer within 2 s") && err.contains("rerun"), "{err}");
    assert!(waited < Duration::from_secs(30), "took {waited:?}");
    println!("{err}");
}
