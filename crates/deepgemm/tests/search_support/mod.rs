//! Hand-built specs for the model and search tests (a plain GEMM `D = acc` on a preset).

#![allow(dead_code)] // each test crate uses part of it

use deepgemm::dtype::DType;
use deepgemm::hw::preset;
use deepgemm::spec::*;

/// `D[M, N] = A[M, K] · B[K, N]` with A row-major, B column-major, D row-major.
pub fn gemm(dtype: DType, m: DimDomain, n: u64, k: u64) -> KernelSpec {
    let matrix = |name: &str, direction, dtype, dims: [ShapeSym; 2], layout, role| Operand {
        name: name.to_string(),
        direction,
        dtype,
        dims: dims.iter().map(|&s| Dim::Sym(s)).collect(),
        layout,
        role,
    };
    KernelSpec {
        name: "gemm".to_string(),
        target: TargetRef::Preset("h200".to_string()),
        hardware: preset("h200").expect("h200 is a preset"),
        operands: vec![
            matrix(
                "A",
                Direction::Input,
                dtype,
                [ShapeSym::M, ShapeSym::K],
                Layout::Row,
                Role::A,
            ),
            matrix(
                "B",
                Direction::Input,
                dtype,
                [ShapeSym::K, ShapeSym::N],
                Layout::Col,
                Role::B,
            ),
            matrix(
                "D",
                Direction::Output,
                dtype,
                [ShapeSym::M, ShapeSym::N],
                Layout::Row,
                Role::D,
            ),
        ],
        params: vec![],
        accumulate: DType::F32,
        epilogue: Epilogue {
            output: "D".to_string(),
            expr: Expr::Acc,
        },
        shape: ShapeSpec {
            m,
            n: DimDomain::Fixed(n),
            k: DimDomain::Fixed(k),
            fallback: deepgemm::spec::ShapeFallback::None,
        },
        constraints: vec![],
        tiling: vec![],
    }
}

pub fn fixed(dtype: DType, m: u64, n: u64, k: u64) -> KernelSpec {
    gemm(dtype, DimDomain::Fixed(m), n, k)
}

/// `lhs op rhs` with an observable on the left and a number on the right.
pub fn constraint(observable: Observable, op: ConstraintOp, value: f64) -> Constraint {
    Constraint {
        lhs: CExpr::Observable(observable),
        op,
        rhs: CExpr::Number(value),
        text: format!("{} {} {}", observable.name(), op.symbol(), value),
    }
}

/// `VAR op value` over a tile variable.
pub fn tile_constraint(var: TileVar, op: ConstraintOp, value: f64) -> Constraint {
    Constraint {
        lhs: CExpr::TileVar(var),
        op,
        rhs: CExpr::Number(value),
        text: format!("{} {} {}", var.name(), op.symbol(), value),
    }
}
