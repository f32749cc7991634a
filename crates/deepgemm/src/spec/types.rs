//! The typed `Spec`: what semantic analysis produces from a `.dgml` file and what every later
//! stage (model, search, codegen, verification, runtime) reads. Plain data, serializable.

use crate::dtype::DType;
use crate::hw::Hardware;
use serde::{Deserialize, Serialize};

/// Everything one `.dgml` file declares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpecFile {
    pub kernels: Vec<KernelSpec>,
}

/// One `kernel NAME { ... }` block after semantic analysis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelSpec {
    pub name: String,
    /// How the target was named (`h200`, `hardware "x.yaml"`), for reports and round trips.
    pub target: TargetRef,
    /// The resolved hardware model the kernel is planned for.
    pub hardware: Hardware,
    /// Operands in declaration order.
    pub operands: Vec<Operand>,
    pub params: Vec<Param>,
    /// The accumulator type (`accumulate f32;`), defaulting to f32 for float inputs, i32 for i8.
    pub accumulate: DType,
    pub epilogue: Epilogue,
    pub shape: ShapeSpec,
    pub constraints: Vec<Constraint>,
    pub tiling: Vec<TilingDomain>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum TargetRef {
    /// A built-in preset, by the name the user wrote (aliases kept as written).
    Preset(String),
    /// `hardware "path.yaml"`, as written (relative to the spec file).
    File(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Input,
    Output,
}

/// Memory order of a matrix operand: `row` = the last dim is contiguous.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    Row,
    Col,
}

impl Layout {
    /// The other order: what a matrix in this layout is, read transposed.
    pub fn transposed(self) -> Layout {
        match self {
            Layout::Row => Layout::Col,
            Layout::Col => Layout::Row,
        }
    }
}

/// A dimension of an operand: a shape symbol, a literal, or a symbol divided by a block size
/// (scale tensors: `K/128`, rounded up).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dim {
    Sym(ShapeSym),
    Lit(u64),
    CeilDiv(ShapeSym, u64),
}

/// The three GEMM extents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ShapeSym {
    M,
    N,
    K,
}

/// What an operand is to the GEMM `D = epilogue(A·B, ...)`, inferred from its dims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Role {
    /// [M, K]
    A,
    /// [K, N]
    B,
    /// [M, N] input used by the epilogue (`beta * C`).
    C,
    /// [M, N] output.
    D,
    /// [M]: broadcast along N (one value per row).
    RowVector,
    /// [N]: broadcast along M (one value per column).
    ColVector,
    /// `f32[]`: a runtime scalar tensor.
    Scalar,
    /// An FP8 scale tensor of operand `of` with the given granularity.
    Scale {
        of: String,
        granularity: ScaleGranularity,
    },
    /// An output holding the largest |value| the epilogue computed for output `of` (before its
    /// rounding to `of`'s dtype), over the whole tensor or per row: what the next FP8 layer
    /// derives its scale from.
    Amax { of: String, per_row: bool },
}

/// How finely an FP8 scale tensor covers its operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScaleGranularity {
    /// `f32[]`: one scale for the whole tensor.
    PerTensor,
    /// `f32[M]` for A / `f32[N]` for B: one per row of the output.
    PerRow,
    /// `f32[N]` for B / `f32[M]` for A's transpose: one per column of the output.
    PerCol,
    /// `[M, K/128]` for A: one per row and 128-wide K block (DeepSeek's 1x128).
    Block1x128,
    /// `[N/128, K/128]` for B: one per 128x128 block.
    Block128x128,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Operand {
    pub name: String,
    pub direction: Direction,
    pub dtype: DType,
    pub dims: Vec<Dim>,
    /// `row` unless written; meaningless for vectors and scalars.
    pub layout: Layout,
    pub role: Role,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    pub dtype: DType,
    pub default: Option<f64>,
}

/// `epilogue D = expr;`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Epilogue {
    /// The output operand written.
    pub output: String,
    pub expr: Expr,
}

/// The epilogue expression language.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expr {
    /// The accumulator value at (m, n).
    Acc,
    Number(f64),
    /// A param, a scalar input, a vector input (broadcast) or C (at (m, n)).
    Var(String),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    Call(Func, Vec<Expr>),
    Cast(DType, Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnaryOp {
    Neg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
}

impl BinaryOp {
    /// The operator as `.dgml` and CUDA C++ both write it.
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
        }
    }
}

/// Built-in epilogue functions (`cast<dtype>` is `Expr::Cast`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Func {
    Relu,
    Gelu,
    GeluTanh,
    Silu,
    Sigmoid,
    Tanh,
    Min,
    Max,
    Clamp,
    Abs,
}

impl Func {
    pub const ALL: [Func; 10] = [
        Func::Relu,
        Func::Gelu,
        Func::GeluTanh,
        Func::Silu,
        Func::Sigmoid,
        Func::Tanh,
        Func::Min,
        Func::Max,
        Func::Clamp,
        Func::Abs,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Func::Relu => "relu",
            Func::Gelu => "gelu",
            Func::GeluTanh => "gelu_tanh",
            Func::Silu => "silu",
            Func::Sigmoid => "sigmoid",
            Func::Tanh => "tanh",
            Func::Min => "min",
            Func::Max => "max",
            Func::Clamp => "clamp",
            Func::Abs => "abs",
        }
    }

    /// Number of arguments the function takes.
    pub fn arity(self) -> usize {
        match self {
            Func::Min | Func::Max => 2,
            Func::Clamp => 3,
            _ => 1,
        }
    }
}

/// The declared values of one GEMM extent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DimDomain {
    Fixed(u64),
    /// Inclusive range `lo..=hi`, lo >= 1, lo <= hi.
    Range {
        lo: u64,
        hi: u64,
    },
    /// A non-empty sorted set of distinct values.
    Set(Vec<u64>),
}

impl DimDomain {
    /// The declared value nearest `v`: `v` itself when declared, else a range's end or a set's
    /// nearest member (the larger on a tie, as a kernel planned for more work handles less
    /// with the smaller waste).
    pub fn nearest(&self, v: u64) -> u64 {
        match self {
            DimDomain::Fixed(fixed) => *fixed,
            DimDomain::Range { lo, hi } => v.clamp(*lo, *hi),
            DimDomain::Set(values) => {
                let above = values.partition_point(|&x| x < v);
                match (above.checked_sub(1).map(|i| values[i]), values.get(above)) {
                    (Some(below), Some(&up)) if v - below < up - v => below,
                    (_, Some(&up)) => up,
                    (Some(below), None) => below,
                    (None, None) => v,
                }
            }
        }
    }

    pub fn min(&self) -> u64 {
        match self {
            DimDomain::Fixed(v) => *v,
            DimDomain::Range { lo, .. } => *lo,
            DimDomain::Set(v) => v[0],
        }
    }

    pub fn max(&self) -> u64 {
        match self {
            DimDomain::Fixed(v) => *v,
            DimDomain::Range { hi, .. } => *hi,
            DimDomain::Set(v) => *v.last().expect("sets are non-empty by construction"),
        }
    }

    pub fn contains(&self, x: u64) -> bool {
        match self {
            DimDomain::Fixed(v) => *v == x,
            DimDomain::Range { lo, hi } => (*lo..=*hi).contains(&x),
            DimDomain::Set(v) => v.binary_search(&x).is_ok(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShapeSpec {
    pub m: DimDomain,
    pub n: DimDomain,
    pub k: DimDomain,
    /// What serves a shape outside every bucket (`fallback nearest;`). Left out of the JSON when
    /// there is none, so that the specs that predate it keep their hash.
    #[serde(default, skip_serializing_if = "ShapeFallback::is_none")]
    pub fallback: ShapeFallback,
}

/// What serves a shape outside the declared ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShapeFallback {
    /// Nothing: such a shape is an error that quotes the declared range.
    #[default]
    None,
    /// The variant of the nearest bucket: each extent clamped into its declared domain (a set's
    /// nearest member, the larger on a tie). Every variant takes its extents at run time, so the
    /// result is exact; the speed is that of a plan made for another shape.
    Nearest,
}

impl ShapeFallback {
    pub fn is_none(&self) -> bool {
        *self == ShapeFallback::None
    }
}

impl ShapeSpec {
    /// Exactly `shape`, nothing else (what `bench` and `tune` plan for one measured shape).
    pub fn fixed(shape: crate::plan::Shape) -> ShapeSpec {
        ShapeSpec {
            m: DimDomain::Fixed(shape.m),
            n: DimDomain::Fixed(shape.n),
            k: DimDomain::Fixed(shape.k),
            fallback: ShapeFallback::None,
        }
    }

    /// `shape` with each extent moved to the nearest value its domain declares (a shape inside
    /// the declared ones is unchanged).
    pub fn nearest_declared(&self, shape: crate::plan::Shape) -> crate::plan::Shape {
        crate::plan::Shape::new(
            self.m.nearest(shape.m),
            self.n.nearest(shape.n),
            self.k.nearest(shape.k),
        )
    }

    pub fn get(&self, sym: ShapeSym) -> &DimDomain {
        match sym {
            ShapeSym::M => &self.m,
            ShapeSym::N => &self.n,
            ShapeSym::K => &self.k,
        }
    }
}

/// `lhs op rhs;` in a `constraints` block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Constraint {
    pub lhs: CExpr,
    pub op: ConstraintOp,
    pub rhs: CExpr,
    /// The source text, for messages ("registers <= 96").
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConstraintOp {
    Le,
    Ge,
    Eq,
    /// Soft: prefer plans near the value.
    Near,
}

impl ConstraintOp {
    pub fn symbol(self) -> &'static str {
        match self {
            ConstraintOp::Le => "<=",
            ConstraintOp::Ge => ">=",
            ConstraintOp::Eq => "==",
            ConstraintOp::Near => "~",
        }
    }
}

/// Arithmetic over observables, tile variables, flags and numbers, used by constraints and
/// tiling `where` clauses. Comparisons and logic appear only in `where` conditions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CExpr {
    Number(f64),
    Observable(Observable),
    TileVar(TileVar),
    /// A backend name on the right of `backend == sm90`.
    Backend(crate::plan::Backend),
    Neg(Box<CExpr>),
    Bin(CBinOp, Box<CExpr>, Box<CExpr>),
    Not(Box<CExpr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CBinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl CBinOp {
    /// The operator as `.dgml` writes it.
    pub fn symbol(self) -> &'static str {
        match self {
            CBinOp::Add => "+",
            CBinOp::Sub => "-",
            CBinOp::Mul => "*",
            CBinOp::Div => "/",
            CBinOp::Mod => "%",
            CBinOp::Lt => "<",
            CBinOp::Le => "<=",
            CBinOp::Gt => ">",
            CBinOp::Ge => ">=",
            CBinOp::Eq => "==",
            CBinOp::Ne => "!=",
            CBinOp::And => "&&",
            CBinOp::Or => "||",
        }
    }
}

/// Quantities the model predicts for a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Observable {
    Smem,
    Registers,
    Occupancy,
    /// `tensor_util`, also spelled `alu_utilization`.
    TensorUtil,
    L2HitRate,
    DramBytes,
    Waves,
    PredictedUs,
    Tflops,
    /// Flags.
    UseTensorCores,
    PadK,
    /// Operands the launcher transposes before each launch (fp8 M- or N-major on sm90).
    Transposes,
    Backend,
}

impl Observable {
    pub const ALL: [Observable; 13] = [
        Observable::Smem,
        Observable::Registers,
        Observable::Occupancy,
        Observable::TensorUtil,
        Observable::L2HitRate,
        Observable::DramBytes,
        Observable::Waves,
        Observable::PredictedUs,
        Observable::Tflops,
        Observable::UseTensorCores,
        Observable::PadK,
        Observable::Transposes,
        Observable::Backend,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Observable::Smem => "smem",
            Observable::Registers => "registers",
            Observable::Occupancy => "occupancy",
            Observable::TensorUtil => "tensor_util",
            Observable::L2HitRate => "l2_hit_rate",
            Observable::DramBytes => "dram_bytes",
            Observable::Waves => "waves",
            Observable::PredictedUs => "predicted_us",
            Observable::Tflops => "tflops",
            Observable::UseTensorCores => "use_tensor_cores",
            Observable::PadK => "pad_k",
            Observable::Transposes => "transposes",
            Observable::Backend => "backend",
        }
    }

    /// Accepts the documented names and the alias `alu_utilization`.
    pub fn from_name(name: &str) -> Option<Observable> {
        if name == "alu_utilization" {
            return Some(Observable::TensorUtil);
        }
        Observable::ALL.into_iter().find(|o| o.name() == name)
    }
}

/// Tile variables a constraint or a tiling domain may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
pub enum TileVar {
    TILE_M,
    TILE_N,
    TILE_K,
    STAGES,
    CLUSTER_M,
    CLUSTER_N,
    WARPGROUPS,
    SPLIT_K,
}

impl TileVar {
    pub const ALL: [TileVar; 8] = [
        TileVar::TILE_M,
        TileVar::TILE_N,
        TileVar::TILE_K,
        TileVar::STAGES,
        TileVar::CLUSTER_M,
        TileVar::CLUSTER_N,
        TileVar::WARPGROUPS,
        TileVar::SPLIT_K,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TileVar::TILE_M => "TILE_M",
            TileVar::TILE_N => "TILE_N",
            TileVar::TILE_K => "TILE_K",
            TileVar::STAGES => "STAGES",
            TileVar::CLUSTER_M => "CLUSTER_M",
            TileVar::CLUSTER_N => "CLUSTER_N",
            TileVar::WARPGROUPS => "WARPGROUPS",
            TileVar::SPLIT_K => "SPLIT_K",
        }
    }

    pub fn from_name(name: &str) -> Option<TileVar> {
        TileVar::ALL.into_iter().find(|v| v.name() == name)
    }
}

/// One line of a `tiling` block: the values a tile variable may take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TilingDomain {
    pub var: TileVar,
    pub values: TileValues,
    /// `where cond`: a boolean CExpr over tile variables.
    pub condition: Option<CExpr>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TileValues {
    /// `in [a, b]` (inclusive).
    Interval { lo: u64, hi: u64 },
    /// `in {v1, v2}` (sorted, distinct).
    Set(Vec<u64>),
    /// `in a..=b step s`.
    Stepped { lo: u64, hi: u64, step: u64 },
}

impl KernelSpec {
    pub fn operand(&self, name: &str) -> Option<&Operand> {
        self.operands.iter().find(|o| o.name == name)
    }

    /// The operand with the given role (A, B, C, D are unique by semantic analysis).
    pub fn by_role(&self, role: &Role) -> Option<&Operand> {
        self.operands.iter().find(|o| &o.role == role)
    }

    pub fn a(&self) -> &Operand {
        self.by_role(&Role::A)
            .expect("semantic analysis guarantees an A operand")
    }

    pub fn b(&self) -> &Operand {
        self.by_role(&Role::B)
            .expect("semantic analysis guarantees a B operand")
    }

    pub fn d(&self) -> &Operand {
        self.by_role(&Role::D)
            .expect("semantic analysis guarantees a D operand")
    }

    pub fn c(&self) -> Option<&Operand> {
        self.by_role(&Role::C)
    }

    /// The amax output (`amax_of D`), if any (at most one: semantic analysis checks).
    pub fn amax(&self) -> Option<&Operand> {
        self.operands
            .iter()
            .find(|o| matches!(o.role, Role::Amax { .. }))
    }
}
