//! The FineWeb shard format shared by modded-nanogpt's `fineweb.py` and llm.c: a 256 x int32
//! little-endian header `[20240520, 1, ntok, 0...]` followed by `ntok` u16 little-endian tokens.
use memmap2::Mmap;
use std::fs::File;
use std::path::{Path, PathBuf};

/// `header[0]`: GPT-2 tokens stored as u16.
pub const MAGIC: i32 = 20240520;
/// `header[1]`.
pub const VERSION: i32 = 1;
/// 256 x int32.
pub const HEADER_BYTES: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// The message holds the cause, so it is not also a `source` (that would print it twice).
    #[error("{path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    #[error("{path}: too short for a shard header: {len} bytes, need at least 1024")]
    NoHeader { path: PathBuf, len: u64 },
    #[error("{path}: bad magic number {found} (expected {MAGIC}); not a FineWeb GPT-2 shard")]
    BadMagic { path: PathBuf, found: i32 },
    #[error("{path}: unsupported shard version {found} (expected {VERSION})")]
    BadVersion { path: PathBuf, found: i32 },
    #[error("{path}: header gives a negative token count {ntok}")]
    NegativeCount { path: PathBuf, ntok: i32 },
    #[error(
        "{path}: odd body length: {body} bytes after the header is not a whole number of u16 tokens"
    )]
    OddLength { path: PathBuf, body: u64 },
    #[error(
        "{path}: truncated: header says {ntok} tokens ({expected} bytes) but the file has {actual} bytes"
    )]
    Truncated { path: PathBuf, ntok: u64, expected: u64, actual: u64 },
    #[error(
        "{path}: trailing data: header says {ntok} tokens ({expected} bytes) but the file has {actual} bytes"
    )]
    TooLong { path: PathBuf, ntok: u64, expected: u64, actual: u64 },
    #[error("{path}: {ntok} tokens do not fit the header's int32 count")]
    TooManyTokens { path: PathBuf, ntok: usize },
    #[error("{path}: token {position} is id {id}, outside the vocabulary of {vocab} (ids 0..={max}); the shard was made with another tokenizer, or it is corrupt", max = .vocab - 1)]
    IdOutOfVocab { path: PathBuf, position: usize, id: u16, vocab: usize },
    #[error("{dir}: no shards matching *_{split}_*.bin")]
    NoShards { dir: PathBuf, split: String },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ShardError + '_ {
    move |error| ShardError::Io { path: path.to_path_buf(), error }
}

/// A validated, memory-mapped shard.
pub struct Shard {
    path: PathBuf,
    /// `None` for an empty body (mapping zero bytes is not portable).
    map: Option<Mmap>,
    ntok: usize,
}

impl std::fmt::Debug for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard").field("path", &self.path).field("ntok", &self.ntok).finish()
    }
}

impl Shard {
    /// Maps `path` and checks magic, version and that the size is exactly `1024 + 2*ntok`.
    pub fn open(path: &Path) -> Result<Shard, ShardError> {
        let file = File::open(path).map_err(io_err(path))?;
        let actual = file.metadata().map_err(io_err(path))?.len();
        let p = || path.to_path_buf();
        if actual < HEADER_BYTES as u64 {
            return Err(ShardError::NoHeader { path: p(), len: actual });
        }
        // SAFETY: shards are read-only inputs; nothing in this process writes to them while mapped.
        let map = unsafe { Mmap::map(&file) }.map_err(io_err(path))?;
        let word = |i: usize| i32::from_le_bytes(map[4 * i..4 * i + 4].try_into().unwrap());
        let (magic, version, ntok) = (word(0), word(1), word(2));
        if magic != MAGIC {
            return Err(ShardError::BadMagic { path: p(), found: magic });
        }
        if version != VERSION {
            return Err(ShardError::BadVersion { path: p(), found: version });
        }
        if ntok < 0 {
            return Err(ShardError::NegativeCount { path: p(), ntok });
        }
        let body = actual - HEADER_BYTES as u64;
        if body % 2 == 1 {
            return Err(ShardError::OddLength { path: p(), body });
        }
        let expected = HEADER_BYTES as u64 + 2 * ntok as u64;
        if actual != expected {
            let (ntok, path) = (ntok as u64, p());
            return Err(if actual < expected {
                ShardError::Truncated { path, ntok, expected, actual }
            } else {
                ShardError::TooLong { path, ntok, expected, actual }
            });
        }
        Ok(Shard { path: p(), map: (ntok > 0).then_some(map), ntok: ntok as usize })
    }

    /// The tokens, zero-copy. The body starts at byte 1024 of a page-aligned map, so it is
    /// u16-aligned; the format is little-endian and so are all supported targets.
    pub fn tokens(&self) -> &[u16] {
        match &self.map {
            Some(m) => bytemuck::cast_slice(&m[HEADER_BYTES..]),
            None => &[],
        }
    }

    pub fn len(&self) -> usize {
        self.ntok
    }

    pub fn is_empty(&self) -> bool {
        self.ntok == 0
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every token id must be below `vocab`: an embedding lookup or a loss target beyond it
    /// would fail deep inside the trainer. The error names the first offending position.
    pub fn check_ids(&self, vocab: usize) -> Result<(), ShardError> {
        let toks = self.tokens();
        // The maximum is one fast pass; the position is looked for only when it is too big.
        if toks.iter().copied().max().is_none_or(|m| usize::from(m) < vocab) {
            return Ok(());
        }
        let position = toks.iter().position(|&t| usize::from(t) >= vocab).unwrap_or(0);
        Err(ShardError::IdOutOfVocab {
            path: self.path.clone(),
            position,
            id: toks[position],
            vocab,
        })
    }
}

#[cfg(not(target_endian = "little"))]
compile_error!("corpus::shard maps little-endian token files directly; big-endian is unsupported");

/// Writes `tokens` as a shard at `path`, atomically (temp file in the same dir, then rename).
pub fn write_shard(path: &Path, tokens: &[u16]) -> Result<(), ShardError> {
    let ntok = i32::try_from(tokens.len())
        .map_err(|_| ShardError::TooManyTokens { path: path.to_path_buf(), ntok: tokens.len() })?;
    let mut header = [0i32; 256];
    header[0] = MAGIC;
    header[1] = VERSION;
    header[2] = ntok;
    let mut bytes = Vec::with_capacity(HEADER_BYTES + 2 * tokens.len());
    for w in header {
        bytes.extend_from_slice(&w.to_le_bytes());
    }
    for t in tokens {
        bytes.extend_from_slice(&t.to_le_bytes());
    }
    crate::fs::write_atomic(path, &bytes).map_err(io_err(path))
}

/// The shards of one split in `dir`: files named `*_{split}_*.bin`, sorted by name.
pub fn shard_files(dir: &Path, split: &str) -> Result<Vec<PathBuf>, ShardError> {
    let marker = format!("_{split}_");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(".bin")
            && name[..name.len() - 4].contains(&marker)
            && entry.file_type().map_err(io_err(dir))?.is_file()
        {
            files.push(entry.path());
        }
    }
    if files.is_empty() {
        return Err(ShardError::NoShards { dir: dir.to_path_buf(), split: split.to_string() });
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(magic: i32, version: i32, ntok: i32) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_BYTES];
        h[0..4].copy_from_slice(&magic.to_le_bytes());
        h[4..8].copy_from_slice(&version.to_le_bytes());
        h[8..12].copy_from_slice(&ntok.to_le_bytes());
        h
    }

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x_train_000001.bin");
        let toks: Vec<u16> = (0..5000u32).map(|i| (i * 7919 % 65536) as u16).collect();
        write_shard(&path, &toks).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 1024 + 2 * toks.len() as u64);
        let s = Shard::open(&path).unwrap();
        assert_eq!(s.len(), toks.len());
        assert_eq!(s.tokens(), &toks[..]);
        assert_eq!(s.path(), path);
        let raw = std::fs::read(&path).unwrap();
        assert_eq!(raw[..12], header(MAGIC, VERSION, 5000)[..12]);
        assert!(raw[12..1024].iter().all(|&b| b == 0));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o644);
        }
    }

    #[test]
    fn ids_beyond_the_vocabulary_are_named_with_their_position() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x_train_000001.bin");
        write_shard(&path, &[5, 256, 3, 300, 257]).unwrap();
        let s = Shard::open(&path).unwrap();
        assert!(s.check_ids(301).is_ok());
        let e = s.check_ids(257).unwrap_err();
        assert!(
            matches!(e, ShardError::IdOutOfVocab { position: 3, id: 300, vocab: 257, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("x_train_000001.bin: token 3 is id 300, outside the vocabulary of 257 (ids 0..=256)"), "{e}");
    }

    #[test]
    fn empty_shard_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.bin");
        write_shard(&path, &[]).unwrap();
        let s = Shard::open(&path).unwrap();
        assert!(s.is_empty());
        assert_eq!(s.tokens(), &[] as &[u16]);
    }

    fn open_bytes(bytes: &[u8]) -> (tempfile::TempDir, ShardError) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.bin");
        std::fs::write(&path, bytes).unwrap();
        let err = Shard::open(&path).unwrap_err();
        (dir, err)
    }

    #[test]
    fn corrupt_magic() {
        let mut b = header(12345, 1, 2);
        b.extend([0; 4]);
        let (_d, e) = open_bytes(&b);
        assert!(matches!(e, ShardError::BadMagic { found: 12345, .. }), "{e}");
        assert!(e.to_string().contains("bad.bin: bad magic number 12345"));
    }

    #[test]
    fn wrong_version() {
        let mut b = header(MAGIC, 7, 2);
        b.extend([0; 4]);
        let (_d, e) = open_bytes(&b);
        assert!(matches!(e, ShardError::BadVersion { found: 7, .. }), "{e}");
    }

    #[test]
    fn truncated() {
        let mut b = header(MAGIC, 1, 1000);
        b.extend(vec![0; 476]);
        let (_d, e) = open_bytes(&b);
        assert!(matches!(e, ShardError::Truncated { .. }), "{e}");
        assert!(
            e.to_string().ends_with(
                "bad.bin: truncated: header says 1000 tokens (3024 bytes) but the file has 1500 bytes"
            ),
            "{e}"
        );
    }

    #[test]
    fn too_long() {
        let mut b = header(MAGIC, 1, 1);
        b.extend([0; 4]);
        let (_d, e) = open_bytes(&b);
        assert!(matches!(e, ShardError::TooLong { .. }), "{e}");
    }

    #[test]
    fn odd_length() {
        let mut b = header(MAGIC, 1, 2);
        b.extend([0; 3]);
        let (_d, e) = open_bytes(&b);
        assert!(matches!(e, ShardError::OddLength { body: 3, .. }), "{e}");
    }

    #[test]
    fn short_header() {
        let (_d, e) = open_bytes(&[0; 100]);
        assert!(matches!(e, ShardError::NoHeader { len: 100, .. }), "{e}");
    }

    #[test]
    fn shard_files_filters_and_sorts() {
        let dir = tempfile::tempdir().unwrap();
        for n in [
            "fineweb_train_000002.bin",
            "fineweb_train_000001.bin",
            "fineweb_val_000000.bin",
            "notes_train_.txt",
            "train.bin",
        ] {
            std::fs::write(dir.path().join(n), b"").unwrap();
        }
        let train = shard_files(dir.path(), "train").unwrap();
        let names: Vec<_> =
            train.iter().map(|p| p.file_name().unwrap().to_str().unwrap()).collect();
        assert_eq!(names, ["fineweb_train_000001.bin", "fineweb_train_000002.bin"]);
        assert_eq!(shard_files(dir.path(), "val").unwrap().len(), 1);
        let e = shard_files(dir.path(), "test").unwrap_err();
        assert!(matches!(e, ShardError::NoShards { .. }), "{e}");
    }
}
