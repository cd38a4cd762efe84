//! How the CLI writes figures and tables, below everything that prints: losses, times, deltas
//! and counts as people read them (`figures`), aligned or markdown tables (`table`), and how an
//! error reads (`error`).
pub mod error;
pub mod figures;
pub mod table;
