//! The `records` library: everything the CLI does, as plain functions (no libtorch here; the
//! trainer runs as a separate process).
pub mod bench;
pub mod catalog;
pub mod corpora;
pub mod diff;
pub mod download;
pub mod figures;
pub mod lab_recipe;
pub mod launch;
pub mod manifest_text;
pub mod pager;
pub mod paths;
pub mod plot;
pub mod recipe_keys;
pub mod replay;
pub mod replays;
pub mod report;
pub mod review;
pub mod runlog;
pub mod series;
pub mod signals;
pub mod site;
pub mod stats;
pub mod table;
pub mod timing_lock;
pub mod verdict;
