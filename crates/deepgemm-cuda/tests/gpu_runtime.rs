//! The runtime on a real GPU: bad operands are refused with clear errors, kernels for another
//! architecture are refused, timing works, and cuBLASLt (the baseline) agrees with the reference
//! on the same buffers. Run on the GPU machine; without a GPU every test fails.

mod gpu_support;

use deepgemm::plan::{Backend, Shape};
use deepgemm_cuda::cache::compile_kernel;
use deepgemm_cuda::cublaslt::Baseline;
use deepgemm_cuda::device::{DeviceBuffer, Gpu};
use deepgemm_cuda::runner::{run, DeviceProblem, RunOptions};
use deepgemm_cuda::timing::{tflops, Timer, TimingOptions};
use deepgemm_cuda::{nvrtc, CudaError};
use gpu_support::{fresh_seed, gpu, kernel, Case, Epilogue};

#[test]
fn gpu_device_is_described() {
    let gpu = gpu();
    let info = gpu.info();
    println!("{info:?}");
    assert!(info.sms > 0 && info.max_smem_per_block_bytes >= 48 * 1024);
    assert!(info.arch.starts_with("sm_"));
    assert!(info.driver_version >= 12000);
}

#[test]
fn gpu_bad_operands_are_refused() {
    let gpu = gpu();
    let case = Case::new("bf16", "bf16", (64, 64, 64));
    let (spec, kernel) = kernel(&case, Backend::Sm80).unwrap();
    let (compiled, _) = compile_kernel(&kernel).unwrap();
    let loaded = gpu.load(&kernel, &compiled).unwrap();
    let device =
        DeviceProblem::upload(&gpu, &spec, case.shape, &case.options(fresh_seed())).unwrap();
    let expect = |mutate: &dyn Fn(&mut deepgemm_cuda::launch::LaunchArgs), needle: &str| {
        let mut args = device.launch_args();
        mutate(&mut args);
        match loaded.prepare(&gpu, &spec, &args) {
            Ok(_) => panic!("accepted a launch that should fail with `{needle}`"),
            Err(e) => assert!(
                e.to_string().contains(needle),
                "`{e}` does not say `{needle}`"
            ),
        }
    };
    expect(&|a| a.operands[0].ptr = 0, "null pointer");
    expect(
        &|a| a.operands[0].geometry.ld = 63,
        "leading dimension 63 is smaller than a row (64 elements)",
    );
    expect(
        &|a| a.operands[1].geometry.cols = 65,
        "the shape needs 64x64",
    );
    expect(
        &|a| a.shape = Shape::new(64, 64, 3_000_000_000),
        "exceeds the kernels' limit of 2147418112",
    );
    // The limit keeps 2^16 of headroom below 2^31 for the kernels' int arithmetic.
    expect(
        &|a| a.shape = Shape::new(64, 64, deepgemm::codegen::MAX_EXTENT + 1),
        "exceeds the kernels' limit of 2147418112",
    );
    expect(&|a| a.operands.retain(|o| o.name != "B"), "operand `B`");
    // The good launch still works after all that, and nothing was corrupted.
    let prepared = loaded.prepare(&gpu, &spec, &device.launch_args()).unwrap();
    prepared.enqueue(&gpu).unwrap();
    let check = device.check(&gpu, &spec).unwrap();
    assert!(check.passed, "{check:?}");
}

#[test]
fn gpu_kernels_for_another_arch_are_refused() {
    let gpu = gpu();
    let (_, kernel) = kernel(&Case::new("bf16", "bf16", (64, 64, 64)), Backend::Sm80).unwrap();
    // The GPU is one major version; a cubin for another cannot run on it.
    let other = if gpu.info().compute_capability.0 == 8 {
        "sm_90a"
    } else {
        "sm_80"
    };
    let compiled = nvrtc::compile(&kernel.source, &kernel.entry, other).unwrap();
    match gpu.load(&kernel, &compiled) {
        Err(CudaError::ArchMismatch { kernel_arch, .. }) => assert_eq!(kernel_arch, other),
        Err(e) => panic!("expected an arch mismatch, got {e}"),
        Ok(_) => panic!("loaded a {other} cubin on {}", gpu.info().arch),
    }
}

#[test]
fn gpu_timing_reports_a_plausible_rate() {
    let gpu = gpu();
    let case = Case::new("bf16", "bf16", (4096, 4096, 4096));
    let (spec, kernel) = kernel(&case, Backend::Sm80).unwrap();
    let options = RunOptions {
        timing: Some(TimingOptions::default()),
        ..case.options(fresh_seed())
    };
    let report = run(&gpu, &spec, &kernel, case.shape, &options).unwrap();
    println!("{report:?}");
    assert!(report.passed);
    let (us, rate) = (report.time_us.unwrap(), report.tflops.unwrap());
    // Between a memory floor (~1 us) and something absurdly slow; 2*4096^3 at 10 TFLOP/s is 14 ms.
    assert!(us > 1.0 && rate > 10.0, "{us} us, {rate} TFLOP/s");
}

#[test]
fn gpu_cublaslt_matches_the_reference_in_every_layout() {
    let gpu = gpu();
    for layouts in [
        ["row", "row", "row"],
        ["row", "col", "row"],
        ["col", "row", "row"],
        ["col", "col", "col"],
        ["row", "col", "col"],
        ["col", "row", "col"],
    ] {
        let case = Case::new("bf16", "f32", (127, 129, 255)).layouts(layouts);
        let spec = gpu_support::parse(&case.dgml(Backend::Sm80));
        let device =
            DeviceProblem::upload(&gpu, &spec, case.shape, &case.options(fresh_seed())).unwrap();
        let baseline = Baseline::new(&gpu, &spec, &device).unwrap();
        baseline.enqueue(&gpu).unwrap();
        let check = device.check(&gpu, &spec).unwrap();
        println!("{} {}: {check:?}", case.name(), baseline.label());
        assert!(
            check.passed,
            "{} {}: {check:?}",
            case.name(),
            baseline.label()
        );
    }
}

#[test]
fn gpu_cublaslt_side_by_side_with_bias_gelu() {
    let gpu = gpu();
    let case = Case::new("bf16", "bf16", (1000, 3000, 2000)).epilogue(Epilogue::BiasGeluTanh);
    let (spec, kernel) = kernel(&case, Backend::Sm80).unwrap();
    let device =
        DeviceProblem::upload(&gpu, &spec, case.shape, &case.options(fresh_seed())).unwrap();
    let baseline = Baseline::new(&gpu, &spec, &device).unwrap();
    baseline.enqueue(&gpu).unwrap();
    let theirs = device.check(&gpu, &spec).unwrap();
    assert!(theirs.passed, "cuBLASLt: {theirs:?}");

    let (compiled, _) = compile_kernel(&kernel).unwrap();
    let loaded = gpu.load(&kernel, &compiled).unwrap();
    let prepared = loaded.prepare(&gpu, &spec, &device.launch_args()).unwrap();
    device.poison_output(&gpu).unwrap();
    prepared.enqueue(&gpu).unwrap();
    let ours = device.check(&gpu, &spec).unwrap();
    assert!(ours.passed, "ours: {ours:?}");

    let timer = Timer::new(&gpu).unwrap();
    let options = TimingOptions::default();
    let ours_us = timer
        .time(&gpu, options, || prepared.enqueue(&gpu))
        .unwrap()
        .median_us;
    let theirs_us = timer
        .time(&gpu, options, || baseline.enqueue(&gpu))
        .unwrap()
        .median_us;
    println!(
        "{}: ours {:.1} us ({:.0} TFLOP/s), {} {:.1} us ({:.0} TFLOP/s), ratio {:.2}",
        case.name(),
        ours_us,
        tflops(case.shape, ours_us),
        baseline.label(),
        theirs_us,
        tflops(case.shape, theirs_us),
        theirs_us / ours_us
    );
    assert!(ours_us > 0.0 && theirs_us > 0.0);
}

#[test]
fn gpu_cublaslt_refuses_what_it_cannot_fuse() {
    let gpu = gpu();
    // A bias along N on a column-major D: cuBLASLt's bias runs along M there.
    let case = Case::new("bf16", "bf16", (64, 64, 64))
        .layouts(["row", "col", "col"])
        .epilogue(Epilogue::BiasGelu);
    let spec = gpu_support::parse(&case.dgml(Backend::Sm80));
    let device = DeviceProblem::upload(&gpu, &spec, case.shape, &case.options(1)).unwrap();
    match Baseline::new(&gpu, &spec, &device) {
        Err(CudaError::CublasUnsupported(why)) => assert!(why.contains("bias"), "{why}"),
        Err(e) => panic!("expected unsupported, got {e}"),
        Ok(_) => panic!("cuBLASLt accepted a bias along N with a col-major D"),
    }
}

/// `len` pseudo-random bytes from `seed` (advanced), and a device buffer holding them: the
/// source of a copy test.
fn random_source(gpu: &Gpu, seed: &mut u64, len: usize) -> (Vec<u8>, DeviceBuffer) {
    let bytes: Vec<u8> = (0..len)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (*seed >> 56) as u8
        })
        .collect();
    let buffer = gpu.alloc(len).unwrap();
    gpu.upload(&buffer, 0, &bytes).unwrap();
    (bytes, buffer)
}

/// `len` device bytes of 0xAB: a copy's destination, whose untouched bytes stay recognisable.
fn poisoned(gpu: &Gpu, len: usize) -> DeviceBuffer {
    let buffer = gpu.alloc(len).unwrap();
    gpu.memset(buffer.ptr(), 0xAB, len).unwrap();
    buffer
}

/// The repack copy moves every byte of every line, for every source alignment, and writes
/// nothing past a line's width (the destination's padding keeps its poison). A source pitch of
/// width + 3 + offset walks the lines' source offsets (mod 16) through many values, and every
/// source ends where its allocation does, so that a read past the last line's last byte is one
/// past the allocation (for compute-sanitizer's memcheck). The nine copies go in one call: three
/// launches (four copies, four, then one), each copy with its own width and height in one grid.
#[test]
fn gpu_pitch_copy_moves_every_byte_and_nothing_else() {
    use deepgemm_cuda::device::Copy2d;
    use deepgemm_cuda::pitch_copy::PitchCopy;
    let gpu = gpu();
    let copy_kernel = PitchCopy::load(&gpu).unwrap();
    let mut seed = fresh_seed();
    let cases = [
        (0usize, 4096usize, 3usize),
        (1, 8187, 5),
        // Source offsets 2, 1, 0, 15, .. 3: all sixteen.
        (2, 8186, 37),
        (4, 100, 2),
        (8, 17, 70_000),
        // Lines shorter than one 16-byte chunk.
        (15, 7, 300),
        // One whole chunk per line, from eight source offsets.
        (3, 16, 9),
        // The last aligned source word of lines 0 and 4 (the last) holds only the line's last
        // byte: line 0's then holds the pitch's gap and line 1's first bytes too; line 4's last
        // byte is the allocation's.
        (1, 32, 5),
        // More chunks than the grid has threads (2.5M): the grid-stride loop turns, its stride
        // wrapping across lines.
        (5, 1001, 40_000),
    ];
    let mut buffers = Vec::new();
    let mut copies = Vec::new();
    for (offset, width, height) in cases {
        let src_pitch = width + 3 + offset;
        let dst_pitch = width.next_multiple_of(16) + 16;
        let (src_bytes, src) =
            random_source(&gpu, &mut seed, offset + src_pitch * (height - 1) + width);
        let dst = poisoned(&gpu, dst_pitch * height);
        let copy = Copy2d {
            src: src.ptr() + offset as u64,
            src_pitch,
            dst: dst.ptr(),
            dst_pitch,
            width,
            height,
        };
        assert!(PitchCopy::fits(&copy));
        copies.push(copy);
        buffers.push((src, dst, src_bytes, offset, width, height, dst_pitch));
    }
    copy_kernel.enqueue(&gpu, &copies).unwrap();
    for (_src, dst, src_bytes, offset, width, height, dst_pitch) in &buffers {
        let (offset, width, height, dst_pitch) = (*offset, *width, *height, *dst_pitch);
        let mut out = vec![0u8; dst_pitch * height];
        gpu.download(dst, 0, &mut out).unwrap();
        for y in 0..height {
            let line = &out[y * dst_pitch..(y + 1) * dst_pitch];
            let from = offset + y * (width + 3 + offset);
            assert_eq!(
                &line[..width],
                &src_bytes[from..from + width],
                "offset {offset} line {y}"
            );
            assert!(
                line[width..].iter().all(|&b| b == 0xAB),
                "offset {offset} line {y} padding"
            );
        }
    }
}

/// The fp8 transpose (`PitchCopy::enqueue_transpose`): every byte lands at its transposed place
/// and the destination's padding is untouched, for ragged shapes (not multiples of its 64x64
/// tiles, one line, one column), aligned sources (whole 16-byte loads) and odd source offsets
/// and pitches (joined loads, and bytes one by one at the source's end), and more tile rows than
/// one grid holds (65535), so that the kernel's row loop turns.
#[test]
fn gpu_transpose_moves_every_byte_to_its_place() {
    use deepgemm_cuda::pitch_copy::{PitchCopy, Transpose};
    let gpu = gpu();
    let kernel = PitchCopy::load(&gpu).unwrap();
    let mut seed = fresh_seed();
    // (source offset, rows, cols, source pitch)
    for (offset, rows, cols, src_pitch) in [
        (0usize, 64usize, 64usize, 64usize),
        (0, 256, 320, 336),
        (0, 4096, 2048, 2048),
        (16, 100, 200, 208),
        (0, 64, 64, 69),
        (1, 127, 129, 134),
        (3, 1, 1000, 1005),
        (5, 1000, 1, 6),
        (7, 33, 31, 36),
        (0, 4_200_000, 3, 8),
    ] {
        let dst_pitch = rows.next_multiple_of(16) + 16;
        // The source ends at its last byte, so that loads near the end cannot run past it.
        let (src_bytes, src) =
            random_source(&gpu, &mut seed, offset + src_pitch * (rows - 1) + cols);
        let dst = poisoned(&gpu, dst_pitch * cols);
        let t = Transpose {
            src: src.ptr() + offset as u64,
            src_pitch,
            dst: dst.ptr(),
            dst_pitch,
            rows,
            cols,
        };
        kernel.enqueue_transpose(&gpu, &t).unwrap();
        let mut out = vec![0u8; dst_pitch * cols];
        gpu.download(&dst, 0, &mut out).unwrap();
        for x in 0..cols {
            let line = &out[x * dst_pitch..(x + 1) * dst_pitch];
            for (y, &byte) in line[..rows].iter().enumerate() {
                assert_eq!(
                    byte,
                    src_bytes[offset + y * src_pitch + x],
                    "{rows}x{cols} at +{offset}: element ({y}, {x})"
                );
            }
            assert!(
                line[rows..].iter().all(|&b| b == 0xAB),
                "{rows}x{cols}: padding of line {x}"
            );
        }
    }
}

/// The Hopper launch contract before any GEMM: a kernel that takes a TMA tensor map
/// (`KernelArg::TensorMap`, encoded by the launcher from the operand), runs on a persistent grid
/// of 2x1 clusters (`GridRule { persistent, cluster: 2 }`, launched with the cluster attribute)
/// and hands tiles between the blocks of a cluster through distributed shared memory
/// (tests/kernels/tma_cluster_smoke.cu). Every byte of D must equal A's, on a shape with ragged
/// tiles and more tile pairs than resident clusters (so the persistent loop turns).
#[test]
fn gpu_tma_cluster_launch_moves_every_byte() {
    use deepgemm::codegen::{GeneratedKernel, GridRule, KernelArg, TensorMapArg, Workspace};
    use deepgemm::spec::ShapeSym;
    let gpu = gpu();
    let spec = gpu_support::parse(
        "kernel copy {\n  target h200;\n  input A: bf16[M, K] row;\n  input B: bf16[K, N] col;\n  \
         output D: bf16[M, N] row;\n  shape { M = 8000; N = 4000; K = 4000; }\n}\n",
    );
    let source = include_str!("kernels/tma_cluster_smoke.cu");
    let entry = "deepgemm_tma_cluster_smoke";
    let kernel = GeneratedKernel {
        entry: entry.into(),
        source: source.into(),
        arch: "sm_90a".into(),
        args: vec![
            KernelArg::Pointer("A".into()),
            KernelArg::Pointer("D".into()),
            KernelArg::Extent(ShapeSym::M),
            KernelArg::Extent(ShapeSym::K),
            KernelArg::TensorMap(TensorMapArg {
                operand: "A".into(),
                param: "tmap_a".into(),
                box_inner: 64,
                box_outer: 64,
                swizzle_bytes: 0,
                only_when_aligned: false,
                flat: false,
            }),
        ],
        threads: 128,
        smem_bytes: 64 * 64 * 2 + 64,
        grid: GridRule {
            tile_m: 64,
            tile_n: 64,
            split_k: 1,
            persistent: true,
            cluster: 2,
        },
        workspace: Workspace::default(),
        alignment: vec![("A".into(), 16), ("D".into(), 2)],
        transposed: Vec::new(),
        // Metadata the launcher does not read: the spec's first sm90 proposal stands in.
        plan: deepgemm::backend::proposals(&spec, Backend::Sm90).remove(0),
    };
    let compiled = nvrtc::compile(source, entry, "sm_90a").unwrap();
    let loaded = gpu.load(&kernel, &compiled).unwrap();
    // N = K, so that D (M x N) has A's shape. 8000 x 4000: 125 x 63 tiles, 3969 pairs, more than
    // the clusters the GPU holds at once (this small kernel fits many per SM).
    for shape in [
        Shape::new(8000, 4000, 4000),
        Shape::new(1, 8, 8),
        Shape::new(65, 72, 72),
    ] {
        let options = RunOptions {
            seed: fresh_seed(),
            ..Default::default()
        };
        let device = DeviceProblem::upload(&gpu, &spec, shape, &options).unwrap();
        let prepared = loaded.prepare(&gpu, &spec, &device.launch_args()).unwrap();
        let (blocks, _, _) = prepared.grid();
        assert_eq!(blocks % 2, 0, "{shape}: whole clusters");
        let pairs = shape.m.div_ceil(64).div_ceil(2) * shape.k.div_ceil(64);
        if shape.m == 8000 {
            assert!(
                u64::from(blocks / 2) < pairs,
                "{blocks} blocks for {pairs} pairs: the persistent loop would not turn"
            );
        }
        prepared.enqueue(&gpu).unwrap();
        gpu.synchronize().unwrap();
        let d = device.download_output(&gpu).unwrap();
        let a = &device.problem.tensor("A").unwrap().bytes;
        assert_eq!(d.len(), a.len(), "{shape}");
        let wrong = d.iter().zip(a.iter()).filter(|(x, y)| x != y).count();
        assert_eq!(
            wrong,
            0,
            "{shape}: {wrong} of {} bytes differ ({blocks} blocks)",
            a.len()
        );
        println!("{shape}: {} bytes moved by {blocks} blocks", a.len());
    }
}

/// What `bench` and `tune` rely on: a result that fails the check is reported with its error and
/// never timed (the work ran exactly once), and a correct one is timed.
#[test]
fn gpu_a_wrong_result_is_reported_and_never_timed() {
    use deepgemm_cuda::runner::check_then_time;
    let gpu = gpu();
    let timer = Timer::new(&gpu).unwrap();
    let case = Case::new("bf16", "bf16", (64, 64, 64));
    let (spec, kernel) = kernel(&case, Backend::Sm80).unwrap();
    let device =
        DeviceProblem::upload(&gpu, &spec, case.shape, &case.options(fresh_seed())).unwrap();
    // "Work" that writes nothing: the poisoned output fails the check.
    let mut calls = 0;
    let timing = Some((&timer, TimingOptions::default()));
    let skipped = check_then_time(&gpu, &device, &spec, timing, || {
        calls += 1;
        Ok(())
    })
    .unwrap();
    assert!(!skipped.check.passed);
    assert_eq!(skipped.check.unwritten, 64 * 64);
    assert!(skipped.timing.is_none());
    assert_eq!(calls, 1, "a failed result must not be run again for timing");
    // The real kernel on the same inputs passes and is timed.
    let (compiled, _) = compile_kernel(&kernel).unwrap();
    let loaded = gpu.load(&kernel, &compiled).unwrap();
    let prepared = loaded.prepare(&gpu, &spec, &device.launch_args()).unwrap();
    let good = check_then_time(&gpu, &device, &spec, timing, || prepared.enqueue(&gpu)).unwrap();
    assert!(good.check.passed, "{:?}", good.check);
    assert!(good
        .timing
        .is_some_and(|t| t.runs >= 50 && t.median_us > 0.0));
}

// ---- The cuBLASLt FP8 baseline -----------------------------------------------------------
//
// Each case runs cuBLASLt on fresh scaled FP8 inputs and checks it against the dequantized
// f32-accumulated reference (‖D − ref‖ / ‖ref‖ < 1e-2). The scales vary 16-fold from block to
// block (reference.rs, `Distribution::Fp8Scale`), so a scale read from the wrong block, a
// transposed scale tensor or the wrong stride fails the check; the control at the end shows
// that it does.

/// An e4m3 GEMM, A row-major and B col-major (cuBLASLt's FP8 form), with `scales` declared.
fn fp8_spec(
    scales: &str,
    d: &str,
    d_layout: &str,
    shape: (u64, u64, u64),
) -> deepgemm::spec::KernelSpec {
    let (m, n, k) = shape;
    gpu_support::parse(&format!(
        "kernel fp8 {{ target h200; input A: e4m3[M, K] row; input B: e4m3[K, N] col; {scales} \
         output D: {d}[M, N] {d_layout}; shape {{ M = {m}; N = {n}; K = {k}; }} }}"
    ))
}

const PER_TENSOR: &str = "input sa: f32[] scale_of A; input sb: f32[] scale_of B;";
const BLOCKS: &str =
    "input sa: f32[M, K/128] col scale_of A; input sb: f32[N/128, K/128] row scale_of B;";
/// The same blocks with each scale tensor in the other layout: both are repacked.
const BLOCKS_TRANSPOSED: &str =
    "input sa: f32[M, K/128] row scale_of A; input sb: f32[N/128, K/128] col scale_of B;";
const CHANNELS: &str = "input sa: f32[M] scale_of A; input sb: f32[N] scale_of B;";

/// Runs the baseline on `spec` and returns its check and the scale mode it reported.
fn cublaslt_fp8(
    gpu: &Gpu,
    spec: &deepgemm::spec::KernelSpec,
    shape: (u64, u64, u64),
) -> (deepgemm::reference::Check, String) {
    let shape = Shape::new(shape.0, shape.1, shape.2);
    let seed = fresh_seed();
    let options = RunOptions {
        seed,
        ..RunOptions::default()
    };
    let device = DeviceProblem::upload(gpu, spec, shape, &options).unwrap();
    let baseline =
        Baseline::new(gpu, spec, &device).unwrap_or_else(|e| panic!("{shape} (seed {seed}): {e}"));
    device.poison_output(gpu).unwrap();
    baseline.enqueue(gpu).unwrap();
    let check = device.check(gpu, spec).unwrap();
    println!("{shape} seed {seed}: {} -> {check:?}", baseline.label());
    let mode = baseline.scale_mode().unwrap_or_default().to_string();
    (check, mode)
}

fn assert_close(check: &deepgemm::reference::Check, what: &str) {
    assert!(
        check.unwritten == 0 && check.error.is_finite() && check.error < 1e-2,
        "{what}: {check:?}"
    );
}

#[test]
fn gpu_cublaslt_fp8_per_tensor_matches_the_dequantized_reference() {
    let gpu = gpu();
    // A row-major D puts the spec's B in cuBLASLt's A slot, a col-major D does not: both
    // assignments of sa/sb to the A/B scale pointers are exercised.
    for (d, layout) in [
        ("bf16", "row"),
        ("bf16", "col"),
        ("f16", "row"),
        ("f32", "row"),
    ] {
        let shape = (256, 384, 512);
        let spec = fp8_spec(PER_TENSOR, d, layout, shape);
        let (check, mode) = cublaslt_fp8(&gpu, &spec, shape);
        assert_eq!(mode, "A SCALAR_32F (sa) x B SCALAR_32F (sb)");
        assert_close(&check, &format!("per tensor, {d} {layout} D"));
    }
}

#[test]
fn gpu_cublaslt_fp8_block_scaled_matches_the_dequantized_reference() {
    let gpu = gpu();
    for (scales, d_layout, shape, repacked) in [
        // In place: sa is M-major with stride M, sb K-major with 4 K blocks per N block.
        (BLOCKS, "row", (256, 384, 512), false),
        (BLOCKS, "col", (256, 384, 512), false),
        // K = 720: 6 K blocks, the last 80 wide; sb's rows are 6 apart, BLK128x128_32F's 8.
        (BLOCKS, "row", (256, 200, 720), true),
        (BLOCKS, "col", (136, 264, 720), true),
        // Scale tensors in the other layouts, copied into cuBLASLt's.
        (BLOCKS_TRANSPOSED, "row", (256, 384, 640), true),
    ] {
        let spec = fp8_spec(scales, "bf16", d_layout, shape);
        let (check, mode) = cublaslt_fp8(&gpu, &spec, shape);
        assert!(
            mode.starts_with("A VEC128_32F (sa") && mode.contains("B BLK128x128_32F (sb"),
            "{mode}"
        );
        assert_eq!(mode.contains("repacked"), repacked, "{mode}");
        assert_close(&check, &format!("{scales} {d_layout} D {shape:?}"));
    }
}

#[test]
fn gpu_cublaslt_fp8_per_channel_matches_the_dequantized_reference() {
    let gpu = gpu();
    for d_layout in ["row", "col"] {
        let shape = (256, 384, 512);
        let spec = fp8_spec(CHANNELS, "bf16", d_layout, shape);
        let (check, mode) = cublaslt_fp8(&gpu, &spec, shape);
        assert_eq!(mode, "A OUTER_VEC_32F (sa) x B OUTER_VEC_32F (sb)");
        assert_close(&check, &format!("per channel, {d_layout} D"));
    }
}

/// The control: the same run with sb's values shifted by one block (what a wrong stride or a
/// transposed scale tensor does) is off the reference by far more than the tolerance.
#[test]
fn gpu_cublaslt_fp8_check_catches_misplaced_scales() {
    let gpu = gpu();
    let shape = Shape::new(256, 384, 512);
    let spec = fp8_spec(BLOCKS, "bf16", "row", (256, 384, 512));
    let options = deepgemm::reference::ProblemOptions {
        seed: fresh_seed(),
        ..Default::default()
    };
    let problem = deepgemm::reference::Problem::generate(&spec, shape, &options).unwrap();
    let mut shifted = problem.clone();
    let sb = shifted.tensors.iter_mut().find(|t| t.name == "sb").unwrap();
    sb.bytes.rotate_left(4);
    let device = DeviceProblem::from_problem(&gpu, shifted, 0).unwrap();
    let baseline = Baseline::new(&gpu, &spec, &device).unwrap();
    device.poison_output(&gpu).unwrap();
    baseline.enqueue(&gpu).unwrap();
    let out = device.download_output(&gpu).unwrap();
    // Checked against the problem with the scales where they belong.
    let check = problem.check(&spec, &out).unwrap();
    println!("misplaced sb: {check:?}");
    assert!(check.unwritten == 0 && check.error > 0.1, "{check:?}");
}

/// What cuBLASLt's FP8 kernels do not take comes back as unsupported, with the reason.
#[test]
fn gpu_cublaslt_fp8_refusals_name_the_reason() {
    let gpu = gpu();
    for (scales, shape, reason) in [
        (BLOCKS, (256, 384, 520), "16-byte aligned rows"),
        (BLOCKS, (254, 384, 512), "multiples of 4"),
        (
            "input sa: f32[M, K/128] col scale_of A; input sb: f32[] scale_of B;",
            (256, 384, 512),
            "A in 1x128 blocks and B per tensor",
        ),
    ] {
        let spec = fp8_spec(scales, "bf16", "row", shape);
        let shape = Shape::new(shape.0, shape.1, shape.2);
        let device = DeviceProblem::upload(&gpu, &spec, shape, &RunOptions::default()).unwrap();
        match Baseline::new(&gpu, &spec, &device) {
            Err(CudaError::CublasUnsupported(why)) => assert!(why.contains(reason), "{why}"),
            Err(e) => panic!("{shape}: expected unsupported, got {e}"),
            Ok(b) => panic!("{shape}: cuBLASLt accepted {}", b.label()),
        }
    }
}
