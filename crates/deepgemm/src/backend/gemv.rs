//! The gemv backend: a GEMM with a few rows or columns of output per block streamed on the CUDA
//! cores (`kernels/gemv_gemm.cu`). Decode-sized M, or a handful of output columns, makes a GEMM
//! a pass over its large operand that DRAM bounds; this kernel reads that operand once through
//! a ring in shared memory at any alignment (no repack), filled by one bulk copy per row on sm_90
//! and by 16-byte `cp.async` copies before it, and sums in f32: 16-bit inputs against 8 small
//! rows on the tensor cores (mma.sync), everything else in FFMA.
//!
//! The tile says which operand is streamed: `tile.n <= 8` streams A (tile.m of its rows per
//! block against tile.n columns of B), otherwise `tile.m <= 8` streams B. `tile.k` is the chunk
//! of K of a stage: the kernel's ring holds `stages` chunks of both operands' rows.

use super::{require_block_per_tile, unsupported, BackendImpl, PlanSettings, Rendering};
use crate::codegen::CodegenError;
use crate::dtype::DType;
use crate::hw::{BackendCalibration, Calibration, Hardware};
use crate::model::sync::BarrierKind;
use crate::plan::{
    Backend, EpilogueStrategy, OperandPath, Plan, RecordedWarps, SmemLayout, SmemSwizzle,
    ThreadLayout, Tile,
};
use crate::spec::{KernelSpec, Layout, Operand};

const TEMPLATE: &str = include_str!("../../kernels/gemv_gemm.cu");
const THREADS: u32 = 256;
const WARPS: u32 = THREADS / 32;
/// Rows of the small operand per block: each lane sums `rows per warp x small` outputs (a power
/// of two, for the butterfly that reduces them).
const SMALL_ROWS: [u32; 4] = [1, 2, 4, 8];
/// Rows of the streamed operand per block: one 16-row mma tile (2 rows per warp on FFMA). 32
/// rows compiled without spills but measured no faster on FFMA (3001x7x3001: 29.2 against
/// 29.0 us), and fewer blocks stream less of DRAM at once.
const STREAMED_ROWS: [u32; 1] = [16];
/// Warp-wide steps of K per chunk: 1, 2 or 4. A longer chunk pays the ring's per-chunk work (a
/// barrier, each row's copy setup) over more bytes, and at 4 the mma path unrolls its k-steps
/// four at a time to stay within two blocks' registers per SM. On 3001x7x3001 the model picks
/// 4 steps in 2 stages; it measured 18.4 us against 18.6 for 2 steps in 4 (bench/RESULTS.md,
/// 2026-12-02).
const CHUNK_STEPS: [u32; 3] = [1, 2, 4];
/// Chunks in the ring: enough ahead to cover DRAM's latency at two blocks per SM.
const RING_STAGES: [u32; 5] = [2, 3, 4, 6, 8];

fn fail(reason: String) -> CodegenError {
    unsupported(Backend::Gemv, reason)
}

/// (streamed rows, small rows) of a tile, and whether A is the streamed operand.
fn roles(tile: Tile) -> (u32, u32, bool) {
    if tile.n <= 8 {
        (tile.m, tile.n, true)
    } else {
        (tile.n, tile.m, false)
    }
}

/// Elements of one 16-byte word of the inputs.
fn elems_per_word(spec: &KernelSpec) -> u32 {
    16 / spec.a().dtype.size_bytes()
}

/// On sm_90 the copy engine fills the ring, one bulk copy per row and chunk counted in by an
/// mbarrier per stage; before it, every thread issues 16-byte cp.async copies.
fn bulk_copies(hw: &Hardware) -> bool {
    hw.features.tma
}

/// 16-bit inputs may sum on the tensor cores (mma.sync m16n8k16: exact products, f32 sums);
/// 4-byte inputs (f32, and tf32 at f32 precision) sum in FFMA: "f32 means f32".
fn tensor_core_input(input: DType) -> bool {
    matches!(input, DType::F16 | DType::Bf16)
}

/// Whether a plan's sums run on the tensor cores: 16-bit inputs against 8 rows of the small
/// operand, a whole mma.sync tile. Fewer rows would leave most of each mma empty, and the mma
/// path's fixed work (its epilogue's pass through shared memory, a longer code path) is what
/// launch-bound shapes pay for: 127x129x255 (4 rows) ran 7.1 us with FFMA sums, 8.3 with mma
/// (bench/RESULTS.md, 2026-12-02).
fn mma_sums(input: DType, tile: Tile) -> bool {
    tensor_core_input(input) && roles(tile).1 == 8
}

fn input_refusal(spec: &KernelSpec) -> Option<String> {
    let (a, b) = (spec.a(), spec.b());
    for operand in [a, b] {
        if !matches!(
            operand.dtype,
            DType::F16 | DType::Bf16 | DType::F32 | DType::Tf32
        ) {
            return Some(format!(
                "input `{}` is {}; gemv streams f16, bf16, f32 and tf32 inputs",
                operand.name, operand.dtype
            ));
        }
    }
    if a.dtype != b.dtype {
        return Some(format!(
            "A is {} and B is {}; gemv takes one input dtype",
            a.dtype, b.dtype
        ));
    }
    if a.layout != Layout::Row || b.layout != Layout::Col {
        return Some(
            "gemv streams K-major operands (A row-major, B col-major: the NT layout)".to_string(),
        );
    }
    if spec.accumulate != DType::F32 {
        return Some(format!(
            "accumulate {} is not supported (gemv sums in f32)",
            spec.accumulate
        ));
    }
    if let Some(scale) = super::input_scale(spec) {
        return Some(format!(
            "scale operand `{}` needs the simt or sm90 backend",
            scale.name
        ));
    }
    None
}

fn check(spec: &KernelSpec, plan: &Plan) -> Result<(), CodegenError> {
    require_block_per_tile(Backend::Gemv, plan)?;
    if let Some(reason) = input_refusal(spec) {
        return Err(fail(reason));
    }
    if plan.threads != (ThreadLayout::Threads { count: THREADS }) {
        return Err(fail(format!(
            "the kernel runs {THREADS} threads, the plan says {:?}",
            plan.threads
        )));
    }
    let (streamed, small, _) = roles(plan.tile);
    if !SMALL_ROWS.contains(&small) || !STREAMED_ROWS.contains(&streamed) {
        return Err(fail(format!(
            "tile {}x{}: one side must be 1, 2, 4 or 8 (the small operand's rows) and the \
             other 16 (the streamed operand's)",
            plan.tile.m, plan.tile.n
        )));
    }
    let step_k = 32 * elems_per_word(spec);
    let k = plan.tile.k;
    if k == 0 || !k.is_multiple_of(step_k) {
        return Err(fail(format!(
            "TILE_K = {k} must be a multiple of {step_k} (one warp-wide 16-byte load per row)"
        )));
    }
    let steps = k / step_k;
    if !CHUNK_STEPS.contains(&steps) {
        return Err(fail(format!(
            "TILE_K = {k} is {steps} warp-wide steps of K; a chunk is 1, 2 or 4"
        )));
    }
    if plan.stages < 2 {
        return Err(fail(format!(
            "the ring needs at least 2 stages, got {}",
            plan.stages
        )));
    }
    if plan.raster.group_m != 1 {
        return Err(fail(
            "gemv reads each streamed row once; it has no raster groups".to_string(),
        ));
    }
    Ok(())
}

fn values(spec: &KernelSpec, plan: &Plan) -> Vec<(&'static str, String)> {
    let mut values = vec![
        ("TILE_M", plan.tile.m.to_string()),
        ("TILE_N", plan.tile.n.to_string()),
        ("TILE_K", plan.tile.k.to_string()),
        ("STAGES", plan.stages.to_string()),
        ("GROUP_M", plan.raster.group_m.max(1).to_string()),
    ];
    values.extend(super::declared_operand_values(spec));
    values.extend([
        ("A_STAGE_BYTES", plan.smem.a_stage_bytes.to_string()),
        ("B_STAGE_BYTES", plan.smem.b_stage_bytes.to_string()),
        ("CP_ASYNC", crate::codegen::CP_ASYNC_CUH.to_string()),
        ("MBARRIER", crate::codegen::MBARRIER_CUH.to_string()),
        ("BULK", bulk_copies(&spec.hardware).to_string()),
        ("MMA", mma_sums(spec.a().dtype, plan.tile).to_string()),
        // FFMA plans never call it; for 4-byte inputs the tf32 form keeps the wrapper valid PTX.
        (
            "MMA_INSTRUCTION",
            super::mma_sync_instruction(spec.a().dtype).to_string(),
        ),
    ]);
    values
}

/// Plan-specific lines of the header comment.
fn describe(spec: &KernelSpec, plan: &Plan) -> Vec<String> {
    let (streamed, small, a_streamed) = roles(plan.tile);
    let (x, y) = if a_streamed { ("A", "B") } else { ("B", "A") };
    let sums = if mma_sums(spec.a().dtype, plan.tile) {
        format!(
            "sums on the tensor cores: mma.sync m16n8k16, {streamed} rows of {x} by {small} of \
             {y}, the 8 warps splitting each chunk's K, their tiles added in shared memory"
        )
    } else {
        format!(
            "sums in f32 FFMA: {} rows of {x} per warp, each lane {} outputs over its 16-byte \
             words ({} elements each), reduced across the warp",
            streamed / WARPS,
            streamed / WARPS * small,
            elems_per_word(spec)
        )
    };
    vec![
        format!("streams {streamed} rows of {x} per block against {small} of {y}"),
        format!(
            "smem: a ring of {} chunks of {} elements of K of every row of {x} and {y} ({} B), {}",
            plan.stages,
            plan.tile.k,
            plan.smem_bytes(),
            if bulk_copies(&spec.hardware) {
                "each row's chunk one bulk copy (the copy engine; a stage mbarrier counts it in)"
            } else {
                "copied 16 bytes at a time by every thread (cp.async)"
            }
        ),
        sums,
    ]
}

/// Every (streamed rows, small rows) pair both ways round, with chunks of 1, 2 or 4 warp-wide
/// steps of K and rings of 2 to 8 chunks (the search drops those shared memory cannot hold).
fn propose(spec: &KernelSpec) -> Vec<Plan> {
    let threads = ThreadLayout::Threads { count: THREADS };
    let step_k = 32 * elems_per_word(spec);
    let mut out = Vec::new();
    for a_streamed in [true, false] {
        for streamed in STREAMED_ROWS {
            for small in SMALL_ROWS {
                for steps in CHUNK_STEPS {
                    let (m, n) = if a_streamed {
                        (streamed, small)
                    } else {
                        (small, streamed)
                    };
                    let tile = Tile {
                        m,
                        n,
                        k: steps * step_k,
                    };
                    let settings = PlanSettings {
                        persistent: false,
                        epilogue: EpilogueStrategy::Direct,
                        // 16-byte loads of the aligned words a row overlaps: any alignment.
                        operands: OperandPath {
                            a_copy_bytes: spec.a().dtype.size_bytes(),
                            b_copy_bytes: spec.b().dtype.size_bytes(),
                            repack_misaligned: false,
                        },
                    };
                    let base = super::base_plan(spec, Backend::Gemv, tile, threads, settings);
                    for stages in RING_STAGES {
                        out.push(super::with_stages(spec, &base, stages));
                    }
                }
            }
        }
    }
    out
}

/// The streaming CUDA-core backend for skinny GEMMs.
pub(super) struct Gemv;

impl BackendImpl for Gemv {
    /// The ring is cp.async and the 16-bit sums mma.sync: sm_80 and later.
    fn target_has(&self, hw: &Hardware) -> bool {
        hw.compute_capability() >= 80 && hw.features.cp_async
    }

    fn refusal(&self, spec: &KernelSpec) -> Option<String> {
        input_refusal(spec)
    }

    fn default_calibration(&self) -> BackendCalibration {
        BackendCalibration {
            mma_efficiency: 0.7,
            l2_efficiency: 0.80,
            smem_efficiency: 0.90,
            kblock_scale_cycles: None,
            promotion_cycles: None,
            producer_regs: None,
            address_regs: None,
            // The H200's measured share (its hardware file says where from).
            stream_efficiency: Some(0.96),
            launch_saving_us: None,
        }
    }

    fn propose(&self, spec: &KernelSpec) -> Vec<Plan> {
        propose(spec)
    }

    fn recorded_threads(&self, warps: RecordedWarps) -> ThreadLayout {
        ThreadLayout::Threads {
            count: warps.threads,
        }
    }

    /// A stage holds `tile.k` elements of K of every row of both operands' tiles, as the
    /// aligned 16-byte words they overlap: one word more than the chunk, for a skewed row. On
    /// sm_90 an 8-byte mbarrier per stage follows the ring.
    fn smem_layout(
        &self,
        spec: &KernelSpec,
        tile: Tile,
        _threads: &ThreadLayout,
        stages: u32,
    ) -> SmemLayout {
        let (streamed, small, a_streamed) = roles(tile);
        let row_bytes = (tile.k / elems_per_word(spec) + 1) * 16;
        let (x, y) = (streamed * row_bytes, small * row_bytes);
        let (a_stage_bytes, b_stage_bytes) = if a_streamed { (x, y) } else { (y, x) };
        SmemLayout {
            a_stage_bytes,
            b_stage_bytes,
            epilogue_bytes: 0,
            epilogue_buffers: 0,
            barrier_bytes: if bulk_copies(&spec.hardware) {
                8 * stages
            } else {
                0
            },
            scale_stage_bytes: 0,
            swizzle: SmemSwizzle::None,
        }
    }

    fn check(&self, spec: &KernelSpec, plan: &Plan) -> Result<(), CodegenError> {
        check(spec, plan)
    }

    fn render(&self, spec: &KernelSpec, plan: &Plan) -> Result<Rendering, CodegenError> {
        Ok(Rendering {
            template_name: "gemv_gemm.cu",
            template: TEMPLATE,
            values: values(spec, plan),
            described: describe(spec, plan),
            extra_args: Vec::new(),
        })
    }

    fn operand_alignment(&self, _spec: &KernelSpec, _plan: &Plan, operand: &Operand) -> u32 {
        operand.dtype.size_bytes()
    }

    fn uses_tensor_cores(&self, input: DType) -> bool {
        tensor_core_input(input)
    }

    /// 16-bit inputs multiply on the tensor cores as they are (in the plans that do); 4-byte
    /// ones in f32 FFMAs.
    fn math_dtype(&self, input: DType) -> DType {
        if tensor_core_input(input) {
            input
        } else {
            DType::F32
        }
    }

    /// Tiles with fewer than 8 rows of the small operand sum in FFMA whatever the input.
    fn plan_math_dtype(&self, input: DType, plan: &Plan) -> DType {
        if mma_sums(input, plan.tile) {
            input
        } else {
            DType::F32
        }
    }

    /// Each lane holds partial sums of all its warp's outputs (beyond the model's
    /// `accumulators`, an even share of the tile), and per step the aligned pair of words of
    /// each of its streamed rows and of one small row, with their elements as floats.
    fn fragment_registers(&self, plan: &Plan, accumulators: u32, input_bytes: u32) -> u32 {
        let (streamed, small, _) = roles(plan.tile);
        let rows_per_warp = streamed / WARPS;
        let elems = 16 / input_bytes.max(1);
        let partial_sums = (rows_per_warp * small).saturating_sub(accumulators);
        partial_sums + (rows_per_warp + 1) * (8 + elems)
    }

    /// Each word is read as the aligned pair it straddles. FFMA: every warp reads its own
    /// streamed rows and every small row of the chunk. MMA: the warps split the chunk's K, so
    /// each reads its k-steps of every row of both operands, and the chunk is read once.
    fn fragment_read_bytes(&self, plan: &Plan, a: DType, b: DType) -> f64 {
        let (streamed, small, a_streamed) = roles(plan.tile);
        let (a_bytes, b_bytes) = (a.size_bytes() as f64, b.size_bytes() as f64);
        let (x_bytes, y_bytes) = if a_streamed {
            (a_bytes, b_bytes)
        } else {
            (b_bytes, a_bytes)
        };
        // gemv takes one input dtype (the check), A's.
        let small_reads = if mma_sums(a, plan.tile) { 1 } else { WARPS };
        let k = plan.tile.k as f64;
        2.0 * k * (streamed as f64 * x_bytes + (small_reads * small) as f64 * y_bytes)
    }

    /// A stage holds the streamed operand's rows and the small one's (from L2, for every block
    /// again): the ring's copies, and so its stream, scale with the streamed rows' share. With
    /// it one figure fits the FFMA plans' M = 1, 2 and 4: 1x, 2x and 4x8192x28672 measured
    /// 130.4, 139.3 and 151.8 us at 3ed1ae4, predicted 132.5, 139.7 and 154.1
    /// (bench/RESULTS.md, 2026-12-02).
    fn stream_share(&self, plan: &Plan) -> f64 {
        let (streamed, small, _) = roles(plan.tile);
        streamed as f64 / (streamed + small) as f64
    }

    /// One `__syncthreads` per chunk: its copies have landed and the stage refilled next is free.
    fn barrier(&self, _plan: &Plan, cal: &Calibration) -> (BarrierKind, u32, f64) {
        (BarrierKind::Syncthreads, 1, cal.syncthreads_cycles)
    }
}
