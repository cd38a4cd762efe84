//! The FineWeb downloader against real HTTP servers on loopback: a tiny_http "hub" that
//! redirects to a "CDN" with Range support, and a raw TCP server that breaks a download midway.
use records::data::download::{download_fineweb, file_url, DownloadOptions};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

const VAL: &str = "fineweb_val_000000.bin";
const TRAIN1: &str = "fineweb_train_000001.bin";

/// A shard's bytes: the 256 x i32 header, then `ntok` u16 tokens (more than one 64 KiB chunk).
fn shard_bytes(ntok: usize, seed: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(1024 + 2 * ntok);
    for w in [20240520i32, 1, ntok as i32] {
        b.extend_from_slice(&w.to_le_bytes());
    }
    b.resize(1024, 0);
    for i in 0..ntok as u32 {
        let tok = (i.wrapping_mul(2654435761).wrapping_add(seed) % 50257) as u16;
        b.extend_from_slice(&tok.to_le_bytes());
    }
    b
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn part(dir: &Path, file: &str) -> PathBuf {
    dir.join(format!("{file}.part"))
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Normal,
    /// Sends `X-Linked-Etag` on the redirect, as the hub does.
    WithEtag,
    /// Answers every request with 200 and the whole file.
    IgnoreRange,
}

/// (path, Range header) of every request, in order.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A hub at `/datasets/kjj0/fineweb10B-gpt2/resolve/main/F` that redirects to `/cdn/F`.
struct Hub {
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
    endpoint: String,
    seen: Seen,
}

impl Hub {
    fn start(files: HashMap<String, Vec<u8>>, mode: Mode) -> Hub {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
        let port = server.server_addr().to_ip().unwrap().port();
        let seen: Seen = Arc::default();
        let (srv, log) = (server.clone(), seen.clone());
        let thread = std::thread::spawn(move || {
            for req in srv.incoming_requests() {
                let path = req.url().to_string();
                let range = req
                    .headers()
                    .iter()
                    .find(|h| h.field.equiv("Range"))
                    .map(|h| h.value.to_string());
                log.lock().unwrap().push((path.clone(), range.clone()));
                let _ = req.respond(answer(&files, mode, &path, range));
            }
        });
        Hub { server, thread: Some(thread), endpoint: format!("http://127.0.0.1:{port}"), seen }
    }

    fn seen(&self) -> Vec<(String, Option<String>)> {
        self.seen.lock().unwrap().clone()
    }

    fn options(&self, dest: &Path, train_shards: u32) -> DownloadOptions {
        DownloadOptions {
            train_shards,
            dest: dest.to_path_buf(),
            endpoint: Some(self.endpoint.clone()),
            pinned_sha256: Vec::new(),
            no_proxy: true,
            timeout: records::data::download::DEFAULT_TIMEOUT,
        }
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn header(name: &str, value: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).unwrap()
}

fn answer(
    files: &HashMap<String, Vec<u8>>,
    mode: Mode,
    path: &str,
    range: Option<String>,
) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    let not_found = || tiny_http::Response::from_data(b"not found".to_vec()).with_status_code(404);
    if let Some(name) = path.strip_prefix("/datasets/kjj0/fineweb10B-gpt2/resolve/main/") {
        let Some(data) = files.get(name) else {
            return not_found();
        };
        let mut r = tiny_http::Response::from_data(Vec::new())
            .with_status_code(302)
            .with_header(header("Location", &format!("/cdn/{name}")));
        if mode == Mode::WithEtag {
            r = r
                .with_header(header("X-Linked-Etag", &format!("\"{}\"", sha256(data))))
                .with_header(header("X-Linked-Size", &data.len().to_string()));
        }
        return r;
    }
    let Some(data) = path.strip_prefix("/cdn/").and_then(|n| files.get(n)) else {
        return not_found();
    };
    let from = range
        .filter(|_| mode != Mode::IgnoreRange)
        .and_then(|r| r.strip_prefix("bytes=")?.strip_suffix('-')?.parse::<usize>().ok());
    match from {
        None => tiny_http::Response::from_data(data.clone()),
        Some(n) if n >= data.len() => tiny_http::Response::from_data(Vec::new())
            .with_status_code(416)
            .with_header(header("Content-Range", &format!("bytes */{}", data.len()))),
        Some(n) => {
            tiny_http::Response::from_data(data[n..].to_vec()).with_status_code(206).with_header(
                header("Content-Range", &format!("bytes {n}-{}/{}", data.len() - 1, data.len())),
            )
        }
    }
}

fn two_files() -> HashMap<String, Vec<u8>> {
    HashMap::from([
        (VAL.to_string(), shard_bytes(50_000, 1)),
        (TRAIN1.to_string(), shard_bytes(40_000, 2)),
    ])
}

#[test]
fn downloads_through_redirect_checks_sha256_and_skips_complete_files() {
    let files = two_files();
    let hub = Hub::start(files.clone(), Mode::Normal);
    let dir = tempfile::tempdir().unwrap();
    let mut opts = hub.options(dir.path(), 1);
    opts.pinned_sha256 = files.iter().map(|(f, b)| (f.clone(), sha256(b))).collect();
    let paths = download_fineweb(&opts).unwrap();
    assert_eq!(paths, [dir.path().join(VAL), dir.path().join(TRAIN1)]);
    for (name, bytes) in &files {
        assert_eq!(&std::fs::read(dir.path().join(name)).unwrap(), bytes);
        assert!(!part(dir.path(), name).exists());
    }
    let shard = corpus::shard::Shard::open(&paths[0]).unwrap();
    assert_eq!(shard.len(), 50_000);
    let seen = hub.seen();
    assert_eq!(
        seen.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
        [
            "/datasets/kjj0/fineweb10B-gpt2/resolve/main/fineweb_val_000000.bin",
            "/cdn/fineweb_val_000000.bin",
            "/datasets/kjj0/fineweb10B-gpt2/resolve/main/fineweb_train_000001.bin",
            "/cdn/fineweb_train_000001.bin",
        ]
    );
    assert!(seen.iter().all(|(_, r)| r.is_none()));

    // A second call finds both files complete and asks for nothing.
    download_fineweb(&opts).unwrap();
    assert_eq!(hub.seen().len(), 4);
}

#[test]
fn wrong_pinned_sha256_is_rejected_and_leaves_no_file() {
    let files = two_files();
    let hub = Hub::start(files, Mode::Normal);
    let dir = tempfile::tempdir().unwrap();
    let mut opts = hub.options(dir.path(), 0);
    opts.pinned_sha256 = vec![(VAL.to_string(), "ab".repeat(32))];
    let err = format!("{:#}", download_fineweb(&opts).unwrap_err());
    assert!(
        err.contains("fineweb_val_000000.bin: sha256") && err.contains(&"ab".repeat(32)),
        "{err}"
    );
    assert!(!dir.path().join(VAL).exists());
    assert!(!part(dir.path(), VAL).exists());
}

#[test]
fn live_etag_is_checked_before_the_pin() {
    let files = two_files();
    let hub = Hub::start(files.clone(), Mode::WithEtag);
    let dir = tempfile::tempdir().unwrap();
    // The pin is wrong but the hub's X-Linked-Etag is right: the hub's hash wins.
    let mut opts = hub.options(dir.path(), 0);
    opts.pinned_sha256 = vec![(VAL.to_string(), "cd".repeat(32))];
    download_fineweb(&opts).unwrap();
    assert_eq!(std::fs::read(dir.path().join(VAL)).unwrap(), files[VAL]);
}

#[test]
fn resumes_a_part_file_through_the_redirect() {
    let files = two_files();
    let hub = Hub::start(files.clone(), Mode::WithEtag);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(part(dir.path(), VAL), &files[VAL][..1000]).unwrap();
    download_fineweb(&hub.options(dir.path(), 0)).unwrap();
    assert_eq!(std::fs::read(dir.path().join(VAL)).unwrap(), files[VAL]);
    let seen = hub.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|(_, r)| r.as_deref() == Some("bytes=1000-")), "{seen:?}");
}

#[test]
fn part_past_the_end_gets_416_and_restarts() {
    let files = two_files();
    let hub = Hub::start(files.clone(), Mode::Normal);
    let dir = tempfile::tempdir().unwrap();
    let mut long = files[VAL].clone();
    long.extend([7u8; 10]);
    std::fs::write(part(dir.path(), VAL), &long).unwrap();
    download_fineweb(&hub.options(dir.path(), 0)).unwrap();
    assert_eq!(std::fs::read(dir.path().join(VAL)).unwrap(), files[VAL]);
    let ranges: Vec<_> = hub.seen().into_iter().map(|(_, r)| r).collect();
    let asked = format!("bytes={}-", long.len());
    assert_eq!(
        ranges,
        [Some(asked.clone()), Some(asked), None, None],
        "416, then a fresh download"
    );
}

#[test]
fn a_complete_part_is_checked_and_kept_without_refetching() {
    let files = two_files();
    let hub = Hub::start(files.clone(), Mode::WithEtag);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(part(dir.path(), VAL), &files[VAL]).unwrap();
    download_fineweb(&hub.options(dir.path(), 0)).unwrap();
    assert_eq!(std::fs::read(dir.path().join(VAL)).unwrap(), files[VAL]);
    assert!(!part(dir.path(), VAL).exists());
    let asked = format!("bytes={}-", files[VAL].len());
    let ranges: Vec<_> = hub.seen().into_iter().map(|(_, r)| r).collect();
    assert_eq!(ranges, [Some(asked.clone()), Some(asked)], "one 416, no body");

    // The same with a corrupted byte: the live sha256 rejects it.
    let dir = tempfile::tempdir().unwrap();
    let mut bad = files[VAL].clone();
    bad[5000] ^= 1;
    std::fs::write(part(dir.path(), VAL), &bad).unwrap();
    let err = format!("{:#}", download_fineweb(&hub.options(dir.path(), 0)).unwrap_err());
    assert!(err.contains("sha256"), "{err}");
    assert!(!part(dir.path(), VAL).exists() && !dir.path().join(VAL).exists());
}

#[test]
fn a_server_that_ignores_range_means_starting_over() {
    let files = two_files();
    let hub = Hub::start(files.clone(), Mode::IgnoreRange);
    let dir = tempfile::tempdir().unwrap();
    // A stale prefix that would corrupt the file if it were appended to.
    std::fs::write(part(dir.path(), VAL), [0xffu8; 1000]).unwrap();
    download_fineweb(&hub.options(dir.path(), 0)).unwrap();
    assert_eq!(std::fs::read(dir.path().join(VAL)).unwrap(), files[VAL]);
}

#[test]
fn corrupt_magic_is_rejected_and_deleted() {
    let mut bad = shard_bytes(1000, 3);
    bad[0] ^= 0xff;
    let hub = Hub::start(HashMap::from([(VAL.to_string(), bad)]), Mode::Normal);
    let dir = tempfile::tempdir().unwrap();
    let err = format!("{:#}", download_fineweb(&hub.options(dir.path(), 0)).unwrap_err());
    assert!(err.contains("bad magic number"), "{err}");
    assert!(!dir.path().join(VAL).exists());
    assert!(!part(dir.path(), VAL).exists());
}

#[test]
fn an_existing_broken_file_is_reported_not_overwritten() {
    let hub = Hub::start(two_files(), Mode::Normal);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(VAL), b"not a shard").unwrap();
    let err = format!("{:#}", download_fineweb(&hub.options(dir.path(), 0)).unwrap_err());
    assert!(err.contains("delete it and rerun"), "{err}");
    assert_eq!(std::fs::read(dir.path().join(VAL)).unwrap(), b"not a shard");
    assert!(hub.seen().is_empty());
}

#[test]
fn unknown_file_is_an_http_error_naming_the_url() {
    let hub = Hub::start(HashMap::new(), Mode::Normal);
    let dir = tempfile::tempdir().unwrap();
    let err = format!("{:#}", download_fineweb(&hub.options(dir.path(), 0)).unwrap_err());
    assert!(err.contains(&file_url(&hub.endpoint, VAL)) && err.contains("404"), "{err}");
}

/// Serves two connections: the first breaks off after half the body, the
/// next honours `Range: bytes=N-`. Returns the endpoint and the Range headers it saw.
fn breaking_server(data: Vec<u8>) -> (String, JoinHandle<Vec<Option<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let mut ranges = Vec::new();
        for (i, stream) in listener.incoming().take(2).enumerate() {
            let mut stream = stream.unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut range = None;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line == "\r\n" || line.is_empty() {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    if k.eq_ignore_ascii_case("range") {
                        range = Some(v.trim().to_string());
                    }
                }
            }
            let len = data.len();
            if i == 0 {
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
                );
                stream.write_all(head.as_bytes()).unwrap();
                stream.write_all(&data[..len / 2]).unwrap();
            } else {
                let from: usize = range
                    .as_deref()
                    .and_then(|r| r.strip_prefix("bytes=")?.strip_suffix('-')?.parse().ok())
                    .unwrap_or(0);
                let head = format!(
                    "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {from}-{}/{len}\r\nConnection: close\r\n\r\n",
                    len - from,
                    len - 1
                );
                stream.write_all(head.as_bytes()).unwrap();
                stream.write_all(&data[from..]).unwrap();
            }
            stream.flush().unwrap();
            ranges.push(range);
        }
        ranges
    });
    (endpoint, handle)
}

#[test]
fn a_broken_connection_keeps_the_part_and_the_next_call_resumes() {
    let data = shard_bytes(60_000, 4);
    let (endpoint, server) = breaking_server(data.clone());
    let dir = tempfile::tempdir().unwrap();
    let opts = DownloadOptions {
        train_shards: 0,
        dest: dir.path().to_path_buf(),
        endpoint: Some(endpoint),
        pinned_sha256: vec![(VAL.to_string(), sha256(&data))],
        no_proxy: true,
        timeout: records::data::download::DEFAULT_TIMEOUT,
    };
    let err = format!("{:#}", download_fineweb(&opts).unwrap_err());
    assert!(err.contains("rerun to resume"), "{err}");
    assert!(err.contains("fineweb_val_000000.bin.part"), "{err}");
    let kept = std::fs::read(part(dir.path(), VAL)).unwrap();
    assert_eq!(kept, data[..data.len() / 2]);
    assert!(!dir.path().join(VAL).exists());

    download_fineweb(&opts).unwrap();
    assert_eq!(std::fs::read(dir.path().join(VAL)).unwrap(), data);
    let ranges = server.join().unwrap();
    assert_eq!(ranges, [None, Some(format!("bytes={}-", data.len() / 2))]);
}
