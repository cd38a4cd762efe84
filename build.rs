//! Links the trainer against the libtorch that torch-sys found (the PyPI wheel under .venv).
//!
//! * Embeds the wheel's lib directory as a RUNPATH, so `train` and the tests run without
//!   LD_LIBRARY_PATH; on another machine LD_LIBRARY_PATH still overrides it.
//! * With `--features cuda`, forces libtorch_cuda.so into DT_NEEDED: rustc links with
//!   `--as-needed`, and nothing references libtorch_cuda's symbols directly (its kernels register
//!   from static initialisers), so without this the binary silently runs CPU-only.
fn main() {
    let lib = std::env::var("DEP_TCH_LIBTORCH_LIB")
        .expect("torch-sys did not report DEP_TCH_LIBTORCH_LIB: run scripts/setup.sh first");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_some() {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg=-ltorch_cuda");
        println!("cargo:rustc-link-arg=-Wl,--as-needed");
    }
}
