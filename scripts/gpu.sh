#!/usr/bin/env bash
# The GPU run, in two halves (shared/docs/GPU.md):
#   scripts/gpu.sh pack   here (no GPU): build the release binary and a nextest archive of the GPU
#                         tests into .gpu/, which the device call carries.
#   scripts/gpu.sh run    on the GPU machine: run every gpu_* test and the benchmark suites, writing
#                         JUnit XML, logs and bench JSON under $OUT. Builds nothing.
# One device call does the whole run:
#   run(command="bash scripts/gpu.sh run", carry=[".gpu"])
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
pack)
  rm -rf .gpu && mkdir -p .gpu
  cargo build --release -p deepgemm-cli
  cp target/release/deepgemm .gpu/
  cargo nextest archive --release --workspace --archive-file .gpu/gpu-tests.tar.zst
  cp "$(command -v cargo-nextest)" .gpu/
  du -sh .gpu/*
  ;;
run)
  : "${OUT:?run this on the GPU machine, where \$OUT is set}"
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export DEEPGEMM_CACHE_DIR=/tmp/deepgemm-cache
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
  status=0
  # The GPU test matrix: only gpu_* tests (the CPU ones ran in CI).
  ./.gpu/cargo-nextest nextest run --archive-file .gpu/gpu-tests.tar.zst --workspace-remap . \
    --no-fail-fast --test-threads 1 -E 'test(/^gpu_/)' --profile gpu 2>&1 | tee "$OUT/gpu-tests.log" || status=1
  cp target/nextest/gpu/junit.xml "$OUT/gpu-tests.junit.xml" 2>/dev/null || true
  # The benchmark suites, side by side with cuBLASLt in the same process.
  for suite in ${BENCH_SUITES:-square odd llm decode}; do
    ./.gpu/deepgemm bench "bench/suites/$suite.toml" --json "$OUT/bench-$suite.json" 2>&1 \
      | tee "$OUT/bench-$suite.log" || status=1
  done
  exit $status
  ;;
*)
  echo "usage: scripts/gpu.sh pack|run" >&2
  exit 2
  ;;
esac
