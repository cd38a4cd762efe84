//! Batches from FineWeb-format shards.
pub mod batches;
pub mod loader;
pub mod packed;
pub mod stream;
