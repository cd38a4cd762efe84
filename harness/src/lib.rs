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
/// The trainer's recipe module (`src/recipe.rs`, `src/recipe/`) and the technique modules that
/// hold a recipe section (its struct and registry entry, the parts without libtorch: the
/// harness's build sets `recipe_only`), compiled into the CLI so a manifest is checked by the
/// trainer's own rules before anything builds ([`recipe_check`]), and its step plan
/// (`src/optim/schedule.rs`), which `records cost` counts each step from.
#[path = "../../src"]
pub mod trainer {
    pub mod recipe;
    pub mod data {
        pub mod batch_schedule;
        pub mod doc_len_schedule;
        pub mod loader;
        pub mod stream_loader;
        pub mod stream_micro_reads;
        pub mod stream_repeat_first;
        pub mod train_shards;
        pub mod val_rank0_rows;
        pub mod val_seq_len;
    }
    pub mod model {
        pub mod attn_branch_scale;
        pub mod attn_gate;
        pub mod attn_layers;
        pub mod attn_scale;
        pub mod attn_window;
        pub mod backout;
        pub mod bigram_hash;
        pub mod block_lambda_init;
        pub mod compact_scalars;
        pub mod doc_mask;
        pub mod embed_norm;
        pub mod fp8_head;
        pub mod fp8_mlp;
        pub mod head_embed;
        pub mod key_offset;
        pub mod loss_over_padding;
        pub mod mlp_layers;
        pub mod mtp;
        pub mod no_bias;
        pub mod norm;
        pub mod parallel_residuals;
        pub mod precision;
        pub mod qk_norm;
        pub mod qkv_init_mul;
        pub mod sa_lambdas;
        pub mod single_skip;
        pub mod skip_gate;
        pub mod smear;
        pub mod tall_matrices;
        pub mod unet;
        pub mod uniform_attn_out;
        pub mod untied_head;
        pub mod value_embed;
        pub mod value_gate;
        pub mod windows;
        pub mod x0_lambdas;
        pub mod x0_lambdas_apart;
        pub mod yarn;
        pub mod zero_proj;
    }
    pub mod optim {
        pub mod adam_betas;
        pub mod adam_every;
        pub mod cautious_adam;
        pub mod clock_from_step;
        pub mod extension_final;
        pub mod gates_in_adam;
        pub mod grad_sum_factor;
        pub mod iteration_extension;
        pub mod loss_sum;
        pub mod lr_mul;
        pub mod lr_schedule;
        pub mod muon;
        pub mod rounded_stages;
        pub mod scalar_adam;
        pub mod schedule;
        pub mod untimed_warmup;
        pub mod wd_mul;
    }
}
/// The trainer's files name these modules `crate::recipe`, `crate::model`, `crate::optim`; here
/// they are the same modules.
use trainer::{model, optim, recipe};
pub mod verdict;
