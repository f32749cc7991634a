//! The cuBLASLt baseline: the same problem on the same device buffers, timed the same way.
//!
//! cuBLASLt is column-major. A row-major D is computed as Dᵀ = Bᵀ·Aᵀ, and each operand enters
//! as itself (`N`) or transposed (`T`) depending on its layout, so every layout combination maps
//! without copies. The spec's epilogue is matched against what cuBLASLt can fuse:
//! `[gelu|gelu_tanh|relu](alpha·acc [+ beta·C] [+ bias])`; anything else is an error that says so.
//! The descriptors and the heuristic's algorithm are chosen once, in [`Baseline::new`].
//!
//! FP8 inputs ([`map_fp8`]) run in the form cuBLASLt takes on Hopper: A row-major and B
//! col-major (both K-major, its "TN"), e4m3 x e4m3, e4m3 x e5m2 or e5m2 x e4m3, a bf16, f16 or
//! f32 D, and the spec's scales as one of its scaling modes: per tensor (`SCALAR_32F`), per row
//! of A and column of B (`OUTER_VEC_32F`), or DeepSeek's 1x128 activations with 128x128 weights
//! (`VEC128_32F` with `BLK128x128_32F`), or 1x128 blocks of both (`VEC128_32F` twice, the
//! weight-gradient form). A scale tensor that is not already in the layout
//! cuBLASLt reads is copied, once, into a buffer the baseline owns; A, B and D are the problem's
//! own buffers. The facts about cuBLASLt used here are from the cuBLAS 13 documentation
//! (docs.nvidia.com/cuda/cublas): "cublasLtMatmul()" (the FP8 requirements and type table),
//! section 3.1.4 "Narrow precision data types usage" (the scaling modes, the supported mode
//! pairs and the scale layouts of 3.1.4.5.1) and "cublasLtMatmulDescAttributes_t" (attribute
//! types); the enum values are cudarc's bindings of the CUDA 13.0 `cublasLt.h`.

use crate::device::{DeviceBuffer, Gpu};
use crate::error::CudaError;
use crate::launch::DeviceOperand;
use crate::runner::DeviceProblem;
use cudarc::cublaslt::{result, sys};
use deepgemm::dtype::DType;
use deepgemm::plan::Shape;
use deepgemm::reference::HostTensor;
use deepgemm::spec::{BinaryOp, Expr, Func, KernelSpec, Layout, Role, ScaleGranularity};
use std::ffi::c_void;

/// The workspace cuBLASLt may use (docs/cli.md, "Measuring").
pub const WORKSPACE_BYTES: usize = 32 << 20;

/// `cublasOperation_t` values the TRANSA/TRANSB attributes take.
const OP_N: i32 = 0;
const OP_T: i32 = 1;

fn cublas(call: impl Into<String>) -> impl FnOnce(result::CublasError) -> CudaError {
    move |e| CudaError::Cublas {
        call: call.into(),
        status: format!("{:?}", e.0),
    }
}

fn unsupported(why: impl Into<String>) -> CudaError {
    CudaError::CublasUnsupported(why.into())
}

/// What cuBLASLt fuses after the product.
#[derive(Debug, Clone, PartialEq)]
pub struct FusedEpilogue {
    /// Param name or constant for alpha (1 when absent).
    pub alpha: Scalar,
    /// Present when the epilogue adds `beta·C`.
    pub beta_c: Option<(Scalar, String)>,
    /// The bias vector's name.
    pub bias: Option<String>,
    pub activation: Option<Activation>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    Constant(f64),
    Param(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// cuBLASLt's GELU is the tanh approximation; `gelu` maps to it too (same cost).
    Gelu,
    Relu,
}

/// Matches the spec's epilogue against `[act](alpha·acc [+ beta·C] [+ bias])`.
pub fn match_epilogue(spec: &KernelSpec) -> Result<FusedEpilogue, CudaError> {
    let mut expr = &spec.epilogue.expr;
    let mut activation = None;
    if let Expr::Call(func, args) = expr {
        activation = Some(match func {
            Func::Gelu | Func::GeluTanh => Activation::Gelu,
            Func::Relu => Activation::Relu,
            other => return Err(unsupported(format!("no fused {}", other.name()))),
        });
        expr = &args[0];
    }
    let mut terms = Vec::new();
    collect_sum(expr, &mut terms);
    let mut fused = FusedEpilogue {
        alpha: Scalar::Constant(1.0),
        beta_c: None,
        bias: None,
        activation,
    };
    let mut saw_acc = false;
    for term in terms {
        let role = |name: &str| spec.operand(name).map(|o| o.role.clone());
        let scalar = |e: &Expr| match e {
            Expr::Number(v) => Some(Scalar::Constant(*v)),
            Expr::Var(name) if spec.params.iter().any(|p| &p.name == name) => {
                Some(Scalar::Param(name.clone()))
            }
            _ => None,
        };
        match term {
            Expr::Acc if !saw_acc => saw_acc = true,
            Expr::Binary(BinaryOp::Mul, l, r) if !saw_acc => {
                let (coefficient, other) = match (scalar(l), scalar(r)) {
                    (Some(s), _) => (s, r.as_ref()),
                    (_, Some(s)) => (s, l.as_ref()),
                    _ => return Err(unsupported("a product of two tensors")),
                };
                match other {
                    Expr::Acc => {
                        fused.alpha = coefficient;
                        saw_acc = true;
                    }
                    Expr::Var(name) if role(name) == Some(Role::C) => {
                        fused.beta_c = Some((coefficient, name.clone()))
                    }
                    _ => return Err(unsupported("a scaled term other than alpha·acc or beta·C")),
                }
            }
            Expr::Binary(BinaryOp::Mul, l, r) => {
                match (scalar(l), scalar(r), l.as_ref(), r.as_ref()) {
                    (Some(s), _, _, Expr::Var(name)) | (_, Some(s), Expr::Var(name), _)
                        if role(name) == Some(Role::C) =>
                    {
                        fused.beta_c = Some((s, name.clone()))
                    }
                    _ => return Err(unsupported("a scaled term other than alpha·acc or beta·C")),
                }
            }
            Expr::Var(name) => match role(name) {
                Some(Role::C) => fused.beta_c = Some((Scalar::Constant(1.0), name.clone())),
                Some(Role::RowVector | Role::ColVector) if fused.bias.is_none() => {
                    fused.bias = Some(name.clone())
                }
                _ => return Err(unsupported(format!("the term `{name}`"))),
            },
            other => return Err(unsupported(format!("the term {other:?}"))),
        }
    }
    if !saw_acc {
        return Err(unsupported("an epilogue without the accumulator"));
    }
    Ok(fused)
}

fn collect_sum<'e>(expr: &'e Expr, terms: &mut Vec<&'e Expr>) {
    match expr {
        Expr::Binary(BinaryOp::Add, l, r) => {
            collect_sum(l, terms);
            collect_sum(r, terms);
        }
        other => terms.push(other),
    }
}

fn data_type(dtype: DType) -> Result<sys::cudaDataType, CudaError> {
    Ok(match dtype {
        DType::Bf16 => sys::cudaDataType::CUDA_R_16BF,
        DType::F16 => sys::cudaDataType::CUDA_R_16F,
        DType::F32 | DType::Tf32 => sys::cudaDataType::CUDA_R_32F,
        DType::E4m3 => sys::cudaDataType::CUDA_R_8F_E4M3,
        DType::E5m2 => sys::cudaDataType::CUDA_R_8F_E5M2,
        other => {
            return Err(unsupported(format!(
                "{other} operands (baseline covers bf16, f16, f32, tf32, e4m3, e5m2)"
            )))
        }
    })
}

// ---------------------------------------------------------------------------------------------
// FP8: scaling modes and scale layouts
// ---------------------------------------------------------------------------------------------

/// The first cuBLASLt with the outer-vector and 128-block scaling modes: 12.9
/// (`cublasLtGetVersion()` is major * 10000 + minor * 100 + patch, as `CUBLAS_VERSION`).
pub const CUBLASLT_BLOCK_SCALING_VERSION: usize = 12_09_00;

/// How cuBLASLt applies one input's scale factors (`cublasLtMatmulMatrixScale_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleMode {
    /// One f32 for the whole tensor (`SCALAR_32F` = 0, the default; compute capability 8.9+).
    Scalar,
    /// One f32 per row of A and per column of B (`OUTER_VEC_32F` = 3; 9.0, cuBLAS 12.9+).
    OuterVec,
    /// One f32 per row and 128-wide K block (`VEC128_32F` = 4; 9.0, cuBLAS 12.9+).
    Vec128,
    /// One f32 per 128x128 block (`BLK128x128_32F` = 5; 9.0, cuBLAS 12.9+).
    Blk128x128,
}

impl ScaleMode {
    fn lt(self) -> sys::cublasLtMatmulMatrixScale_t {
        use sys::cublasLtMatmulMatrixScale_t::*;
        match self {
            ScaleMode::Scalar => CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F,
            ScaleMode::OuterVec => CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
            ScaleMode::Vec128 => CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
            ScaleMode::Blk128x128 => CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F,
        }
    }

    /// The enumerant's name without its `CUBLASLT_MATMUL_MATRIX_SCALE_` prefix.
    pub fn name(self) -> &'static str {
        match self {
            ScaleMode::Scalar => "SCALAR_32F",
            ScaleMode::OuterVec => "OUTER_VEC_32F",
            ScaleMode::Vec128 => "VEC128_32F",
            ScaleMode::Blk128x128 => "BLK128x128_32F",
        }
    }
}

/// Where cuBLASLt reads the f32 scale of (outer index, K block) (cuBLAS docs 3.1.4.5.1), as an
/// element offset from the scale pointer. "Outer" is M for the spec's A and N for its B, or
/// their 128-blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleLayout {
    /// `len` consecutive f32: 1 for `SCALAR_32F`, M or N for `OUTER_VEC_32F`.
    Vector { len: u64 },
    /// `VEC128_32F`: "M-major for A with shape M x L" (N-major for B), L = ceil(K / 128):
    /// (o, kb) at `kb * outer + o`.
    OuterMajor { outer: u64, k_blocks: u64 },
    /// `BLK128x128_32F`: "K-major and the stride between the consecutive columns must be a
    /// multiple of 4", shape L4 x ceil(outer / 128) with L4 = L rounded up to 4: (ob, kb) at
    /// `ob * stride + kb`, `stride` = L4 (cuBLASLt takes no stride argument, so the columns are
    /// L4 apart).
    KMajor {
        outer_blocks: u64,
        k_blocks: u64,
        stride: u64,
    },
}

impl ScaleLayout {
    /// f32 elements the layout spans.
    pub fn elems(&self) -> u64 {
        match *self {
            ScaleLayout::Vector { len } => len,
            ScaleLayout::OuterMajor { outer, k_blocks } => outer * k_blocks,
            ScaleLayout::KMajor {
                outer_blocks,
                stride,
                ..
            } => outer_blocks * stride,
        }
    }

    /// The spec's scale tensor copied into this layout, f32 little-endian; the K-major padding
    /// between L and L4 is zero. `tensor` is the spec's `[]`, `[M]`/`[N]`, `[M, K/128]` or
    /// `[N/128, K/128]` tensor: its element (outer, K block) is at `geometry.offset(o, kb)`
    /// (a vector is one row, a scalar 1x1).
    pub fn repack(&self, tensor: &HostTensor) -> Vec<u8> {
        let g = tensor.geometry;
        let read = |r: u64, c: u64| {
            let at = g.offset(r, c) as usize * 4;
            [
                tensor.bytes[at],
                tensor.bytes[at + 1],
                tensor.bytes[at + 2],
                tensor.bytes[at + 3],
            ]
        };
        let mut out = vec![0u8; self.elems() as usize * 4];
        let mut put = |at: u64, value: [u8; 4]| {
            out[at as usize * 4..at as usize * 4 + 4].copy_from_slice(&value)
        };
        match *self {
            ScaleLayout::Vector { len } => (0..len).for_each(|i| put(i, read(0, i))),
            ScaleLayout::OuterMajor { outer, k_blocks } => {
                for o in 0..outer {
                    for kb in 0..k_blocks {
                        put(kb * outer + o, read(o, kb));
                    }
                }
            }
            ScaleLayout::KMajor {
                outer_blocks,
                k_blocks,
                stride,
            } => {
                for ob in 0..outer_blocks {
                    for kb in 0..k_blocks {
                        put(ob * stride + kb, read(ob, kb));
                    }
                }
            }
        }
        out
    }
}

/// One input's scale as cuBLASLt takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleBinding {
    /// The spec's scale operand.
    pub operand: String,
    pub mode: ScaleMode,
    pub layout: ScaleLayout,
    /// The spec's tensor already is `layout` at a 16-byte aligned address, so cuBLASLt reads
    /// it in place; otherwise it is copied into a buffer the baseline owns.
    pub in_place: bool,
}

/// How an FP8 problem maps onto cuBLASLt: the scales of the spec's A and B (`None`: unscaled,
/// which cuBLASLt takes as a scale of 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fp8Mapping {
    pub a: Option<ScaleBinding>,
    pub b: Option<ScaleBinding>,
}

impl Fp8Mapping {
    /// For reports: `A VEC128_32F (sa) x B BLK128x128_32F (sb, repacked)`.
    pub fn describe(&self) -> String {
        let one = |which: &str, binding: &Option<ScaleBinding>| match binding {
            None => format!("{which} unscaled"),
            Some(b) => format!(
                "{which} {} ({}{})",
                b.mode.name(),
                b.operand,
                if b.in_place { "" } else { ", repacked" }
            ),
        };
        format!("{} x {}", one("A", &self.a), one("B", &self.b))
    }

    fn modes(&self) -> impl Iterator<Item = ScaleMode> + '_ {
        [&self.a, &self.b]
            .into_iter()
            .flatten()
            .map(|binding| binding.mode)
    }
}

fn layout_name(layout: Layout) -> &'static str {
    match layout {
        Layout::Row => "row-major",
        Layout::Col => "col-major",
    }
}

fn round_up(value: u64, to: u64) -> u64 {
    value.div_ceil(to) * to
}

/// Maps an FP8 spec (A or B e4m3/e5m2) at `shape` onto cuBLASLt, or says why it cannot run
/// there. `operands` are the problem's device operands (their layouts, leading dimensions and
/// addresses are checked against cuBLASLt's requirements).
pub fn map_fp8(
    spec: &KernelSpec,
    shape: Shape,
    operands: &[DeviceOperand],
) -> Result<Fp8Mapping, CudaError> {
    let (a, b, d) = (spec.a(), spec.b(), spec.d());
    match (a.dtype, b.dtype) {
        (DType::E5m2, DType::E5m2) => {
            return Err(unsupported(
                "e5m2 x e5m2: cuBLASLt's FP8 kernels take e4m3 x e4m3, e4m3 x e5m2 and e5m2 x e4m3",
            ))
        }
        (x, y) if !(x.is_fp8() && y.is_fp8()) => {
            return Err(unsupported(format!(
                "mixed inputs {x} x {y}: cuBLASLt's FP8 kernels take two FP8 inputs"
            )))
        }
        _ => {}
    }
    // cuBLASLt: "A must be transposed and B non-transposed (the "TN" format)" on Hopper. Both
    // forms the baseline computes (D = A·B for a col-major D, Dᵀ = Bᵀ·Aᵀ for a row-major one)
    // are TN exactly when A and B are K-major.
    if a.layout != Layout::Row || b.layout != Layout::Col {
        return Err(unsupported(format!(
            "FP8 cuBLASLt takes only K-major inputs (its \"TN\" form): A row-major [M, K] and B \
             col-major [K, N]; this spec has A {} and B {}",
            layout_name(a.layout),
            layout_name(b.layout)
        )));
    }
    if !matches!(d.dtype, DType::Bf16 | DType::F16 | DType::F32) {
        return Err(unsupported(format!(
            "a {} D: the baseline runs FP8 inputs into bf16, f16 or f32 (cuBLASLt's FP8 D needs \
             a D scale, and no block-scaled mode writes one)",
            d.dtype
        )));
    }
    let operand = |name: &str| {
        operands
            .iter()
            .find(|o| o.name == name)
            .ok_or_else(|| unsupported(format!("operand `{name}` is not on the device")))
    };
    // cuBLASLt: FP8 needs "pointers and matrix dimension [to] support 16-byte alignment".
    let mut matrices = vec![(a.name.as_str(), a.dtype), (b.name.as_str(), b.dtype)];
    matrices.push((d.name.as_str(), d.dtype));
    matrices.extend(
        spec.operands
            .iter()
            .filter(|o| o.role == Role::C)
            .map(|o| (o.name.as_str(), o.dtype)),
    );
    for (name, dtype) in matrices {
        let o = operand(name)?;
        let ld_bytes = o.geometry.ld * dtype.size_bytes() as u64;
        if !ld_bytes.is_multiple_of(16) || !o.ptr.is_multiple_of(16) {
            return Err(unsupported(format!(
                "FP8 cuBLASLt needs 16-byte aligned rows: `{name}` has a leading dimension of \
                 {} elements ({ld_bytes} bytes) at address offset {} mod 16",
                o.geometry.ld,
                o.ptr % 16
            )));
        }
    }

    let scale_of = |of: &str| {
        spec.operands.iter().find_map(|o| match &o.role {
            Role::Scale {
                of: target,
                granularity,
            } if target == of => Some((o.name.as_str(), *granularity)),
            _ => None,
        })
    };
    let (sa, sb) = (scale_of(&a.name), scale_of(&b.name));
    use ScaleGranularity::*;
    let tensorwide = |s: Option<(&str, ScaleGranularity)>| matches!(s, None | Some((_, PerTensor)));
    let k_blocks = shape.k.div_ceil(128);
    let modes = if tensorwide(sa) && tensorwide(sb) {
        (ScaleMode::Scalar, ScaleMode::Scalar)
    } else {
        let modes = match (sa.map(|s| s.1), sb.map(|s| s.1)) {
            (Some(PerRow), Some(PerCol)) => (ScaleMode::OuterVec, ScaleMode::OuterVec),
            (Some(Block1x128), Some(Block128x128)) => (ScaleMode::Vec128, ScaleMode::Blk128x128),
            // Weight gradients: 1x128 blocks of A's rows and of B's columns.
            (Some(Block1x128), Some(Block1x128)) => (ScaleMode::Vec128, ScaleMode::Vec128),
            (ga, gb) => {
                let name = |g: Option<ScaleGranularity>| match g {
                    None => "unscaled",
                    Some(PerTensor) => "per tensor",
                    Some(PerRow) => "per row",
                    Some(PerCol) => "per column",
                    Some(Block1x128) => "in 1x128 blocks",
                    Some(Block128x128) => "in 128x128 blocks",
                };
                return Err(unsupported(format!(
                    "scales A {} and B {}: cuBLASLt takes both per tensor (or unscaled), A per \
                     row with B per column (outer vector), or A in 1x128 with B in 128x128 or 1x128 blocks",
                    name(ga),
                    name(gb)
                )));
            }
        };
        // cuBLAS docs 3.1.4.5.1: "M and N must be multiples of 4" for the 128-block modes.
        if modes.0 == ScaleMode::Vec128
            && (!shape.m.is_multiple_of(4) || !shape.n.is_multiple_of(4))
        {
            return Err(unsupported(format!(
                "cuBLASLt's 1x128/128x128 scaling needs M and N multiples of 4 (M = {}, N = {})",
                shape.m, shape.n
            )));
        }
        modes
    };
    let bind = |scale: Option<(&str, ScaleGranularity)>,
                mode: ScaleMode,
                outer: u64|
     -> Result<Option<ScaleBinding>, CudaError> {
        let Some((name, _)) = scale else {
            return Ok(None);
        };
        let o = operand(name)?;
        let g = o.geometry;
        let layout = match mode {
            ScaleMode::Scalar => ScaleLayout::Vector { len: 1 },
            ScaleMode::OuterVec => ScaleLayout::Vector { len: outer },
            ScaleMode::Vec128 => ScaleLayout::OuterMajor { outer, k_blocks },
            ScaleMode::Blk128x128 => ScaleLayout::KMajor {
                outer_blocks: outer.div_ceil(128),
                k_blocks,
                stride: round_up(k_blocks, 4),
            },
        };
        // The spec's tensor, element (outer, k block) at g.offset(o, kb), already is the layout
        // when its line is the layout's contiguous run and its ld the layout's stride.
        let same = match layout {
            ScaleLayout::Vector { .. } => true,
            ScaleLayout::OuterMajor { outer, .. } => g.layout == Layout::Col && g.ld == outer,
            ScaleLayout::KMajor { stride, .. } => g.layout == Layout::Row && g.ld == stride,
        };
        Ok(Some(ScaleBinding {
            operand: name.to_string(),
            mode,
            layout,
            // "Starting addresses of scaling factors must be 16B aligned" (3.1.4.5.1).
            in_place: same && o.ptr.is_multiple_of(16),
        }))
    };
    Ok(Fp8Mapping {
        a: bind(sa, modes.0, shape.m)?,
        b: bind(sb, modes.1, shape.n)?,
    })
}

/// Whether this cuBLASLt (`cublasLtGetVersion()`) on a GPU of this compute capability runs the
/// mapping's scaling modes (cuBLAS docs, "Scaling Mode Support Overview": tensorwide 8.9+,
/// outer vector and 128-element blocks 9.0 only).
pub fn check_fp8_support(
    mapping: &Fp8Mapping,
    cublaslt_version: usize,
    compute_capability: (u32, u32),
) -> Result<(), CudaError> {
    let (major, minor) = compute_capability;
    if compute_capability < (8, 9) {
        return Err(unsupported(format!(
            "FP8 matmuls need compute capability 8.9 or newer; this GPU is {major}.{minor}"
        )));
    }
    if let Some(mode) = mapping.modes().find(|&m| m != ScaleMode::Scalar) {
        if cublaslt_version < CUBLASLT_BLOCK_SCALING_VERSION {
            return Err(unsupported(format!(
                "{} needs cuBLASLt 12.9 or newer; this one is {}.{}.{}",
                mode.name(),
                cublaslt_version / 10000,
                cublaslt_version / 100 % 100,
                cublaslt_version % 100
            )));
        }
        if compute_capability != (9, 0) {
            return Err(unsupported(format!(
                "cuBLASLt runs {} on compute capability 9.0 only; this GPU is {major}.{minor}",
                mode.name()
            )));
        }
    }
    Ok(())
}

/// One column-major operand as cuBLASLt sees it.
struct LtMatrix {
    layout: sys::cublasLtMatrixLayout_t,
}

impl LtMatrix {
    fn new(dtype: DType, rows: u64, cols: u64, ld: u64) -> Result<LtMatrix, CudaError> {
        let layout = result::create_matrix_layout(data_type(dtype)?, rows, cols, ld as i64)
            .map_err(cublas("cublasLtMatrixLayoutCreate"))?;
        Ok(LtMatrix { layout })
    }
}

impl Drop for LtMatrix {
    fn drop(&mut self) {
        // SAFETY: created above, destroyed only here.
        let _ = unsafe { result::destroy_matrix_layout(self.layout) };
    }
}

/// A cuBLASLt matmul on a [`DeviceProblem`]'s buffers, planned once.
pub struct Baseline {
    handle: sys::cublasLtHandle_t,
    desc: sys::cublasLtMatmulDesc_t,
    /// The "A" and "B" slots of the column-major call, then C and D.
    first: LtMatrix,
    second: LtMatrix,
    c: LtMatrix,
    d: LtMatrix,
    pointers: [u64; 4],
    algo: sys::cublasLtMatmulAlgo_t,
    workspace: DeviceBuffer,
    /// FP8 scales copied into the layout cuBLASLt reads; the descriptor points into them.
    _scale_copies: Vec<DeviceBuffer>,
    alpha: f32,
    beta: f32,
    label: String,
    scale_mode: Option<String>,
}

impl Baseline {
    /// Plans `spec` on `problem`'s buffers: layouts, transposes, the fused epilogue, FP8 scales
    /// and the heuristic's best algorithm. Unsupported combinations are
    /// [`CudaError::CublasUnsupported`] errors that name the reason.
    pub fn new(
        gpu: &Gpu,
        spec: &KernelSpec,
        problem: &DeviceProblem,
    ) -> Result<Baseline, CudaError> {
        // SAFETY: only tries to open the library.
        if !unsafe { sys::is_culib_present() } {
            return Err(CudaError::NoCublasLt);
        }
        let (a, b, d) = (spec.a(), spec.b(), spec.d());
        if let Some(amax) = spec.amax() {
            return Err(unsupported(format!(
                "the amax output `{}`: the baseline maps no amax (cuBLASLt's AMAX_D needs an \
                 fp8 D with a D scale)",
                amax.name
            )));
        }
        let shape = problem.problem.shape;
        let fp8 = if a.dtype.is_fp8() || b.dtype.is_fp8() {
            let mapping = map_fp8(spec, shape, problem.operands())?;
            // SAFETY: the library is present (checked above); the call takes no arguments.
            let version = unsafe { sys::cublasLtGetVersion() };
            check_fp8_support(&mapping, version, gpu.info().compute_capability)?;
            Some(mapping)
        } else {
            if a.dtype != b.dtype {
                return Err(unsupported(format!(
                    "mixed inputs {} x {}",
                    a.dtype, b.dtype
                )));
            }
            None
        };
        let compute = match a.dtype {
            DType::Tf32 => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
            // cuBLASLt: FP8 "compute type must be CUBLAS_COMPUTE_32F", scale type 32F.
            DType::Bf16 | DType::F16 | DType::F32 | DType::E4m3 | DType::E5m2 => {
                sys::cublasComputeType_t::CUBLAS_COMPUTE_32F
            }
            other => return Err(unsupported(format!("{other} inputs"))),
        };
        if a.dtype == DType::F32 && d.dtype != DType::F32 || spec.accumulate != DType::F32 {
            return Err(unsupported(
                "f32 inputs need an f32 output; accumulation must be f32",
            ));
        }
        let fused = match_epilogue(spec)?;
        let operand = |name: &str| {
            problem
                .operand(name)
                .ok_or_else(|| unsupported(format!("operand `{name}` is not on the device")))
        };
        let (da, db, dd) = (operand(&a.name)?, operand(&b.name)?, operand(&d.name)?);

        // Column-major call: D_cm (rows x cols) = op(first) · op(second).
        // D col-major: D = A·B. D row-major: Dᵀ = Bᵀ·Aᵀ.
        let d_row = d.layout == Layout::Row;
        let (rows, cols) = if d_row {
            (shape.n, shape.m)
        } else {
            (shape.m, shape.n)
        };
        let (first_op, second_op) = if d_row { (db, da) } else { (da, db) };
        // A stored matrix as cuBLASLt sees it: its column-major shape (a row-major matrix reads
        // as its transpose), and whether the slot needs it transposed. For D = A·B the slots
        // want A and B themselves, so col-major operands enter as N; for Dᵀ = Bᵀ·Aᵀ they want
        // the transposes, which row-major operands already are.
        let view = |o: &DeviceOperand| {
            let g = o.geometry;
            let (stored_rows, stored_cols) = match g.layout {
                Layout::Col => (g.rows, g.cols),
                Layout::Row => (g.cols, g.rows),
            };
            let op = if (g.layout == Layout::Col) != d_row {
                OP_N
            } else {
                OP_T
            };
            (stored_rows, stored_cols, g.ld, op)
        };
        let (r1, c1, ld1, op1) = view(first_op);
        let (r2, c2, ld2, op2) = view(second_op);
        let first = LtMatrix::new(first_op.dtype, r1, c1, ld1)?;
        let second = LtMatrix::new(second_op.dtype, r2, c2, ld2)?;
        let d_matrix = LtMatrix::new(d.dtype, rows, cols, dd.geometry.ld)?;
        let (c_ptr, c_matrix, beta) = match &fused.beta_c {
            Some((beta, c_name)) => {
                let c = operand(c_name)?;
                let c_spec = spec
                    .operand(c_name)
                    .ok_or_else(|| unsupported("C is not declared"))?;
                if c_spec.layout != d.layout || c_spec.dtype != d.dtype {
                    return Err(unsupported("C must have D's layout and dtype"));
                }
                (
                    c.ptr,
                    LtMatrix::new(c_spec.dtype, rows, cols, c.geometry.ld)?,
                    Some(beta.clone()),
                )
            }
            None => (
                dd.ptr,
                LtMatrix::new(d.dtype, rows, cols, dd.geometry.ld)?,
                None,
            ),
        };
        let value = |s: &Scalar| match s {
            Scalar::Constant(v) => *v,
            Scalar::Param(name) => problem
                .problem
                .params
                .iter()
                .find(|(n, _)| n == name)
                .map_or(1.0, |(_, v)| *v),
        };

        let desc = result::create_matmul_desc(compute, sys::cudaDataType::CUDA_R_32F)
            .map_err(cublas("cublasLtMatmulDescCreate"))?;
        let mut baseline = Baseline {
            handle: std::ptr::null_mut(),
            desc,
            first,
            second,
            c: c_matrix,
            d: d_matrix,
            pointers: [first_op.ptr, second_op.ptr, c_ptr, dd.ptr],
            // SAFETY: a plain C struct; overwritten by the heuristic below.
            algo: unsafe { std::mem::zeroed() },
            workspace: gpu.alloc(WORKSPACE_BYTES)?,
            _scale_copies: Vec::new(),
            alpha: value(&fused.alpha) as f32,
            beta: beta.as_ref().map_or(0.0, value) as f32,
            label: String::new(),
            scale_mode: fp8.as_ref().map(Fp8Mapping::describe),
        };
        baseline.set_desc(
            sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
            &op1,
        )?;
        baseline.set_desc(
            sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB,
            &op2,
        )?;
        if let Some(mapping) = &fp8 {
            // cuBLASLt's A slot holds the spec's B when D is row-major (Dᵀ = Bᵀ·Aᵀ).
            let (slot_a, slot_b) = if d_row {
                (&mapping.b, &mapping.a)
            } else {
                (&mapping.a, &mapping.b)
            };
            use sys::cublasLtMatmulDescAttributes_t::*;
            for (binding, mode_attr, pointer_attr) in [
                (
                    slot_a,
                    CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                    CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                ),
                (
                    slot_b,
                    CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                    CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                ),
            ] {
                if let Some(binding) = binding {
                    baseline.bind_scale(gpu, problem, binding, mode_attr, pointer_attr)?;
                }
            }
        }

        let epilogue = match (&fused.bias, fused.activation) {
            (None, None) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_DEFAULT,
            (None, Some(Activation::Gelu)) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU,
            (None, Some(Activation::Relu)) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU,
            (Some(_), None) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BIAS,
            (Some(_), Some(Activation::Gelu)) => {
                sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU_BIAS
            }
            (Some(_), Some(Activation::Relu)) => {
                sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU_BIAS
            }
        };
        baseline.set_desc(
            sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_EPILOGUE,
            &(epilogue as u32),
        )?;
        if let Some(bias) = &fused.bias {
            // cuBLASLt's bias runs along the rows of its D: N for a row-major D (computed as Dᵀ),
            // M for a col-major one.
            let bias_spec = spec
                .operand(bias)
                .ok_or_else(|| unsupported("bias is not declared"))?;
            let fits = matches!(
                (&bias_spec.role, d_row),
                (Role::ColVector, true) | (Role::RowVector, false)
            );
            if !fits {
                return Err(unsupported(format!(
                    "bias `{bias}` runs along {} while cuBLASLt's runs along {}",
                    if bias_spec.role == Role::ColVector {
                        "N"
                    } else {
                        "M"
                    },
                    if d_row {
                        "N (row-major D)"
                    } else {
                        "M (col-major D)"
                    }
                )));
            }
            // The bias has D's type, except that FP8 kernels with an f32 D take a bf16 bias
            // (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE's default, cublasLtMatmulDescAttributes_t).
            let bias_dtype = if fp8.is_some() && d.dtype == DType::F32 {
                DType::Bf16
            } else {
                d.dtype
            };
            if bias_spec.dtype != bias_dtype {
                return Err(unsupported(format!(
                    "the bias must be {bias_dtype} here (cuBLASLt's bias type for these inputs \
                     and D)"
                )));
            }
            let ptr = operand(bias)?.ptr as *const c_void;
            baseline.set_desc(
                sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                &ptr,
            )?;
        }

        baseline.handle = result::create_handle().map_err(cublas("cublasLtCreate"))?;
        let pref =
            result::create_matmul_pref().map_err(cublas("cublasLtMatmulPreferenceCreate"))?;
        let workspace_bytes = WORKSPACE_BYTES as u64;
        let problem_text = format!(
            "{} x {} -> {} at {shape}{}",
            a.dtype,
            b.dtype,
            d.dtype,
            baseline
                .scale_mode
                .as_ref()
                .map_or(String::new(), |m| format!(", scales {m}"))
        );
        // SAFETY: a live preference and a u64 attribute of the documented size.
        let heuristic = unsafe {
            result::set_matmul_pref_attribute(
                pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &workspace_bytes as *const u64 as *const c_void,
                std::mem::size_of::<u64>(),
            )
            .map_err(cublas(
                "cublasLtMatmulPreferenceSetAttribute(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)",
            ))
            .and_then(|()| {
                result::get_matmul_algo_heuristic(
                    baseline.handle,
                    baseline.desc,
                    baseline.first.layout,
                    baseline.second.layout,
                    baseline.c.layout,
                    baseline.d.layout,
                    pref,
                )
                .map_err(|e| {
                    if e.0 == sys::cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED {
                        unsupported(format!(
                            "the heuristic found no algorithm for {problem_text}"
                        ))
                    } else {
                        cublas(format!("cublasLtMatmulAlgoGetHeuristic ({problem_text})"))(e)
                    }
                })
            })
        };
        // SAFETY: created above, destroyed once.
        let _ = unsafe { result::destroy_matmul_pref(pref) };
        baseline.algo = heuristic?.algo;
        let trans = |op: i32| if op == OP_N { 'N' } else { 'T' };
        baseline.label = format!(
            "cuBLASLt {}{} {:?}{}{}",
            trans(op1),
            trans(op2),
            epilogue,
            if d_row { " (as Dᵀ = Bᵀ·Aᵀ)" } else { "" },
            baseline
                .scale_mode
                .as_ref()
                .map_or(String::new(), |m| format!(", {m}"))
        );
        Ok(baseline)
    }

    /// Points one of cuBLASLt's scale slots at the spec's scale tensor, or at a copy of it in the
    /// layout cuBLASLt reads, and sets the slot's scaling mode.
    fn bind_scale(
        &mut self,
        gpu: &Gpu,
        problem: &DeviceProblem,
        binding: &ScaleBinding,
        mode_attr: sys::cublasLtMatmulDescAttributes_t,
        pointer_attr: sys::cublasLtMatmulDescAttributes_t,
    ) -> Result<(), CudaError> {
        let on_device = problem.operand(&binding.operand).ok_or_else(|| {
            unsupported(format!("scale `{}` is not on the device", binding.operand))
        })?;
        let ptr = if binding.in_place {
            on_device.ptr
        } else {
            let host = problem.problem.tensor(&binding.operand).ok_or_else(|| {
                unsupported(format!("scale `{}` has no host copy", binding.operand))
            })?;
            let bytes = binding.layout.repack(host);
            let buffer = gpu.alloc(bytes.len())?;
            gpu.upload(&buffer, 0, &bytes)?;
            let ptr = buffer.ptr();
            self._scale_copies.push(buffer);
            ptr
        };
        // SCALAR_32F is the default mode; it is left unset so that a cuBLASLt older than the
        // mode attributes (12.8) still runs per-tensor scaling.
        if binding.mode != ScaleMode::Scalar {
            // cublasLtMatmulDescAttributes_t: the *_SCALE_MODE attributes are int32_t.
            self.set_desc(mode_attr, &(binding.mode.lt() as i32))?;
        }
        // The *_SCALE_POINTER attributes are `const void *` device pointers.
        self.set_desc(pointer_attr, &(ptr as *const c_void))
    }

    fn set_desc<T>(
        &self,
        attr: sys::cublasLtMatmulDescAttributes_t,
        value: &T,
    ) -> Result<(), CudaError> {
        // SAFETY: a live descriptor; `value` is the attribute's documented C type.
        unsafe {
            result::set_matmul_desc_attribute(
                self.desc,
                attr,
                value as *const T as *const c_void,
                std::mem::size_of::<T>(),
            )
        }
        .map_err(cublas(format!("cublasLtMatmulDescSetAttribute({attr:?})")))
    }

    /// How the problem was mapped, e.g. `cuBLASLt TN CUBLASLT_EPILOGUE_GELU_BIAS (as Dᵀ = Bᵀ·Aᵀ)`.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// For FP8 inputs, the scaling modes, e.g. `A VEC128_32F (sa) x B BLK128x128_32F (sb)`
    /// (in the spec's A and B, whichever cuBLASLt slot each takes).
    pub fn scale_mode(&self) -> Option<&str> {
        self.scale_mode.as_deref()
    }

    /// Enqueues the matmul on the GPU's stream.
    pub fn enqueue(&self, gpu: &Gpu) -> Result<(), CudaError> {
        gpu.bind()?;
        let [first, second, c, d] = self.pointers;
        // SAFETY: every handle and layout is live; the pointers are the problem's device
        // buffers, which outlive the call; alpha/beta are f32 as the scale type says.
        unsafe {
            result::matmul(
                self.handle,
                self.desc,
                &self.alpha as *const f32 as *const c_void,
                &self.beta as *const f32 as *const c_void,
                first as *const c_void,
                self.first.layout,
                second as *const c_void,
                self.second.layout,
                c as *const c_void,
                self.c.layout,
                d as *mut c_void,
                self.d.layout,
                &self.algo,
                self.workspace.ptr() as *mut c_void,
                self.workspace.len(),
                gpu.stream() as sys::cudaStream_t,
            )
        }
        .map_err(cublas("cublasLtMatmul"))
    }
}

impl Drop for Baseline {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed only here (the handle may still be null when
        // planning failed before it was created).
        unsafe {
            let _ = result::destroy_matmul_desc(self.desc);
            if !self.handle.is_null() {
                let _ = result::destroy_handle(self.handle);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: &str, epilogue: &str) -> KernelSpec {
        let text = format!(
            "kernel t {{ target h200; input A: bf16[M, K] row; input B: bf16[K, N] col; {extra} \
             output D: bf16[M, N] row; param alpha: f32 = 2.0; param beta: f32 = 0.5; \
             epilogue D = {epilogue}; shape {{ M = 64; N = 64; K = 64; }} }}"
        );
        let file = deepgemm::spec::parse_str(&text, "t.dgml", std::path::Path::new("."))
            .unwrap_or_else(|d| panic!("{d:?}"));
        file.kernels.into_iter().next().unwrap()
    }

    #[test]
    fn fusable_epilogues_are_recognised() {
        let plain = match_epilogue(&spec("", "acc")).unwrap();
        assert_eq!(plain.alpha, Scalar::Constant(1.0));
        assert_eq!(
            (plain.beta_c, plain.bias, plain.activation),
            (None, None, None)
        );

        let axpby = match_epilogue(&spec("input C: bf16[M, N] row;", "alpha * acc + beta * C"));
        let axpby = axpby.unwrap();
        assert_eq!(axpby.alpha, Scalar::Param("alpha".into()));
        assert_eq!(
            axpby.beta_c,
            Some((Scalar::Param("beta".into()), "C".into()))
        );

        let mlp = match_epilogue(&spec(
            "input bias: bf16[N];",
            "gelu_tanh(acc * alpha + bias)",
        ));
        let mlp = mlp.unwrap();
        assert_eq!(mlp.alpha, Scalar::Param("alpha".into()));
        assert_eq!(mlp.bias.as_deref(), Some("bias"));
        assert_eq!(mlp.activation, Some(Activation::Gelu));
    }

    #[test]
    fn other_epilogues_are_refused_with_the_reason() {
        let refused = |extra: &str, expr: &str| match match_epilogue(&spec(extra, expr)) {
            Err(CudaError::CublasUnsupported(why)) => why,
            other => panic!("{expr}: expected unsupported, got {other:?}"),
        };
        assert!(refused("", "silu(acc)").contains("silu"));
        assert!(refused("input bias: bf16[N];", "acc * bias").contains("product of two tensors"));
        assert!(refused("input C: bf16[M, N] row;", "beta * C").contains("without the accumulator"));
        assert!(refused("", "alpha").contains("`alpha`"));
    }

    // ---- FP8 mapping --------------------------------------------------------------------

    fn fp8_spec(inputs: (&str, &str), layouts: (&str, &str), d: &str, scales: &str) -> KernelSpec {
        let text = format!(
            "kernel t {{ target h200; input A: {}[M, K] {}; input B: {}[K, N] {}; {scales} \
             output D: {d}[M, N] row; shape {{ M in 1..=8192; N in 1..=8192; K in 1..=8192; }} }}",
            inputs.0, layouts.0, inputs.1, layouts.1
        );
        let file = deepgemm::spec::parse_str(&text, "t.dgml", std::path::Path::new("."))
            .unwrap_or_else(|d| panic!("{d:?}"));
        file.kernels.into_iter().next().unwrap()
    }

    /// `spec` with B's dtype changed to one the language refuses next to A's (it takes mixed
    /// inputs only as e4m3 x e5m2), to see that the mapping refuses it too.
    fn with_b(mut spec: KernelSpec, dtype: DType) -> KernelSpec {
        let b = spec.b().name.clone();
        spec.operands
            .iter_mut()
            .find(|o| o.name == b)
            .unwrap()
            .dtype = dtype;
        spec
    }

    const BLOCKS: &str =
        "input sa: f32[M, K/128] col scale_of A; input sb: f32[N/128, K/128] row scale_of B;";

    /// The problem's operands as the device would hold them (fake, 256-byte aligned addresses).
    fn operands(spec: &KernelSpec, shape: Shape) -> Vec<DeviceOperand> {
        let problem = deepgemm::reference::Problem::generate(spec, shape, &Default::default());
        problem
            .unwrap()
            .tensors
            .into_iter()
            .enumerate()
            .map(|(i, t)| DeviceOperand {
                name: t.name,
                ptr: 0x1000_0000 * (i as u64 + 1),
                dtype: t.dtype,
                geometry: t.geometry,
            })
            .collect()
    }

    fn map(spec: &KernelSpec, shape: (u64, u64, u64)) -> Result<Fp8Mapping, CudaError> {
        let shape = Shape::new(shape.0, shape.1, shape.2);
        map_fp8(spec, shape, &operands(spec, shape))
    }

    fn refused(spec: &KernelSpec, shape: (u64, u64, u64)) -> String {
        match map(spec, shape) {
            Err(CudaError::CublasUnsupported(why)) => why,
            other => panic!("expected unsupported, got {other:?}"),
        }
    }

    #[test]
    fn deepseek_blocks_map_to_vec128_and_blk128x128_in_place() {
        let spec = fp8_spec(("e4m3", "e4m3"), ("row", "col"), "bf16", BLOCKS);
        let m = map(&spec, (4096, 7168, 2048)).unwrap();
        let (a, b) = (m.a.clone().unwrap(), m.b.clone().unwrap());
        // sa f32[M, K/128] col is M-major with stride M, as VEC128_32F reads it.
        assert_eq!((a.operand.as_str(), a.mode), ("sa", ScaleMode::Vec128));
        assert_eq!(
            a.layout,
            ScaleLayout::OuterMajor {
                outer: 4096,
                k_blocks: 16
            }
        );
        // sb f32[N/128, K/128] row is K-major with 16 (a multiple of 4) between N blocks.
        assert_eq!((b.operand.as_str(), b.mode), ("sb", ScaleMode::Blk128x128));
        assert_eq!(
            b.layout,
            ScaleLayout::KMajor {
                outer_blocks: 56,
                k_blocks: 16,
                stride: 16
            }
        );
        assert!(a.in_place && b.in_place);
        assert_eq!(m.describe(), "A VEC128_32F (sa) x B BLK128x128_32F (sb)");
    }

    #[test]
    fn k_not_a_multiple_of_128_rounds_its_blocks_up() {
        let spec = fp8_spec(("e4m3", "e4m3"), ("row", "col"), "bf16", BLOCKS);
        // K = 2000: 16 blocks, the last 80 wide; N = 7000: 55 N blocks, the last 88 wide.
        let m = map(&spec, (4096, 7000, 2000)).unwrap();
        let b = m.b.unwrap();
        assert_eq!(
            b.layout,
            ScaleLayout::KMajor {
                outer_blocks: 55,
                k_blocks: 16,
                stride: 16
            }
        );
        assert!(b.in_place);
        // K = 640: 5 blocks, so BLK128x128_32F's columns are 8 apart while sb's rows are 5
        // apart: sb is copied.
        let m = map(&spec, (256, 256, 640)).unwrap();
        let b = m.b.unwrap();
        assert_eq!(
            b.layout,
            ScaleLayout::KMajor {
                outer_blocks: 2,
                k_blocks: 5,
                stride: 8
            }
        );
        assert!(!b.in_place);
        assert!(m.a.unwrap().in_place);
    }

    #[test]
    fn scale_tensors_in_other_layouts_are_copied() {
        let spec = fp8_spec(
            ("e4m3", "e4m3"),
            ("row", "col"),
            "bf16",
            "input sa: f32[M, K/128] row scale_of A; input sb: f32[N/128, K/128] col scale_of B;",
        );
        let m = map(&spec, (256, 512, 1024)).unwrap();
        assert!(!m.a.as_ref().unwrap().in_place && !m.b.as_ref().unwrap().in_place);
        assert_eq!(
            m.describe(),
            "A VEC128_32F (sa, repacked) x B BLK128x128_32F (sb, repacked)"
        );
    }

    #[test]
    fn per_tensor_and_per_channel_scales_map_to_their_modes() {
        let tensor = fp8_spec(
            ("e4m3", "e5m2"),
            ("row", "col"),
            "f16",
            "input sa: f32[] scale_of A; input sb: f32[] scale_of B;",
        );
        let m = map(&tensor, (64, 2112, 7168)).unwrap();
        for binding in [m.a.unwrap(), m.b.unwrap()] {
            assert_eq!(binding.mode, ScaleMode::Scalar);
            assert_eq!(binding.layout, ScaleLayout::Vector { len: 1 });
            assert!(binding.in_place);
        }
        // Only A scaled: B unscaled is a scale of 1, which tensorwide scaling allows.
        let one = fp8_spec(
            ("e5m2", "e4m3"),
            ("row", "col"),
            "f32",
            "input sa: f32[] scale_of A;",
        );
        let m = map(&one, (128, 128, 128)).unwrap();
        assert_eq!((m.a.unwrap().mode, m.b), (ScaleMode::Scalar, None));
        assert_eq!(
            map(
                &fp8_spec(("e4m3", "e4m3"), ("row", "col"), "bf16", ""),
                (16, 16, 16)
            )
            .unwrap()
            .describe(),
            "A unscaled x B unscaled"
        );

        let channels = fp8_spec(
            ("e4m3", "e4m3"),
            ("row", "col"),
            "bf16",
            "input sa: f32[M] scale_of A; input sb: f32[N] scale_of B;",
        );
        let m = map(&channels, (1000, 3000, 2048)).unwrap();
        let (a, b) = (m.a.unwrap(), m.b.unwrap());
        assert_eq!(
            (a.mode, a.layout),
            (ScaleMode::OuterVec, ScaleLayout::Vector { len: 1000 })
        );
        assert_eq!(
            (b.mode, b.layout),
            (ScaleMode::OuterVec, ScaleLayout::Vector { len: 3000 })
        );
    }

    #[test]
    fn what_cublaslt_cannot_run_is_refused_with_the_reason() {
        let blocks = fp8_spec(("e4m3", "e4m3"), ("row", "col"), "bf16", BLOCKS);
        // Not TN.
        let nn = fp8_spec(("e4m3", "e4m3"), ("row", "row"), "bf16", "");
        assert!(refused(&nn, (64, 64, 64)).contains("TN"));
        let tn = fp8_spec(("e4m3", "e4m3"), ("col", "col"), "bf16", "");
        assert!(refused(&tn, (64, 64, 64)).contains("A col-major and B col-major"));
        // Types.
        let e5 = fp8_spec(("e5m2", "e5m2"), ("row", "col"), "bf16", "");
        assert!(refused(&e5, (64, 64, 64)).contains("e5m2 x e5m2"));
        let mixed = with_b(
            fp8_spec(("e4m3", "e4m3"), ("row", "col"), "bf16", ""),
            DType::Bf16,
        );
        assert!(refused(&mixed, (64, 64, 64)).contains("mixed inputs e4m3 x bf16"));
        // (The language stores no FP8 D either; the baseline refuses one all the same.)
        let mut fp8_d = fp8_spec(("e4m3", "e4m3"), ("row", "col"), "bf16", "");
        fp8_d
            .operands
            .iter_mut()
            .find(|o| o.name == "D")
            .unwrap()
            .dtype = DType::E4m3;
        assert!(refused(&fp8_d, (64, 64, 64)).contains("e4m3 D"));
        // 16-byte rows: K = 4104 bytes of e4m3 per row of A, N = 4100 bf16 per row of D.
        let why = refused(&blocks, (4096, 4096, 4104));
        assert!(why.contains("`A`") && why.contains("4104 bytes"), "{why}");
        let why = refused(&blocks, (4096, 4100, 4096));
        assert!(why.contains("`D`") && why.contains("8200 bytes"), "{why}");
        // Block scales need M and N multiples of 4.
        let why = refused(&blocks, (1002, 3000, 2048));
        assert!(
            why.contains("multiples of 4") && why.contains("M = 1002"),
            "{why}"
        );
        // Mode pairs cuBLASLt does not have.
        let half_blocks = fp8_spec(
            ("e4m3", "e4m3"),
            ("row", "col"),
            "bf16",
            "input sa: f32[M, K/128] col scale_of A; input sb: f32[] scale_of B;",
        );
        let why = refused(&half_blocks, (128, 128, 128));
        assert!(why.contains("A in 1x128 blocks and B per tensor"), "{why}");
        let row_only = fp8_spec(
            ("e4m3", "e4m3"),
            ("row", "col"),
            "bf16",
            "input sa: f32[M] scale_of A;",
        );
        assert!(refused(&row_only, (128, 128, 128)).contains("A per row and B unscaled"));
    }

    #[test]
    fn block_and_channel_modes_need_cublas_12_9_on_hopper() {
        let blocks = fp8_spec(("e4m3", "e4m3"), ("row", "col"), "bf16", BLOCKS);
        let tensor = fp8_spec(
            ("e4m3", "e4m3"),
            ("row", "col"),
            "bf16",
            "input sa: f32[] scale_of A;",
        );
        let blocks = map(&blocks, (128, 128, 128)).unwrap();
        let tensor = map(&tensor, (128, 128, 128)).unwrap();
        let why = |r: Result<(), CudaError>| match r {
            Err(CudaError::CublasUnsupported(why)) => why,
            other => panic!("expected unsupported, got {other:?}"),
        };
        assert!(check_fp8_support(&blocks, 13_01_00, (9, 0)).is_ok());
        assert!(check_fp8_support(&blocks, 12_09_00, (9, 0)).is_ok());
        let old = why(check_fp8_support(&blocks, 12_08_01, (9, 0)));
        assert!(old.contains("12.9") && old.contains("12.8.1"), "{old}");
        let ada = why(check_fp8_support(&blocks, 13_01_00, (8, 9)));
        assert!(ada.contains("9.0 only") && ada.contains("8.9"), "{ada}");
        assert!(why(check_fp8_support(&blocks, 13_01_00, (10, 0))).contains("10.0"));
        // Tensorwide scaling: any cuBLASLt with FP8, compute capability 8.9 and newer.
        assert!(check_fp8_support(&tensor, 12_01_00, (8, 9)).is_ok());
        assert!(check_fp8_support(&tensor, 13_01_00, (10, 0)).is_ok());
        assert!(why(check_fp8_support(&tensor, 13_01_00, (8, 0))).contains("8.9 or newer"));
    }

    /// A host tensor of f32 scales whose value encodes its (row, col): 100 * r + c.
    fn numbered(rows: u64, cols: u64, layout: Layout) -> HostTensor {
        use deepgemm::reference::Geometry;
        let ld = match layout {
            Layout::Row => cols,
            Layout::Col => rows,
        };
        let geometry = Geometry {
            rows,
            cols,
            layout,
            ld,
        };
        let mut bytes = vec![0u8; (rows * cols * 4) as usize];
        for r in 0..rows {
            for c in 0..cols {
                let at = geometry.offset(r, c) as usize * 4;
                bytes[at..at + 4].copy_from_slice(&((100 * r + c) as f32).to_le_bytes());
            }
        }
        HostTensor {
            name: "s".into(),
            role: Role::Scale {
                of: "A".into(),
                granularity: ScaleGranularity::Block1x128,
            },
            dtype: DType::F32,
            geometry,
            bytes,
        }
    }

    fn floats(bytes: &[u8]) -> Vec<f32> {
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    #[test]
    fn repacking_puts_each_scale_where_cublaslt_reads_it() {
        // [M = 8, L = 3] row-major into VEC128_32F's M-major order: (o, kb) at kb * 8 + o.
        let sa = numbered(8, 3, Layout::Row);
        let layout = ScaleLayout::OuterMajor {
            outer: 8,
            k_blocks: 3,
        };
        let got = floats(&layout.repack(&sa));
        assert_eq!(got.len(), 24);
        for o in 0..8 {
            for kb in 0..3 {
                assert_eq!(got[(kb * 8 + o) as usize], (100 * o + kb) as f32);
            }
        }
        // A col-major [M, L] already is that order: the copy is the identity.
        let sa = numbered(8, 3, Layout::Col);
        assert_eq!(layout.repack(&sa), sa.bytes);

        // [N/128 = 2, L = 5] col-major into BLK128x128_32F's K-major columns 8 apart, the three
        // padding slots of each zero.
        let sb = numbered(2, 5, Layout::Col);
        let layout = ScaleLayout::KMajor {
            outer_blocks: 2,
            k_blocks: 5,
            stride: 8,
        };
        let got = floats(&layout.repack(&sb));
        assert_eq!(got.len(), 16);
        for ob in 0..2 {
            for kb in 0..8 {
                let expected = if kb < 5 { (100 * ob + kb) as f32 } else { 0.0 };
                assert_eq!(got[(ob * 8 + kb) as usize], expected, "({ob}, {kb})");
            }
        }
        // A vector and a scalar are read from their one row.
        let v = numbered(1, 4, Layout::Row);
        assert_eq!(
            floats(&ScaleLayout::Vector { len: 4 }.repack(&v)),
            [0.0, 1.0, 2.0, 3.0]
        );
    }
}
