//! One test per construct of the `.dgml` language (docs/language.md). Every accepted source is also
//! printed with `to_dgml` and parsed again, which must give the same `SpecFile`.

mod spec_language {
    use deepgemm::dtype::DType;
    use deepgemm::plan::Backend;
    use deepgemm::spec::*;
    use std::f64::consts::PI;
    use std::path::Path;

    /// Parse, check the round trip, return the file.
    fn check_in(src: &str, base_dir: &Path) -> SpecFile {
        let file = parse_str(src, "test.dgml", base_dir).unwrap_or_else(|d| panic!("{src}\n{d}"));
        let printed = to_dgml(&file);
        let again = parse_str(&printed, "printed.dgml", base_dir)
            .unwrap_or_else(|d| panic!("printed form does not parse:\n{printed}\n{d}"));
        assert_eq!(file, again, "round trip changed the spec:\n{printed}");
        file
    }

    fn check(src: &str) -> SpecFile {
        check_in(src, Path::new("."))
    }

    /// A kernel around `body` with a default target and shape unless the body gives them.
    fn kernel(body: &str) -> KernelSpec {
        let target = if body.contains("target") || body.contains("hardware") {
            ""
        } else {
            "target h200;"
        };
        let shape = if body.contains("shape") {
            ""
        } else {
            "shape { M = 256; N = 512; K = 1024; }"
        };
        let src = format!("kernel k {{\n{target}\n{body}\n{shape}\n}}\n");
        check(&src).kernels.remove(0)
    }

    const GEMM: &str =
        "input A: bf16[M, K] row; input B: bf16[K, N] col; output D: bf16[M, N] row;";

    fn with_gemm(extra: &str) -> KernelSpec {
        kernel(&format!("{GEMM}\n{extra}"))
    }

    #[test]
    fn several_kernels_per_file() {
        let src = format!(
            "kernel one {{ target h100; {GEMM} shape {{ M = 1; N = 2; K = 3; }} }}\n\
             kernel two {{ target a100; {GEMM} shape {{ M = 4; N = 5; K = 6; }} }}"
        );
        let file = check(&src);
        let names: Vec<&str> = file.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["one", "two"]);
        assert_eq!(file.kernels[1].hardware.name, "a100");
        assert_eq!(file.kernels[1].shape.k, DimDomain::Fixed(6));
    }

    #[test]
    fn target_presets_and_aliases() {
        for (name, hw) in [
            ("hopper", "h100"),
            ("ampere", "a100"),
            ("rtx4090", "rtx4090"),
            ("l40s", "l40s"),
        ] {
            let k = kernel(&format!("target {name}; {GEMM}"));
            assert_eq!(k.target, TargetRef::Preset(name.to_string()));
            assert_eq!(k.hardware.name, hw);
        }
    }

    #[test]
    fn hardware_file_target() {
        let dir = std::env::temp_dir().join(format!("deepgemm-spec-lang-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("gpu.yaml"), deepgemm::hw::PRESETS[2].yaml()).unwrap();
        let src = format!(
            "kernel k {{ hardware \"gpu.yaml\"; {GEMM} shape {{ M = 1; N = 1; K = 1; }} }}"
        );
        let file = check_in(&src, &dir);
        assert_eq!(file.kernels[0].target, TargetRef::File("gpu.yaml".into()));
        assert_eq!(file.kernels[0].hardware.name, "a100");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn operands_dtypes_dims_layouts() {
        let k = kernel("input A: f16[M, K]; input B: f16[K, N] row; output D: f32[M, N] col;");
        assert_eq!(
            (k.a().layout, k.b().layout, k.d().layout),
            (Layout::Row, Layout::Row, Layout::Col),
            "layout defaults to row"
        );
        assert_eq!(
            k.a().dims,
            vec![Dim::Sym(ShapeSym::M), Dim::Sym(ShapeSym::K)]
        );
        assert_eq!(
            (k.a().direction, k.d().direction),
            (Direction::Input, Direction::Output)
        );
        assert_eq!(k.d().dtype, DType::F32);
    }

    #[test]
    fn roles_are_inferred_from_dims() {
        let k = with_gemm(
            "input C: bf16[M, N] col; input rows: f32[M]; input cols: bf16[N]; input s: f32[]; epilogue D = acc + C * rows + cols * s;",
        );
        let role = |name: &str| k.operand(name).unwrap().role.clone();
        assert_eq!(role("C"), Role::C);
        assert_eq!(role("rows"), Role::RowVector);
        assert_eq!(role("cols"), Role::ColVector);
        assert_eq!(role("s"), Role::Scalar);
        assert_eq!(k.c().unwrap().layout, Layout::Col);
    }

    #[test]
    fn operands_may_be_declared_in_any_order() {
        let k =
            kernel("output Y: bf16[M, N] row; input W: bf16[K, N] col; input X: bf16[M, K] row;");
        assert_eq!(
            (
                k.a().name.as_str(),
                k.b().name.as_str(),
                k.d().name.as_str()
            ),
            ("X", "W", "Y")
        );
    }

    #[test]
    fn literal_dims_match_fixed_extents() {
        let k = kernel(
            "input A: bf16[M, 1024] row; input B: bf16[1024, N] col; output D: bf16[M, N] row;\
             shape { M in 1..=64; N = 512; K = 1024; }",
        );
        assert_eq!(k.a().dims[1], Dim::Lit(1024));
        assert_eq!(k.b().role, Role::B);
    }

    #[test]
    fn params_with_and_without_defaults() {
        let k = with_gemm("param alpha: f32 = 1.5; param beta: f32; param shift: f32 = -0.25;");
        let params: Vec<(&str, Option<f64>)> = k
            .params
            .iter()
            .map(|p| (p.name.as_str(), p.default))
            .collect();
        assert_eq!(
            params,
            [("alpha", Some(1.5)), ("beta", None), ("shift", Some(-0.25))]
        );
    }

    #[test]
    fn accumulate_explicit_and_default() {
        assert_eq!(with_gemm("").accumulate, DType::F32);
        assert_eq!(with_gemm("accumulate f32;").accumulate, DType::F32);
        // `accumulate f16` is refused (no generator has it): spec_errors.rs.
        let int8 = kernel("input A: i8[M, K]; input B: i8[K, N] col; output D: f32[M, N];");
        assert_eq!(
            int8.accumulate,
            DType::I32,
            "i8 inputs accumulate in i32 by default"
        );
        let int8_f32 = kernel(
            "input A: i8[M, K]; input B: i8[K, N] col; output D: f32[M, N]; accumulate f32;",
        );
        assert_eq!(int8_f32.accumulate, DType::F32);
    }

    #[test]
    fn fp8_scales_of_every_granularity() {
        let fp8 = "input A: e4m3[M, K] row; input B: e4m3[K, N] col; output D: bf16[M, N] row;";
        let cases = [
            (
                "input sa: f32[] scale_of A; input sb: f32[] scale_of B;",
                ScaleGranularity::PerTensor,
                ScaleGranularity::PerTensor,
            ),
            (
                "input sa: f32[M] scale_of A; input sb: f32[N] scale_of B;",
                ScaleGranularity::PerRow,
                ScaleGranularity::PerCol,
            ),
            (
                "input sa: f32[M, K/128] col scale_of A; input sb: f32[N/128, K/128] scale_of B;",
                ScaleGranularity::Block1x128,
                ScaleGranularity::Block128x128,
            ),
            (
                "input sa: f32[M, K/128] col scale_of A; input sb: f32[N, K/128] col scale_of B;",
                ScaleGranularity::Block1x128,
                ScaleGranularity::Block1x128,
            ),
        ];
        for (scales, ga, gb) in cases {
            let k = kernel(&format!("{fp8} {scales}"));
            assert_eq!(
                k.operand("sa").unwrap().role,
                Role::Scale {
                    of: "A".into(),
                    granularity: ga
                }
            );
            assert_eq!(
                k.operand("sb").unwrap().role,
                Role::Scale {
                    of: "B".into(),
                    granularity: gb
                }
            );
        }
        let k = kernel(&format!("{fp8} input sa: f32[M, K/128] col scale_of A;"));
        assert_eq!(
            k.operand("sa").unwrap().dims[1],
            Dim::CeilDiv(ShapeSym::K, 128)
        );
        assert_eq!(k.operand("sa").unwrap().layout, Layout::Col);
    }

    #[test]
    fn amax_outputs_per_tensor_and_per_row() {
        let base = "input A: bf16[M, K] row; input B: bf16[K, N] col; output D: e4m3[M, N] row;";
        for (decl, per_row) in [
            ("output amax: f32[] amax_of D;", false),
            ("output amax: f32[M] amax_of D;", true),
        ] {
            let k = kernel(&format!("{base} {decl}"));
            assert_eq!(
                k.operand("amax").unwrap().role,
                Role::Amax {
                    of: "D".into(),
                    per_row
                }
            );
            // The summary names it.
            let summary = deepgemm::spec::summary(&k);
            assert!(summary.contains("amax of D"), "{summary}");
        }
    }

    fn epilogue(extra_decls: &str, expr: &str) -> Expr {
        with_gemm(&format!("{extra_decls} epilogue D = {expr};"))
            .epilogue
            .expr
    }

    fn var(name: &str) -> Box<Expr> {
        Box::new(Expr::Var(name.into()))
    }

    #[test]
    fn epilogue_precedence_and_associativity() {
        let decls = "param a: f32; param b: f32; param c: f32;";
        use BinaryOp::*;
        assert_eq!(
            epilogue(decls, "a + b * c"),
            Expr::Binary(
                Add,
                var("a"),
                Box::new(Expr::Binary(Mul, var("b"), var("c")))
            )
        );
        assert_eq!(
            epilogue(decls, "a - b - c"),
            Expr::Binary(
                Sub,
                Box::new(Expr::Binary(Sub, var("a"), var("b"))),
                var("c")
            )
        );
        assert_eq!(
            epilogue(decls, "a - (b - c)"),
            Expr::Binary(
                Sub,
                var("a"),
                Box::new(Expr::Binary(Sub, var("b"), var("c")))
            )
        );
        assert_eq!(
            epilogue(decls, "-(a + b) / -c"),
            Expr::Binary(
                Div,
                Box::new(Expr::Unary(
                    UnaryOp::Neg,
                    Box::new(Expr::Binary(Add, var("a"), var("b")))
                )),
                Box::new(Expr::Unary(UnaryOp::Neg, var("c")))
            )
        );
    }

    #[test]
    fn epilogue_functions_and_casts() {
        let decls = "input bias: f32[N]; input rs: f32[M]; input C: bf16[M, N]; input s: f32[]; param alpha: f32 = 2;";
        let expr = "clamp(max(relu(acc), min(abs(bias), rs)), -1, 1) + gelu(acc) + gelu_tanh(acc) \
                    + silu(acc) * sigmoid(acc) / tanh(alpha) + cast<bf16>(C) * s + cast<e4m3>(acc)";
        let e = epilogue(decls, expr);
        assert_eq!(e.references(), ["bias", "rs", "alpha", "C", "s"]);
        let env = |name: &str| match name {
            "bias" => -0.5,
            "rs" => 0.25,
            "alpha" => 2.0,
            "C" => 3.0,
            "s" => 0.5,
            _ => f64::NAN,
        };
        let acc: f64 = 0.75;
        let sigmoid = 1.0 / (1.0 + (-acc).exp());
        let want = acc.max(0.25_f64.min(0.5)).clamp(-1.0, 1.0)
            + 0.5 * acc * (1.0 + erf(acc / 2f64.sqrt()))
            + 0.5 * acc * (1.0 + ((2.0 / PI).sqrt() * (acc + 0.044715 * acc.powi(3))).tanh())
            + acc * sigmoid * sigmoid / 2f64.tanh()
            + 3.0 * 0.5
            + 0.75; // 0.75 is exact in e4m3
        assert!(
            (e.eval(&env, acc) - want).abs() < 1e-12,
            "{} vs {want}",
            e.eval(&env, acc)
        );
    }

    #[test]
    fn default_epilogue_is_acc_or_blas() {
        assert_eq!(
            with_gemm("").epilogue,
            Epilogue {
                output: "D".into(),
                expr: Expr::Acc
            }
        );
        let k = with_gemm("input C: bf16[M, N] row; param alpha: f32 = 1; param beta: f32 = 0;");
        assert_eq!(k.epilogue.expr.to_string(), "alpha * acc + beta * C");
        let k = with_gemm("input C: bf16[M, N] row;");
        assert_eq!(k.epilogue.expr.to_string(), "acc + C");
    }

    #[test]
    fn shape_fixed_range_and_set() {
        let k = kernel(&format!(
            "{GEMM} shape {{ M in 1..=8192; N in {{4096, 1024, 4096}}; K = 7168; }}"
        ));
        assert_eq!(k.shape.m, DimDomain::Range { lo: 1, hi: 8192 });
        assert_eq!(
            k.shape.n,
            DimDomain::Set(vec![1024, 4096]),
            "sets are sorted and distinct"
        );
        assert_eq!(k.shape.k, DimDomain::Fixed(7168));
        assert_eq!(k.shape.fallback, ShapeFallback::None);
    }

    #[test]
    fn shape_fallback_nearest() {
        let k = kernel(&format!(
            "{GEMM} shape {{ M in 1..=512; fallback nearest; N = 256; K in {{384, 1024}}; }}"
        ));
        // (`kernel` also checks that the printed spec parses back to the same, fallback included.)
        assert_eq!(k.shape.fallback, ShapeFallback::Nearest);
        // The nearest declared values: a range's ends, a set's nearest member (the larger on a
        // tie), a fixed value.
        for (shape, nearest) in [
            ((600, 256, 384), (512, 256, 384)),
            ((1, 7, 700), (1, 256, 384)),
            ((9, 256, 704), (9, 256, 1024)),
            ((9, 256, 703), (9, 256, 384)),
            ((9, 256, 5000), (9, 256, 1024)),
        ] {
            let s = |(m, n, k)| deepgemm::plan::Shape::new(m, n, k);
            assert_eq!(k.shape.nearest_declared(s(shape)), s(nearest), "{shape:?}");
        }
        // A `fallback` dimension name still works as a name elsewhere in the kernel.
        let k = kernel(&format!("{GEMM} param fallback: f32 = 1.0;"));
        assert_eq!(k.params[0].name, "fallback");
    }

    #[test]
    fn constraints_hard_and_soft() {
        let k = with_gemm(
            "constraints {\n\
               smem <= 200 KiB;\n\
               registers ~ 168;\n\
               tensor_util >= 0.8;\n\
               alu_utilization >= 0.5;\n\
               occupancy == 1;\n\
               dram_bytes <= 1 MiB;\n\
               waves * 2 >= 1.5 + l2_hit_rate;\n\
               TILE_M * TILE_N <= 128 * 256;\n\
               predicted_us ~ 20;\n\
               tflops >= 500;\n\
               use_tensor_cores == true;\n\
               pad_k == 0;\n\
               backend == sm90;\n\
             }",
        );
        let texts: Vec<&str> = k.constraints.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "smem <= 200 KiB",
                "registers ~ 168",
                "tensor_util >= 0.8",
                "tensor_util >= 0.5",
                "occupancy == 1",
                "dram_bytes <= 1 MiB",
                "waves * 2 >= 1.5 + l2_hit_rate",
                "TILE_M * TILE_N <= 128 * 256",
                "predicted_us ~ 20",
                "tflops >= 500",
                "use_tensor_cores == 1",
                "pad_k == 0",
                "backend == sm90",
            ]
        );
        assert_eq!(k.constraints[0].rhs, CExpr::Number(204800.0));
        assert_eq!(k.constraints[1].op, ConstraintOp::Near);
        assert_eq!(k.constraints[12].rhs, CExpr::Backend(Backend::Sm90));
    }

    #[test]
    fn tiling_domains() {
        let k = with_gemm(
            "tiling {\n\
               TILE_M in [64, 256] where TILE_M % 64 == 0;\n\
               TILE_N in {256, 64, 128};\n\
               STAGES in 2..=8;\n\
               TILE_K in 32..=128 step 32;\n\
               CLUSTER_M in {1, 2} where CLUSTER_M * CLUSTER_N <= 2 && !(CLUSTER_M == 2 || WARPGROUPS > 2);\n\
             }",
        );
        let values: Vec<&TileValues> = k.tiling.iter().map(|t| &t.values).collect();
        assert_eq!(
            values,
            [
                &TileValues::Interval { lo: 64, hi: 256 },
                &TileValues::Set(vec![64, 128, 256]),
                &TileValues::Stepped {
                    lo: 2,
                    hi: 8,
                    step: 1
                },
                &TileValues::Stepped {
                    lo: 32,
                    hi: 128,
                    step: 32
                },
                &TileValues::Set(vec![1, 2]),
            ]
        );
        assert_eq!(
            k.tiling[0].condition,
            Some(CExpr::Bin(
                CBinOp::Eq,
                Box::new(CExpr::Bin(
                    CBinOp::Mod,
                    Box::new(CExpr::TileVar(TileVar::TILE_M)),
                    Box::new(CExpr::Number(64.0))
                )),
                Box::new(CExpr::Number(0.0))
            ))
        );
        assert!(matches!(
            k.tiling[4].condition,
            Some(CExpr::Bin(CBinOp::And, _, _))
        ));
    }

    #[test]
    fn comments_unicode_and_size_suffixes() {
        let src = "// a line comment\n\
                   kernel k { /* a block\n comment */ target h200;\n\
                   input A: bf16[M, K] row; // trailing\n\
                   input B: bf16[K, N] col; output D: bf16[M, N] row;\n\
                   shape { M ∈ 1..=64; N ∈ {128, 256}; K = 64; }\n\
                   constraints { smem ≤ 96 KiB; registers ≥ 64; dram_bytes <= 2 MiB; }\n\
                   tiling { TILE_M ∈ [64, 128] where TILE_M ≥ 64 ∧ TILE_M % 64 == 0; }\n\
                   }";
        let k = check(src).kernels.remove(0);
        assert_eq!(k.shape.m, DimDomain::Range { lo: 1, hi: 64 });
        assert_eq!(k.constraints[0].rhs, CExpr::Number(96.0 * 1024.0));
        assert_eq!(k.constraints[1].op, ConstraintOp::Ge);
        assert_eq!(k.constraints[2].rhs, CExpr::Number(2.0 * 1048576.0));
        assert!(matches!(
            k.tiling[0].condition,
            Some(CExpr::Bin(CBinOp::And, _, _))
        ));
    }

    #[test]
    fn printer_keeps_the_tree() {
        // Parenthesization the printer must keep for the round trip to hold.
        let k = with_gemm(
            "param a: f32; param b: f32;\n\
             epilogue D = -(a - (b - acc)) / (a * (b / acc)) - -(-acc);\n\
             constraints { (TILE_M + TILE_N) * 2 <= 512 - (TILE_K - 32); smem - -1 >= -(2 + 3); }\n\
             tiling { STAGES in 2..=8 where !(STAGES < 3) && (STAGES == 4 || STAGES == 6) || (!(STAGES > 2)) == 1; }",
        );
        let printed = to_dgml(&SpecFile { kernels: vec![k] });
        assert!(
            printed.contains("epilogue D = -(a - (b - acc)) / (a * (b / acc)) - -(-acc);"),
            "{printed}"
        );
        assert!(
            printed.contains("(TILE_M + TILE_N) * 2 <= 512 - (TILE_K - 32);"),
            "{printed}"
        );
    }

    #[test]
    fn summary_lists_everything() {
        let k = with_gemm("input bias: f32[N]; param alpha: f32 = 1; epilogue D = alpha * acc + bias; constraints { smem <= 100 KiB; registers ~ 128; } tiling { STAGES in {3, 4}; }");
        let s = summary(&k);
        for needle in [
            "kernel k",
            "target       h200 (h200, sm_90a, 132 SMs)",
            "bias  input   f32[N]",
            "column vector",
            "params       alpha: f32 = 1",
            "accumulate   f32",
            "epilogue     D = alpha * acc + bias",
            "shape        M = 256, N = 512, K = 1024",
            "buckets      1",
            "smem <= 100 KiB  (hard)",
            "registers ~ 128  (soft)",
            "STAGES in {3, 4}",
        ] {
            assert!(s.contains(needle), "missing {needle:?} in\n{s}");
        }
    }

    /// docs/language.md is the language's reference: every dtype, function, observable, tile
    /// variable, backend and target the implementation knows is named there.
    #[test]
    fn the_language_reference_names_every_construct() {
        let doc = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/language.md"),
        )
        .unwrap();
        let quoted = |name: &str| format!("`{name}");
        let mut names: Vec<String> = DType::ALL.iter().map(|d| d.name().to_string()).collect();
        names.extend(Func::ALL.iter().map(|f| format!("{}(", f.name())));
        names.push("cast<".to_string());
        names.extend(Observable::ALL.iter().map(|o| o.name().to_string()));
        names.push("alu_utilization".to_string());
        names.extend(TileVar::ALL.iter().map(|v| v.name().to_string()));
        names.extend(Backend::ALL.iter().map(|b| b.name().to_string()));
        names.extend(deepgemm::hw::preset_names().into_iter().map(str::to_string));
        let missing: Vec<&String> = names.iter().filter(|n| !doc.contains(&quoted(n))).collect();
        assert!(
            missing.is_empty(),
            "docs/language.md does not name {missing:?}"
        );
    }
}
