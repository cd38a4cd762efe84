//! The two tokenizers of the lab: GPT-2 BPE (the real speedrun's, offline via tiktoken-rs'
//! bundled `r50k_base` ranks) and a byte-level one for CPU-sized replays.
use std::sync::OnceLock;
use tiktoken_rs::CoreBPE;

/// GPT-2's `<|endoftext|>`, which fineweb.py writes before every document.
pub const GPT2_BOS: u16 = 50256;
/// The byte tokenizer's document separator, right after the 256 byte ids.
pub const BYTE_BOS: u16 = 256;

#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("unknown tokenizer {0:?}: expected \"byte\" or \"gpt2\"")]
    UnknownName(String),
    #[error("loading the GPT-2 (r50k_base) ranks bundled with tiktoken-rs failed: {0}")]
    Load(String),
}

#[derive(Clone, Copy)]
pub enum Tokenizer {
    /// Each UTF-8 byte is its own id (0..=255); 256 separates documents.
    Byte,
    /// GPT-2 BPE; the ranks are loaded once per process and shared.
    Gpt2(&'static CoreBPE),
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

static GPT2: OnceLock<CoreBPE> = OnceLock::new();

impl Tokenizer {
    pub fn byte() -> Tokenizer {
        Tokenizer::Byte
    }

    pub fn gpt2() -> Result<Tokenizer, TokenizerError> {
        if let Some(bpe) = GPT2.get() {
            return Ok(Tokenizer::Gpt2(bpe));
        }
        let bpe = tiktoken_rs::r50k_base().map_err(|e| TokenizerError::Load(e.to_string()))?;
        // A racing thread may have set it first; either copy is identical.
        Ok(Tokenizer::Gpt2(GPT2.get_or_init(|| bpe)))
    }

    /// `"byte"` or `"gpt2"`.
    pub fn from_name(name: &str) -> Result<Tokenizer, TokenizerError> {
        match name {
            "byte" => Ok(Tokenizer::byte()),
            "gpt2" => Tokenizer::gpt2(),
            other => Err(TokenizerError::UnknownName(other.to_string())),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Tokenizer::Byte => "byte",
            Tokenizer::Gpt2(_) => "gpt2",
        }
    }

    /// Ordinary text: special-token strings such as `<|endoftext|>` are encoded as plain text.
    pub fn encode(&self, text: &str) -> Vec<u16> {
        match self {
            Tokenizer::Byte => text.bytes().map(u16::from).collect(),
            // Every r50k rank is < 50257, so the narrowing never truncates.
            Tokenizer::Gpt2(bpe) => {
                bpe.encode_ordinary(text).into_iter().map(|t| t as u16).collect()
            }
        }
    }

    /// Lossy: invalid UTF-8 and unknown ids become U+FFFD; BOS becomes `<|endoftext|>`.
    pub fn decode(&self, ids: &[u16]) -> String {
        let mut bytes = Vec::with_capacity(ids.len() * 2);
        for &id in ids {
            match self {
                Tokenizer::Byte if id < BYTE_BOS => bytes.push(id as u8),
                Tokenizer::Byte if id == BYTE_BOS => bytes.extend_from_slice(b"<|endoftext|>"),
                Tokenizer::Byte => bytes.extend_from_slice("\u{FFFD}".as_bytes()),
                Tokenizer::Gpt2(bpe) => match bpe.decode_bytes(&[u32::from(id)]) {
                    Ok(b) => bytes.extend_from_slice(&b),
                    Err(_) => bytes.extend_from_slice("\u{FFFD}".as_bytes()),
                },
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The document separator, written before every document.
    pub fn bos(&self) -> u16 {
        match self {
            Tokenizer::Byte => BYTE_BOS,
            Tokenizer::Gpt2(_) => GPT2_BOS,
        }
    }

    pub fn vocab_size(&self) -> usize {
        self.bos() as usize + 1
    }

    /// `[bos] + encode(doc)` for each document, concatenated, as fineweb.py writes them.
    pub fn encode_documents<I, S>(&self, docs: I) -> Vec<u16>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut out = Vec::new();
        for doc in docs {
            out.push(self.bos());
            out.extend(self.encode(doc.as_ref()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_hello_world() {
        let t = Tokenizer::gpt2().unwrap();
        assert_eq!(t.encode("Hello world"), [15496, 995]);
        assert_eq!(t.decode(&[15496, 995]), "Hello world");
        assert_eq!(t.bos(), 50256);
        assert_eq!(t.vocab_size(), 50257);
        assert_eq!(t.name(), "gpt2");
        assert_eq!(t.decode(&[50256]), "<|endoftext|>");
        assert_eq!(t.decode(&[60000]), "\u{FFFD}");
    }

    #[test]
    fn gpt2_special_text_is_ordinary() {
        let t = Tokenizer::gpt2().unwrap();
        assert!(!t.encode("<|endoftext|>").contains(&50256));
    }

    #[test]
    fn byte_round_trip() {
        let t = Tokenizer::byte();
        let s = "Ber.\nWho's there? — é";
        let ids = t.encode(s);
        assert_eq!(ids.len(), s.len());
        assert_eq!(&ids[..4], &[66, 101, 114, 46]);
        assert_eq!(t.decode(&ids), s);
        assert_eq!(t.bos(), 256);
        assert_eq!(t.vocab_size(), 257);
        // A lone continuation byte is not UTF-8.
        assert_eq!(t.decode(&[0x80, 104]), "\u{FFFD}h");
    }

    #[test]
    fn documents_get_a_leading_bos() {
        let t = Tokenizer::byte();
        assert_eq!(t.encode_documents(["ab", "", "c"]), [256, 97, 98, 256, 256, 99]);
        let g = Tokenizer::gpt2().unwrap();
        assert_eq!(g.encode_documents(vec!["Hello world".to_string()]), [50256, 15496, 995]);
    }

    #[test]
    fn names() {
        assert_eq!(Tokenizer::from_name("byte").unwrap().name(), "byte");
        assert_eq!(Tokenizer::from_name("gpt2").unwrap().name(), "gpt2");
        let e = Tokenizer::from_name("bpe").unwrap_err();
        assert_eq!(e.to_string(), "unknown tokenizer \"bpe\": expected \"byte\" or \"gpt2\"");
    }
}
