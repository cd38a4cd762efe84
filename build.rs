//! Links the trainer against the libtorch that torch-sys found (the PyPI wheel under .venv).
//!
//! * Embeds the wheel's lib directory as a RUNPATH, so `train` and the tests run without
//!   LD_LIBRARY_PATH; on another machine LD_LIBRARY_PATH still overrides it.
//! * With `--features cuda`, forces libtorch_cuda.so into DT_NEEDED: rustc links with
//!   `--as-needed`, and nothing references libtorch_cuda's symbols directly (its kernels register
//!   from static initialisers), so without this the binary silently runs CPU-only.
//! * Compiles the C++ shim (src/shim/*.cpp) against the wheel's headers: core.cpp always,
//!   cuda.cpp with `--features cuda` (needs the CUDA, cuBLAS, cuSPARSE, cuSOLVER and NCCL headers
//!   that `scripts/setup.sh` installs, the CPU setup included).
use std::path::{Path, PathBuf};

fn main() {
    let lib = std::env::var("DEP_TCH_LIBTORCH_LIB")
        .expect("torch-sys did not report DEP_TCH_LIBTORCH_LIB: run scripts/setup.sh first");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
    let cuda = std::env::var_os("CARGO_FEATURE_CUDA").is_some();
    if cuda {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg=-ltorch_cuda");
        println!("cargo:rustc-link-arg=-Wl,--as-needed");
    }
    compile_shim(Path::new(&lib), cuda);
}

/// Builds libtrainer_shim.a with torch-sys's own flags (CXX11 ABI, C++17).
fn compile_shim(lib: &Path, cuda: bool) {
    // Without these, cargo would rerun this script (and the 30 s C++ compile) on any edit in src/.
    for file in ["build.rs", "src/shim/shim.h", "src/shim/core.cpp", "src/shim/cuda.cpp"] {
        println!("cargo:rerun-if-changed={file}");
    }
    // .venv/libtorch is a symlink into site-packages, where the nvidia wheels sit beside torch.
    let torch = std::fs::canonicalize(lib.join(".."))
        .unwrap_or_else(|e| panic!("cannot resolve the torch directory above {lib:?}: {e}"));
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .pic(true)
        .warnings(false)
        .include(torch.join("include"))
        .include(torch.join("include/torch/csrc/api/include"))
        .flag("-std=c++17")
        .flag("-D_GLIBCXX_USE_CXX11_ABI=1")
        .flag("-DGLOG_USE_GLOG_EXPORT")
        .file("src/shim/core.cpp");
    if cuda {
        let site = torch.parent().expect("torch sits in a site-packages directory");
        for dir in cuda_includes(site) {
            build.include(dir);
        }
        build.define("USE_C10D_NCCL", None).file("src/shim/cuda.cpp");
        println!("cargo:rustc-link-lib=dylib=c10_cuda");
    }
    build.compile("trainer_shim");
}

/// The CUDA and NCCL include directories of the nvidia wheels; stops the build when any header
/// cuda.cpp needs is missing.
fn cuda_includes(site: &Path) -> [PathBuf; 2] {
    let cuda = site.join("nvidia/cu13/include");
    let nccl = site.join("nvidia/nccl/include");
    // ATen's CUDA context (through c10d's NCCL headers) includes cuBLAS', cuSPARSE's and
    // cuSOLVER's headers too.
    let needed = [
        cuda.join("cuda_runtime_api.h"), // nvidia-cuda-runtime
        cuda.join("crt/host_config.h"),  // nvidia-cuda-crt
        cuda.join("nv/target"),          // nvidia-cuda-cccl
        cuda.join("cublas_v2.h"),        // nvidia-cublas
        cuda.join("cusparse.h"),         // nvidia-cusparse
        cuda.join("cusolverDn.h"),       // nvidia-cusolver
        nccl.join("nccl.h"),             // nvidia-nccl-cu13
    ];
    let missing: Vec<String> =
        needed.iter().filter(|p| !p.exists()).map(|p| p.display().to_string()).collect();
    if !missing.is_empty() {
        panic!(
            "--features cuda needs the CUDA and NCCL headers of the nvidia wheels, missing: {}; \
             run scripts/setup.sh (it installs them)",
            missing.join(", ")
        );
    }
    [cuda, nccl]
}
