//! The GPT and its parts, one file per technique.
pub mod attend;
pub mod attention;
pub mod fp8_head;
pub mod gpt;
pub mod mlp;
pub mod norm;
pub mod params;

pub use gpt::Gpt;
