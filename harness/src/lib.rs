//! The `records` library: everything the CLI does, as plain functions (no libtorch here; the
//! trainer runs as a separate process).
pub mod bench;
pub mod catalog;
pub mod corpora;
pub mod diff;
pub mod download;
pub mod figures;
pub mod lab_recipe;
pub mod lab_target;
pub mod launch;
pub mod logging;
pub mod manifest_text;
pub mod pager;
pub mod paths;
pub mod plot;
pub mod profile;
pub mod recipe_check;
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
/// The trainer's recipe module (`src/recipe.rs`, `src/recipe/`), compiled into the CLI so a
/// manifest is checked by the trainer's own rules before anything builds ([`recipe_check`]).
/// It needs no libtorch.
#[path = "../../src"]
pub mod trainer {
    pub mod recipe;
}
pub mod verdict;
