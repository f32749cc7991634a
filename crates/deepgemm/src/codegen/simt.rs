//! The SIMT backend: an FFMA kernel for every input dtype on every architecture
//! (`kernels/simt_gemm.cu`).

use super::abi::element_type;
use super::epilogue::scales_of;
use super::{require_block_per_tile, unsupported, CodegenError};
use crate::dtype::DType;
use crate::plan::{Backend, Plan};
use crate::spec::{KernelSpec, Layout};

pub(crate) const TEMPLATE: &str = include_str!("../../kernels/simt_gemm.cu");
pub(crate) const THREADS: u32 = 256;
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

pub(crate) fn check(spec: &KernelSpec, plan: &Plan) -> Result<(), CodegenError> {
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
    if plan.warps.threads != THREADS {
        return Err(fail(format!(
            "the kernel runs {THREADS} threads, the plan says {}",
            plan.warps.threads
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

pub(crate) fn values(spec: &KernelSpec, plan: &Plan) -> Vec<(&'static str, String)> {
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
        ("PAD", super::space::SIMT_PAD_ELEMS.to_string()),
        ("A_STAGE_BYTES", plan.smem.a_stage_bytes.to_string()),
        ("B_STAGE_BYTES", plan.smem.b_stage_bytes.to_string()),
    ]
}

/// Plan-specific lines of the header comment.
pub(crate) fn describe(spec: &KernelSpec, plan: &Plan) -> Vec<String> {
    let t = plan.tile;
    let pad = super::space::SIMT_PAD_ELEMS;
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
