//! The SIMT backend: an FFMA kernel for every input dtype on every architecture
//! (`kernels/simt_gemm.cu`).

use super::{
    base_plan, push_variants, require_block_per_tile, unsupported, BackendImpl, PlanSettings,
    Rendering,
};
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

const TEMPLATE: &str = include_str!("../../kernels/simt_gemm.cu");
const THREADS: u32 = 256;
/// Elements of padding per smem row (f32 staging): 4 floats.
const PAD_ELEMS: u32 = 4;
/// Outputs one thread may accumulate before registers run out (a 128x128 tile).
const MAX_OUTPUTS_PER_THREAD: u32 = 64;
/// Elements one thread may hold in flight for the next k-tile.
const MAX_STAGED_PER_THREAD: u32 = 32;

fn fail(reason: String) -> CodegenError {
    unsupported(Backend::Simt, reason)
}

/// Whether the kernel accumulates in int32: i8 x i8 with `accumulate i32`, exact for any K.
fn int_accumulation(spec: &KernelSpec) -> bool {
    spec.accumulate == DType::I32
}

fn check(spec: &KernelSpec, plan: &Plan) -> Result<(), CodegenError> {
    require_block_per_tile(Backend::Simt, plan)?;
    let (a, b) = (spec.a(), spec.b());
    for operand in [a, b] {
        if operand.dtype == DType::I32 {
            return Err(fail(format!(
                "i32 input `{}` is not supported (inputs: f32, tf32, f16, bf16, e4m3, e5m2, i8)",
                operand.name
            )));
        }
    }
    match spec.accumulate {
        DType::F32 => {}
        DType::I32 => {
            if a.dtype != DType::I8 || b.dtype != DType::I8 {
                return Err(fail("accumulate i32 needs i8 inputs".to_string()));
            }
            if !scales_of(spec, a).is_empty() || !scales_of(spec, b).is_empty() {
                return Err(fail(
                    "scale operands need accumulate f32 (i32 accumulation is exact and unscaled)"
                        .to_string(),
                ));
            }
        }
        other => {
            return Err(fail(format!(
                "accumulate {other} is not supported (f32, or i32 for i8 inputs)"
            )))
        }
    }
    let tile = plan.tile;
    if plan.threads != (ThreadLayout::Threads { count: THREADS }) {
        return Err(fail(format!(
            "the kernel runs {THREADS} threads, the plan says {:?}",
            plan.threads
        )));
    }
    if !tile.m.is_multiple_of(16) || !tile.n.is_multiple_of(16) {
        return Err(fail(format!(
            "tile {}x{} must be a multiple of 16 in M and N (a 16x16 thread grid)",
            tile.m, tile.n
        )));
    }
    let outputs = tile.m * tile.n / THREADS;
    if outputs > MAX_OUTPUTS_PER_THREAD {
        return Err(fail(format!(
            "tile {}x{} gives {outputs} outputs per thread; at most {MAX_OUTPUTS_PER_THREAD} fit in registers",
            tile.m, tile.n
        )));
    }
    for (name, rows) in [("A", tile.m), ("B", tile.n)] {
        let elems = rows * tile.k;
        if !elems.is_multiple_of(THREADS) {
            return Err(fail(format!(
                "the {name} tile ({rows}x{}) does not split evenly over {THREADS} threads",
                tile.k
            )));
        }
    }
    let staged = (tile.m + tile.n) * tile.k / THREADS;
    if staged > MAX_STAGED_PER_THREAD {
        return Err(fail(format!(
            "TILE_K = {} stages {staged} elements per thread; at most {MAX_STAGED_PER_THREAD}",
            tile.k
        )));
    }
    if !(1..=2).contains(&plan.stages) {
        return Err(fail(format!(
            "stages must be 1 or 2 (registers -> smem double buffering), got {}",
            plan.stages
        )));
    }
    Ok(())
}

fn values(spec: &KernelSpec, plan: &Plan) -> Vec<(&'static str, String)> {
    let acc_type = if int_accumulation(spec) {
        "int"
    } else {
        "float"
    };
    vec![
        ("TILE_M", plan.tile.m.to_string()),
        ("TILE_N", plan.tile.n.to_string()),
        ("TILE_K", plan.tile.k.to_string()),
        ("STAGES", plan.stages.to_string()),
        ("GROUP_M", plan.raster.group_m.max(1).to_string()),
        ("A_ROW", (spec.a().layout == Layout::Row).to_string()),
        ("B_ROW", (spec.b().layout == Layout::Row).to_string()),
        ("D_ROW", (spec.d().layout == Layout::Row).to_string()),
        (
            "A_SCALED",
            (!scales_of(spec, spec.a()).is_empty()).to_string(),
        ),
        (
            "B_SCALED",
            (!scales_of(spec, spec.b()).is_empty()).to_string(),
        ),
        ("A_TYPE", element_type(spec.a().dtype).to_string()),
        ("B_TYPE", element_type(spec.b().dtype).to_string()),
        ("D_TYPE", element_type(spec.d().dtype).to_string()),
        ("ACC_TYPE", acc_type.to_string()),
        ("ACC_IS_INT", int_accumulation(spec).to_string()),
        ("PAD", PAD_ELEMS.to_string()),
        ("A_STAGE_BYTES", plan.smem.a_stage_bytes.to_string()),
        ("B_STAGE_BYTES", plan.smem.b_stage_bytes.to_string()),
    ]
}

/// Plan-specific lines of the header comment.
fn describe(spec: &KernelSpec, plan: &Plan) -> Vec<String> {
    let t = plan.tile;
    let pad = PAD_ELEMS;
    let acc = if int_accumulation(spec) {
        "int32"
    } else {
        "f32"
    };
    vec![
        format!(
            "smem: {} x {} B (A staged [{}][{}] and B [{}][{}] in {acc})",
            plan.stages,
            plan.smem.a_stage_bytes + plan.smem.b_stage_bytes,
            t.k,
            t.m + pad,
            t.k,
            t.n + pad
        ),
        format!(
            "threads: {THREADS} as 16x16, {}x{} outputs each",
            t.m / 16,
            t.n / 16
        ),
    ]
}

/// The SIMT plans: tiles of 16 to 128 along M and N and 8 to 32 along K, on 256 threads, with one
/// or two stages.
fn propose(spec: &KernelSpec) -> Vec<Plan> {
    const SIZES: [u32; 4] = [16, 32, 64, 128];
    let threads = ThreadLayout::Threads { count: THREADS };
    let mut out = Vec::new();
    for tm in SIZES {
        for tn in SIZES {
            for tk in [8, 16, 32] {
                let settings = PlanSettings {
                    persistent: false,
                    epilogue: EpilogueStrategy::Direct,
                    // Copies element by element, so any alignment of whole elements does.
                    operands: OperandPath {
                        a_copy_bytes: spec.a().dtype.size_bytes(),
                        b_copy_bytes: spec.b().dtype.size_bytes(),
                        repack_misaligned: false,
                    },
                };
                let tile = Tile {
                    m: tm,
                    n: tn,
                    k: tk,
                };
                let base = base_plan(spec, Backend::Simt, tile, threads, settings);
                push_variants(&mut out, spec, base, 1..=2);
            }
        }
    }
    out
}

/// The CUDA-core FFMA backend.
pub(super) struct Simt;

impl BackendImpl for Simt {
    fn target_has(&self, _hw: &Hardware) -> bool {
        true
    }

    fn refusal(&self, _spec: &KernelSpec) -> Option<String> {
        None
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
            stream_efficiency: None,
            launch_saving_us: None,
        }
    }

    fn propose(&self, spec: &KernelSpec) -> Vec<Plan> {
        propose(spec)
    }

    /// The threads; the recorded `warps_m x warps_n` (always 2x4) meant nothing to the kernel.
    fn recorded_threads(&self, warps: RecordedWarps) -> ThreadLayout {
        ThreadLayout::Threads {
            count: warps.threads,
        }
    }

    fn smem_layout(
        &self,
        _spec: &KernelSpec,
        tile: Tile,
        _threads: &ThreadLayout,
        _stages: u32,
    ) -> SmemLayout {
        SmemLayout {
            a_stage_bytes: tile.k * (tile.m + PAD_ELEMS) * 4,
            b_stage_bytes: tile.k * (tile.n + PAD_ELEMS) * 4,
            epilogue_bytes: 0,
            epilogue_buffers: 0,
            barrier_bytes: 0,
            scale_stage_bytes: 0,
            swizzle: SmemSwizzle::Padded {
                pad_elems: PAD_ELEMS,
            },
        }
    }

    fn check(&self, spec: &KernelSpec, plan: &Plan) -> Result<(), CodegenError> {
        check(spec, plan)
    }

    fn render(&self, spec: &KernelSpec, plan: &Plan) -> Result<Rendering, CodegenError> {
        Ok(Rendering {
            template_name: "simt_gemm.cu",
            template: TEMPLATE,
            values: values(spec, plan),
            described: describe(spec, plan),
            extra_args: Vec::new(),
        })
    }

    fn operand_alignment(&self, _spec: &KernelSpec, _plan: &Plan, operand: &Operand) -> u32 {
        operand.dtype.size_bytes()
    }

    fn uses_tensor_cores(&self, _input: DType) -> bool {
        false
    }

    /// SIMT computes in f32.
    fn math_dtype(&self, _input: DType) -> DType {
        DType::F32
    }

    /// One column of A and one row of B of the (about square) thread tile per k.
    fn fragment_registers(&self, _plan: &Plan, accumulators: u32, _input_bytes: u32) -> u32 {
        2 * (accumulators as f64).sqrt().ceil() as u32
    }

    /// Each thread reads a column of A and a row of B of its (about square) thread tile, as f32
    /// staging: 2 * sqrt(accumulators) floats per k.
    fn fragment_read_bytes(&self, plan: &Plan, _a: DType, _b: DType) -> f64 {
        let t = plan.tile;
        let (tm, tn, tk) = (t.m as f64, t.n as f64, t.k as f64);
        let threads = plan.threads.threads().max(1) as f64;
        let acc = tm * tn / threads;
        threads * tk * 2.0 * acc.sqrt() * 4.0
    }

    /// Two `__syncthreads` per k-block with one stage (before and after the load), one with two
    /// (double buffer).
    fn barrier(&self, plan: &Plan, cal: &Calibration) -> (BarrierKind, u32, f64) {
        let per_kblock = if plan.stages <= 1 { 2 } else { 1 };
        (BarrierKind::Syncthreads, per_kblock, cal.syncthreads_cycles)
    }
}
