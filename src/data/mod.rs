//! Batches from FineWeb-format shards.
pub mod loader;
