//! The spec's epilogue expression and FP8 scales as CUDA C++: a `__device__` lambda
//! `epilogue(acc, m, n) -> float` that every backend calls on each output element inside its
//! bounds check, and `scale_a(m, k)` / `scale_b(k, n)` for the SIMT kernel's dequantization.

use super::abi::{leading_dim_name, param_name, pointer_name};
use super::CodegenError;
use crate::dtype::DType;
use crate::spec::{
    needs_parens, Dim, Expr, Func, KernelSpec, Layout, Operand, Role, ShapeSym, UnaryOp,
};

/// The epilogue as C++ statements for the kernel body (4-space lambda body, 2-space indent).
pub(crate) fn epilogue_code(spec: &KernelSpec) -> Result<String, CodegenError> {
    let mut scalars = Vec::new();
    let body = cxx_expr(spec, &spec.epilogue.expr, &mut scalars)?;
    let mut out = format!(
        "  // Epilogue (the spec's): {} = {}\n",
        spec.epilogue.output,
        dgml_expr(&spec.epilogue.expr)
    );
    for operand in scalars {
        out += &format!(
            "  const float {} = dg_to_float({}[0]);  // scalar input, read once\n",
            scalar_name(operand),
            pointer_name(operand)
        );
    }
    out += &format!(
        "  auto epilogue = [&](float acc, int m, int n) -> float {{\n    return {body};\n  }};\n"
    );
    out += &match spec.amax().and_then(|o| match &o.role {
        Role::Amax { per_row, .. } => Some((o, *per_row)),
        _ => None,
    }) {
        Some((amax, per_row)) => format!(
            "  // `{}`: the largest |value| of {} {} before its rounding (dg_amax).\n  \
             constexpr bool AMAX = true, AMAX_PER_ROW = {per_row};\n  \
             float* const amax_out = {};",
            amax.name,
            if per_row { "each row of" } else { "all of" },
            spec.epilogue.output,
            pointer_name(amax)
        ),
        None => "  // No amax output.\n  constexpr bool AMAX = false, AMAX_PER_ROW = false;\n  \
                 float* const amax_out = nullptr;"
            .to_string(),
    };
    Ok(out)
}

fn scalar_name(operand: &Operand) -> String {
    format!("s_{}", super::abi::ident(&operand.name))
}

/// `child` as an operand of `parent`, parenthesized as the `.dgml` printer would.
fn operand_text(parent: &Expr, child: &Expr, right: bool, text: String) -> String {
    if needs_parens(parent, child, right) {
        format!("({text})")
    } else {
        text
    }
}

/// An f32 literal that reads back as exactly the same f32.
fn float_literal(value: f64) -> String {
    let v = value as f32;
    if v.is_nan() {
        "__uint_as_float(0x7FC00000u)".to_string()
    } else if v.is_infinite() {
        let sign = if v < 0.0 { "-" } else { "" };
        format!("{sign}__uint_as_float(0x7F800000u)")
    } else {
        // Debug prints the shortest text that round-trips, always with a '.' or an exponent.
        format!("{v:?}f")
    }
}

fn cxx_expr<'a>(
    spec: &'a KernelSpec,
    expr: &Expr,
    scalars: &mut Vec<&'a Operand>,
) -> Result<String, CodegenError> {
    Ok(match expr {
        Expr::Acc => "acc".to_string(),
        Expr::Number(v) => float_literal(*v),
        Expr::Var(name) => variable(spec, name, scalars)?,
        Expr::Unary(UnaryOp::Neg, inner) => {
            let text = cxx_expr(spec, inner, scalars)?;
            format!("-{}", operand_text(expr, inner, false, text))
        }
        Expr::Binary(op, lhs, rhs) => {
            let l = cxx_expr(spec, lhs, scalars)?;
            let r = cxx_expr(spec, rhs, scalars)?;
            format!(
                "{} {} {}",
                operand_text(expr, lhs, false, l),
                op.symbol(),
                operand_text(expr, rhs, true, r)
            )
        }
        Expr::Call(func, args) => {
            if args.len() != func.arity() {
                return Err(CodegenError::Epilogue(format!(
                    "{} takes {} argument(s), got {}",
                    func.name(),
                    func.arity(),
                    args.len()
                )));
            }
            let args = args
                .iter()
                .map(|a| cxx_expr(spec, a, scalars))
                .collect::<Result<Vec<_>, _>>()?;
            format!("{}({})", function_name(*func), args.join(", "))
        }
        Expr::Cast(dtype, inner) => {
            let text = cxx_expr(spec, inner, scalars)?;
            match round_function(*dtype) {
                Some(f) => format!("{f}({text})"),
                None => text,
            }
        }
    })
}

fn function_name(func: Func) -> &'static str {
    match func {
        Func::Relu => "dg_relu",
        Func::Gelu => "dg_gelu",
        Func::GeluTanh => "dg_gelu_tanh",
        Func::Silu => "dg_silu",
        Func::Sigmoid => "dg_sigmoid",
        Func::Tanh => "tanhf",
        Func::Min => "fminf",
        Func::Max => "fmaxf",
        Func::Clamp => "dg_clamp",
        Func::Abs => "fabsf",
    }
}

/// `cast<dtype>` rounds through the dtype (none needed for f32).
fn round_function(dtype: DType) -> Option<&'static str> {
    match dtype {
        DType::F32 => None,
        DType::Tf32 => Some("dg_round_tf32"),
        DType::F16 => Some("dg_round_f16"),
        DType::Bf16 => Some("dg_round_bf16"),
        DType::E4m3 => Some("dg_round_e4m3"),
        DType::E5m2 => Some("dg_round_e5m2"),
        DType::I8 => Some("dg_round_i8"),
        DType::I32 => Some("dg_round_i32"),
    }
}

fn variable<'a>(
    spec: &'a KernelSpec,
    name: &str,
    scalars: &mut Vec<&'a Operand>,
) -> Result<String, CodegenError> {
    if spec.params.iter().any(|p| p.name == name) {
        return Ok(param_name(name));
    }
    let operand = spec.operand(name).ok_or_else(|| {
        CodegenError::Epilogue(format!("`{name}` is neither a param nor an operand"))
    })?;
    let ptr = pointer_name(operand);
    Ok(match &operand.role {
        Role::C => {
            let ld = leading_dim_name(operand);
            let offset = match operand.layout {
                Layout::Row => format!("(long long)m * {ld} + n"),
                Layout::Col => format!("(long long)n * {ld} + m"),
            };
            format!("dg_to_float({ptr}[{offset}])")
        }
        Role::RowVector => format!("dg_to_float({ptr}[m])"),
        Role::ColVector => format!("dg_to_float({ptr}[n])"),
        Role::Scalar => {
            if !scalars.iter().any(|s| s.name == operand.name) {
                scalars.push(operand);
            }
            scalar_name(operand)
        }
        Role::A | Role::B | Role::D | Role::Scale { .. } | Role::Amax { .. } => {
            return Err(CodegenError::Epilogue(format!(
                "the epilogue cannot read operand `{name}` (only acc, params, C, vectors and scalars)"
            )))
        }
    })
}

/// Whether `expr` reads a tensor at the element's coordinates (C or a vector); params and scalar
/// inputs are read once, before the epilogue.
fn reads_at_element(spec: &KernelSpec, expr: &Expr) -> bool {
    match expr {
        Expr::Acc | Expr::Number(_) => false,
        // Every role named, so that a new one is decided here as in `variable`.
        Expr::Var(name) => spec.operand(name).is_some_and(|o| match o.role {
            Role::C | Role::RowVector | Role::ColVector => true,
            // Read once, before the epilogue.
            Role::Scalar => false,
            // Not readable by the epilogue (`variable` refuses them).
            Role::A | Role::B | Role::D | Role::Scale { .. } | Role::Amax { .. } => false,
        }),
        Expr::Unary(_, inner) | Expr::Cast(_, inner) => reads_at_element(spec, inner),
        Expr::Binary(_, lhs, rhs) => reads_at_element(spec, lhs) || reads_at_element(spec, rhs),
        Expr::Call(_, args) => args.iter().any(|a| reads_at_element(spec, a)),
    }
}

/// The expression in `.dgml` syntax, for comments: the spec's one printer.
pub(crate) fn dgml_expr(expr: &Expr) -> String {
    expr.to_string()
}

/// Scale tensors of operand `of` (A or B) in declaration order.
pub(crate) fn scales_of<'a>(spec: &'a KernelSpec, of: &Operand) -> Vec<&'a Operand> {
    spec.operands
        .iter()
        .filter(|o| matches!(&o.role, Role::Scale { of: target, .. } if *target == of.name))
        .collect()
}

/// The scaled operands as the scale lambdas see them: A and B, the suffix of their lambdas'
/// names, the lambdas' parameters and the symbols a scale of each may be indexed by.
fn scaled_operands(
    spec: &KernelSpec,
) -> [(&Operand, &'static str, &'static str, [ShapeSym; 2]); 2] {
    [
        (spec.a(), "a", "int m, int k", [ShapeSym::M, ShapeSym::K]),
        (spec.b(), "b", "int k, int n", [ShapeSym::K, ShapeSym::N]),
    ]
}

/// `scale_a(m, k)` and `scale_b(k, n)`: the product of the operand's scale tensors at one
/// element (1 when it has none).
pub(crate) fn scale_code(spec: &KernelSpec) -> Result<String, CodegenError> {
    let mut out = String::new();
    for (operand, suffix, params, allowed) in scaled_operands(spec) {
        let lambda = format!("scale_{suffix}");
        let factors = scales_of(spec, operand)
            .into_iter()
            .map(|s| scale_element(s, &allowed).map(|e| format!("dg_to_float({e})")))
            .collect::<Result<Vec<_>, _>>()?;
        let body = if factors.is_empty() {
            "1.0f".to_string()
        } else {
            factors.join(" * ")
        };
        out += &format!(
            "  auto {lambda} = [&]({params}) -> float {{ return {body}; }};  // {} scales\n",
            operand.name
        );
    }
    out.pop();
    Ok(out)
}

/// FP8 scales as the sm90 kernel applies them, split by what they vary with: a K-block scale
/// (`[M, K/128]` of A, `[N/128, K/128]` of B) multiplies each k-tile's partial sums when they are
/// promoted into the f32 accumulators, so it must be constant over a k-tile of `tile_k`
/// elements; the other scales (per tensor, per row, per column) do not depend on K and multiply
/// the finished sum once, in the epilogue. For C++ this is:
/// - `outer_scale(acc, m, n)`: the finished sum times the K-independent scales;
/// - `block_scale_a(m, k)` / `block_scale_b(k, n)`: the K-block scales at an element of the
///   k-tile (1 when there are none);
/// - `block_scale_a_at(m, k)` / `block_scale_b_at(k, n)`: the address of that scale when it is
///   one tensor (which the kernel may copy ahead into shared memory), else null;
/// - `ELEMENT_READS`: whether `epilogue(acc, m, n)` or `outer_scale(acc, m, n)` reads memory at
///   (m, n) (C, a vector, a per-row or per-column scale), so that it must not be evaluated
///   outside D; otherwise the kernel may evaluate it anywhere and skip the bounds tests.
pub(crate) fn split_scale_code(spec: &KernelSpec, tile_k: u32) -> Result<String, CodegenError> {
    let mut out = String::from(
        "  // FP8 scales (codegen::epilogue::split_scale_code): K-block scales multiply each \
         k-tile's\n  // partial sums as they are promoted; the others multiply the finished sum.\n",
    );
    let mut hoisted = Vec::new();
    let mut outer = Vec::new();
    let mut element_reads = reads_at_element(spec, &spec.epilogue.expr);
    for (operand, suffix, params, allowed) in scaled_operands(spec) {
        let lambda = format!("block_scale_{suffix}");
        let mut block = Vec::new();
        let mut block_elements = Vec::new();
        for scale in scales_of(spec, operand) {
            let element = scale_element(scale, &allowed)?;
            let factor = format!("dg_to_float({element})");
            let k_block = scale.dims.iter().find_map(|d| match d {
                Dim::CeilDiv(ShapeSym::K, b) => Some(*b),
                _ => None,
            });
            match k_block {
                Some(b) if b % u64::from(tile_k) == 0 => {
                    block.push(factor);
                    block_elements.push(element);
                }
                Some(b) => {
                    return Err(CodegenError::Epilogue(format!(
                        "scale tensor `{}` changes every {b} elements of K, inside a k-tile of \
                         {tile_k}",
                        scale.name
                    )))
                }
                None if scale.dims.is_empty() => {
                    let name = format!("{}_scale", super::abi::ident(&scale.name));
                    hoisted.push(format!(
                        "  const float {name} = {factor};  // per-tensor scale, read once\n"
                    ));
                    outer.push(name);
                }
                None => {
                    outer.push(factor);
                    element_reads = true;
                }
            }
        }
        let body = if block.is_empty() {
            "1.0f".to_string()
        } else {
            block.join(" * ")
        };
        out += &format!(
            "  auto {lambda} = [&]({params}) -> float {{ return {body}; }};  // {} K-block \
             scales\n",
            operand.name
        );
        let (address, why) = match block_elements.as_slice() {
            [one] => (format!("&{one}"), "where the kernel stages it from"),
            _ => (
                "nullptr".to_string(),
                "not one tensor: the kernel does not stage it",
            ),
        };
        out += &format!(
            "  auto {lambda}_at = [&]({params}) -> const void* {{ return {address}; }};  // {why}\n"
        );
    }
    for line in hoisted {
        out += &line;
    }
    let body = std::iter::once("acc".to_string())
        .chain(outer)
        .collect::<Vec<_>>()
        .join(" * ");
    out += &format!(
        "  auto outer_scale = [&](float acc, int m, int n) -> float {{ return {body}; }};\n"
    );
    out += &format!(
        "  constexpr bool ELEMENT_READS = {element_reads};  // epilogue or outer_scale reads at (m, n)"
    );
    Ok(out)
}

/// One scale tensor read at the element's coordinates: each dim maps to a coordinate (`m`,
/// `k / 128`, ...) and the tensor is dense in its declared layout.
/// The element `pointer[index]` of one scale tensor at the coordinates of an element of the
/// product.
fn scale_element(scale: &Operand, allowed: &[ShapeSym; 2]) -> Result<String, CodegenError> {
    let unsupported =
        |why: String| CodegenError::Epilogue(format!("scale tensor `{}`: {why}", scale.name));
    let mut coords = Vec::new();
    let mut extents = Vec::new();
    for dim in &scale.dims {
        let (sym, block) = match dim {
            Dim::Sym(s) => (*s, 1),
            Dim::CeilDiv(s, b) if *b > 0 => (*s, *b),
            Dim::Lit(1) => {
                coords.push("0".to_string());
                extents.push("1".to_string());
                continue;
            }
            other => return Err(unsupported(format!("unsupported dimension {other:?}"))),
        };
        if !allowed.contains(&sym) {
            return Err(unsupported(format!(
                "dimension {sym:?} does not index its operand"
            )));
        }
        let coord = format!("{sym:?}").to_lowercase();
        if block == 1 {
            coords.push(coord);
            extents.push(format!("{sym:?}"));
        } else {
            coords.push(format!("({coord} / {block})"));
            extents.push(format!("(({sym:?} + {}) / {block})", block - 1));
        }
    }
    // Row-major: the last dim is contiguous; col-major: the first.
    if scale.layout == Layout::Col {
        coords.reverse();
        extents.reverse();
    }
    let mut index = coords.first().cloned().unwrap_or_else(|| "0".to_string());
    for i in 1..coords.len() {
        let lhs = if i == 1 {
            format!("(long long){index}")
        } else {
            format!("({index})")
        };
        index = format!("{lhs} * {} + {}", extents[i], coords[i]);
    }
    Ok(format!("{}[{index}]", pointer_name(scale)))
}
