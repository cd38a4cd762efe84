//! Optimizers and learning-rate schedules.
pub mod adamw;
pub mod schedule;
