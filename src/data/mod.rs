//! Batches from FineWeb-format shards.
pub mod batch_schedule;
pub mod batches;
pub mod doc_len_schedule;
pub mod loader;
pub mod packed;
pub mod stream;
pub mod stream_loader;
pub mod stream_micro_reads;
pub mod stream_repeat_first;
pub mod train_shards;
pub mod val_rank0_rows;
pub mod val_seq_len;
