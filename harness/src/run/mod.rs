//! Running the trainer: building a record's trainer, the command line it gets (`TrainerCmd`),
//! launching its ranks, the machine-wide timing lock and signals, the results a replay writes
//! and reads back, the lab target, `bench`, and what a trainer says of a manifest.
pub mod bench;
pub mod lab_recipe;
pub mod lab_target;
pub mod launch;
pub mod replay;
pub mod replays;
pub mod series_build;
pub mod signals;
pub mod timing_lock;
pub mod trainer_cmd;
pub mod tree_build;
pub mod walk;
