#!/usr/bin/env bash
# The GPU run, in two halves:
#   scripts/gpu.sh pack          here (no GPU): build the release binary and a nextest archive of
#                                the GPU tests into .gpu/, which the device call carries.
#   scripts/gpu.sh run [PART..]  on the GPU machine, building nothing; PARTs (default: all):
#     tests      every gpu_* test (the correctness matrix; $TEST_THREADS at a time, default 1;
#                $GPU_TESTS, a nextest filter expression, picks fewer), JUnit XML under $OUT
#     sanitizer  compute-sanitizer memcheck over `deepgemm run` on edge shapes
#     bench      the bench suites ($BENCH_SUITES, default: square odd llm decode f32; any name of
#                bench/suites/, e.g. BENCH_SUITES="fp8 fp8_tensor") vs cuBLASLt
#     tune       the model's top plans timed on calibration shapes ($OUT/tune.json and .log;
#                $TUNE_SPEC, $TUNE_SHAPES and $TUNE_TOP tune other specs (then tune-NAME.json
#                each), shapes or plan count)
#     c          the C example (examples/c/gemm.c against libdeepgemm): results and bad calls
#     python     the pytest suite (python/tests) of the Python package against torch.matmul
#     overhead   host overhead per launch: Rust, C and Python (beside torch.matmul)
#                ($OUT/overhead.jsonl)
#     profile    Nsight Compute on $PROFILE_RUNS (SPEC[@M,N,K] ..., default the 4096^3 bf16
#                kernel): speed of light, warp stalls, and stall samples per SASS instruction
#                ($OUT/profile-NAME-sass.csv; the reports are kept too)
#     ab         $AB_BASELINE (other builds' binaries under .gpu/) against this one, alternating
#                ($AB_RUNS, $AB_ROUNDS: see ab() below)
#     breakdown  Nsight Compute's duration of each kernel a launch runs (the repack copies apart
#                from the GEMM) at $BREAKDOWN_SHAPES (default: the odd suite), unlocked clocks
#                ($OUT/breakdown.log)
# One device call does a run:
#   run(command="bash scripts/gpu.sh run", carry=[".gpu"])
# Everything is written under $WORK/out and packed into $OUT/results.tar.gz at the end (the
# device tool brings back only a few files); the summaries are also copied to $OUT. $WORK is
# $GPU_WORK (default /tmp/gpu), the run's scratch folder: two runs at once in one device call
# (e.g. tests beside the sanitizer) each need their own.
set -euo pipefail
cd "$(dirname "$0")/.."

deepgemm=./.gpu/deepgemm
WORK=${GPU_WORK:-/tmp/gpu}

tests() {
  ./.gpu/cargo-nextest nextest run --archive-file .gpu/gpu-tests.tar.zst --workspace-remap . \
    --no-fail-fast --test-threads "${TEST_THREADS:-1}" -E "${GPU_TESTS:-test(/^gpu_/)}" --profile gpu 2>&1 | tee "$OUT/gpu-tests.log"
  local rc=${PIPESTATUS[0]}
  cp target/nextest/gpu/junit.xml "$OUT/gpu-tests.junit.xml" 2>/dev/null || true
  return "$rc"
}

# racecheck flags the staged fp8 K-block scale slots of a block-scaled sm90 kernel that reuses its
# stages: the consumers' reads (dg_ld_shared_f32) against the producer warp's next copies into the
# slot (cp.async, attributed to dg_cp_async_* or to the scale-address lambdas they are inlined
# into), although the stage's empty barrier orders them (bench/RESULTS.md, 2026-12-04: the tool
# does not follow an mbarrier arrive/wait into a later cp.async). Whether a racecheck log reports
# those accesses and nothing else: any other shared-memory access in a report is a failure. It
# cannot tell a real race on the scale slots from that report (a build whose consumers released
# a stage before every lane had read its scales gave the same one).
scale_slot_report_only() {
  grep -q "Race reported" "$1" || return 1
  ! grep -E "(Write|Read) access at" "$1" |
    grep -vE "access at (dg_cp_async_4\(|dg_ld_shared_f32\(|[A-Za-z0-9_]+::\[lambda\(int, int\) \(instance [0-9]+\)\]::operator \(\)\(int, int\) const)" |
    grep -q .
}

sanitizer() {
  local rc=0
  # Edge tiles, K below one tile, ld = K+1 and 2-byte-misaligned bases (the repack path): odd_shape
  # plans sm90 (TMA), decode's M=1 bucket and mlp_up's rows plan what the model picks for them;
  # tiny_forced reads elements at every skew straight from global memory.
  for args in "examples/odd_shape.dgml --shape 127,129,255" \
              "examples/odd_shape.dgml --shape 17,33,65 --ld-pad 1" \
              "examples/odd_shape.dgml --shape 33,65,7 --misalign 2" \
              "examples/decode.dgml --shape 1,6144,4096" \
              "examples/fp8_block_scaled.dgml --shape 128,7168,2048" \
              "examples/fp8_to_fp8.dgml --shape 127,129,255" \
              "examples/mlp_up.dgml --shape 300,14336,4096 --ld-pad 3" \
              "examples/gemm_tf32.dgml --shape 127,129,255 --ld-pad 1" \
              "bench/specs/tiny_forced.dgml --shape 17,33,65 --ld-pad 1" \
              "bench/specs/tiny_forced.dgml --shape 127,129,255 --misalign 2" \
              "bench/specs/gemv_forced.dgml --shape 301,7,3001 --misalign 2" \
              "bench/specs/gemv_forced.dgml --shape 33,7,1000 --ld-pad 1"; do
    echo "== compute-sanitizer memcheck: deepgemm run $args" | tee -a "$OUT/sanitizer.log"
    # shellcheck disable=SC2086
    compute-sanitizer --tool memcheck --error-exitcode 9 $deepgemm run $args --no-time \
      >>"$OUT/sanitizer.log" 2>&1 || { rc=1; echo "   FAILED" | tee -a "$OUT/sanitizer.log"; }
  done
  # The mbarrier ring, the ping-pong turns and the cluster's multicast and remote arrivals of a
  # persistent sm90 kernel (cooperative and ping-pong), under racecheck and synccheck.
  # The fp8 kernels (cooperative, and ping-pong at M = 128) add the promotion and the K-block
  # scales the producer warp copies into each stage's slot (cp.async arriving on the stage's
  # barrier), read by every consumer warp; the two bench/specs kernels reuse every stage many
  # times, one without a cluster and one with the peer block's remote releases.
  # The ld + 1 run is repacked: its GEMM is a programmatic dependent launch behind the copy.
  # 1000x3000x2000 is a 128x192 tile at five stages: one staged-epilogue buffer per warp.
  # fp8_wide_tiles runs a block's first epilogue under its second tile's first k-tile.
  # gemv's ring on sm_90 (bulk copies counted in by a stage mbarrier, the operand's first and
  # last words copied by hand) turns over three chunks in two stages (mma sums, A streamed, its
  # base 2 bytes off) and many chunks in its stages (FFMA sums, B streamed at M = 1).
  for args in "bench/specs/sm90_pingpong_cluster.dgml" \
              "examples/gemm_bf16.dgml --shape 1000,3000,2000" \
              "examples/odd_shape.dgml --shape 2100,2100,128" \
              "examples/odd_shape.dgml --shape 2100,2100,128 --ld-pad 1" \
              "examples/fp8_block_scaled.dgml --shape 1000,1500,1000" \
              "examples/fp8_block_scaled.dgml --shape 128,1500,1000" \
              "examples/fp8_per_tensor.dgml --shape 128,1500,1000" \
              "examples/gemm_tf32.dgml --shape 1000,1500,1000" \
              "bench/specs/fp8_staged_scales_cooperative.dgml" \
              "bench/specs/fp8_staged_scales_pingpong_cluster.dgml" \
              "bench/specs/fp8_two_slices.dgml" \
              "bench/specs/fp8_wide_tiles.dgml" \
              "bench/specs/gemv_forced.dgml --shape 301,7,3001 --misalign 2" \
              "bench/specs/gemv_forced.dgml --shape 1,6144,4096"; do
    for tool in racecheck synccheck; do
      echo "== compute-sanitizer $tool: deepgemm run $args" | tee -a "$OUT/sanitizer.log"
      # shellcheck disable=SC2086
      compute-sanitizer --tool $tool --error-exitcode 9 $deepgemm run $args --no-time \
        >"$WORK/sanitizer-run.log" 2>&1 && status=0 || status=1
      cat "$WORK/sanitizer-run.log" >>"$OUT/sanitizer.log"
      if [ "$status" = 1 ] && [ "$tool" = racecheck ] && scale_slot_report_only "$WORK/sanitizer-run.log"; then
        echo "   known report: the staged fp8 scale slots only (bench/RESULTS.md, 2026-12-04)" |
          tee -a "$OUT/sanitizer.log"
      elif [ "$status" = 1 ]; then
        rc=1
        echo "   FAILED" | tee -a "$OUT/sanitizer.log"
      fi
    done
  done
  grep -E "^== |SUMMARY|FAILED" "$OUT/sanitizer.log"
  return $rc
}

bench() {
  local rc=0
  for suite in ${BENCH_SUITES:-square odd llm decode f32}; do
    $deepgemm bench "bench/suites/$suite.toml" --json "$OUT/bench-$suite.json" \
      --plot "$OUT/bench-$suite.svg" 2>&1 | tee "$OUT/bench-$suite.log" || rc=1
  done
  return $rc
}

c() {
  $deepgemm compile examples/c/gemm.dgml -o "$WORK/c-out" 2>&1 | tail -1
  ./.gpu/gemm_c "$WORK/c-out/gemm.dgb" 2>&1 | tee "$OUT/c-example.log"
  return "${PIPESTATUS[0]}"
}

python_tests() {
  python3 -m pip install -q --no-index --no-deps --target "$WORK/dg-site" .gpu/deepgemm-*.whl || return 1
  PYTHONPATH="$WORK/dg-site" DEEPGEMM_BIN=$PWD/.gpu/deepgemm python3 -m pytest -q python/tests \
    --junitxml "$OUT/python-tests.junit.xml" 2>&1 | tee "$OUT/python-tests.log"
  return "${PIPESTATUS[0]}"
}

overhead() {
  local rc=0
  $deepgemm compile examples/c/gemm.dgml -o "$WORK/c-out" 2>&1 | tail -1
  ./.gpu/launch_overhead "$WORK/c-out/gemm.dgb" 200 20 | tee "$OUT/overhead.jsonl" || rc=1
  ./.gpu/gemm_c "$WORK/c-out/gemm.dgb" --bench 200 | grep "dgmm_launch (" | tee -a "$OUT/overhead.jsonl" || rc=1
  python3 -m pip install -q --no-index --no-deps --target "$WORK/dg-site" .gpu/deepgemm-*.whl || return 1
  PYTHONPATH="$WORK/dg-site" python3 -P python/bench_overhead.py "$WORK/c-out/gemm.dgb" | tee -a "$OUT/overhead.jsonl" || rc=1
  return $rc
}

tune() {
  local shapes=()
  for s in ${TUNE_SHAPES:-4096,4096,4096 8192,8192,8192 4095,4097,4093 1000,3000,2000 \
           127,129,255 4096,7168,2048 128,24576,1536 64,2112,7168 16,4096,4096 1,4096,14336}; do
    shapes+=(--shape "$s")
  done
  local spec name rc=0
  for spec in ${TUNE_SPEC:-examples/gemm_bf16.dgml}; do
    name=tune${TUNE_SPEC:+-$(basename "$spec" .dgml)}
    $deepgemm tune "$spec" "${shapes[@]}" --top "${TUNE_TOP:-8}" \
      --json "$OUT/$name.json" 2>&1 | tee "$OUT/$name.log" || rc=1
  done
  return "$rc"
}

breakdown() {
  local rc=0
  for s in ${BREAKDOWN_SHAPES:-4095,4097,4093 1000,3000,2000 127,129,255 17,33,65 2047,1023,4095 3001,7,3001}; do
    echo "== ${BREAKDOWN_SPEC:-examples/gemm_bf16.dgml} at $s" | tee -a "$OUT/breakdown.log"
    ncu --clock-control none --metrics gpu__time_duration.sum \
      $deepgemm run "${BREAKDOWN_SPEC:-examples/gemm_bf16.dgml}" --shape "$s" --no-time 2>&1 |
      grep -E '^  [a-z_0-9]+ \(|gpu__time_duration' | tee -a "$OUT/breakdown.log" || rc=1
  done
  return "$rc"
}

profile() {
  # Speed of light, warp stalls, and per-SASS-instruction stall samples (the source page) of each
  # kernel of $PROFILE_RUNS (SPEC[@M,N,K] ..., default: the 4096^3 bf16 kernel), as
  # profile-NAME.log and profile-NAME-sass.csv; the reports are kept for the Nsight Compute GUI.
  local rc=0
  for run in ${PROFILE_RUNS:-examples/gemm_bf16.dgml}; do
    local spec=${run%@*} shape=() name
    [ "$spec" != "$run" ] && shape=(--shape "${run#*@}")
    name=$(basename "$spec" .dgml)${shape[1]:+-${shape[1]//,/x}}
    ncu --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis \
      --section MemoryWorkloadAnalysis --section SourceCounters --import-source no \
      -k regex:deepgemm_ -o "$OUT/profile-$name" \
      $deepgemm run "$spec" "${shape[@]}" --no-time 2>&1 | tee "$OUT/profile-$name.log" || { rc=1; continue; }
    ncu --import "$OUT/profile-$name.ncu-rep" --page details 2>&1 | tee -a "$OUT/profile-$name.log" || rc=1
    ncu --import "$OUT/profile-$name.ncu-rep" --page source --print-source sass --csv \
      >"$OUT/profile-$name-sass.csv" 2>&1 || { echo "ncu printed no source page" | tee -a "$OUT/profile-$name.log"; rc=1; }
  done
  return "$rc"
}

ab() {
  # Builds timed in turn on one machine: $AB_BASELINE (one or more other builds' `deepgemm`,
  # carried under .gpu/, separated by spaces; their file names must differ, as they name the
  # outputs) and this build each bench $AB_RUNS (suite files, or SPEC@M,N,K[;M,N,K...])
  # $AB_ROUNDS times (default 2), as ab-BUILD-NAME-ROUND.{json,log}: a change timed against its
  # parent on one machine, where figures of different calls differ by a few percent.
  : "${AB_BASELINE:?set AB_BASELINE to the baseline binary, e.g. .gpu/deepgemm-base}"
  local rc=0 round run spec shapes list s bin name
  for round in $(seq "${AB_ROUNDS:-2}"); do
    # shellcheck disable=SC2086
    for bin in $AB_BASELINE "$deepgemm"; do
      for run in ${AB_RUNS:?set AB_RUNS to suites or SPEC@M,N,K[;M,N,K...]}; do
        spec=${run%@*}
        shapes=()
        if [ "$spec" != "$run" ]; then
          IFS=';' read -ra list <<<"${run#*@}"
          for s in "${list[@]}"; do shapes+=(--shape "$s"); done
        fi
        name=ab-$(basename "$bin")-$(basename "${spec%.toml}" .dgml)-$round
        "$bin" bench "$spec" "${shapes[@]}" --json "$OUT/$name.json" 2>&1 | tee "$OUT/$name.log" || rc=1
      done
    done
  done
  return "$rc"
}

case "${1:-}" in
pack)
  rm -rf .gpu && mkdir -p .gpu
  cargo build --profile gpu -p deepgemm-cli -p deepgemm-capi
  cp target/gpu/deepgemm target/gpu/libdeepgemm.so .gpu/
  # The C example, linked against libdeepgemm.so found beside it.
  gcc -std=c11 -O2 -Wall -Wextra -Werror -I crates/deepgemm-capi/include examples/c/gemm.c \
    -L .gpu -ldeepgemm -ldl -lm -Wl,-rpath,'$ORIGIN' -o .gpu/gemm_c
  cargo build --profile gpu -p deepgemm-runtime --example launch_overhead
  cp target/gpu/examples/launch_overhead .gpu/
  # The Python wheel (abi3: the GPU machine's CPython 3.12 imports it).
  python3 -m pip install -q --disable-pip-version-check 'maturin>=1.9,<2'
  python3 -m maturin build --release --out .gpu -q
  # Only the test binaries that hold gpu_* tests: the carry is limited to 64 MiB.
  cargo nextest archive --cargo-profile gpu -p deepgemm-cuda --test gpu_correctness \
    --test gpu_epilogue_ties \
    --test gpu_runtime -p deepgemm-runtime --test gpu_bundle --archive-file .gpu/gpu-tests.tar.zst
  cp "$(command -v cargo-nextest)" .gpu/
  du -sh .gpu/*
  ;;
run)
  : "${OUT:?run this on the GPU machine, where \$OUT is set}"
  FINAL_OUT=$OUT
  OUT="$WORK/out"
  rm -rf "$OUT" && mkdir -p "$OUT"
  pack_results() {
    tar czf "$FINAL_OUT/results.tar.gz" -C "$OUT" .
    cat "$OUT"/parts.txt > "$FINAL_OUT/parts.txt" 2>/dev/null || true
  }
  trap pack_results EXIT
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export DEEPGEMM_CACHE_DIR="$WORK/cache"
  # NVRTC is required (the tests fail without it); a skip must never hide a missing compiler.
  unset DEEPGEMM_SKIP_NVRTC
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
  shift
  parts=("$@")
  [ ${#parts[@]} -eq 0 ] && parts=(tests c python sanitizer bench tune)
  status=0
  for part in "${parts[@]}"; do
    start=$SECONDS
    case "$part" in
      tests|sanitizer|bench|tune|profile|breakdown|c|overhead|ab) "$part" || { status=1; echo "PART $part FAILED"; } ;;
      python) python_tests || { status=1; echo "PART $part FAILED"; } ;;
      *) echo "unknown part $part" >&2; exit 2 ;;
    esac
    echo "PART $part took $((SECONDS - start)) s" | tee -a "$OUT/parts.txt"
  done
  exit $status
  ;;
*)
  echo "usage: scripts/gpu.sh pack | run [tests|c|python|overhead|sanitizer|bench|tune|profile|breakdown|ab]..." >&2
  exit 2
  ;;
esac
