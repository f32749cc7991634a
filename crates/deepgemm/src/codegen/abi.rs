//! The kernel's argument list (the ABI the runtime builds its argument buffer from) and the
//! CUDA C++ that declares and binds it.
//!
//! Order: a pointer per operand in declaration order (scales and D included); the leading
//! dimension of every matrix operand (A, B, C, D) in declaration order; M, N, K; every spec param
//! (f32) in order; the workspace pointer when the plan needs one.

use super::{KernelArg, Workspace};
use crate::dtype::DType;
use crate::spec::{Direction, KernelSpec, Operand, Role, ShapeSym};

/// The C++ element type of a dtype in generated code (the prelude's bit containers).
pub(crate) fn element_type(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 | DType::Tf32 => "float",
        DType::F16 => "dg_f16",
        DType::Bf16 => "dg_bf16",
        DType::E4m3 => "dg_e4m3",
        DType::E5m2 => "dg_e5m2",
        DType::I8 => "dg_i8",
        DType::I32 => "int",
    }
}

/// A user-chosen name made safe as a C++ identifier suffix.
pub(crate) fn ident(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// The kernel parameter that carries an operand's pointer.
pub(crate) fn pointer_name(operand: &Operand) -> String {
    format!("op_{}", ident(&operand.name))
}

pub(crate) fn leading_dim_name(operand: &Operand) -> String {
    format!("ld_{}", ident(&operand.name))
}

pub(crate) fn param_name(name: &str) -> String {
    format!("p_{}", ident(name))
}

pub(crate) fn is_matrix(operand: &Operand) -> bool {
    matches!(operand.role, Role::A | Role::B | Role::C | Role::D)
}

pub(crate) fn kernel_args(spec: &KernelSpec, workspace: &Workspace) -> Vec<KernelArg> {
    let mut args: Vec<KernelArg> = spec
        .operands
        .iter()
        .map(|o| KernelArg::Pointer(o.name.clone()))
        .collect();
    args.extend(
        spec.operands
            .iter()
            .filter(|o| is_matrix(o))
            .map(|o| KernelArg::LeadingDim(o.name.clone())),
    );
    args.extend([ShapeSym::M, ShapeSym::N, ShapeSym::K].map(KernelArg::Extent));
    args.extend(spec.params.iter().map(|p| KernelArg::Param(p.name.clone())));
    if !workspace.is_empty() {
        args.push(KernelArg::Workspace);
    }
    args
}

/// The C++ parameter list for `args`, one parameter per line.
pub(crate) fn cuda_params(spec: &KernelSpec, args: &[KernelArg]) -> String {
    let declare = |arg: &KernelArg| -> String {
        match arg {
            KernelArg::Pointer(name) => {
                let operand = spec
                    .operand(name)
                    .expect("kernel_args names only spec operands");
                let constness = match operand.direction {
                    Direction::Input => "const ",
                    Direction::Output => "",
                };
                format!(
                    "{constness}{}* __restrict__ {}",
                    element_type(operand.dtype),
                    pointer_name(operand)
                )
            }
            KernelArg::LeadingDim(name) => {
                let operand = spec
                    .operand(name)
                    .expect("kernel_args names only spec operands");
                format!("long long {}", leading_dim_name(operand))
            }
            KernelArg::Extent(sym) => format!("int {sym:?}"),
            KernelArg::Param(name) => format!("float {}", param_name(name)),
            KernelArg::Workspace => "void* __restrict__ workspace".to_string(),
            KernelArg::TensorMap(map) => {
                format!("const __grid_constant__ dg_tensor_map {}", map.param)
            }
        }
    };
    let lines: Vec<String> = args.iter().map(|a| format!("    {}", declare(a))).collect();
    format!("\n{}", lines.join(",\n"))
}

/// Binds the ABI names of A, B and D to the names the templates use (gA, lda, ...).
pub(crate) fn bindings(spec: &KernelSpec) -> String {
    let mut out =
        String::from("  // Operands: the kernel's argument names -> the template's names.\n");
    for (operand, short) in [(spec.a(), "A"), (spec.b(), "B"), (spec.d(), "D")] {
        let constness = if short == "D" { "" } else { "const " };
        out += &format!(
            "  {constness}{}* __restrict__ g{short} = {};\n",
            element_type(operand.dtype),
            pointer_name(operand)
        );
    }
    out += &format!(
        "  const long long lda = {}, ldb = {}, ldd = {};",
        leading_dim_name(spec.a()),
        leading_dim_name(spec.b()),
        leading_dim_name(spec.d())
    );
    out
}
