//! The whole search for a spec with `M in 1..=8192` (10 shape buckets, every backend's space):
//! it must take well under a second on one core.

use criterion::{criterion_group, criterion_main, Criterion};
use deepgemm::dtype::DType;
use deepgemm::hw::preset;
use deepgemm::search::search;
use deepgemm::spec::*;
use std::hint::black_box;

fn mlp_up() -> KernelSpec {
    let matrix = |name: &str, direction, dims: [ShapeSym; 2], layout, role| Operand {
        name: name.to_string(),
        direction,
        dtype: DType::Bf16,
        dims: dims.iter().map(|&s| Dim::Sym(s)).collect(),
        layout,
        role,
    };
    KernelSpec {
        name: "mlp_up".to_string(),
        target: TargetRef::Preset("h200".to_string()),
        hardware: preset("h200").expect("h200 is a preset"),
        operands: vec![
            matrix(
                "A",
                Direction::Input,
                [ShapeSym::M, ShapeSym::K],
                Layout::Row,
                Role::A,
            ),
            matrix(
                "B",
                Direction::Input,
                [ShapeSym::K, ShapeSym::N],
                Layout::Col,
                Role::B,
            ),
            matrix(
                "D",
                Direction::Output,
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
            m: DimDomain::Range { lo: 1, hi: 8192 },
            n: DimDomain::Fixed(14336),
            k: DimDomain::Fixed(4096),
            fallback: deepgemm::spec::ShapeFallback::None,
        },
        constraints: vec![Constraint {
            lhs: CExpr::Observable(Observable::Registers),
            op: ConstraintOp::Near,
            rhs: CExpr::Number(168.0),
            text: "registers ~ 168".to_string(),
        }],
        tiling: vec![],
    }
}

fn bench_search(c: &mut Criterion) {
    let spec = mlp_up();
    c.bench_function("search M in 1..=8192, N=14336, K=4096", |b| {
        b.iter(|| search(black_box(&spec)).expect("the spec is feasible"))
    });
}

criterion_group!(benches, bench_search);
criterion_main!(benches);
