//! The GPT and its parts, one file per technique.
pub mod attend;
pub mod attention;
pub mod backout;
pub mod block;
pub mod embedding;
pub mod fp8_head;
pub mod gpt;
pub mod head;
pub mod key_offset;
pub mod mlp;
pub mod mtp;
pub mod norm;
pub mod params;
pub mod relu2_mlp;
pub mod rotary;
pub mod sa_lambdas;
pub mod scalars;
pub mod single_skip;
pub mod smear;
pub mod softcap;
pub mod unet;
pub mod value_embed;
pub mod value_gate;
pub mod windowed_attention;
pub mod x0_lambdas;
pub mod yarn;

pub use gpt::{Ctx, Gpt};
