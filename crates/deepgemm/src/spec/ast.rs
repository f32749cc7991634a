//! The syntax tree: what the file says, with spans, before any name is resolved. Semantic
//! analysis (`sema.rs`) turns it into the typed [`super::KernelSpec`].

use super::diag::Span;
use super::types::{BinaryOp, CBinOp, ConstraintOp, Direction};

/// A word as written, with where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Name {
    pub text: String,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct KernelAst {
    pub name: Name,
    pub items: Vec<Item>,
    /// An item failed to parse or the block was not closed: items may be missing because of a
    /// reported syntax error, so semantic analysis does not report missing items again.
    pub incomplete: bool,
}

/// One statement or block inside `kernel NAME { ... }`.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Target(Name),
    /// `hardware "path.yaml";` (the path as written, and the string's span).
    Hardware {
        path: String,
        span: Span,
    },
    Operand(OperandDecl),
    Param(ParamDecl),
    Accumulate(Name),
    Epilogue {
        output: Name,
        expr: AExpr,
    },
    /// The blocks carry the span of their keyword, for "given twice" and "missing" errors.
    Shape(Vec<ShapeItem>, Span),
    Constraints(Vec<ConstraintAst>, Span),
    Tiling(Vec<TilingEntry>, Span),
}

/// `input NAME: dtype[dims] layout? (scale_of X)?;` or `output NAME: f32[dims] amax_of D;`
#[derive(Debug, Clone, PartialEq)]
pub struct OperandDecl {
    pub direction: Direction,
    pub name: Name,
    pub dtype: Name,
    pub dims: Vec<DimAst>,
    /// Span of `[ ... ]`.
    pub dims_span: Span,
    pub layout: Option<Name>,
    pub scale_of: Option<Name>,
    pub amax_of: Option<Name>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DimAst {
    Name(Name),
    Lit(u64, Span),
    /// `K/128`
    Div(Name, u64, Span),
}

/// `param NAME: dtype (= number)?;`
#[derive(Debug, Clone, PartialEq)]
pub struct ParamDecl {
    pub name: Name,
    pub dtype: Name,
    pub default: Option<f64>,
}

/// An epilogue expression.
#[derive(Debug, Clone, PartialEq)]
pub struct AExpr {
    pub kind: AExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AExprKind {
    Number(f64),
    /// A name: `acc`, a param or an input (resolved by sema).
    Var(String),
    Neg(Box<AExpr>),
    Binary(BinaryOp, Box<AExpr>, Box<AExpr>),
    Call(Name, Vec<AExpr>),
    /// `cast<dtype>(x)`
    Cast(Name, Box<AExpr>),
}

/// One line of `shape { ... }`: an extent's values, or `fallback MODE;`.
#[derive(Debug, Clone, PartialEq)]
pub enum ShapeItem {
    Dim(ShapeEntry),
    /// `fallback nearest;`: the mode as written.
    Fallback(Name),
}

/// `M = 4096;`, `M in 1..=256;`, `K in {2048, 4096};`.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapeEntry {
    pub sym: Name,
    pub domain: DomainAst,
    /// Span of the values (for range errors).
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DomainAst {
    Fixed(u64),
    Range { lo: u64, hi: u64 },
    Set(Vec<u64>),
}

/// `lhs op rhs;` in `constraints { ... }`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstraintAst {
    pub lhs: CAst,
    pub op: ConstraintOp,
    pub rhs: CAst,
}

/// A constraint or `where` expression.
#[derive(Debug, Clone, PartialEq)]
pub struct CAst {
    pub kind: CAstKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum CAstKind {
    Number(f64),
    /// An observable, tile variable, flag or backend name (resolved by sema).
    Name(String),
    Neg(Box<CAst>),
    Not(Box<CAst>),
    Bin(CBinOp, Box<CAst>, Box<CAst>),
}

/// One line of `tiling { ... }`.
#[derive(Debug, Clone, PartialEq)]
pub struct TilingEntry {
    pub var: Name,
    pub values: TileValuesAst,
    /// Span of the values (for range errors).
    pub span: Span,
    pub condition: Option<CAst>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TileValuesAst {
    Interval { lo: u64, hi: u64 },
    Set(Vec<u64>),
    Stepped { lo: u64, hi: u64, step: u64 },
}
