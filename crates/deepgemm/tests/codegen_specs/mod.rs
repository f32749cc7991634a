//! Specs and plans for the code generation tests, built directly as data (no parser needed).
//! Shared by `deepgemm/tests/codegen_*.rs` and `deepgemm-cuda/tests/codegen_compiles.rs`.
#![allow(dead_code)]

use deepgemm::backend;
use deepgemm::dtype::DType;
use deepgemm::hw;
use deepgemm::plan::{Backend, EpilogueStrategy, OperandPath, Plan, Raster, ThreadLayout, Tile};
use deepgemm::spec::{
    BinaryOp, Dim, DimDomain, Direction, Epilogue, Expr, Func, KernelSpec, Layout, Operand, Param,
    Role, ScaleGranularity, ShapeSpec, ShapeSym, TargetRef,
};

/// What varies between test specs; `Default` is the plain bf16 `D = acc`, A row, B col, D row.
#[derive(Clone, Debug)]
pub struct SpecShape {
    pub input: DType,
    pub a_layout: Layout,
    pub b_layout: Layout,
    pub output: DType,
    pub d_layout: Layout,
    /// `C` with this layout and `D = alpha * acc + beta * C`.
    pub c_layout: Option<Layout>,
    /// `bias[N]` and `D = gelu(acc + bias)`.
    pub bias_gelu: bool,
    /// FP8 block scales: `sa: f32[M, K/128]` (1x128) and `sb: f32[N/128, K/128]` (128x128).
    pub block_scales: bool,
    pub accumulate: DType,
    pub target: &'static str,
    /// `amax: f32[] amax_of D` (Some(false)) or `f32[M]` (Some(true)).
    pub amax_per_row: Option<bool>,
}

impl Default for SpecShape {
    fn default() -> Self {
        SpecShape {
            input: DType::Bf16,
            a_layout: Layout::Row,
            b_layout: Layout::Col,
            output: DType::Bf16,
            d_layout: Layout::Row,
            c_layout: None,
            bias_gelu: false,
            block_scales: false,
            accumulate: DType::F32,
            target: "h200",
            amax_per_row: None,
        }
    }
}

fn matrix(
    name: &str,
    direction: Direction,
    dtype: DType,
    dims: [ShapeSym; 2],
    layout: Layout,
    role: Role,
) -> Operand {
    Operand {
        name: name.to_string(),
        direction,
        dtype,
        dims: dims.iter().map(|s| Dim::Sym(*s)).collect(),
        layout,
        role,
    }
}

fn var(name: &str) -> Box<Expr> {
    Box::new(Expr::Var(name.to_string()))
}

pub fn spec(shape: &SpecShape) -> KernelSpec {
    use ShapeSym::{K, M, N};
    let mut operands = vec![
        matrix(
            "A",
            Direction::Input,
            shape.input,
            [M, K],
            shape.a_layout,
            Role::A,
        ),
        matrix(
            "B",
            Direction::Input,
            shape.input,
            [K, N],
            shape.b_layout,
            Role::B,
        ),
    ];
    let mut params = Vec::new();
    let mut expr = Expr::Acc;
    if shape.block_scales {
        operands.push(Operand {
            name: "sa".to_string(),
            direction: Direction::Input,
            dtype: DType::F32,
            dims: vec![Dim::Sym(M), Dim::CeilDiv(K, 128)],
            layout: Layout::Col,
            role: Role::Scale {
                of: "A".to_string(),
                granularity: ScaleGranularity::Block1x128,
            },
        });
        operands.push(Operand {
            name: "sb".to_string(),
            direction: Direction::Input,
            dtype: DType::F32,
            dims: vec![Dim::CeilDiv(N, 128), Dim::CeilDiv(K, 128)],
            layout: Layout::Row,
            role: Role::Scale {
                of: "B".to_string(),
                granularity: ScaleGranularity::Block128x128,
            },
        });
    }
    if let Some(c_layout) = shape.c_layout {
        operands.push(matrix(
            "C",
            Direction::Input,
            shape.output,
            [M, N],
            c_layout,
            Role::C,
        ));
        params.push(Param {
            name: "alpha".to_string(),
            dtype: DType::F32,
            default: Some(1.0),
        });
        params.push(Param {
            name: "beta".to_string(),
            dtype: DType::F32,
            default: Some(0.0),
        });
        expr = Expr::Binary(
            BinaryOp::Add,
            Box::new(Expr::Binary(
                BinaryOp::Mul,
                var("alpha"),
                Box::new(Expr::Acc),
            )),
            Box::new(Expr::Binary(BinaryOp::Mul, var("beta"), var("C"))),
        );
    }
    if shape.bias_gelu {
        operands.push(Operand {
            name: "bias".to_string(),
            direction: Direction::Input,
            dtype: shape.output,
            dims: vec![Dim::Sym(N)],
            layout: Layout::Row,
            role: Role::ColVector,
        });
        expr = Expr::Call(
            Func::Gelu,
            vec![Expr::Binary(BinaryOp::Add, Box::new(expr), var("bias"))],
        );
    }
    operands.push(matrix(
        "D",
        Direction::Output,
        shape.output,
        [M, N],
        shape.d_layout,
        Role::D,
    ));
    if let Some(per_row) = shape.amax_per_row {
        operands.push(Operand {
            name: "amax".to_string(),
            direction: Direction::Output,
            dtype: DType::F32,
            dims: if per_row { vec![Dim::Sym(M)] } else { vec![] },
            layout: Layout::Row,
            role: Role::Amax {
                of: "D".to_string(),
                per_row,
            },
        });
    }
    KernelSpec {
        name: "gemm".to_string(),
        target: TargetRef::Preset(shape.target.to_string()),
        hardware: hw::preset(shape.target).expect("a built-in preset"),
        operands,
        params,
        accumulate: shape.accumulate,
        epilogue: Epilogue {
            output: "D".to_string(),
            expr,
        },
        shape: ShapeSpec {
            m: DimDomain::Range { lo: 1, hi: 8192 },
            n: DimDomain::Fixed(4096),
            k: DimDomain::Fixed(4093),
            fallback: deepgemm::spec::ShapeFallback::None,
        },
        constraints: Vec::new(),
        tiling: Vec::new(),
    }
}

fn plan(
    spec: &KernelSpec,
    backend: Backend,
    tile: Tile,
    stages: u32,
    threads: ThreadLayout,
    group_m: u32,
) -> Plan {
    Plan {
        backend,
        tile,
        threads,
        stages,
        cluster_m: 1,
        cluster_n: 1,
        raster: Raster { group_m },
        split_k: 1,
        persistent: false,
        smem: backend::of(backend).smem_layout(spec, tile, &threads, stages),
        epilogue: EpilogueStrategy::Direct,
        operands: OperandPath {
            a_copy_bytes: 16,
            b_copy_bytes: 16,
            repack_misaligned: true,
        },
    }
}

/// An sm80 plan: `tile` = (m, n, k), warps (along M, along N).
pub fn sm80_plan(spec: &KernelSpec, tile: (u32, u32, u32), stages: u32, warps: (u32, u32)) -> Plan {
    let layout = ThreadLayout::Warps {
        m: warps.0,
        n: warps.1,
    };
    plan(
        spec,
        Backend::Sm80,
        Tile {
            m: tile.0,
            n: tile.1,
            k: tile.2,
        },
        stages,
        layout,
        8,
    )
}

/// A gemv plan: `tile` = (m, n, k), one side the streamed operand's 16 rows, the other 1..8;
/// `stages` chunks of K in the ring.
pub fn gemv_plan(spec: &KernelSpec, tile: (u32, u32, u32), stages: u32) -> Plan {
    let mut plan = plan(
        spec,
        Backend::Gemv,
        Tile {
            m: tile.0,
            n: tile.1,
            k: tile.2,
        },
        stages,
        ThreadLayout::Threads { count: 256 },
        1,
    );
    let element = spec.a().dtype.size_bytes();
    plan.operands = OperandPath {
        a_copy_bytes: element,
        b_copy_bytes: element,
        repack_misaligned: false,
    };
    plan
}

/// A tiny plan: `tile` = (rows per warp, columns of the block's 4 warps, K per loop turn).
pub fn tiny_plan(spec: &KernelSpec, tile: (u32, u32, u32)) -> Plan {
    let mut plan = plan(
        spec,
        Backend::Tiny,
        Tile {
            m: tile.0,
            n: tile.1,
            k: tile.2,
        },
        1,
        ThreadLayout::Threads { count: 128 },
        1,
    );
    plan.operands = OperandPath {
        a_copy_bytes: spec.a().dtype.size_bytes(),
        b_copy_bytes: spec.b().dtype.size_bytes(),
        repack_misaligned: false,
    };
    plan
}

pub fn simt_plan(spec: &KernelSpec, tile: (u32, u32, u32), stages: u32) -> Plan {
    let layout = ThreadLayout::Threads { count: 256 };
    plan(
        spec,
        Backend::Simt,
        Tile {
            m: tile.0,
            n: tile.1,
            k: tile.2,
        },
        stages,
        layout,
        4,
    )
}

/// An sm90 plan: `tile` = (m, n, 64), one producer and `consumers` consumer warpgroups that split
/// each tile (`pingpong` = false) or take whole tiles in turn, on a persistent grid with clusters
/// of `cluster_m` blocks along M.
pub fn sm90_plan(
    spec: &KernelSpec,
    tile: (u32, u32),
    stages: u32,
    consumers: u32,
    pingpong: bool,
    cluster_m: u32,
) -> Plan {
    let layout = ThreadLayout::Warpgroups {
        consumers,
        split_m: if pingpong { 1 } else { consumers },
    };
    let mut plan = plan(
        spec,
        Backend::Sm90,
        Tile {
            m: tile.0,
            n: tile.1,
            // One 128-byte swizzle row of K.
            k: 128 / spec.a().dtype.size_bytes(),
        },
        stages,
        layout,
        8,
    );
    plan.persistent = true;
    plan.cluster_m = cluster_m;
    plan.epilogue = backend::of(Backend::Sm90).epilogue_strategy(spec);
    plan
}
