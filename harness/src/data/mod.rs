//! The data a replay trains on: FineWeb shards downloaded from the Hub, and the offline default
//! corpus the lab builds.
pub mod corpora;
pub mod download;
