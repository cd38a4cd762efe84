//! The `records` library: everything the CLI does, as plain functions (no libtorch here; the
//! trainer runs as a separate process).
pub mod catalog;
pub mod cost;
pub mod data;
pub mod logging;
pub mod paths;
pub mod present;
pub mod profile;
pub mod run;
pub mod series;
pub mod text;
pub mod toml_file;
/// The trainer's recipe module (`src/recipe.rs`, `src/recipe/`), compiled into the CLI so a
/// manifest is checked by the trainer's own rules before anything builds ([`recipe_check`]),
/// and its step plan (`src/optim/schedule.rs`), which `records cost` counts each step from.
/// Neither needs libtorch.
#[path = "../../src"]
pub mod trainer {
    pub mod recipe;
    pub mod optim {
        pub mod schedule;
    }
}
/// The trainer's files name their recipe module `crate::recipe`; here it is the same module.
use trainer::recipe;
pub mod verdict;
