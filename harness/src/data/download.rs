//! Download the FineWeb GPT-2 shards (`kjj0/fineweb10B-gpt2`) the way upstream's
//! `data/cached_fineweb10B.py` does, with resume, checksums and a header check (data.md §4.1).
//!
//! Each file goes to `<file>.part` first: a broken connection keeps it and the next call resumes
//! with `Range: bytes=N-`. The sha256 is checked against the server's `X-Linked-Etag` (the LFS
//! oid) or, failing that, a pinned hash; then the file is renamed into place and opened as a
//! shard, which checks magic, version and length.
use indicatif::{ProgressBar, ProgressStyle};
use reqwest::blocking::{Client, Response};
use reqwest::header::{HeaderMap, CONTENT_RANGE, LOCATION, RANGE};
use reqwest::StatusCode;
use sha2::{Digest, Sha256};
use std::fs::{self, File, OpenOptions};
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
pub const REPO: &str = "kjj0/fineweb10B-gpt2";
pub const REVISION: &str = "main";
/// Upstream's README downloads 9 train shards (900M tokens).
pub const DEFAULT_TRAIN_SHARDS: u32 = 9;

/// sha256 (= LFS oid) of the files whose hashes data.md §1.2 pins.
pub const PINNED_SHA256: [(&str, &str); 10] = [
    ("fineweb_val_000000.bin", "5b95c8e0966f0861685b307b23dc5ae42b228ef74b28cb499784ae021f201640"),
    (
        "fineweb_train_000001.bin",
        "771fa4a99b9fe0946ffb6e848b4ba5c6a9b0fe87860ebf03bc2c1c7e45f8178e",
    ),
    (
        "fineweb_train_000002.bin",
        "d4ba8d2d740905a836a4222d2aff01750560e7d49a51a745a1b3235520aec2cd",
    ),
    (
        "fineweb_train_000003.bin",
        "f70fa272369730fd9e39f1848bfe4daa3289b6e490c1e7762777f00ea8b66246",
    ),
    (
        "fineweb_train_000004.bin",
        "d8d88850f89fe2030e866380e90d544167467d407080403b830b903543925835",
    ),
    (
        "fineweb_train_000005.bin",
        "36cef3fc41863eb6731b41e986edde38e368853ee6deb87b928990bf445a119c",
    ),
    (
        "fineweb_train_000006.bin",
        "d80e5b209983e636655fc738fdf281f0132f0298bf4c0848f7e7a6bea6ca06f0",
    ),
    (
        "fineweb_train_000007.bin",
        "fa9f94dce61686b5467bc6cd3078424203db23ac254d804a6d8d5d440afc1e11",
    ),
    (
        "fineweb_train_000008.bin",
        "308e6937af5d78b7489a8aac3a3951dced5b46103e613f8bc4eb543f5092526c",
    ),
    (
        "fineweb_train_000009.bin",
        "1635300891634346ecff3a78d6e489a69c647885f0dcd249fe3eb76fac683458",
    ),
];

const MAX_REDIRECTS: usize = 10;
const CHUNK: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    /// The source chain (printed by `{:#}`) says what went wrong; `source` carries no URL.
    #[error("GET {url}")]
    Http {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("GET {url}: the server sent no answer within {} s; check the network and the endpoint (--endpoint or HF_ENDPOINT), then rerun (finished files are kept, a partial one resumes)", .waited.as_secs())]
    NoAnswer { url: String, waited: Duration },
    #[error("GET {url}: HTTP {status}; check the endpoint (--endpoint or HF_ENDPOINT)")]
    Status { url: String, status: StatusCode },
    #[error("GET {url}: redirect without a usable Location header")]
    BadRedirect { url: String },
    #[error("GET {url}: more than {MAX_REDIRECTS} redirects")]
    TooManyRedirects { url: String },
    #[error("GET {url}: asked for bytes {have}- but the server sent Content-Range {got:?}")]
    BadContentRange { url: String, have: u64, got: String },
    #[error("GET {url}: the server refused the range even for a fresh download (HTTP 416)")]
    RangeRefused { url: String },
    #[error("{part}: the download stopped after {got} of {expected} bytes ({why}); the partial file is kept, rerun to resume")]
    Incomplete { part: PathBuf, got: u64, expected: String, why: String },
    #[error("{file}: {got} bytes but the server says the file has {expected}; deleted {part}, rerun to download again")]
    SizeMismatch { file: String, part: PathBuf, got: u64, expected: u64 },
    #[error("{file}: sha256 {actual} does not match the expected {expected}; deleted the download, rerun to fetch it again")]
    Checksum { file: String, expected: String, actual: String },
    #[error("{path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} was downloaded but is not a valid shard, so it was deleted")]
    BadShard { path: PathBuf, source: corpus::shard::ShardError },
    #[error("{path} exists but is not a valid shard (delete it and rerun)")]
    BadExisting { path: PathBuf, source: corpus::shard::ShardError },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> DownloadError + '_ {
    move |source| DownloadError::Io { path: path.to_path_buf(), source }
}

/// What to fetch and where.
#[derive(Debug, Clone)]
pub struct DownloadOptions {
    /// Train shards `1..=train_shards`; the val shard is always fetched.
    pub train_shards: u32,
    /// Destination folder, e.g. [`default_dest`].
    pub dest: PathBuf,
    /// Hub endpoint; `None` means `HF_ENDPOINT`, else [`DEFAULT_ENDPOINT`].
    pub endpoint: Option<String>,
    /// Expected sha256 per file name, used when the server sends no `X-Linked-Etag`.
    pub pinned_sha256: Vec<(String, String)>,
    /// Ignore `HTTP(S)_PROXY` (for loopback servers).
    pub no_proxy: bool,
    /// How long to wait for the server to answer a request, and then for each read.
    pub timeout: Duration,
}

/// How long a silent server is waited for by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

impl DownloadOptions {
    /// The usual options: endpoint from the environment, upstream's pinned hashes.
    pub fn new(dest: PathBuf, train_shards: u32) -> DownloadOptions {
        DownloadOptions {
            train_shards,
            dest,
            endpoint: None,
            pinned_sha256: PINNED_SHA256
                .iter()
                .map(|(f, h)| (f.to_string(), h.to_string()))
                .collect(),
            no_proxy: false,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// `<root>/data/fineweb10B`, where upstream's loaders look.
pub fn default_dest(root: &Path) -> PathBuf {
    crate::paths::data_dir(root).join("fineweb10B")
}

/// The endpoint flag if given, else `HF_ENDPOINT`, else huggingface.co; no trailing slash.
pub fn resolve_endpoint(flag: Option<&str>) -> String {
    let env = std::env::var("HF_ENDPOINT").ok();
    let chosen = flag.or(env.as_deref().filter(|e| !e.is_empty())).unwrap_or(DEFAULT_ENDPOINT);
    chosen.trim_end_matches('/').to_string()
}

/// The files upstream's script fetches: val first, then train 1..=n.
pub fn file_names(train_shards: u32) -> Vec<String> {
    std::iter::once("fineweb_val_000000.bin".to_string())
        .chain((1..=train_shards).map(|i| format!("fineweb_train_{i:06}.bin")))
        .collect()
}

/// `{endpoint}/datasets/kjj0/fineweb10B-gpt2/resolve/main/{file}`.
pub fn file_url(endpoint: &str, file: &str) -> String {
    format!("{endpoint}/datasets/{REPO}/resolve/{REVISION}/{file}")
}

/// Downloads the val shard and `train_shards` train shards into `opts.dest`, skipping files that
/// are already complete. Returns the shard paths, val first.
pub fn download_fineweb(opts: &DownloadOptions) -> anyhow::Result<Vec<PathBuf>> {
    let endpoint = resolve_endpoint(opts.endpoint.as_deref());
    fs::create_dir_all(&opts.dest).map_err(io_err(&opts.dest))?;
    let mut builder = Client::builder()
        // Redirects are followed by hand so the hub's X-Linked-* headers can be read.
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(opts.timeout.min(Duration::from_secs(30)))
        // Per read on a blocking body, so a stalled connection fails instead of hanging.
        .timeout(opts.timeout);
    if opts.no_proxy {
        builder = builder.no_proxy();
    }
    let client = builder.build().map_err(|source| DownloadError::Http {
        url: endpoint.clone(),
        source: source.without_url(),
    })?;
    let mut paths = Vec::new();
    for file in file_names(opts.train_shards) {
        let dest = opts.dest.join(&file);
        if dest.exists() {
            corpus::shard::Shard::open(&dest)
                .map_err(|source| DownloadError::BadExisting { path: dest.clone(), source })?;
        } else {
            let pin = opts.pinned_sha256.iter().find(|(f, _)| *f == file).map(|(_, h)| h.as_str());
            let url = file_url(&endpoint, &file);
            // A silent server would otherwise look like a hung command.
            tracing::info!(
                "records: {file}: waiting for {} (gives up after {} s of silence)",
                url,
                opts.timeout.as_secs()
            );
            fetch(&client, &url, &file, &dest, pin, opts.timeout)?;
        }
        paths.push(dest);
    }
    Ok(paths)
}

/// What the hub says about the file on the way to the bytes.
#[derive(Default)]
struct Linked {
    sha256: Option<String>,
    size: Option<u64>,
}

impl Linked {
    fn absorb(&mut self, headers: &HeaderMap) {
        let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        if let Some(tag) = get("x-linked-etag").and_then(sha256_etag) {
            self.sha256 = Some(tag);
        }
        if let Some(size) = get("x-linked-size").and_then(|s| s.parse().ok()) {
            self.size = Some(size);
        }
    }
}

/// An ETag that is a sha256 (LFS oid): quotes and a weak `W/` prefix stripped. Git blob ETags
/// (40-hex sha1) are not content hashes of LFS files, so they are ignored.
fn sha256_etag(tag: &str) -> Option<String> {
    let t = tag.trim().trim_start_matches("W/").trim_matches('"');
    (t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit())).then(|| t.to_ascii_lowercase())
}

/// GET `url` with an optional `Range: bytes={have}-`, following redirects and keeping the
/// Range on every hop.
fn get(
    client: &Client,
    url: &str,
    have: u64,
    timeout: Duration,
) -> Result<(Response, Linked), DownloadError> {
    let mut linked = Linked::default();
    let mut url = reqwest::Url::parse(url)
        .map_err(|_| DownloadError::BadRedirect { url: url.to_string() })?;
    for _ in 0..=MAX_REDIRECTS {
        let mut req = client.get(url.clone());
        if have > 0 {
            req = req.header(RANGE, format!("bytes={have}-"));
        }
        let resp = req.send().map_err(|source| match source.is_timeout() {
            true => DownloadError::NoAnswer { url: url.to_string(), waited: timeout },
            false => DownloadError::Http { url: url.to_string(), source: source.without_url() },
        })?;
        linked.absorb(resp.headers());
        if !resp.status().is_redirection() {
            return Ok((resp, linked));
        }
        let next = resp
            .headers()
            .get(LOCATION)
            .and_then(|l| l.to_str().ok())
            .and_then(|l| url.join(l).ok())
            .ok_or_else(|| DownloadError::BadRedirect { url: url.to_string() })?;
        url = next;
    }
    Err(DownloadError::TooManyRedirects { url: url.to_string() })
}

/// Downloads one file to `dest` via `dest.part`.
fn fetch(
    client: &Client,
    url: &str,
    file: &str,
    dest: &Path,
    pin: Option<&str>,
    timeout: Duration,
) -> Result<(), DownloadError> {
    let part = dest.with_file_name(format!("{file}.part"));
    let mut retried_416 = false;
    let (mut resp, linked, have) = loop {
        let have = fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
        let (resp, linked) = get(client, url, have, timeout)?;
        match resp.status() {
            StatusCode::RANGE_NOT_SATISFIABLE if have > 0 && range_total(&resp) == Some(have) => {
                // An earlier run got every byte but stopped before the checks: finish it.
                return finish(&part, dest, file, have, &linked, pin);
            }
            StatusCode::RANGE_NOT_SATISFIABLE if have > 0 && !retried_416 => {
                // The .part is no prefix the server recognises (e.g. the file changed): restart.
                fs::remove_file(&part).map_err(io_err(&part))?;
                retried_416 = true;
            }
            StatusCode::RANGE_NOT_SATISFIABLE => {
                return Err(DownloadError::RangeRefused { url: url.to_string() })
            }
            StatusCode::PARTIAL_CONTENT if have > 0 => {
                let got = resp
                    .headers()
                    .get(CONTENT_RANGE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                if !got.starts_with(&format!("bytes {have}-")) {
                    return Err(DownloadError::BadContentRange { url: url.to_string(), have, got });
                }
                break (resp, linked, have);
            }
            // 200 after a Range means the server ignored it: start over.
            StatusCode::OK => break (resp, linked, 0),
            status => return Err(DownloadError::Status { url: url.to_string(), status }),
        }
    };
    let mut out =
        if have > 0 { OpenOptions::new().append(true).open(&part) } else { File::create(&part) }
            .map_err(io_err(&part))?;
    let total = resp.content_length().map(|n| n + have);
    let got = copy_with_progress(&mut resp, &mut out, file, have, total);
    out.sync_all().map_err(io_err(&part))?;
    drop(out);
    let incomplete = |got: u64, why: String| DownloadError::Incomplete {
        part: part.clone(),
        got,
        expected: total.map_or("an unknown number of".into(), |t| t.to_string()),
        why,
    };
    let got = match got {
        Ok(n) => n,
        Err((n, e)) => return Err(incomplete(n, e.to_string())),
    };
    if let Some(t) = total.filter(|&t| got < t) {
        return Err(incomplete(got, format!("{} bytes short", t - got)));
    }
    finish(&part, dest, file, got, &linked, pin)
}

/// The total size in a 416's `Content-Range: bytes */N`.
fn range_total(resp: &Response) -> Option<u64> {
    resp.headers().get(CONTENT_RANGE)?.to_str().ok()?.strip_prefix("bytes */")?.parse().ok()
}

/// Checks a fully received `part` (size, sha256), renames it to `dest` and opens it as a shard.
fn finish(
    part: &Path,
    dest: &Path,
    file: &str,
    got: u64,
    linked: &Linked,
    pin: Option<&str>,
) -> Result<(), DownloadError> {
    if let Some(expected) = linked.size.filter(|&s| s != got) {
        fs::remove_file(part).map_err(io_err(part))?;
        return Err(DownloadError::SizeMismatch {
            file: file.to_string(),
            part: part.to_path_buf(),
            got,
            expected,
        });
    }
    check_sha256(part, file, linked.sha256.as_deref(), pin)?;
    fs::rename(part, dest).map_err(io_err(dest))?;
    if let Err(source) = corpus::shard::Shard::open(dest) {
        fs::remove_file(dest).map_err(io_err(dest))?;
        return Err(DownloadError::BadShard { path: dest.to_path_buf(), source });
    }
    Ok(())
}

/// Streams the body into `out`; returns the file's total size so far, or that size and the error.
fn copy_with_progress(
    body: &mut Response,
    out: &mut File,
    file: &str,
    have: u64,
    total: Option<u64>,
) -> Result<u64, (u64, std::io::Error)> {
    let bar = if std::io::stderr().is_terminal() {
        let bar = total.map_or_else(ProgressBar::no_length, ProgressBar::new);
        if let Ok(style) = ProgressStyle::with_template(
            "{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        ) {
            bar.set_style(style);
        }
        bar
    } else {
        ProgressBar::hidden()
    };
    bar.set_message(file.to_string());
    bar.set_position(have);
    let mut got = have;
    let mut buf = vec![0u8; CHUNK];
    let result = loop {
        match body.read(&mut buf) {
            Ok(0) => break Ok(got),
            Ok(n) => {
                if let Err(e) = out.write_all(&buf[..n]) {
                    break Err((got, e));
                }
                got += n as u64;
                bar.set_position(got);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => break Err((got, e)),
        }
    };
    bar.finish_and_clear();
    result
}

/// Checks `part` against the live LFS oid, else the pinned hash; deletes it on a mismatch.
fn check_sha256(
    part: &Path,
    file: &str,
    live: Option<&str>,
    pin: Option<&str>,
) -> Result<(), DownloadError> {
    if let (Some(l), Some(p)) = (live, pin) {
        if !l.eq_ignore_ascii_case(p) {
            tracing::warn!(
                "warning: {file}: the hub's sha256 {l} differs from the pinned {p}; checking against the hub's"
            );
        }
    }
    let Some(expected) = live.or(pin) else {
        return Ok(());
    };
    let actual = sha256_file(part)?;
    if actual.eq_ignore_ascii_case(expected) {
        return Ok(());
    }
    fs::remove_file(part).map_err(io_err(part))?;
    Err(DownloadError::Checksum { file: file.to_string(), expected: expected.to_string(), actual })
}

fn sha256_file(path: &Path) -> Result<String, DownloadError> {
    let mut f = File::open(path).map_err(io_err(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_names_follow_upstream() {
        assert_eq!(
            file_names(2),
            ["fineweb_val_000000.bin", "fineweb_train_000001.bin", "fineweb_train_000002.bin"]
        );
        assert_eq!(
            file_url("https://huggingface.co", "fineweb_train_000001.bin"),
            "https://huggingface.co/datasets/kjj0/fineweb10B-gpt2/resolve/main/fineweb_train_000001.bin"
        );
        assert_eq!(resolve_endpoint(Some("http://x:1/")), "http://x:1");
    }

    #[test]
    fn etags_are_unquoted_and_only_sha256_counts() {
        let h = "5b95c8e0966f0861685b307b23dc5ae42b228ef74b28cb499784ae021f201640";
        assert_eq!(sha256_etag(&format!("\"{h}\"")).as_deref(), Some(h));
        assert_eq!(sha256_etag(&format!("W/\"{h}\"")).as_deref(), Some(h));
        assert_eq!(sha256_etag("\"2aae6c35c94fcfb415dbe95f408b9ce91ee846ed\""), None);
    }

    #[test]
    fn pins_cover_the_readme_download() {
        for f in file_names(DEFAULT_TRAIN_SHARDS) {
            assert!(PINNED_SHA256.iter().any(|(p, _)| *p == f), "{f}");
        }
    }
}
