//! The model's layers against hand-computed cases.

mod search_support;

use deepgemm::backend;
use deepgemm::codegen::check_supported;
use deepgemm::dtype::DType;
use deepgemm::model::{predict, Bottleneck};
use deepgemm::plan::{Backend, Plan, Shape};
use deepgemm::search::search;
use deepgemm::spec::{DimDomain, KernelSpec, Layout};
use search_support::*;

/// The legal plan of `backend` with this tile and stage count, no cluster, row-order raster.
fn plan(spec: &KernelSpec, backend: Backend, tile: (u32, u32), stages: u32) -> Plan {
    backend::proposals(spec, backend)
        .into_iter()
        .find(|p| {
            check_supported(spec, p).is_ok()
                && (p.tile.m, p.tile.n) == tile
                && p.stages == stages
                && p.cluster_m == 1
                && p.raster.group_m == 1
                && {
                    // 8 warps (sm80), 2 consumers sharing each tile (sm90).
                    let (m, n) = p.threads.tile_split();
                    m * n == if backend == Backend::Sm80 { 8 } else { 2 }
                }
        })
        .unwrap_or_else(|| panic!("{backend} {tile:?} s{stages} is in the space"))
}

#[test]
fn operand_tiles_of_128x256x64_bf16_with_4_stages() {
    let spec = fixed(DType::Bf16, 4096, 4096, 4096);
    let p = plan(&spec, Backend::Sm90, (128, 256), 4);
    assert_eq!(p.tile.k, 64);
    let prediction = predict(&spec, &p, Shape::new(4096, 4096, 4096));
    assert_eq!(
        prediction.movement.operand_tile_bytes,
        (128 * 64 + 64 * 256) * 2 * 4
    );
    assert_eq!(prediction.movement.operand_tile_bytes, 196_608);
}

/// DeepSeek's DeepGEMM: M=256, N=7168 with BLOCK_M=128 on 132 SMs; BLOCK_N=112 gives 128 tiles
/// (128 busy SMs), BLOCK_N=128 gives 112 (112 busy SMs), so the math of the fuller wave ends
/// sooner. (Whether the whole kernel is faster depends on the L2 bandwidth the hardware file
/// assumes: at 9 TB/s x 0.8 both plans are L2-bound here.)
#[test]
fn block_n_112_fills_more_sms_on_256x7168() {
    let shape = Shape::new(256, 7168, 7168);
    let spec = fixed(DType::Bf16, 256, 7168, 7168);
    let run = |bn: u32| predict(&spec, &plan(&spec, Backend::Sm90, (128, bn), 4), shape);
    let (p112, p128) = (run(112), run(128));
    assert_eq!(p112.schedule.geometry.tiles, 128);
    assert_eq!(p128.schedule.geometry.tiles, 112);
    assert_eq!(p112.schedule.waves.launched, 1);
    assert_eq!(p128.schedule.waves.launched, 1);
    assert_eq!(p112.schedule.waves.last_wave_busy_sms, 128);
    assert_eq!(p128.schedule.waves.last_wave_busy_sms, 112);
    assert!((p112.observables.waves - 128.0 / 132.0).abs() < 1e-12);
    assert!(p112.schedule.compute_us < p128.schedule.compute_us);
}

#[test]
fn decode_shapes_are_memory_bound() {
    for m in [1, 4, 8, 16] {
        let spec = fixed(DType::Bf16, m, 8192, 8192);
        let result = search(&spec).expect("decode shapes have plans");
        let winner = result.buckets[0].winner();
        // Bound by moving bytes (DRAM or L2 bandwidth, or load latency: too few bytes in
        // flight per SM), never by math.
        assert!(
            winner.prediction.bottleneck.is_memory(),
            "M = {m}: {} is {:?}",
            winner.label,
            winner.prediction.breakdown
        );
        // Reading B once dominates: at least 128 MiB of the DRAM bytes.
        assert!(winner.prediction.movement.dram_bytes >= 8192.0 * 8192.0 * 2.0);
    }
}

#[test]
fn large_square_is_compute_bound_on_tensor_cores() {
    let spec = fixed(DType::Bf16, 4096, 4096, 4096);
    let result = search(&spec).unwrap();
    let bucket = &result.buckets[0];
    let winner = bucket.winner();
    assert_eq!(winner.prediction.bottleneck, Bottleneck::Compute);
    // wgmma on Hopper, fed by TMA: cuBLAS-class (~700-850 TFLOP/s measured, bench/RESULTS.md).
    assert_eq!(winner.plan.backend, Backend::Sm90);
    let tflops = winner.prediction.tflops;
    assert!((650.0..=900.0).contains(&tflops), "{tflops}");
    // The best mma.sync plan: about half of that.
    let sm80 = bucket
        .candidates
        .iter()
        .find(|c| c.plan.backend == Backend::Sm80)
        .map(|c| c.prediction.tflops);
    let sm80 = sm80.unwrap_or_else(|| {
        let p = plan(&spec, Backend::Sm80, (256, 128), 4);
        predict(&spec, &p, Shape::new(4096, 4096, 4096)).tflops
    });
    assert!((250.0..=450.0).contains(&sm80), "{sm80}");
}

#[test]
fn predicted_time_grows_with_k() {
    let spec = fixed(DType::Bf16, 2048, 2048, 1024);
    let p = plan(&spec, Backend::Sm80, (128, 128), 4);
    let mut last = 0.0;
    for k in [64, 128, 512, 1024, 4096, 8192, 16384, 65536] {
        let t = predict(&spec, &p, Shape::new(2048, 2048, k)).time_us;
        assert!(t > last, "K = {k}: {t} <= {last}");
        last = t;
    }
    // The search's winner too, bucket by bucket.
    let mut spec = fixed(DType::Bf16, 512, 4096, 1024);
    spec.shape.k = DimDomain::Set(vec![256, 1024, 4096, 16384]);
    let result = search(&spec).unwrap();
    let times: Vec<f64> = result
        .buckets
        .iter()
        .map(|b| b.winner().prediction.time_us)
        .collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
}

#[test]
fn wave_quantization_shows_in_the_time() {
    // 132 tiles of 128x128 fill one wave; 133 need a second, nearly empty one.
    let spec = fixed(DType::Bf16, 128 * 12, 128 * 11, 4096);
    let p = plan(&spec, Backend::Sm90, (128, 128), 4);
    let one = predict(&spec, &p, Shape::new(128 * 12, 128 * 11, 4096));
    let two = predict(&spec, &p, Shape::new(128 * 12 + 1, 128 * 11, 4096));
    assert_eq!(one.schedule.waves.launched, 1);
    assert_eq!(two.schedule.waves.launched, 2);
    assert_eq!(two.schedule.waves.last_wave_busy_sms, 11);
    // The second wave's 11 blocks run their whole k-loop (compute/smem chain) but share the L2
    // with few others, so it costs less than the full wave, never nothing.
    assert!(
        two.time_us > 1.3 * one.time_us,
        "{:?} vs {:?}",
        one.breakdown,
        two.breakdown
    );
}

#[test]
fn misaligned_leading_dimensions_cost_a_repack_and_pad_k() {
    let spec = fixed(DType::Bf16, 4095, 4097, 4093);
    let p = plan(&spec, Backend::Sm80, (128, 128), 4);
    let odd = predict(&spec, &p, Shape::new(4095, 4097, 4093));
    let even = predict(&spec, &p, Shape::new(4096, 4096, 4096));
    // K = 4093 bf16 rows are not 16-byte multiples: A (row) and B (col, K-major) are repacked.
    let a_and_b = 2.0 * (4095.0 * 4093.0 + 4093.0 * 4097.0) * 2.0;
    assert_eq!(odd.movement.repack_dram_bytes, a_and_b);
    assert_eq!(even.movement.repack_dram_bytes, 0.0);
    assert!(odd.observables.pad_k);
    assert!(!even.observables.pad_k);
}

#[test]
fn split_k_adds_blocks_and_partial_sums() {
    let spec = fixed(DType::Bf16, 64, 1024, 16384);
    let mut p = plan(&spec, Backend::Sm80, (64, 128), 4);
    let shape = Shape::new(64, 1024, 16384);
    let whole = predict(&spec, &p, shape);
    p.split_k = 8;
    let split = predict(&spec, &p, shape);
    assert_eq!(
        split.schedule.geometry.blocks,
        8 * whole.schedule.geometry.blocks
    );
    assert_eq!(
        split.schedule.geometry.k_blocks * 8,
        whole.schedule.geometry.k_blocks
    );
    assert!(split.movement.epilogue_dram_bytes > whole.movement.epilogue_dram_bytes);
    // 8 tiles on 132 SMs: splitting K puts 64 SMs to work and wins.
    assert!(
        split.time_us < whole.time_us,
        "{} vs {}",
        split.time_us,
        whole.time_us
    );
}

/// A cooperative fp8 kernel with row-major D stores each tile while the next tile's first k-tile
/// runs: the model leaves exposed only what the stores take beyond that k-tile, and counts the
/// partial sums' registers live through the epilogue. With column-major D (stored from the
/// registers) the epilogue stops the math and reuses the partial sums' registers.
#[test]
fn a_deferred_fp8_epilogue_exposes_only_what_outlasts_a_k_tile() {
    let shape = Shape::new(4096, 32768, 512);
    let row = fixed(DType::E4m3, 4096, 32768, 512);
    let mut col = row.clone();
    col.operands[2].layout = Layout::Col;
    let deferred = predict(&row, &plan(&row, Backend::Sm90, (128, 128), 4), shape);
    let stopped = predict(&col, &plan(&col, Backend::Sm90, (128, 128), 4), shape);
    assert!(deferred.sync.epilogue_under_next_k_tile);
    assert!(!stopped.sync.epilogue_under_next_k_tile && !stopped.sync.epilogue_hidden);
    assert!(
        deferred.breakdown.prologue_epilogue_us < stopped.breakdown.prologue_epilogue_us,
        "{} vs {}",
        deferred.breakdown.prologue_epilogue_us,
        stopped.breakdown.prologue_epilogue_us
    );
    assert_eq!(
        deferred.registers.total,
        stopped.registers.total + deferred.registers.epilogue
    );
}

#[test]
fn calibration_constants_move_the_prediction() {
    let mut spec = fixed(DType::Bf16, 4096, 4096, 4096);
    let p = plan(&spec, Backend::Sm80, (128, 128), 4);
    let shape = Shape::new(4096, 4096, 4096);
    let before = predict(&spec, &p, shape).time_us;
    spec.hardware
        .calibration
        .backends
        .get_mut(Backend::Sm80)
        .mma_efficiency /= 2.0;
    let after = predict(&spec, &p, shape).time_us;
    // Compute is most of the time, not all: the latency chain and the fixed costs stay.
    assert!(after > 1.5 * before, "{before} -> {after}");
}

#[test]
fn a_small_grid_waits_the_idle_latency() {
    // One 128x128 tile keeps one SM busy: its loads see the idle latencies. 132 tiles fill the
    // GPU and wait the loaded ones.
    let spec = fixed(DType::Bf16, 128, 128, 4096);
    let p = plan(&spec, Backend::Sm80, (128, 128), 4);
    let lat = &spec.hardware.latencies;
    let (idle_dram, idle_l2) = (
        lat.dram_idle_cycles.expect("h200 has idle latencies") as f64,
        lat.l2_idle_cycles.expect("h200 has idle latencies") as f64,
    );
    let one = predict(&spec, &p, Shape::new(128, 128, 4096)).schedule;
    assert!(one.load_latency_cycles >= idle_l2.min(idle_dram) - 1e-9);
    assert!(
        one.load_latency_cycles <= 1.05 * idle_l2.max(idle_dram),
        "{one:?}"
    );
    let full = predict(&spec, &p, Shape::new(128 * 12, 128 * 11, 4096)).schedule;
    let loaded = (lat.dram_cycles as f64).min(lat.l2_cycles as f64);
    assert!(full.load_latency_cycles >= loaded - 1e-9, "{full:?}");
}

/// gemv sums 16-bit inputs on the tensor cores only where a tile has 8 rows of the small
/// operand: the narrower tiles are FFMA plans, in the generated kernel, the math rate and the
/// `use_tensor_cores` observable alike.
#[test]
fn gemv_narrow_tiles_sum_on_the_cuda_cores() {
    let spec = fixed(DType::Bf16, 3001, 7, 3001);
    let shape = Shape::new(3001, 7, 3001);
    let gemv = |n: u32| {
        backend::proposals(&spec, Backend::Gemv)
            .into_iter()
            .find(|p| (p.tile.m, p.tile.n) == (16, n) && check_supported(&spec, p).is_ok())
            .unwrap_or_else(|| panic!("gemv 16x{n} is in the space"))
    };
    for (n, tensor_cores) in [(8, true), (4, false), (1, false)] {
        let plan = gemv(n);
        let prediction = predict(&spec, &plan, shape);
        let flag = prediction.observables.use_tensor_cores;
        assert_eq!(flag, tensor_cores, "16x{n}: use_tensor_cores {flag}");
        let instruction = &prediction.schedule.math.instruction;
        assert_eq!(
            instruction.contains("mma"),
            tensor_cores,
            "16x{n}: {instruction}"
        );
        let kernel = deepgemm::codegen::generate(&spec, &plan, "v0").unwrap();
        let mma = format!("constexpr bool MMA = {tensor_cores};");
        assert!(kernel.source.contains(&mma), "16x{n}: no `{mma}`");
    }
}

/// gemv's mma sums split each chunk's K among the warps: a chunk's rows are read from shared
/// memory once, the small operand's as well (the FFMA sums read every small row in every warp).
/// Counting them once per warp had made 3001x7x3001 smem-bound at 19.8 us (measured 16.5-16.9 on
/// the H100, bench/RESULTS.md 2026-12-07).
#[test]
fn gemv_mma_sums_read_the_chunk_once() {
    let spec = fixed(DType::Bf16, 3001, 7, 3001);
    let plan = backend::proposals(&spec, Backend::Gemv)
        .into_iter()
        .find(|p| {
            (p.tile.m, p.tile.n, p.tile.k, p.stages) == (16, 8, 1024, 2)
                && check_supported(&spec, p).is_ok()
        })
        .expect("gemv 16x8x1024 s2 is in the space");
    let prediction = predict(&spec, &plan, Shape::new(3001, 7, 3001));
    // Per block, 2 bytes an element: the ring's copies in (K of the tile's rows of A, 3001 / 188
    // on average, and of B's 7 columns) and the sums' reads of 3 chunks of 1024 of 16 + 8 rows,
    // each word read as the aligned pair it straddles (twice its bytes).
    let copies = 3001.0 * (3001.0 / 188.0 + 7.0) * 2.0;
    let expected = copies + 3.0 * 1024.0 * (16.0 + 8.0) * 2.0 * 2.0;
    let block = prediction.movement.block_smem_bytes;
    assert!(
        (block - expected).abs() < 1e-6 * expected,
        "block smem bytes {block}, want {expected}"
    );
    assert_ne!(prediction.bottleneck, Bottleneck::Smem);
}

/// gemv's ring copies the small operand's rows beside the streamed ones, so a wider small side
/// streams the large operand slower: 4 rows of A against 16 of B copy 20 rows per 16 streamed,
/// 1 row 17 (measured: 151.8 against 130.4 us at 4x / 1x8192x28672, bench/RESULTS.md).
#[test]
fn gemv_streams_slower_with_more_small_rows() {
    let time = |m: u32| {
        let spec = fixed(DType::Bf16, m.into(), 8192, 28672);
        let plan = backend::proposals(&spec, Backend::Gemv)
            .into_iter()
            .find(|p| {
                (p.tile.m, p.tile.n, p.tile.k, p.stages) == (m, 16, 1024, 3)
                    && check_supported(&spec, p).is_ok()
            })
            .unwrap_or_else(|| panic!("gemv {m}x16x1024 s3 is in the space"));
        let prediction = predict(&spec, &plan, Shape::new(m.into(), 8192, 28672));
        assert_eq!(
            prediction.bottleneck,
            Bottleneck::Dram,
            "{m}x16: {:?}",
            prediction.bottleneck
        );
        prediction.time_us
    };
    let (one, four) = (time(1), time(4));
    let ratio = four / one;
    assert!(
        (1.1..1.25).contains(&ratio),
        "4 small rows against 1: {four:.1} / {one:.1} us = {ratio:.3}, want about 20 / 17"
    );
}

/// A persistent kernel fills its ring once and drains its last tile once; between tile rounds a
/// cooperative one also stops for each tile's epilogue. With one tile per block there is no
/// round between: cooperative and ping-pong plans of one tile pay the same fill and drain, and
/// a second round adds one epilogue stop to the cooperative plan alone.
#[test]
fn a_persistent_kernel_drains_its_last_tile_once() {
    let one_round = Shape::new(2048, 1024, 4096); // 16 x 8 tiles of 128 x 128 on 132 SMs
    let two_rounds = Shape::new(4096, 1024, 4096); // 32 x 8
    let s = fixed(DType::Bf16, 4096, 1024, 4096);
    let cooperative = plan(&s, Backend::Sm90, (128, 128), 6);
    let pingpong = backend::proposals(&s, Backend::Sm90)
        .into_iter()
        .find(|p| {
            check_supported(&s, p).is_ok()
                && (p.tile.m, p.tile.n, p.stages) == (128, 128, 6)
                && p.threads.pingpong()
                && p.cluster_m == 1
                && p.raster.group_m == 1
        })
        .expect("128x128 s6 ping-pong is in the space");
    let fill_and_drain = |p: &Plan, shape| predict(&s, p, shape).breakdown.prologue_epilogue_us;
    let (coop_one, pp_one) = (
        fill_and_drain(&cooperative, one_round),
        fill_and_drain(&pingpong, one_round),
    );
    assert!((coop_one - pp_one).abs() < 1e-9, "{coop_one} vs {pp_one}");
    let coop_two = fill_and_drain(&cooperative, two_rounds);
    let pp_two = fill_and_drain(&pingpong, two_rounds);
    assert!(coop_two > coop_one, "{coop_two} vs {coop_one}");
    assert!(coop_two > pp_two, "{coop_two} vs {pp_two}");
}

/// Every fp8 kernel promotes each k-tile's partial sums into its f32 sums, which the model
/// charges per k-tile (`promotion_cycles`) with or without scales; K-block scales add their own
/// cycles on top (`kblock_scale_cycles`); a 16-bit kernel pays neither.
#[test]
fn fp8_pays_its_promotion_and_block_scales_on_top() {
    let example = |name: &str| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples")
            .join(name);
        deepgemm::spec::parse_file(&path)
            .unwrap_or_else(|d| panic!("{name}: {d}"))
            .kernels
            .remove(0)
    };
    let shape = Shape::new(4096, 4096, 7168);
    let time_and_sync = |spec: &KernelSpec| {
        let p = predict(spec, &plan(spec, Backend::Sm90, (128, 128), 4), shape);
        (
            p.time_us,
            p.sync.promotion_cycles,
            p.sync.kblock_scale_cycles,
        )
    };
    let per_tensor = example("fp8_per_tensor.dgml");
    let figures = per_tensor.hardware.calibration.backends.get(Backend::Sm90);
    let (promoted_us, promotion, scales) = time_and_sync(&per_tensor);
    assert_eq!(
        (promotion, scales),
        (figures.promotion_cycles.unwrap(), 0.0)
    );
    assert!(promotion > 0.0);
    let (blocks_us, promotion, scales) = time_and_sync(&example("fp8_block_scaled.dgml"));
    assert_eq!(
        (promotion, scales),
        (
            figures.promotion_cycles.unwrap(),
            figures.kblock_scale_cycles.unwrap()
        )
    );
    assert!(blocks_us > promoted_us, "{blocks_us} vs {promoted_us}");
    let mut unpromoted = per_tensor.clone();
    unpromoted
        .hardware
        .calibration
        .backends
        .get_mut(Backend::Sm90)
        .promotion_cycles = Some(0.0);
    assert!(time_and_sync(&unpromoted).0 < promoted_us);
    assert_eq!(time_and_sync(&fixed(DType::Bf16, 4096, 4096, 7168)).1, 0.0);
}

/// tiny takes the launch-bound shapes, where its short kernel ran 1.6 us faster than gemv
/// (17x33x65 4.82 against 6.43 us, 127x129x255 6.19 against 7.46: bench/RESULTS.md,
/// 2026-12-07), and leaves every shape that streams data to the backends that stream it: its
/// element loads took 27.9 us on 3001x7x3001 (gemv: 19.2), and a decode projection is a stream
/// of hundreds of megabytes.
#[test]
fn tiny_takes_the_launch_bound_shapes_and_leaves_the_streams() {
    let winner = |m: u64, n: u64, k: u64| {
        let result = search(&fixed(DType::Bf16, m, n, k)).unwrap();
        result.buckets[0].winner().plan.backend
    };
    for (m, n, k) in [(17, 33, 65), (127, 129, 255)] {
        assert_eq!(winner(m, n, k), Backend::Tiny, "{m}x{n}x{k}");
    }
    for (m, n, k) in [
        (3001, 7, 3001),
        (1, 10240, 8192),
        (1, 4096, 4096),
        (1000, 3000, 2000),
    ] {
        let backend = winner(m, n, k);
        assert_ne!(backend, Backend::Tiny, "{m}x{n}x{k}");
    }
}
