#!/usr/bin/env bash
# The project's test command (README.md): everything that runs without a GPU.
#
# It installs NVRTC 13.0 (the compiler DeepGEMM uses; no GPU needed) and cuobjdump (for the SASS
# checks) into .cuda-tools/ when they are missing, so that every generated kernel is compiled in
# CI, then checks formatting and lints and runs all CPU tests. The tests that need NVRTC fail without it (DEEPGEMM_SKIP_NVRTC=1 would skip
# them; this script unsets it). GPU tests (named gpu_*) are left out here: they run on the
# GPU machine through scripts/gpu.sh and never pass without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

NVRTC_DIR="$PWD/.cuda-tools/nvidia/cu13/lib"
CUOBJDUMP="$PWD/.cuda-tools/nvidia/cu13/bin/cuobjdump"
# NVRTC, and cuobjdump with the nvdisasm it runs for the SASS checks of the sm90 kernels (HGMMA,
# no local memory). One pip call for all three: `pip --target` skips a package whose top-level
# folder (nvidia/) is already there, so a second call would install nothing.
if [ ! -e "$NVRTC_DIR/libnvrtc.so.13" ] || [ ! -x "$CUOBJDUMP" ]; then
  echo "installing NVRTC 13.0, cuobjdump and nvdisasm 13.2 into .cuda-tools/ (pip)"
  python3 -m pip install --quiet --disable-pip-version-check --upgrade --target .cuda-tools \
    'nvidia-cuda-nvrtc==13.0.*' 'nvidia-cuda-cuobjdump==13.2.*' 'nvidia-cuda-nvdisasm==13.2.*'
fi
export LD_LIBRARY_PATH="$NVRTC_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The test command requires NVRTC: no opt-out may turn a missing compiler into skipped tests.
unset DEEPGEMM_SKIP_NVRTC

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
if command -v cargo-nextest >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast -E 'not test(/^gpu_/)'
else
  cargo test --workspace --no-fail-fast -- --skip gpu_
fi
# Doc tests (nextest does not run them).
cargo test --workspace --doc

# The C example builds with gcc against the generated header and libdeepgemm (the header's
# currency is a test of deepgemm-capi). It runs on the GPU machine (scripts/gpu.sh run c).
cargo build -p deepgemm-capi
gcc -std=c11 -O2 -Wall -Wextra -Werror -I crates/deepgemm-capi/include examples/c/gemm.c \
  -L target/debug -ldeepgemm -ldl -lm -o target/debug/gemm_c
# The Python wheel builds from the repository (maturin, abi3) and imports.
python3 -m pip install --quiet --disable-pip-version-check 'maturin>=1.9,<2'
rm -rf target/wheels
python3 -m maturin build --quiet --out target/wheels
python3 -m pip install --quiet --disable-pip-version-check --no-deps --target target/wheels/site target/wheels/deepgemm-*.whl
PYTHONPATH=target/wheels/site python3 -c "import deepgemm; print('deepgemm', deepgemm.__all__)"
