//! Batches from FineWeb-format shards.
pub mod batch_schedule;
pub mod batches;
pub mod doc_len_schedule;
pub mod loader;
pub mod packed;
pub mod stream;
pub mod val_seq_len;
