//! One file per subcommand: a clap `Args` struct and `run(args)`.
pub mod data;
pub mod diff;
pub mod list;
pub mod replay;
pub mod review;
pub mod series;
pub mod show;
pub mod site;
