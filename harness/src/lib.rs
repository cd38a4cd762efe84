//! The `records` library: everything the CLI does, as plain functions (no libtorch here; the
//! trainer runs as a separate process).
pub mod catalog;
pub mod corpora;
pub mod diff;
pub mod download;
pub mod launch;
pub mod paths;
pub mod plot;
pub mod replay;
pub mod replays;
pub mod review;
pub mod runlog;
pub mod series;
pub mod site;
pub mod stats;
pub mod verdict;
