//! Printing a checked spec: [`to_dgml`] writes canonical `.dgml` (parsing it gives the same
//! [`SpecFile`] back), [`summary`] the normalized one-screen view `deepgemm check` prints.
//!
//! Expressions are printed with the fewest parentheses that keep their tree: a child is
//! parenthesized when it binds more loosely than its parent, or as loosely on the right of a
//! left-associative operator (`a - (b - c)`).

use super::types::*;
use crate::plan::ShapeBucket;
use serde::Serialize;
use std::fmt::{self, Write};

/// `.dgml` syntax, as in [`to_dgml`].
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&expr(self))
    }
}

/// `.dgml` syntax, as in [`to_dgml`].
impl fmt::Display for CExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&cexpr(self))
    }
}

/// `.dgml` syntax without the `;`: `TILE_N in {64, 128}`, `TILE_M in [64, 256] where ...`.
impl fmt::Display for TilingDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&tiling_domain(self))
    }
}

/// Canonical `.dgml` text of a whole file.
pub fn to_dgml(file: &SpecFile) -> String {
    file.kernels
        .iter()
        .map(kernel_dgml)
        .collect::<Vec<_>>()
        .join("\n")
}

fn kernel_dgml(k: &KernelSpec) -> String {
    let mut out = format!("kernel {} {{\n", k.name);
    match &k.target {
        TargetRef::Preset(name) => out += &format!("  target {name};\n"),
        TargetRef::File(path) => out += &format!("  hardware \"{path}\";\n"),
    }
    out += "\n";
    for op in &k.operands {
        out += &format!("  {};\n", operand_decl(op));
    }
    for p in &k.params {
        out += &format!("  {};\n", param_decl(p));
    }
    out += &format!("  accumulate {};\n", k.accumulate);
    out += &format!(
        "\n  epilogue {} = {};\n",
        k.epilogue.output,
        expr(&k.epilogue.expr)
    );
    out += "\n  shape {\n";
    for (sym, domain) in [("M", &k.shape.m), ("N", &k.shape.n), ("K", &k.shape.k)] {
        out += &format!("    {};\n", dim_domain(sym, domain));
    }
    if k.shape.fallback == ShapeFallback::Nearest {
        out += "    fallback nearest;\n";
    }
    out += "  }\n";
    if !k.constraints.is_empty() {
        out += "\n  constraints {\n";
        for c in &k.constraints {
            out += &format!("    {};\n", c.text);
        }
        out += "  }\n";
    }
    if !k.tiling.is_empty() {
        out += "\n  tiling {\n";
        for t in &k.tiling {
            out += &format!("    {};\n", tiling_domain(t));
        }
        out += "  }\n";
    }
    out += "}\n";
    out
}

/// `input A: bf16[M, K] row` (no `;`). Layouts are written for matrices only.
fn operand_decl(op: &Operand) -> String {
    let direction = match op.direction {
        Direction::Input => "input",
        Direction::Output => "output",
    };
    let mut s = format!("{direction} {}: {}{}", op.name, op.dtype, dims(&op.dims));
    if op.dims.len() == 2 {
        s += match op.layout {
            Layout::Row => " row",
            Layout::Col => " col",
        };
    }
    match &op.role {
        Role::Scale { of, .. } => s += &format!(" scale_of {of}"),
        Role::Amax { of, .. } => s += &format!(" amax_of {of}"),
        _ => {}
    }
    s
}

fn param_decl(p: &Param) -> String {
    format!("param {}", param_text(p))
}

/// `alpha: f32 = 1`
fn param_text(p: &Param) -> String {
    match p.default {
        Some(v) => format!("{}: {} = {}", p.name, p.dtype, number(v)),
        None => format!("{}: {}", p.name, p.dtype),
    }
}

/// `[M, K/128]`
pub fn dims(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims.iter().map(dim).collect();
    format!("[{}]", parts.join(", "))
}

fn dim(d: &Dim) -> String {
    match d {
        Dim::Sym(s) => sym(*s).to_string(),
        Dim::Lit(v) => v.to_string(),
        Dim::CeilDiv(s, block) => format!("{}/{block}", sym(*s)),
    }
}

fn sym(s: ShapeSym) -> &'static str {
    match s {
        ShapeSym::M => "M",
        ShapeSym::N => "N",
        ShapeSym::K => "K",
    }
}

/// A declared shape as one line, e.g. `M in 1..=256, N = 6144, K = 4096`.
pub fn shape_text(shape: &ShapeSpec) -> String {
    format!(
        "{}, {}, {}",
        dim_domain("M", &shape.m),
        dim_domain("N", &shape.n),
        dim_domain("K", &shape.k)
    )
}

fn dim_domain(sym: &str, d: &DimDomain) -> String {
    match d {
        DimDomain::Fixed(v) => format!("{sym} = {v}"),
        DimDomain::Range { lo, hi } => format!("{sym} in {lo}..={hi}"),
        DimDomain::Set(values) => format!("{sym} in {}", int_set(values)),
    }
}

fn int_set(values: &[u64]) -> String {
    let parts: Vec<String> = values.iter().map(u64::to_string).collect();
    format!("{{{}}}", parts.join(", "))
}

fn tiling_domain(t: &TilingDomain) -> String {
    let values = match &t.values {
        TileValues::Interval { lo, hi } => format!("[{lo}, {hi}]"),
        TileValues::Set(values) => int_set(values),
        TileValues::Stepped { lo, hi, step: 1 } => format!("{lo}..={hi}"),
        TileValues::Stepped { lo, hi, step } => format!("{lo}..={hi} step {step}"),
    };
    match &t.condition {
        Some(c) => format!("{} in {values} where {}", t.var.name(), cexpr(c)),
        None => format!("{} in {values}", t.var.name()),
    }
}

/// A number as the lexer reads it back: Rust's shortest round-trip form, never an exponent.
fn number(v: f64) -> String {
    format!("{v}")
}

// ---- epilogue expressions -----------------------------------------------------------------

/// Binding strength: sums 1, products 2, negation 3, atoms 4.
fn expr_prec(e: &Expr) -> u8 {
    match e {
        Expr::Binary(BinaryOp::Add | BinaryOp::Sub, ..) => 1,
        Expr::Binary(BinaryOp::Mul | BinaryOp::Div, ..) => 2,
        Expr::Unary(..) => 3,
        Expr::Number(v) if *v < 0.0 => 3,
        _ => 4,
    }
}

/// Whether `child`, an operand of `parent` (its right operand when `right`), is printed in
/// parentheses. `.dgml` and CUDA C++ (codegen) share the rule: `-(-x)` rather than `--x`, which
/// C++ reads as a decrement.
pub(crate) fn needs_parens(parent: &Expr, child: &Expr, right: bool) -> bool {
    let (p, c) = (expr_prec(parent), expr_prec(child));
    match parent {
        Expr::Unary(..) => c <= p,
        _ => c < p || (right && c == p),
    }
}

/// An epilogue expression in `.dgml` syntax.
pub fn expr(e: &Expr) -> String {
    let wrap = |child: &Expr, right: bool| {
        if needs_parens(e, child, right) {
            format!("({})", expr(child))
        } else {
            expr(child)
        }
    };
    match e {
        Expr::Acc => "acc".to_string(),
        Expr::Number(v) => number(*v),
        Expr::Var(name) => name.clone(),
        Expr::Unary(UnaryOp::Neg, x) => format!("-{}", wrap(x, false)),
        Expr::Binary(op, l, r) => {
            format!("{} {} {}", wrap(l, false), op.symbol(), wrap(r, true))
        }
        Expr::Call(f, args) => {
            let args: Vec<String> = args.iter().map(expr).collect();
            format!("{}({})", f.name(), args.join(", "))
        }
        Expr::Cast(dtype, x) => format!("cast<{dtype}>({})", expr(x)),
    }
}

// ---- constraint expressions ---------------------------------------------------------------

/// Binding strength following the grammar in `parser.rs`: `||` 1, `&&` 2, comparisons and `!`
/// 3 (`!` applies to a whole comparison), sums 4, products 5, negation 6, atoms 7.
fn cprec(e: &CExpr) -> u8 {
    match e {
        CExpr::Bin(op, ..) => match op {
            CBinOp::Or => 1,
            CBinOp::And => 2,
            CBinOp::Lt | CBinOp::Le | CBinOp::Gt | CBinOp::Ge | CBinOp::Eq | CBinOp::Ne => 3,
            CBinOp::Add | CBinOp::Sub => 4,
            CBinOp::Mul | CBinOp::Div | CBinOp::Mod => 5,
        },
        CExpr::Not(_) => 3,
        CExpr::Neg(_) => 6,
        CExpr::Number(v) if *v < 0.0 => 6,
        _ => 7,
    }
}

/// A constraint or condition expression in `.dgml` syntax.
pub fn cexpr(e: &CExpr) -> String {
    let wrap = |child: &CExpr, parens: bool| {
        if parens {
            format!("({})", cexpr(child))
        } else {
            cexpr(child)
        }
    };
    match e {
        CExpr::Number(v) => number(*v),
        CExpr::Observable(o) => o.name().to_string(),
        CExpr::TileVar(v) => v.name().to_string(),
        CExpr::Backend(b) => b.name().to_string(),
        CExpr::Neg(x) => format!("-{}", wrap(x, cprec(x) <= 6)),
        // `!(a < b)` rather than the equivalent `!a < b` (`!` binds looser than comparisons).
        CExpr::Not(x) => format!(
            "!{}",
            wrap(x, !matches!(**x, CExpr::Not(_)) && cprec(x) < 7)
        ),
        CExpr::Bin(op, l, r) => {
            let p = cprec(e);
            let (left_parens, right_parens) = if p == 3 {
                // Comparisons do not chain: both sides are sums or tighter.
                (cprec(l) <= 3, cprec(r) <= 3)
            } else {
                (cprec(l) < p, cprec(r) <= p)
            };
            format!(
                "{} {} {}",
                wrap(l, left_parens),
                op.symbol(),
                wrap(r, right_parens)
            )
        }
    }
}

/// `lhs op rhs` of a constraint, with byte counts compared to `smem` / `dram_bytes` written
/// in KiB or MiB when they are whole (`smem <= 200 KiB`).
pub fn constraint_text(lhs: &CExpr, op: ConstraintOp, rhs: &CExpr) -> String {
    let is_bytes = |e: &CExpr| {
        matches!(
            e,
            CExpr::Observable(Observable::Smem | Observable::DramBytes)
        )
    };
    let side = |e: &CExpr, other: &CExpr| match e {
        CExpr::Number(v) if is_bytes(other) => size(*v),
        _ if cprec(e) < 4 => format!("({})", cexpr(e)),
        _ => cexpr(e),
    };
    format!("{} {} {}", side(lhs, rhs), op.symbol(), side(rhs, lhs))
}

/// A byte count as `N MiB` / `N KiB` when exact, else plain.
fn size(bytes: f64) -> String {
    const MIB: f64 = 1048576.0;
    const KIB: f64 = 1024.0;
    if bytes >= MIB && bytes % MIB == 0.0 {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes % KIB == 0.0 {
        format!("{} KiB", bytes / KIB)
    } else {
        number(bytes)
    }
}

// ---- summary ------------------------------------------------------------------------------

/// Most shape buckets listed one by one in a summary; the rest are counted.
const BUCKETS_SHOWN: usize = 12;

/// The normalized summary `deepgemm check` prints for one kernel.
pub fn summary(k: &KernelSpec) -> String {
    let mut out = String::new();
    let hw = &k.hardware;
    let target = match &k.target {
        TargetRef::Preset(name) => name.clone(),
        TargetRef::File(path) => format!("hardware \"{path}\""),
    };
    let _ = writeln!(out, "kernel {}", k.name);
    let _ = writeln!(
        out,
        "  target       {target} ({}, {}, {} SMs)",
        hw.name, hw.arch, hw.sms
    );
    let _ = writeln!(out, "  operands");
    let decls: Vec<String> = k
        .operands
        .iter()
        .map(|op| format!("{}{}", op.dtype, dims(&op.dims)))
        .collect();
    let name_width = k.operands.iter().map(|o| o.name.len()).max().unwrap_or(0);
    let decl_width = decls.iter().map(String::len).max().unwrap_or(0);
    for (op, decl) in k.operands.iter().zip(&decls) {
        let direction = match op.direction {
            Direction::Input => "input ",
            Direction::Output => "output",
        };
        let layout = match (op.dims.len(), op.layout) {
            (2, Layout::Row) => "row",
            (2, Layout::Col) => "col",
            _ => "   ",
        };
        let line = format!(
            "    {:name_width$}  {direction}  {decl:decl_width$}  {layout}  {}",
            op.name,
            role_text(&op.role)
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    if !k.params.is_empty() {
        let params: Vec<String> = k.params.iter().map(param_text).collect();
        let _ = writeln!(out, "  params       {}", params.join(", "));
    }
    let _ = writeln!(out, "  accumulate   {}", k.accumulate);
    let _ = writeln!(
        out,
        "  epilogue     {} = {}",
        k.epilogue.output,
        expr(&k.epilogue.expr)
    );
    let _ = writeln!(
        out,
        "  shape        {}, {}, {}{}",
        dim_domain("M", &k.shape.m),
        dim_domain("N", &k.shape.n),
        dim_domain("K", &k.shape.k),
        match k.shape.fallback {
            ShapeFallback::Nearest => "; other shapes: the nearest bucket's variant",
            ShapeFallback::None => "",
        }
    );
    let buckets = ShapeBucket::split(&k.shape);
    let _ = writeln!(out, "  buckets      {}", buckets.len());
    for b in buckets.iter().take(BUCKETS_SHOWN) {
        let _ = writeln!(
            out,
            "    M {:<12} N {:<12} K {}",
            range(b.m),
            range(b.n),
            range(b.k)
        );
    }
    if buckets.len() > BUCKETS_SHOWN {
        let _ = writeln!(out, "    ... and {} more", buckets.len() - BUCKETS_SHOWN);
    }
    let mut label = "constraints";
    for c in &k.constraints {
        let _ = writeln!(out, "  {label:<11}  {}  ({})", c.text, constraint_kind(c));
        label = "";
    }
    let mut label = "tiling";
    for t in &k.tiling {
        let _ = writeln!(out, "  {label:<11}  {}", tiling_domain(t));
        label = "";
    }
    out
}

/// The normalized summary as data: what `deepgemm check --json` prints for one kernel, the same
/// facts as [`summary`] with every shape bucket listed (a program has no screen to fill).
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub kernel: String,
    /// As written: `h200`, `hopper`, `hardware "my_gpu.yaml"`.
    pub target: String,
    pub hardware: String,
    pub arch: String,
    pub sms: u32,
    pub operands: Vec<OperandSummary>,
    /// `alpha: f32 = 1`, as declared.
    pub params: Vec<String>,
    pub accumulate: String,
    /// `D = ...`, the default epilogue written out.
    pub epilogue: String,
    /// `M in 1..=256`, `N = 4096`, `K = 4096`.
    pub shape: [String; 3],
    /// What serves a shape outside the buckets: `none` (an error) or `nearest`.
    pub fallback: ShapeFallback,
    pub buckets: Vec<ShapeBucket>,
    pub constraints: Vec<ConstraintSummary>,
    pub tiling: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct OperandSummary {
    pub name: String,
    pub direction: Direction,
    pub dtype: String,
    /// `[M, K/128]`.
    pub dims: String,
    /// `row` or `col`; none for vectors and scalars, which have no layout.
    pub layout: Option<Layout>,
    /// The inferred role, in words (`A`, `scale of A (1x128 blocks)`).
    pub role: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConstraintSummary {
    pub text: String,
    /// `hard` (`<=`, `>=`, `==`) or `soft` (`~`).
    pub kind: &'static str,
}

/// [`Summary`] of one kernel.
pub fn summary_record(k: &KernelSpec) -> Summary {
    let hw = &k.hardware;
    let target = match &k.target {
        TargetRef::Preset(name) => name.clone(),
        TargetRef::File(path) => format!("hardware \"{path}\""),
    };
    Summary {
        kernel: k.name.clone(),
        target,
        hardware: hw.name.clone(),
        arch: hw.arch.clone(),
        sms: hw.sms,
        operands: k
            .operands
            .iter()
            .map(|op| OperandSummary {
                name: op.name.clone(),
                direction: op.direction,
                dtype: op.dtype.to_string(),
                dims: dims(&op.dims),
                layout: (op.dims.len() == 2).then_some(op.layout),
                role: role_text(&op.role),
            })
            .collect(),
        params: k.params.iter().map(param_text).collect(),
        accumulate: k.accumulate.to_string(),
        epilogue: format!("{} = {}", k.epilogue.output, expr(&k.epilogue.expr)),
        shape: [
            dim_domain("M", &k.shape.m),
            dim_domain("N", &k.shape.n),
            dim_domain("K", &k.shape.k),
        ],
        fallback: k.shape.fallback,
        buckets: ShapeBucket::split(&k.shape),
        constraints: k
            .constraints
            .iter()
            .map(|c| ConstraintSummary {
                text: c.text.clone(),
                kind: constraint_kind(c),
            })
            .collect(),
        tiling: k.tiling.iter().map(tiling_domain).collect(),
    }
}

fn constraint_kind(c: &Constraint) -> &'static str {
    if c.op == ConstraintOp::Near {
        "soft"
    } else {
        "hard"
    }
}

fn range((lo, hi): (u64, u64)) -> String {
    if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}..={hi}")
    }
}

fn role_text(role: &Role) -> String {
    match role {
        Role::A => "A".to_string(),
        Role::B => "B".to_string(),
        Role::C => "C (read by the epilogue)".to_string(),
        Role::D => "D (output)".to_string(),
        Role::RowVector => "row vector (one per row, broadcast along N)".to_string(),
        Role::ColVector => "column vector (one per column, broadcast along M)".to_string(),
        Role::Scalar => "scalar".to_string(),
        Role::Scale { of, granularity } => {
            let g = match granularity {
                ScaleGranularity::PerTensor => "per tensor",
                ScaleGranularity::PerRow => "per row",
                ScaleGranularity::PerCol => "per column",
                ScaleGranularity::Block1x128 => "1x128 blocks",
                ScaleGranularity::Block128x128 => "128x128 blocks",
            };
            format!("scale of {of} ({g})")
        }
        Role::Amax { of, per_row } => {
            format!(
                "amax of {of} ({})",
                if *per_row { "per row" } else { "per tensor" }
            )
        }
    }
}
