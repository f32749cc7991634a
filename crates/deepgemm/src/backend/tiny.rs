//! The tiny backend: GEMMs whose time is the launch and a memory latency or two (17x33x65,
//! 127x129x255), on the CUDA cores with nothing between the loads and the sums
//! (`kernels/tiny_gemm.cu`). Each warp owns a few outputs, its lanes split K and load their
//! elements straight from global memory (any dtype the prelude converts, any layout, any
//! alignment), and a warp-wide butterfly sums them. There is no shared memory, barrier or ring
//! to set up, and the kernel is a few hundred instructions: the shortest path from launch to
//! store. Its loads are not reused beyond L1, so the model keeps it to small problems.
//!
//! The tile: `tile.m` rows (each warp's), `tile.n` columns split over the block's warps, and
//! `tile.k` the K one loop turn loads (32 elements per warp-wide step).

use super::{require_block_per_tile, unsupported, BackendImpl, PlanSettings, Rendering};
use crate::codegen::CodegenError;
use crate::dtype::DType;
use crate::hw::{BackendCalibration, Calibration, Hardware};
use crate::model::sync::BarrierKind;
use crate::plan::{
    Backend, EpilogueStrategy, OperandPath, Plan, RecordedWarps, SmemLayout, ThreadLayout, Tile,
};
use crate::spec::{KernelSpec, Operand};

const TEMPLATE: &str = include_str!("../../kernels/tiny_gemm.cu");
const THREADS: u32 = 128;
const WARPS: u32 = THREADS / 32;
/// Rows of D per warp (the block's warps share them).
const WARP_ROWS: [u32; 3] = [1, 2, 4];
/// Columns of D per warp.
const WARP_COLS: [u32; 4] = [1, 2, 4, 8];
/// The most outputs one warp sums: each lane holds a partial sum of every one.
const MAX_WARP_OUTPUTS: u32 = 16;
/// Warp-wide steps of K (32 elements) whose loads a lane issues before summing any: K up to
/// 32 x this costs one memory latency.
const UNROLL: [u32; 4] = [1, 2, 4, 8];

fn fail(reason: String) -> CodegenError {
    unsupported(Backend::Tiny, reason)
}

fn input_refusal(spec: &KernelSpec) -> Option<String> {
    let (a, b) = (spec.a(), spec.b());
    for operand in [a, b] {
        if matches!(operand.dtype, DType::I8 | DType::I32) {
            return Some(format!(
                "input `{}` is {}; tiny sums floating-point inputs in f32 (integer GEMMs run on \
                 simt)",
                operand.name, operand.dtype
            ));
        }
    }
    if spec.accumulate != DType::F32 {
        return Some(format!(
            "accumulate {} is not supported (tiny sums in f32)",
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

/// A tile's rows and columns per warp.
fn warp_tile(tile: Tile) -> (u32, u32) {
    (tile.m, tile.n / WARPS)
}

fn check(spec: &KernelSpec, plan: &Plan) -> Result<(), CodegenError> {
    require_block_per_tile(Backend::Tiny, plan)?;
    if let Some(reason) = input_refusal(spec) {
        return Err(fail(reason));
    }
    if plan.threads != (ThreadLayout::Threads { count: THREADS }) {
        return Err(fail(format!(
            "the kernel runs {THREADS} threads, the plan says {:?}",
            plan.threads
        )));
    }
    let tile = plan.tile;
    let (rows, cols) = warp_tile(tile);
    if !tile.n.is_multiple_of(WARPS) || !WARP_ROWS.contains(&rows) || !WARP_COLS.contains(&cols) {
        return Err(fail(format!(
            "tile {}x{}: a warp takes 1, 2 or 4 rows and 1, 2, 4 or 8 columns, and the {WARPS} \
             warps sit side by side along N",
            tile.m, tile.n
        )));
    }
    if rows * cols > MAX_WARP_OUTPUTS {
        return Err(fail(format!(
            "tile {}x{} gives each warp {} outputs; at most {MAX_WARP_OUTPUTS}",
            tile.m,
            tile.n,
            rows * cols
        )));
    }
    if !tile.k.is_multiple_of(32) || !UNROLL.contains(&(tile.k / 32)) {
        return Err(fail(format!(
            "TILE_K = {}: a loop turn loads 1, 2, 4 or 8 warp-wide steps of 32 elements",
            tile.k
        )));
    }
    if plan.stages != 1 {
        return Err(fail(format!(
            "tiny has no ring: one stage, got {}",
            plan.stages
        )));
    }
    if plan.raster.group_m != 1 {
        return Err(fail(
            "tiny's grid is one wave of small tiles; it has no raster groups".to_string(),
        ));
    }
    Ok(())
}

fn values(spec: &KernelSpec, plan: &Plan) -> Vec<(&'static str, String)> {
    let mut values = vec![
        ("TILE_M", plan.tile.m.to_string()),
        ("TILE_N", plan.tile.n.to_string()),
        ("TILE_K", plan.tile.k.to_string()),
        ("THREADS", THREADS.to_string()),
    ];
    values.extend(super::declared_operand_values(spec));
    values
}

/// Plan-specific lines of the header comment.
fn describe(plan: &Plan) -> Vec<String> {
    let (rows, cols) = warp_tile(plan.tile);
    vec![
        format!(
            "threads: {WARPS} warps side by side along N, each {rows}x{cols} outputs, its lanes \
             splitting K"
        ),
        format!(
            "loads: {} warp-wide steps of K per loop turn, straight from global memory (no \
             shared memory); sums in f32 FFMA, reduced across the warp",
            plan.tile.k / 32
        ),
    ]
}

/// Every warp tile of [`WARP_ROWS`] x [`WARP_COLS`] up to [`MAX_WARP_OUTPUTS`], each with every
/// [`UNROLL`], on one stage.
fn propose(spec: &KernelSpec) -> Vec<Plan> {
    let threads = ThreadLayout::Threads { count: THREADS };
    let mut out = Vec::new();
    for rows in WARP_ROWS {
        for cols in WARP_COLS {
            if rows * cols > MAX_WARP_OUTPUTS {
                continue;
            }
            for unroll in UNROLL {
                let tile = Tile {
                    m: rows,
                    n: cols * WARPS,
                    k: 32 * unroll,
                };
                let settings = PlanSettings {
                    persistent: false,
                    epilogue: EpilogueStrategy::Direct,
                    // Element by element: any alignment of whole elements.
                    operands: OperandPath {
                        a_copy_bytes: spec.a().dtype.size_bytes(),
                        b_copy_bytes: spec.b().dtype.size_bytes(),
                        repack_misaligned: false,
                    },
                };
                out.push(super::base_plan(
                    spec,
                    Backend::Tiny,
                    tile,
                    threads,
                    settings,
                ));
            }
        }
    }
    out
}

/// The load-and-sum CUDA-core backend for tiny GEMMs.
pub(super) struct Tiny;

impl BackendImpl for Tiny {
    /// Plain loads and FFMA: every target.
    fn target_has(&self, _hw: &Hardware) -> bool {
        true
    }

    fn refusal(&self, spec: &KernelSpec) -> Option<String> {
        input_refusal(spec)
    }

    fn default_calibration(&self) -> BackendCalibration {
        BackendCalibration {
            mma_efficiency: 0.7,
            l2_efficiency: 0.6,
            smem_efficiency: 0.8,
            kblock_scale_cycles: None,
            promotion_cycles: None,
            producer_regs: None,
            address_regs: None,
            // Its element loads, a few in flight per lane, are no stream: 3001x7x3001 (18 MB
            // of A) took 27.9 us on an H100 against gemv's 19.2 (bench/RESULTS.md, 2026-12-07).
            stream_efficiency: Some(0.25),
            // The launch-bound shapes, tiny against gemv in the same call (H100): 17x33x65 4.82
            // against 6.43 us, 127x129x255 5.90 against 7.46; an empty kernel took 3.1. Its 472
            // SASS instructions (gemv's: 2040) come cold from DRAM after the L2 flush, and
            // there is no ring to set up before the first load.
            launch_saving_us: Some(1.6),
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

    /// No shared memory.
    fn smem_layout(
        &self,
        _spec: &KernelSpec,
        _tile: Tile,
        _threads: &ThreadLayout,
        _stages: u32,
    ) -> SmemLayout {
        SmemLayout::NONE
    }

    fn check(&self, spec: &KernelSpec, plan: &Plan) -> Result<(), CodegenError> {
        check(spec, plan)
    }

    fn render(&self, spec: &KernelSpec, plan: &Plan) -> Result<Rendering, CodegenError> {
        Ok(Rendering {
            template_name: "tiny_gemm.cu",
            template: TEMPLATE,
            values: values(spec, plan),
            described: describe(plan),
            extra_args: Vec::new(),
        })
    }

    fn operand_alignment(&self, _spec: &KernelSpec, _plan: &Plan, operand: &Operand) -> u32 {
        operand.dtype.size_bytes()
    }

    fn uses_tensor_cores(&self, _input: DType) -> bool {
        false
    }

    /// Every input is converted to f32 and summed in FFMA.
    fn math_dtype(&self, _input: DType) -> DType {
        DType::F32
    }

    /// Each lane holds a partial sum of every output of its warp (beyond the model's
    /// `accumulators`, an even share of the tile), a loop turn's loaded elements as floats, and
    /// a 64-bit offset per row and column.
    fn fragment_registers(&self, plan: &Plan, accumulators: u32, _input_bytes: u32) -> u32 {
        let (rows, cols) = warp_tile(plan.tile);
        let partial_sums = (rows * cols).saturating_sub(accumulators);
        partial_sums + (plan.tile.k / 32 + 2) * (rows + cols)
    }

    /// The loads go through L1, which shares the shared-memory banks: a warp's load of 32
    /// elements of 4 bytes or less is one 128-byte wavefront, for each of its rows and columns
    /// and each warp-wide step.
    fn fragment_read_bytes(&self, plan: &Plan, _a: DType, _b: DType) -> f64 {
        let (rows, cols) = warp_tile(plan.tile);
        WARPS as f64 * (rows + cols) as f64 * (plan.tile.k / 32) as f64 * 128.0
    }

    /// No barrier at all.
    fn barrier(&self, _plan: &Plan, _cal: &Calibration) -> (BarrierKind, u32, f64) {
        (BarrierKind::Syncthreads, 0, 0.0)
    }
}
