//! Optimizers and learning-rate schedules.
pub mod adamw;
pub mod cautious_adam;
pub mod cautious_wd;
pub mod dist_adam;
pub mod mantissa;
pub mod muon;
pub mod muon_classic;
pub mod newton_schulz;
pub mod normuon;
pub mod optimizer;
pub mod param_table;
pub mod polar_express;
pub mod qk_head_pairs;
pub mod schedule;
pub mod untie;
