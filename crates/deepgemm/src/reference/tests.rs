//! The reference's own tests.

use super::*;
use crate::hw::preset;
use crate::spec::{
    erf, BinaryOp, DimDomain, Direction, Epilogue, Func, KernelSpec, Operand as SpecOperand, Param,
    ScaleGranularity, ShapeSpec, TargetRef,
};

/// An f32 scale tensor of `of` (row-major when two-dim).
fn scale(name: &str, of: &str, dims: Vec<Dim>, granularity: ScaleGranularity) -> SpecOperand {
    SpecOperand {
        name: name.into(),
        direction: Direction::Input,
        dtype: DType::F32,
        dims,
        layout: Layout::Row,
        role: Role::Scale {
            of: of.into(),
            granularity,
        },
    }
}

fn matrix(
    name: &str,
    dtype: DType,
    dims: [ShapeSym; 2],
    layout: Layout,
    role: Role,
) -> SpecOperand {
    SpecOperand {
        name: name.into(),
        direction: if role == Role::D {
            Direction::Output
        } else {
            Direction::Input
        },
        dtype,
        dims: dims.iter().map(|s| Dim::Sym(*s)).collect(),
        layout,
        role,
    }
}

/// D = epilogue(A·B) with the given dtypes and layouts.
fn spec(input: DType, output: DType, layouts: [Layout; 3], expr: Expr) -> KernelSpec {
    use ShapeSym::*;
    KernelSpec {
        name: "t".into(),
        target: TargetRef::Preset("h200".into()),
        hardware: preset("h200").expect("h200 preset exists"),
        operands: vec![
            matrix("A", input, [M, K], layouts[0], Role::A),
            matrix("B", input, [K, N], layouts[1], Role::B),
            matrix("D", output, [M, N], layouts[2], Role::D),
        ],
        params: vec![],
        accumulate: DType::F32,
        epilogue: Epilogue {
            output: "D".into(),
            expr,
        },
        shape: ShapeSpec {
            m: DimDomain::Fixed(1),
            n: DimDomain::Fixed(1),
            k: DimDomain::Fixed(1),
            fallback: crate::spec::ShapeFallback::None,
        },
        constraints: vec![],
        tiling: vec![],
    }
}

/// A naive f64 GEMM + epilogue straight from the encoded tensors: the oracle for `check`.
fn naive_output(spec: &KernelSpec, p: &Problem, perturb: impl Fn(u64, u64, f64) -> f64) -> Vec<u8> {
    let (a, b) = (p.tensor("A").unwrap(), p.tensor("B").unwrap());
    let d = p.output().unwrap();
    let epilogue = CompiledEpilogue::new(spec, p).unwrap();
    let size = d.dtype.size_bytes() as usize;
    let mut out = d.bytes.clone();
    for r in 0..p.shape.m {
        for c in 0..p.shape.n {
            let acc: f64 = (0..p.shape.k)
                .map(|k| a.element(r, k) * b.element(k, c))
                .sum();
            let at = d.geometry.offset(r, c) as usize * size;
            let v = perturb(r, c, epilogue.eval(r, c, acc));
            encode_into(d.dtype, v, &mut out[at..at + size]);
        }
    }
    out
}

#[test]
fn inputs_are_seeded_rounded_padded_and_non_zero() {
    let s = spec(
        DType::Bf16,
        DType::F32,
        [Layout::Col, Layout::Row, Layout::Row],
        Expr::Acc,
    );
    let options = ProblemOptions {
        seed: 7,
        ld_pad: 3,
        params: vec![],
    };
    let p = Problem::generate(&s, Shape::new(5, 6, 7), &options).unwrap();
    let again = Problem::generate(&s, Shape::new(5, 6, 7), &options).unwrap();
    let other = Problem::generate(
        &s,
        Shape::new(5, 6, 7),
        &ProblemOptions {
            seed: 8,
            ..options.clone()
        },
    )
    .unwrap();
    let a = p.tensor("A").unwrap();
    // A is col-major [5, 7]: 7 columns of 5 + 3 padding.
    assert_eq!(a.geometry.ld, 8);
    assert_eq!(a.bytes.len(), (6 * 8 + 5) * 2);
    assert_eq!(a.bytes, again.tensor("A").unwrap().bytes);
    assert_ne!(a.bytes, other.tensor("A").unwrap().bytes);
    // Padding between columns is poison; the elements are bf16 values in (-1, 1), not all 0.
    assert!(decode(DType::Bf16, &a.bytes[10..12]).is_nan());
    let values: Vec<f64> = (0..5)
        .flat_map(|r| (0..7).map(move |c| (r, c)))
        .map(|(r, c)| a.element(r, c))
        .collect();
    assert!(values
        .iter()
        .all(|v| v.abs() < 1.0 && round_to(DType::Bf16, *v) == *v));
    assert!(values.iter().any(|v| *v != 0.0));
    // The output is all poison.
    assert_eq!(count_poison(p.output().unwrap()), 30);
}

#[test]
fn exact_output_passes_and_errors_are_caught() {
    use Layout::*;
    for layouts in [[Row, Col, Row], [Col, Row, Col], [Row, Row, Row]] {
        let s = spec(DType::F16, DType::F32, layouts, Expr::Acc);
        let options = ProblemOptions {
            seed: 1,
            ld_pad: 1,
            params: vec![],
        };
        let p = Problem::generate(&s, Shape::new(9, 11, 13), &options).unwrap();
        let good = p.check(&s, &naive_output(&s, &p, |_, _, v| v)).unwrap();
        assert!(good.passed && good.error < 1e-7, "{layouts:?}: {good:?}");
        assert_eq!(good.checked, 99);
        assert!(!good.sampled);
        // One element off by 50% of its value fails a 1e-2 tolerance on 99 elements? The norm
        // of 99 values dilutes it; use a systematic 2% error instead.
        let bad = p
            .check(&s, &naive_output(&s, &p, |_, _, v| v * 1.02))
            .unwrap();
        assert!(!bad.passed && (bad.error - 0.02).abs() < 1e-3, "{bad:?}");
        // The poisoned output fails with every element unwritten.
        let untouched = p.check(&s, &p.output().unwrap().bytes).unwrap();
        assert_eq!(untouched.unwritten, 99);
        assert!(!untouched.passed);
    }
}

/// An fp8 D is checked against the value it stores (saturated at 448) and each element
/// within one ulp: exact bytes pass, one element two ulps off fails however small the norm.
#[test]
fn fp8_outputs_saturate_and_are_held_to_one_ulp() {
    let scaled = Expr::Binary(
        BinaryOp::Mul,
        Box::new(Expr::Acc),
        Box::new(Expr::Number(400.0)),
    );
    let s = spec(
        DType::Bf16,
        DType::E4m3,
        [Layout::Row, Layout::Col, Layout::Row],
        scaled,
    );
    let p = Problem::generate(&s, Shape::new(16, 24, 32), &ProblemOptions::default()).unwrap();
    let exact = naive_output(&s, &p, |_, _, v| v);
    let d = HostTensor {
        bytes: exact.clone(),
        ..p.output().unwrap().clone()
    };
    // Sums of O(1) times 400: many saturate.
    let saturated = (0..16)
        .flat_map(|r| (0..24).map(move |c| (r, c)))
        .filter(|&(r, c)| d.element(r, c).abs() == 448.0)
        .count();
    assert!(saturated > 10, "{saturated} saturated");
    let good = p.check(&s, &exact).unwrap();
    assert!(good.passed && good.error < 1e-12, "{good:?}");
    assert!(good.fp8.is_some_and(|f| f.worst_excess == 0.0), "{good:?}");
    // One unsaturated element moved by two of its ulps.
    let (r, c) = (0..16)
        .flat_map(|r| (0..24).map(move |c| (r, c)))
        .find(|&(r, c)| (1.0..200.0).contains(&d.element(r, c).abs()))
        .unwrap();
    let bad = naive_output(&s, &p, |rr, cc, v| {
        if (rr, cc) == (r, c) {
            let stored = round_to(DType::E4m3, v);
            stored + 2.0 * crate::codec::fp8_ulp(DType::E4m3, stored).unwrap()
        } else {
            v
        }
    });
    let check = p.check(&s, &bad).unwrap();
    assert!(check.error < check.tolerance, "{check:?}");
    // Its ulp is 8 or 16: far beyond the sums' error (1e-2 x rms).
    let fp8 = check.fp8.unwrap();
    assert!(
        !check.passed && fp8.worst_excess > fp8.allowed_excess,
        "{check:?}"
    );
}

/// `spec` with `amax: f32[] amax_of D` (or `f32[M]`).
fn with_amax(mut spec: KernelSpec, per_row: bool) -> KernelSpec {
    spec.operands.push(SpecOperand {
        name: "amax".into(),
        direction: Direction::Output,
        dtype: DType::F32,
        dims: if per_row {
            vec![Dim::Sym(ShapeSym::M)]
        } else {
            vec![]
        },
        layout: Layout::Row,
        role: Role::Amax {
            of: "D".into(),
            per_row,
        },
    });
    spec
}

/// An amax output is checked against the largest |value| before D's rounding, per row or
/// over D; a spec with one cannot be checked without its bytes.
#[test]
fn amax_outputs_are_checked_per_row_and_per_tensor() {
    let scaled = Expr::Binary(
        BinaryOp::Mul,
        Box::new(Expr::Acc),
        Box::new(Expr::Number(400.0)),
    );
    for per_row in [false, true] {
        let s = with_amax(
            spec(
                DType::Bf16,
                DType::E4m3,
                [Layout::Row, Layout::Col, Layout::Row],
                scaled.clone(),
            ),
            per_row,
        );
        let (m, n) = (16u64, 24u64);
        let p = Problem::generate(&s, Shape::new(m, n, 32), &ProblemOptions::default()).unwrap();
        let d = naive_output(&s, &p, |_, _, v| v);
        // The maxima of the unrounded values (beyond 448: D saturates, the amax does not).
        let (a, b) = (p.tensor("A").unwrap(), p.tensor("B").unwrap());
        let epilogue = CompiledEpilogue::new(&s, &p).unwrap();
        let value = |r: u64, c: u64| {
            let acc: f64 = (0..32).map(|k| a.element(r, k) * b.element(k, c)).sum();
            epilogue.eval(r, c, acc).abs()
        };
        let rows: Vec<f64> = (0..m)
            .map(|r| (0..n).map(|c| value(r, c)).fold(0.0, f64::max))
            .collect();
        let want: Vec<f64> = if per_row {
            rows.clone()
        } else {
            vec![rows.iter().copied().fold(0.0, f64::max)]
        };
        assert!(want.iter().any(|&v| v > 448.0), "{want:?}");
        let bytes = |values: &[f64]| -> Vec<u8> {
            values
                .iter()
                .flat_map(|&v| (v as f32).to_le_bytes())
                .collect()
        };
        let good = p.check_outputs(&s, &d, Some(&bytes(&want))).unwrap();
        assert!(good.passed, "{good:?}");
        assert_eq!(good.amax.unwrap().checked, want.len() as u64);
        let mut off = want.clone();
        *off.last_mut().unwrap() *= 0.99;
        let bad = p.check_outputs(&s, &d, Some(&bytes(&off))).unwrap();
        assert!(!bad.passed && bad.amax.unwrap().error > 5e-3, "{bad:?}");
        assert!(matches!(
            p.check(&s, &d),
            Err(ReferenceError::AmaxBytes { .. })
        ));
    }
}

/// Checked on sampled lines, a tensor's amax must reach the sampled maximum and stay within
/// D's rounding of D's largest element.
#[test]
fn a_sampled_tensor_amax_is_bounded_both_ways() {
    let s = with_amax(
        spec(
            DType::Bf16,
            DType::Bf16,
            [Layout::Row, Layout::Col, Layout::Row],
            Expr::Acc,
        ),
        false,
    );
    let mut p =
        Problem::generate(&s, Shape::new(200, 150, 16), &ProblemOptions::default()).unwrap();
    p.full_reference_macs = 1;
    let d = naive_output(&s, &p, |_, _, v| v);
    let stored = HostTensor {
        bytes: d.clone(),
        ..p.output().unwrap().clone()
    };
    let (largest, saturated, _) = largest_stored(&stored);
    assert!(!saturated);
    let check = |amax: f64| {
        p.check_outputs(&s, &d, Some(&(amax as f32).to_le_bytes()))
            .unwrap()
    };
    let good = check(largest);
    assert!(good.sampled && good.passed, "{good:?}");
    assert!(!check(largest * 1.5).passed);
    assert!(!check(largest * 0.5).passed);
}

#[test]
fn expected_output_stores_the_epilogue_as_a_kernel_does() {
    let s = spec(
        DType::Bf16,
        DType::F32,
        [Layout::Row, Layout::Col, Layout::Col],
        Expr::Cast(DType::I8, Box::new(Expr::Acc)),
    );
    let options = ProblemOptions {
        ld_pad: 1,
        ..Default::default()
    };
    let mut p = Problem::generate(&s, Shape::new(3, 4, 2), &options).unwrap();
    // acc = t[r] + c: ties, which cast<i8> rounds to even.
    let t = [0.5, 2.5, -1.5];
    let set = |p: &mut Problem, name: &str, r: u64, c: u64, v: f64| {
        let tensor = p.tensors.iter_mut().find(|t| t.name == name).unwrap();
        let at = tensor.geometry.offset(r, c) as usize * 2;
        encode_into(DType::Bf16, v, &mut tensor.bytes[at..at + 2]);
    };
    for (r, &v) in t.iter().enumerate() {
        set(&mut p, "A", r as u64, 0, v);
        set(&mut p, "A", r as u64, 1, 1.0);
    }
    for c in 0..4 {
        set(&mut p, "B", 0, c, 1.0);
        set(&mut p, "B", 1, c, c as f64);
    }
    let expected = p.expected_output(&s).unwrap();
    assert_eq!(expected, naive_output(&s, &p, |_, _, v| v));
    let d = HostTensor {
        bytes: expected.clone(),
        ..p.output().unwrap().clone()
    };
    for (r, &v) in t.iter().enumerate() {
        for c in 0..4 {
            let want = (v + c as f64).round_ties_even();
            assert_eq!(d.element(r as u64, c), want, "({r}, {c})");
        }
    }
    // D is col-major with ld 4: the one padding element per column stays poisoned.
    assert_eq!(count_poison(&d), 0);
    assert!(decode(DType::F32, &expected[12..16]).is_nan());
    assert!(p.check(&s, &expected).unwrap().passed);
}

#[test]
fn one_unwritten_element_fails_the_check() {
    let s = spec(DType::F32, DType::F32, [Layout::Row; 3], Expr::Acc);
    let p = Problem::generate(&s, Shape::new(4, 4, 4), &ProblemOptions::default()).unwrap();
    let out = naive_output(
        &s,
        &p,
        |r, c, v| if (r, c) == (3, 2) { f64::NAN } else { v },
    );
    let check = p.check(&s, &out).unwrap();
    assert_eq!(check.unwritten, 1);
    assert!(!check.passed);
    assert!(check.error < 1e-7);
}

#[test]
fn epilogue_with_params_vectors_and_c() {
    use ShapeSym::*;
    let mut s = spec(
        DType::Bf16,
        DType::Bf16,
        [Layout::Row, Layout::Col, Layout::Row],
        Expr::Call(
            Func::Gelu,
            vec![Expr::Binary(
                BinaryOp::Add,
                Box::new(Expr::Binary(
                    BinaryOp::Add,
                    Box::new(Expr::Binary(
                        BinaryOp::Mul,
                        Box::new(Expr::Var("alpha".into())),
                        Box::new(Expr::Acc),
                    )),
                    Box::new(Expr::Binary(
                        BinaryOp::Mul,
                        Box::new(Expr::Var("beta".into())),
                        Box::new(Expr::Var("C".into())),
                    )),
                )),
                Box::new(Expr::Var("bias".into())),
            )],
        ),
    );
    s.operands
        .push(matrix("C", DType::Bf16, [M, N], Layout::Col, Role::C));
    s.operands.push(SpecOperand {
        name: "bias".into(),
        direction: Direction::Input,
        dtype: DType::Bf16,
        dims: vec![Dim::Sym(N)],
        layout: Layout::Row,
        role: Role::ColVector,
    });
    s.params = vec![
        Param {
            name: "alpha".into(),
            dtype: DType::F32,
            default: Some(1.0),
        },
        Param {
            name: "beta".into(),
            dtype: DType::F32,
            default: None,
        },
    ];
    let options = ProblemOptions {
        seed: 3,
        ld_pad: 0,
        params: vec![("alpha".into(), 1.5)],
    };
    let p = Problem::generate(&s, Shape::new(6, 5, 40), &options).unwrap();
    assert_eq!(p.params[0], ("alpha".into(), 1.5));
    let beta = p.params[1].1;
    assert!((0.5..1.5).contains(&beta));
    // Check one element by hand.
    let (a, b, c, bias) = (
        p.tensor("A").unwrap(),
        p.tensor("B").unwrap(),
        p.tensor("C").unwrap(),
        p.tensor("bias").unwrap(),
    );
    let acc: f64 = (0..40).map(|k| a.element(2, k) * b.element(k, 4)).sum();
    let x = 1.5 * acc + beta * c.element(2, 4) + bias.element(0, 4);
    let want = 0.5 * x * (1.0 + erf(x / 2f64.sqrt()));
    let e = CompiledEpilogue::new(&s, &p).unwrap();
    assert!((e.eval(2, 4, acc) - want).abs() < 1e-12);
    let check = p.check(&s, &naive_output(&s, &p, |_, _, v| v)).unwrap();
    assert!(check.passed && check.error < 4e-3, "{check:?}");
}

#[test]
fn unknown_epilogue_variable_is_an_error() {
    let s = spec(
        DType::F32,
        DType::F32,
        [Layout::Row; 3],
        Expr::Var("gamma".into()),
    );
    let p = Problem::generate(&s, Shape::new(2, 2, 2), &ProblemOptions::default()).unwrap();
    let err = p.check(&s, &p.output().unwrap().bytes).unwrap_err();
    assert_eq!(
        err,
        ReferenceError::UnknownVariable {
            name: "gamma".into()
        }
    );
}

#[test]
fn fp8_block_scales_are_applied() {
    use ShapeSym::*;
    let mut s = spec(
        DType::E4m3,
        DType::Bf16,
        [Layout::Row, Layout::Col, Layout::Row],
        Expr::Acc,
    );
    s.operands.push(scale(
        "sa",
        "A",
        vec![Dim::Sym(M), Dim::CeilDiv(K, 128)],
        ScaleGranularity::Block1x128,
    ));
    s.operands.push(scale(
        "sb",
        "B",
        vec![Dim::CeilDiv(N, 128), Dim::CeilDiv(K, 128)],
        ScaleGranularity::Block128x128,
    ));
    let p = Problem::generate(
        &s,
        Shape::new(3, 130, 300),
        &ProblemOptions {
            seed: 5,
            ..Default::default()
        },
    )
    .unwrap();
    let (a, b, sa, sb) = (
        p.tensor("A").unwrap(),
        p.tensor("B").unwrap(),
        p.tensor("sa").unwrap(),
        p.tensor("sb").unwrap(),
    );
    assert_eq!((sa.geometry.rows, sa.geometry.cols), (3, 3));
    assert_eq!((sb.geometry.rows, sb.geometry.cols), (2, 3));
    let (r, c) = (1, 129);
    let acc: f64 = (0..300)
        .map(|k| {
            a.element(r, k)
                * sa.element(r, k / 128)
                * b.element(k, c)
                * sb.element(c / 128, k / 128)
        })
        .sum();
    let a_rows = p.dequantized(&s, a, Operand::A).unwrap();
    let b_rows = p.dequantized(&s, b, Operand::B).unwrap();
    let got = dot(a_rows.row(r), b_rows.row(c));
    assert!(
        (got - acc).abs() < 1e-5 * acc.abs().max(1.0),
        "{got} vs {acc}"
    );
}

#[test]
fn scaled_fp8_inputs_use_the_format_range_and_scales_undo_it() {
    use ShapeSym::*;
    // e4m3 A with a per-tensor scale, e5m2 B with 128x128 blocks.
    let mut s = spec(
        DType::E4m3,
        DType::Bf16,
        [Layout::Row, Layout::Col, Layout::Row],
        Expr::Acc,
    );
    s.operands[1].dtype = DType::E5m2;
    s.operands
        .push(scale("sa", "A", vec![], ScaleGranularity::PerTensor));
    s.operands.push(scale(
        "sb",
        "B",
        vec![Dim::CeilDiv(N, 128), Dim::CeilDiv(K, 128)],
        ScaleGranularity::Block128x128,
    ));
    let shape = Shape::new(64, 1024, 1024);
    let p = Problem::generate(&s, shape, &ProblemOptions::default()).unwrap();
    let values = |name: &str| {
        let t = p.tensor(name).unwrap();
        let g = t.geometry;
        (0..g.rows)
            .flat_map(|r| (0..g.cols).map(move |c| (r, c)))
            .map(|(r, c)| t.element(r, c))
            .collect::<Vec<f64>>()
    };
    let max_abs = |v: &[f64]| v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    // The codes reach the top binade of their format: above half the largest finite value.
    assert!(max_abs(&values("A")) > 224.0 && max_abs(&values("A")) <= 448.0);
    assert!(max_abs(&values("B")) > 28672.0 && max_abs(&values("B")) <= 57344.0);
    // Scales: positive, within 2^±2 of 1/max, and not all alike.
    let sb = values("sb");
    assert_eq!(sb.len(), 64);
    assert!(sb.iter().all(|&v| v > 0.25 / 57344.0 && v < 4.0 / 57344.0));
    let (lo, hi) = sb
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), &v| (l.min(v), h.max(v)));
    assert!(hi / lo > 4.0, "scales vary too little: {lo}..{hi}");
    let sa = values("sa");
    assert!(sa.len() == 1 && sa[0] > 0.25 / 448.0 && sa[0] < 4.0 / 448.0);
    // Dequantized, both operands are O(1) again.
    let a = p
        .dequantized(&s, p.tensor("A").unwrap(), Operand::A)
        .unwrap();
    let b = p
        .dequantized(&s, p.tensor("B").unwrap(), Operand::B)
        .unwrap();
    for rows in [&a.values, &b.values] {
        let peak = rows.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        assert!(peak > 0.2 && peak < 4.0, "dequantized peak {peak}");
    }
    // Unscaled FP8 operands keep the (-1, 1) data of every other dtype.
    let plain = spec(
        DType::E4m3,
        DType::Bf16,
        [Layout::Row, Layout::Col, Layout::Row],
        Expr::Acc,
    );
    let p = Problem::generate(&plain, Shape::new(8, 8, 64), &ProblemOptions::default());
    let a = p.unwrap().tensor("A").unwrap().clone();
    // (Rounded to e4m3, 0.97 becomes 1.0: the bound is inclusive.)
    assert!((0..8).all(|r| (0..64).all(|k| a.element(r, k).abs() <= 1.0)));
}

#[test]
fn large_problems_are_sampled_but_fully_poison_checked() {
    // A small problem with the sampling threshold lowered below its size.
    let s = spec(
        DType::Bf16,
        DType::F32,
        [Layout::Row, Layout::Col, Layout::Row],
        Expr::Acc,
    );
    let shape = Shape::new(100, 80, 16);
    let mut p = Problem::generate(
        &s,
        shape,
        &ProblemOptions {
            seed: 11,
            ..Default::default()
        },
    )
    .unwrap();
    p.full_reference_macs = 100 * 80 * 16 - 1;
    let mut out = p.output().unwrap().bytes.clone();
    // Write every element but one, which may or may not lie on a sampled line: it is
    // counted as unwritten either way.
    for chunk in out.chunks_exact_mut(4) {
        chunk.copy_from_slice(&1.0f32.to_le_bytes());
    }
    out[4 * (50 * 80 + 33)..4 * (50 * 80 + 34)].copy_from_slice(&f32::NAN.to_le_bytes());
    let check = p.check(&s, &out).unwrap();
    assert!(check.sampled);
    assert_eq!(check.unwritten, 1);
    // 64 sampled rows of 80 and 64 sampled columns of 100, less the NaN where it was sampled.
    assert!((64 * 80 + 64 * 100 - 2..=64 * 80 + 64 * 100).contains(&check.checked));
    assert!(!check.passed);
}

#[test]
fn sampled_lines_include_first_and_last() {
    let mut rng = SplitMix64::new(9);
    let lines = sample_lines(1000, &mut rng);
    assert_eq!(lines.len(), 64);
    assert_eq!((lines[0], lines[63]), (0, 999));
    assert!(lines.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(sample_lines(5, &mut rng), vec![0, 1, 2, 3, 4]);
}
