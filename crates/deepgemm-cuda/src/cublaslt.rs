//! The cuBLASLt baseline: the same problem on the same device buffers, timed the same way.
//!
//! cuBLASLt is column-major. A row-major D is computed as Dᵀ = Bᵀ·Aᵀ, and each operand enters
//! as itself (`N`) or transposed (`T`) depending on its layout, so every layout combination maps
//! without copies. The spec's epilogue is matched against what cuBLASLt can fuse:
//! `[gelu|gelu_tanh|relu](alpha·acc [+ beta·C] [+ bias])`; anything else is an error that says so.
//! The descriptors and the heuristic's algorithm are chosen once, in [`Baseline::new`].

use crate::device::{DeviceBuffer, Gpu};
use crate::error::CudaError;
use crate::runner::DeviceProblem;
use cudarc::cublaslt::{result, sys};
use deepgemm::dtype::DType;
use deepgemm::spec::{BinaryOp, Expr, Func, KernelSpec, Layout, Role};
use std::ffi::c_void;

/// The workspace cuBLASLt may use (docs/cli.md, "Measuring").
pub const WORKSPACE_BYTES: usize = 32 << 20;

/// `cublasOperation_t` values the TRANSA/TRANSB attributes take.
const OP_N: i32 = 0;
const OP_T: i32 = 1;

fn cublas(call: &'static str) -> impl FnOnce(result::CublasError) -> CudaError {
    move |e| CudaError::Cublas {
        call,
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
        other => {
            return Err(unsupported(format!(
                "{other} operands (baseline covers bf16, f16, f32, tf32)"
            )))
        }
    })
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
    alpha: f32,
    beta: f32,
    label: String,
}

impl Baseline {
    /// Plans `spec` on `problem`'s buffers: layouts, transposes, the fused epilogue and the
    /// heuristic's best algorithm. Unsupported combinations are errors that name the reason.
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
        if a.dtype != b.dtype {
            return Err(unsupported(format!(
                "mixed inputs {} x {}",
                a.dtype, b.dtype
            )));
        }
        let compute = match a.dtype {
            DType::Tf32 => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
            DType::Bf16 | DType::F16 | DType::F32 => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
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
        let shape = problem.problem.shape;

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
        let view = |o: &crate::launch::DeviceOperand| {
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
        let first = LtMatrix::new(a.dtype, r1, c1, ld1)?;
        let second = LtMatrix::new(b.dtype, r2, c2, ld2)?;
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
            pointers: [
                if d_row { db.ptr } else { da.ptr },
                if d_row { da.ptr } else { db.ptr },
                c_ptr,
                dd.ptr,
            ],
            // SAFETY: a plain C struct; overwritten by the heuristic below.
            algo: unsafe { std::mem::zeroed() },
            workspace: gpu.alloc(WORKSPACE_BYTES)?,
            alpha: value(&fused.alpha) as f32,
            beta: beta.as_ref().map_or(0.0, value) as f32,
            label: String::new(),
        };
        baseline.set_desc(
            sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
            &op1,
        )?;
        baseline.set_desc(
            sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB,
            &op2,
        )?;

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
            if bias_spec.dtype != d.dtype {
                return Err(unsupported("the bias must have D's dtype"));
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
        // SAFETY: a live preference and a u64 attribute of the documented size.
        let heuristic = unsafe {
            result::set_matmul_pref_attribute(
                pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &workspace_bytes as *const u64 as *const c_void,
                std::mem::size_of::<u64>(),
            )
            .map_err(cublas("cublasLtMatmulPreferenceSetAttribute"))
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
                        unsupported("the heuristic found no algorithm for this problem")
                    } else {
                        cublas("cublasLtMatmulAlgoGetHeuristic")(e)
                    }
                })
            })
        };
        // SAFETY: created above, destroyed once.
        let _ = unsafe { result::destroy_matmul_pref(pref) };
        baseline.algo = heuristic?.algo;
        let trans = |op: i32| if op == OP_N { 'N' } else { 'T' };
        baseline.label = format!(
            "cuBLASLt {}{} {:?}{}",
            trans(op1),
            trans(op2),
            epilogue,
            if d_row { " (as Dᵀ = Bᵀ·Aᵀ)" } else { "" }
        );
        Ok(baseline)
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
        .map_err(cublas("cublasLtMatmulDescSetAttribute"))
    }

    /// How the problem was mapped, e.g. `cuBLASLt TN CUBLASLT_EPILOGUE_GELU_BIAS (as Dᵀ = Bᵀ·Aᵀ)`.
    pub fn label(&self) -> &str {
        &self.label
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
}
