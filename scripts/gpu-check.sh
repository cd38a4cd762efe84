#!/usr/bin/env bash
# Runs the gpu-check binary on a GPU machine and prints its one table, one or more rows per check,
# cheapest first (the binary prints each check's time estimate before it starts):
#   - flash attention (dense, window, varlen; fwd and bwd) against an fp32 SDPA reference;
#   - the FP8 head against bf16; Muon's Newton-Schulz (bf16); our AdamW against the fused one;
#   - record #84's first two optimizer steps through a one-rank NCCL group against the single
#     backend (NCCL's dtype and device rules hold at any world size);
#   - record #1 at full shape: ms/step, fwd+bwd, tokens/s, MFU, peak memory;
#   - records #29-#84, one rank's batch on 1 GPU: ms/step at each stage, tokens/s, peak memory,
#     and their eval forwards over 262,144 tokens;
#   - last, one lab-size step eager against CUDA-graph replay;
#   - then `records profile` of #29's trace at full shape, when FineWeb shards are there.
#
# Build on any machine (no GPU needed) and carry target/release/gpu-check along:
#     cargo build --release -p gpu-check --features cuda
# Then, from the repo root on the GPU machine (python3 with pip's torch 2.11 and its nvidia-*
# wheels; no Rust toolchain):
#     bash scripts/gpu-check.sh [gpu-check options, e.g. --batch 8]
# The table lands in $OUT/gpu-check.md (a temp dir without $OUT), with the console log beside it.
# Environment: BIN (the binary), PYTHON (default python3), GPU_CHECK_TIMEOUT (seconds, 200).
# Worst case under 4 minutes: 30 s to import torch, 200 s for the binary, whose checks stop
# starting at 3/4 of that; the table is rewritten after every row, so a cut run still has one.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BIN:-$ROOT/target/release/gpu-check}
PY=${PYTHON:-python3}
LIMIT=${GPU_CHECK_TIMEOUT:-200}
RESULTS=${OUT:-$(mktemp -d)}
mkdir -p "$RESULTS"
die() { echo "gpu-check.sh: error: $*" >&2; exit 1; }

[ -x "$BIN" ] || die "no binary at $BIN: build it with 'cargo build --release -p gpu-check --features cuda' and carry target/release/gpu-check"

echo "== torch (via $PY)"
INFO=$(timeout 30 "$PY" -c 'import os, torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available()); print(os.path.dirname(torch.__file__))' 2>/dev/null) \
  || die "'$PY -c import torch' failed: install torch 2.11 with '$PY -m pip install torch==2.11.0'"
read -r VERSION CUDA AVAILABLE <<<"$(echo "$INFO" | head -n 1)"
TORCH_DIR=$(echo "$INFO" | tail -n 1)
echo "torch $VERSION (CUDA $CUDA, torch.cuda.is_available: $AVAILABLE) at $TORCH_DIR"
case "$VERSION" in
  2.11.0*) ;;
  *) echo "warning: the binary was built against torch 2.11.0, this is $VERSION" ;;
esac
[ -d "$TORCH_DIR/lib" ] || die "no lib directory under $TORCH_DIR"

# torch/lib has libtorch*; libtorch_cuda's RPATH finds the nvidia wheels, which are also listed
# for libraries loaded later by name (cuDNN's sub-libraries, NVRTC).
SITE=$(dirname "$TORCH_DIR")
NV_DIRS=$(ls -d "$SITE"/nvidia/*/lib 2>/dev/null | tr '\n' ':')
export LD_LIBRARY_PATH="$TORCH_DIR/lib:${NV_DIRS}${LD_LIBRARY_PATH:-}"
LD_LIBRARY_PATH=${LD_LIBRARY_PATH%:}
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

echo "== ldd $BIN"
MISSING=$(ldd "$BIN" 2>&1 | grep -E "not found|version .* not found")
[ -z "$MISSING" ] || die "unresolved libraries (a newer glibc/libstdc++ may be needed: the binary wants GLIBCXX_3.4.29):
$MISSING"
ldd "$BIN" | grep -E "torch|c10|cudart|cublas|cudnn|nccl" | sed 's/ (0x.*//'

echo "== GPU"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
else
  echo "nvidia-smi not found"
fi

echo "== gpu-check (timeout ${LIMIT}s)"
TABLE="$RESULTS/gpu-check.md"
rm -f "$TABLE"
# Checks whose estimate would end past 3/4 of the limit are skipped, so the table usually ends
# before the timeout.
timeout "$LIMIT" "$BIN" --out "$TABLE" --budget-s $((LIMIT * 3 / 4)) "$@" 2>&1 | tee "$RESULTS/gpu-check.log"
RC=${PIPESTATUS[0]}
if [ "$RC" = 124 ]; then
  echo "gpu-check timed out after ${LIMIT}s; the rows finished so far:"
  [ -f "$TABLE" ] && cat "$TABLE"
fi
# Where the time goes in #29 at full shape on one GPU: the CUDA trainer traces its last 3 of 5
# steps and the CLI summarises the trace (kernel time by category). Needs TRAIN_BIN (built with
# --features cuda), RECORDS_BIN and FineWeb shards in DATA; skipped when one is missing.
TRAIN_BIN=${TRAIN_BIN:-$ROOT/target/release/train}
RECORDS_BIN=${RECORDS_BIN:-$ROOT/target/release/records}
DATA=${DATA:-$ROOT/data/fineweb10B}
echo "== profile of #29 (full shape, 1 GPU)"
if [ -x "$TRAIN_BIN" ] && [ -x "$RECORDS_BIN" ] && ls "$DATA"/*_val_*.bin >/dev/null 2>&1; then
  timeout 300 "$TRAIN_BIN" --manifest "$ROOT/records/29.toml" --scale full --data "$DATA" \
      --steps 5 --profile "$RESULTS/profile-29" --profile-steps 3 --out "$RESULTS/train-29" \
      >"$RESULTS/profile-29.log" 2>&1 \
    && "$RECORDS_BIN" profile 29 --trace "$RESULTS/profile-29/trace-rank0.json" --format md \
      | tee "$RESULTS/profile-29.md" \
    || echo "profile of #29 failed: see $RESULTS/profile-29.log"
else
  echo "skipped: needs $TRAIN_BIN (--features cuda), $RECORDS_BIN and FineWeb shards in $DATA"
fi
echo "exit: $RC (0: every check passed; 1: a row says error/FAIL/skipped; 2: could not run)"
echo "table: $TABLE"
exit "$RC"
