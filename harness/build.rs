//! Compiles the trainer's recipe sections without their libtorch halves: a technique module
//! (`src/model/bigram_hash.rs`) puts its parameters and forward behind `cfg(not(recipe_only))`.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(recipe_only)");
    println!("cargo::rustc-cfg=recipe_only");
}
