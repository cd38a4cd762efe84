//! The trainer: one GPT on tch (libtorch); every record's technique sits behind a `Recipe` flag.
//!
//! - `recipe`: every hyperparameter, read from a record's manifest.
//! - `model`: the GPT, one file per technique.
//! - `optim`: AdamW (#1), Muon and DistAdam (upstream), the schedules.
//! - `data`: batches from FineWeb-format shards.
//! - `dist`: data-parallel ranks: the rank environment and collectives.
//! - `shim`: what tch lacks (flash attention, fused AdamW, profiler, c10d), via a C++ shim.
//! - `train`: the loop, timing and validation; `runlog`: what a run writes; `profile`: traces.
//!
//! Every record builds on libtorch 2.11 (the PyTorch wheel); upstream moved from a 2.10 nightly
//! to the torch 2.10 release at #66, which changed no number.
pub mod data;
pub mod device;
pub mod dist;
pub mod logging;
pub mod model;
pub mod optim;
pub mod profile;
pub mod recipe;
pub mod runlog;
pub mod shim;
pub mod train;
