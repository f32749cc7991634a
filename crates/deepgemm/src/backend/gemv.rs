//! The gemv backend: a GEMM with a few rows or columns of output per block streamed on the CUDA
//! cores (`kernels/gemv_gemm.cu`). Decode-sized M, or a handful of output columns, makes a GEMM
//! a pass over its large operand that DRAM bounds; this kernel reads that operand once with
//! 16-byte loads at any alignment (no repack) and sums in f32.
//!
//! The tile says which operand is streamed: `tile.n <= 8` streams A (tile.m of its rows per
//! block against tile.n columns of B), otherwise `tile.m <= 8` streams B. `tile.k` is the chunk
//! of the small operand staged in shared memory at once.

use super::{require_block_per_tile, unsupported, BackendImpl, PlanSettings, Rendering};
use crate::codegen::abi::element_type;
use crate::codegen::epilogue::scales_of;
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
/// Rows of the streamed operand per block: 2 per warp (4 spill beside the loads in flight).
const STREAMED_ROWS: [u32; 1] = [16];
/// The most 16-byte words of the small operand one thread stages per chunk (two in flight at a
/// time beside the ring of the streamed operand).
const MAX_STAGED_WORDS: u32 = 4;

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
    let scales = [a, b].map(|o| scales_of(spec, o));
    if let Some(scale) = scales.iter().flatten().next() {
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
    let words = (small * k / elems_per_word(spec)).div_ceil(THREADS);
    if words > MAX_STAGED_WORDS {
        return Err(fail(format!(
            "TILE_K = {k} stages {words} words per thread; at most {MAX_STAGED_WORDS}"
        )));
    }
    if plan.stages != 1 {
        return Err(fail(format!(
            "the small operand is staged one chunk at a time (stages 1), got {}",
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
    vec![
        ("TILE_M", plan.tile.m.to_string()),
        ("TILE_N", plan.tile.n.to_string()),
        ("TILE_K", plan.tile.k.to_string()),
        ("GROUP_M", plan.raster.group_m.max(1).to_string()),
        ("A_ROW", (spec.a().layout == Layout::Row).to_string()),
        ("B_ROW", (spec.b().layout == Layout::Row).to_string()),
        ("D_ROW", (spec.d().layout == Layout::Row).to_string()),
        ("A_TYPE", element_type(spec.a().dtype).to_string()),
        ("B_TYPE", element_type(spec.b().dtype).to_string()),
        ("D_TYPE", element_type(spec.d().dtype).to_string()),
        ("A_STAGE_BYTES", plan.smem.a_stage_bytes.to_string()),
        ("B_STAGE_BYTES", plan.smem.b_stage_bytes.to_string()),
        ("BYTES_FROM", crate::codegen::BYTES_FROM_CUH.to_string()),
    ]
}

/// Plan-specific lines of the header comment.
fn describe(spec: &KernelSpec, plan: &Plan) -> Vec<String> {
    let (streamed, small, a_streamed) = roles(plan.tile);
    let (x, y) = if a_streamed { ("A", "B") } else { ("B", "A") };
    vec![
        format!(
            "streams {streamed} rows of {x} per block, {} per warp, against {small} of {y}",
            streamed / WARPS
        ),
        format!(
            "smem: {y}'s rows staged {} elements of K at a time ({} B)",
            plan.tile.k,
            plan.smem_bytes()
        ),
        format!(
            "each lane sums {} outputs over its 16-byte words ({} elements each)",
            streamed / WARPS * small,
            elems_per_word(spec)
        ),
    ]
}

/// Every (streamed rows, small rows) pair both ways round, with chunks of 1 to 64 warp-wide
/// steps of K; [`check`] keeps those that stage few enough words.
fn propose(spec: &KernelSpec) -> Vec<Plan> {
    let threads = ThreadLayout::Threads { count: THREADS };
    let step_k = 32 * elems_per_word(spec);
    let mut out = Vec::new();
    for a_streamed in [true, false] {
        for streamed in STREAMED_ROWS {
            for small in SMALL_ROWS {
                for steps in [1, 2, 4, 8, 16, 32, 64] {
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
                    out.push(super::base_plan(
                        spec,
                        Backend::Gemv,
                        tile,
                        threads,
                        settings,
                    ));
                }
            }
        }
    }
    out
}

/// The streaming CUDA-core backend for skinny GEMMs.
pub(super) struct Gemv;

impl BackendImpl for Gemv {
    fn target_has(&self, _hw: &Hardware) -> bool {
        true
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
            producer_regs: None,
            stream_efficiency: Some(0.2),
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

    /// Only the small operand is staged: `tile.k` elements of each of its rows.
    fn smem_layout(&self, spec: &KernelSpec, tile: Tile, _threads: &ThreadLayout) -> SmemLayout {
        let (_, small, a_streamed) = roles(tile);
        let chunk = small * tile.k * spec.a().dtype.size_bytes();
        let (a_stage_bytes, b_stage_bytes) = if a_streamed { (0, chunk) } else { (chunk, 0) };
        SmemLayout {
            a_stage_bytes,
            b_stage_bytes,
            epilogue_bytes: 0,
            barrier_bytes: 0,
            scale_bytes: 0,
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

    fn operand_alignment(&self, _plan: &Plan, operand: &Operand) -> u32 {
        operand.dtype.size_bytes()
    }

    fn uses_tensor_cores(&self) -> bool {
        false
    }

    /// The sums are f32 FFMAs.
    fn math_dtype(&self, _input: DType) -> DType {
        DType::F32
    }

    /// Each lane holds partial sums of all its warp's outputs (beyond the model's
    /// `accumulators`, an even share of the tile), its streamed rows' words in flight and as
    /// floats, and a word of the small operand as floats. An estimate: the kernel's ring holds 2
    /// to 8 words per lane by alignment and tile, counted here as two per row.
    fn fragment_registers(&self, plan: &Plan, accumulators: u32, input_bytes: u32) -> u32 {
        let (streamed, small, _) = roles(plan.tile);
        let rows_per_warp = streamed / WARPS;
        let elems = 16 / input_bytes.max(1);
        let partial_sums = (rows_per_warp * small).saturating_sub(accumulators);
        partial_sums + rows_per_warp * (8 + elems) + elems
    }

    /// Every warp reads the whole staged chunk once.
    fn fragment_read_bytes(&self, plan: &Plan, a_bytes: f64, b_bytes: f64) -> f64 {
        let (_, small, a_streamed) = roles(plan.tile);
        let bytes = if a_streamed { b_bytes } else { a_bytes };
        WARPS as f64 * small as f64 * plan.tile.k as f64 * bytes
    }

    /// Two `__syncthreads` per chunk: before and after staging it.
    fn barrier(&self, _plan: &Plan, cal: &Calibration) -> (BarrierKind, u32, f64) {
        (BarrierKind::Syncthreads, 2, cal.syncthreads_cycles)
    }
}
