//! Batches from FineWeb-format shards.
pub mod loader;
pub mod packed;
