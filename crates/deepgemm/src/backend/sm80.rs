//! The sm80 backend: cp.async multistage ring, ldmatrix and mma.sync (`kernels/sm80_gemm.cu`).

use super::{
    base_plan, push_variants, require_block_per_tile, require_unscaled_f32_accumulation,
    tensor_core_dtype_refusal, unsupported, BackendImpl, PlanSettings, Rendering,
};
use crate::codegen::abi::element_type;
use crate::codegen::CodegenError;
use crate::dtype::DType;
use crate::hw::{BackendCalibration, Calibration, Hardware};
use crate::model::sync::BarrierKind;
use crate::plan::{
    Backend, EpilogueStrategy, OperandPath, Plan, RecordedWarps, SmemLayout, SmemSwizzle,
    ThreadLayout, Tile,
};
use crate::spec::{KernelSpec, Layout};

const TEMPLATE: &str = include_str!("../../kernels/sm80_gemm.cu");
/// Accumulator registers per thread beyond which a warp tile cannot avoid spilling.
const MAX_ACCUMULATORS_PER_THREAD: u32 = 128;

fn fail(reason: String) -> CodegenError {
    unsupported(Backend::Sm80, reason)
}

/// tf32 inputs run on the tf32 tensor cores (m16n8k8); `check` refuses f32 ones.
fn is_tf32(dtype: DType) -> bool {
    dtype == DType::Tf32
}

/// How the kernel stages a row of `dtype`: 16-bit operands (read by ldmatrix) are XOR-swizzled
/// in 16-byte chunks, which keeps both ldmatrix's 8 row reads and the cp.async writes of whole
/// rows free of bank conflicts with no padding; other types (tf32's 32-bit loads) pad each row by
/// 16 bytes, which makes 8 consecutive rows start in distinct 4-bank groups.
fn swizzle(dtype: DType) -> SmemSwizzle {
    if dtype.size_bytes() == 2 {
        SmemSwizzle::XorChunks
    } else {
        SmemSwizzle::Padded {
            pad_elems: 16 / dtype.size_bytes(),
        }
    }
}

/// Elements of padding per staged row (0 when swizzled).
fn pad_elems(dtype: DType) -> u32 {
    match swizzle(dtype) {
        SmemSwizzle::Padded { pad_elems } => pad_elems,
        SmemSwizzle::XorChunks | SmemSwizzle::None => 0,
    }
}

/// 16-bit tiles are XOR-swizzled ([`swizzle`]), the others padded.
fn is_swizzled(dtype: DType) -> bool {
    swizzle(dtype) == SmemSwizzle::XorChunks
}

fn smem_layout(spec: &KernelSpec, tile: Tile) -> SmemLayout {
    let (a, b) = (spec.a(), spec.b());
    let e = a.dtype.size_bytes();
    let pad = pad_elems(a.dtype);
    // A is staged in its global order: K-major rows of tile.k for `row`, M-major rows of tile.m
    // for `col`. Likewise B: `col` (N rows of K) is K-major.
    let a_stage = match a.layout {
        Layout::Row => tile.m * (tile.k + pad),
        Layout::Col => tile.k * (tile.m + pad),
    } * e;
    let b_stage = match b.layout {
        Layout::Col => tile.n * (tile.k + pad),
        Layout::Row => tile.k * (tile.n + pad),
    } * e;
    SmemLayout {
        a_stage_bytes: a_stage,
        b_stage_bytes: b_stage,
        epilogue_bytes: 0,
        epilogue_buffers: 0,
        barrier_bytes: 0,
        scale_stage_bytes: 0,
        swizzle: swizzle(a.dtype),
    }
}

fn mma_k(dtype: DType) -> u32 {
    if is_tf32(dtype) {
        8
    } else {
        16
    }
}

fn check(spec: &KernelSpec, plan: &Plan) -> Result<(), CodegenError> {
    require_block_per_tile(Backend::Sm80, plan)?;
    let cc = spec.hardware.compute_capability();
    if cc < 80 {
        return Err(fail(format!(
            "needs sm_80 or newer (cp.async, bf16 mma); target {} is {}",
            spec.hardware.name, spec.hardware.arch
        )));
    }
    if let Some(amax) = spec.amax() {
        return Err(fail(format!(
            "no amax output (`{}`) in this generator yet: the sm90 and simt backends write one",
            amax.name
        )));
    }
    let (a, b) = (spec.a(), spec.b());
    for operand in [a, b] {
        match operand.dtype {
            DType::F16 | DType::Bf16 | DType::Tf32 => {}
            // Measured on the H200 (bench/RESULTS.md, 2026-12-01): f32 split into tf32 hi + lo
            // parts (three mma.sync products) left a relative error growing with K, as the
            // tensor cores' f32 accumulation truncates.
            DType::F32 => {
                return Err(fail(
                    "f32 inputs run on CUDA cores (simt): split into tf32 hi + lo parts on \
                     mma.sync they measured a relative error of 2.9e-5 at K = 4096 and 1.2e-4 at \
                     K = 16384 on the H200 (the tensor cores truncate their f32 sums), above \
                     f32's 1e-5; write `tf32` for tensor-core speed at tf32 precision"
                        .to_string(),
                ))
            }
            DType::E4m3 | DType::E5m2 => {
                return Err(fail(format!(
                    "{} inputs need the sm90 backend or simt",
                    operand.dtype
                )))
            }
            other => return Err(fail(format!("{other} inputs need the simt backend"))),
        }
    }
    if a.dtype != b.dtype {
        return Err(fail(format!(
            "A and B must share a dtype (A is {}, B is {}); use simt for mixed inputs",
            a.dtype, b.dtype
        )));
    }
    require_unscaled_f32_accumulation(Backend::Sm80, spec, "mma.sync")?;

    let tile = plan.tile;
    let ThreadLayout::Warps {
        m: warps_m,
        n: warps_n,
    } = plan.threads
    else {
        return Err(fail(format!(
            "the kernel's threads are warps along M and N, not {:?}",
            plan.threads
        )));
    };
    if warps_m == 0 || warps_n == 0 {
        return Err(fail(format!(
            "{warps_m}x{warps_n} warps: at least one along each of M and N"
        )));
    }
    let threads = plan.threads.threads();
    if !tile.m.is_multiple_of(16 * warps_m) || !tile.n.is_multiple_of(16 * warps_n) {
        return Err(fail(format!(
            "tile {}x{} over {}x{} warps must give warp tiles that are multiples of 16",
            tile.m, tile.n, warps_m, warps_n
        )));
    }
    let accumulators = tile.m / warps_m * tile.n / warps_n / 32;
    if accumulators > MAX_ACCUMULATORS_PER_THREAD {
        return Err(fail(format!(
            "warp tile {}x{} needs {accumulators} accumulator registers per thread; at most {MAX_ACCUMULATORS_PER_THREAD}",
            tile.m / warps_m,
            tile.n / warps_n
        )));
    }
    let k_step = mma_k(a.dtype);
    if !tile.k.is_multiple_of(2 * k_step) {
        return Err(fail(format!(
            "TILE_K = {} must be an even number of mma K steps ({k_step} each): fragments are \
             double-buffered across steps and the ring advances at the second-to-last one",
            tile.k
        )));
    }
    if plan.stages < 2 {
        return Err(fail(format!(
            "the cp.async ring needs at least 2 stages, got {}",
            plan.stages
        )));
    }
    let elem = a.dtype.size_bytes();
    for (name, bytes, layout_rows, layout_cols) in [
        (
            "A",
            plan.operands.a_copy_bytes,
            if a.layout == Layout::Row {
                tile.m
            } else {
                tile.k
            },
            if a.layout == Layout::Row {
                tile.k
            } else {
                tile.m
            },
        ),
        (
            "B",
            plan.operands.b_copy_bytes,
            if b.layout == Layout::Col {
                tile.n
            } else {
                tile.k
            },
            if b.layout == Layout::Col {
                tile.k
            } else {
                tile.n
            },
        ),
    ] {
        let row_bytes = layout_cols * elem;
        let chunks = row_bytes / 16;
        if is_swizzled(a.dtype)
            && !(row_bytes.is_multiple_of(16) && chunks >= 2 && chunks.is_power_of_two())
        {
            return Err(fail(format!(
                "the staged {name} tile has rows of {row_bytes} bytes; the XOR swizzle needs a \
                 power of two of 16-byte chunks (32, 64, 128, ... bytes)"
            )));
        }
        if ![4, 8, 16].contains(&bytes) || bytes < elem {
            return Err(fail(format!(
                "{name} copies of {bytes} bytes: cp.async copies 4, 8 or 16 bytes of whole elements"
            )));
        }
        let chunks_per_row = layout_cols / (bytes / elem);
        let even = layout_cols % (bytes / elem) == 0
            && chunks_per_row > 0
            && threads.is_multiple_of(chunks_per_row)
            && layout_rows % (threads / chunks_per_row) == 0;
        if !even {
            return Err(fail(format!(
                "the staged {name} tile ({layout_rows} rows of {layout_cols}) does not split into {bytes}-byte copies over {threads} threads"
            )));
        }
    }
    Ok(())
}

fn values(spec: &KernelSpec, plan: &Plan) -> Vec<(&'static str, String)> {
    let input = spec.a().dtype;
    vec![
        ("TILE_M", plan.tile.m.to_string()),
        ("TILE_N", plan.tile.n.to_string()),
        ("TILE_K", plan.tile.k.to_string()),
        ("STAGES", plan.stages.to_string()),
        ("WARPS_M", plan.threads.tile_split().0.to_string()),
        ("WARPS_N", plan.threads.tile_split().1.to_string()),
        ("GROUP_M", plan.raster.group_m.max(1).to_string()),
        ("A_ROW", (spec.a().layout == Layout::Row).to_string()),
        ("B_COL", (spec.b().layout == Layout::Col).to_string()),
        ("D_ROW", (spec.d().layout == Layout::Row).to_string()),
        ("IN_TYPE", element_type(input).to_string()),
        ("D_TYPE", element_type(spec.d().dtype).to_string()),
        ("TF32", is_tf32(input).to_string()),
        (
            "MMA_INSTRUCTION",
            super::mma_sync_instruction(input).to_string(),
        ),
        ("SWIZZLE", is_swizzled(input).to_string()),
        ("PAD", pad_elems(input).to_string()),
        ("A_STAGE_BYTES", plan.smem.a_stage_bytes.to_string()),
        ("CP_ASYNC", crate::codegen::CP_ASYNC_CUH.to_string()),
        ("B_STAGE_BYTES", plan.smem.b_stage_bytes.to_string()),
        ("A_COPY_BYTES", plan.operands.a_copy_bytes.to_string()),
        ("B_COPY_BYTES", plan.operands.b_copy_bytes.to_string()),
    ]
}

/// Plan-specific lines of the header comment.
fn describe(spec: &KernelSpec, plan: &Plan) -> Vec<String> {
    let t = plan.tile;
    let (warps_m, warps_n) = plan.threads.tile_split();
    let dtype = spec.a().dtype;
    let pad = pad_elems(dtype);
    let swizzled = is_swizzled(dtype);
    let staged = |rows: u32, cols: u32| {
        if swizzled {
            format!("[{rows}][{cols}] with 16-byte chunks XOR-swizzled by row")
        } else {
            format!("[{rows}][{}] ({pad} elements of padding)", cols + pad)
        }
    };
    let a_staged = match spec.a().layout {
        Layout::Row => format!("row-major, staged {}", staged(t.m, t.k)),
        Layout::Col => format!("col-major, staged {}", staged(t.k, t.m)),
    };
    let b_staged = match spec.b().layout {
        Layout::Col => format!("col-major, staged {}", staged(t.n, t.k)),
        Layout::Row => format!("row-major, staged {}", staged(t.k, t.n)),
    };
    let stage_bytes = plan.smem.a_stage_bytes + plan.smem.b_stage_bytes;
    vec![
        format!(
            "stage ring: {} x {:.1} KiB = {:.1} KiB; A tile {}x{} {a_staged}; B tile {}x{} {b_staged}",
            plan.stages,
            stage_bytes as f64 / 1024.0,
            plan.smem_bytes() as f64 / 1024.0,
            t.m,
            t.k,
            t.k,
            t.n
        ),
        format!(
            "copies: cp.async {} B (A) / {} B (B), zero-filled outside the matrix",
            plan.operands.a_copy_bytes, plan.operands.b_copy_bytes
        ),
        format!(
            "threads: {} = {}x{} warps, warp tile {}x{} as {}x{} {}",
            plan.threads.threads(),
            warps_m,
            warps_n,
            t.m / warps_m,
            t.n / warps_n,
            t.m / warps_m / 16,
            t.n / warps_n / 8,
            if is_tf32(dtype) {
                "mma.m16n8k8 (tf32)"
            } else {
                "mma.m16n8k16"
            }
        ),
    ]
}

/// The sm80 plans: tiles of 32 to 256 along M and N, two tile depths per dtype, one to eight
/// warps, 2 to 6 stages.
fn propose(spec: &KernelSpec) -> Vec<Plan> {
    let tile_ks: &[u32] = match spec.a().dtype {
        DType::F16 | DType::Bf16 => &[32, 64],
        _ => &[16, 32],
    };
    const SIZES: [u32; 4] = [32, 64, 128, 256];
    const WARPS: [(u32, u32); 6] = [(1, 1), (1, 2), (2, 1), (2, 2), (2, 4), (4, 2)];
    /// The space stops at warp tiles of 128 along M and N: the accumulator limit of `check`
    /// would let a 256x16 warp tile through, which was never measured.
    const MAX_WARP_TILE: u32 = 128;
    let mut out = Vec::new();
    for tm in SIZES {
        for tn in SIZES {
            for &tk in tile_ks {
                for (wm, wn) in WARPS {
                    if tm / wm > MAX_WARP_TILE || tn / wn > MAX_WARP_TILE {
                        continue;
                    }
                    let threads = ThreadLayout::Warps { m: wm, n: wn };
                    let tile = Tile {
                        m: tm,
                        n: tn,
                        k: tk,
                    };
                    let settings = PlanSettings {
                        persistent: false,
                        epilogue: EpilogueStrategy::Direct,
                        // 16-byte cp.async copies; misaligned operands are repacked.
                        operands: OperandPath {
                            a_copy_bytes: 16,
                            b_copy_bytes: 16,
                            repack_misaligned: true,
                        },
                    };
                    let base = base_plan(spec, Backend::Sm80, tile, threads, settings);
                    push_variants(&mut out, spec, base, 2..=6);
                }
            }
        }
    }
    out
}

/// The cp.async + mma.sync backend.
pub(super) struct Sm80;

impl BackendImpl for Sm80 {
    fn target_has(&self, hw: &Hardware) -> bool {
        hw.compute_capability() >= 80 && hw.features.cp_async
    }

    fn refusal(&self, spec: &KernelSpec) -> Option<String> {
        let hw = &spec.hardware;
        let a = spec.a().dtype;
        tensor_core_dtype_refusal(spec, false).or_else(|| {
            if !matches!(a, DType::F16 | DType::Bf16 | DType::Tf32) {
                Some(format!(
                    "its mma.sync generator takes f16, bf16 and tf32 inputs, not {a}"
                ))
            } else if !self.target_has(hw) {
                Some(format!(
                    "{} ({}) lacks cp.async and bf16 mma",
                    hw.name, hw.arch
                ))
            } else {
                None
            }
        })
    }

    fn default_calibration(&self) -> BackendCalibration {
        BackendCalibration {
            mma_efficiency: 0.75,
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

    /// `warps_m x warps_n` warps, as recorded.
    fn recorded_threads(&self, warps: RecordedWarps) -> ThreadLayout {
        ThreadLayout::Warps {
            m: warps.warps_m,
            n: warps.warps_n,
        }
    }

    fn smem_layout(
        &self,
        spec: &KernelSpec,
        tile: Tile,
        _threads: &ThreadLayout,
        _stages: u32,
    ) -> SmemLayout {
        smem_layout(spec, tile)
    }

    fn check(&self, spec: &KernelSpec, plan: &Plan) -> Result<(), CodegenError> {
        check(spec, plan)
    }

    fn render(&self, spec: &KernelSpec, plan: &Plan) -> Result<Rendering, CodegenError> {
        Ok(Rendering {
            template_name: "sm80_gemm.cu",
            template: TEMPLATE,
            values: values(spec, plan),
            described: describe(spec, plan),
            extra_args: Vec::new(),
        })
    }

    /// mma.sync m16n8k16 (and m16n8k8 for tf32): an A fragment is 4 registers per 16 rows, a B
    /// fragment 2 per 8 columns; two k-steps in flight.
    fn fragment_registers(&self, plan: &Plan, _accumulators: u32, _input_bytes: u32) -> u32 {
        let t = plan.tile;
        let (warps_m, warps_n) = plan.threads.tile_split();
        let warp_m = t.m / warps_m.max(1);
        let warp_n = t.n / warps_n.max(1);
        2 * (warp_m.div_ceil(16) * 4 + warp_n.div_ceil(8) * 2)
    }

    /// cp.async copies one thread issues per stage.
    fn copies_per_thread(&self, plan: &Plan, input_bytes: u32) -> u32 {
        let t = plan.tile;
        let copies = |rows: u32, copy_bytes: u32| rows * t.k * input_bytes / copy_bytes.max(1);
        (copies(t.m, plan.operands.a_copy_bytes) + copies(t.n, plan.operands.b_copy_bytes))
            / plan.threads.threads().max(1)
    }

    fn fragment_read_bytes(&self, plan: &Plan, a: DType, b: DType) -> f64 {
        super::warp_fragment_read_bytes(plan, a, b)
    }

    /// One `cp.async.wait_group` + `__syncthreads` per k-block.
    fn barrier(&self, _plan: &Plan, cal: &Calibration) -> (BarrierKind, u32, f64) {
        (BarrierKind::Syncthreads, 1, cal.syncthreads_cycles)
    }
}
