//! Token data for `records`: the FineWeb shard format, tokenizers and the corpora.
pub mod default_corpus;
pub mod fs;
pub mod shard;
pub mod synthetic;
pub mod tokenizer;
