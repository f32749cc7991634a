//! Malformed `.dgml`: each case asserts where the error is (line:col), what it says and its
//! hint, and that nothing else is reported (no cascades). Then: several errors in one file,
//! the rendering, and files on disk.

mod spec_errors {
    use deepgemm::spec::{self, Diagnostic};
    use std::path::Path;

    /// A valid kernel; cases replace numbered lines. Lines 6 and 7 are free slots for items.
    const BASE: [&str; 9] = [
        "kernel k {",
        "  target h200;",
        "  input A: bf16[M, K] row;",
        "  input B: bf16[K, N] col;",
        "  output D: bf16[M, N] row;",
        "",
        "",
        "  shape { M = 64; N = 64; K = 64; }",
        "}",
    ];

    fn base_with(replace: &[(usize, &str)]) -> String {
        let mut lines: Vec<&str> = BASE.to_vec();
        for &(line, text) in replace {
            lines[line - 1] = text;
        }
        lines.join("\n")
    }

    fn diagnostics(src: &str) -> Vec<Diagnostic> {
        match spec::parse_str(src, "case.dgml", Path::new(".")) {
            Ok(_) => Vec::new(),
            Err(d) => d.items,
        }
    }

    struct Case {
        name: &'static str,
        replace: &'static [(usize, &'static str)],
        at: (u32, u32),
        message: &'static str,
        hint: Option<&'static str>,
    }

    const CASES: &[Case] = &[
        Case {
            name: "a tile variable no generator implements is not silently ignored",
            replace: &[(6, "  tiling { SPLIT_K in 1..=8; }")],
            at: (6, 12),
            message: "`SPLIT_K` is not implemented yet: no generator splits K, every plan has \
                      SPLIT_K = 1",
            hint: Some("remove it; small-M shapes are planned without split-K"),
        },
        Case {
            name: "nor in a constraint",
            replace: &[(6, "  constraints { SPLIT_K >= 2; }")],
            at: (6, 17),
            message: "`SPLIT_K` is not implemented yet: no generator splits K, every plan has \
                      SPLIT_K = 1",
            hint: Some("remove it"),
        },
        Case {
            name: "an accumulator no generator implements, at its line",
            replace: &[
                (3, "  input A: f16[M, K] row;"),
                (4, "  input B: f16[K, N] col;"),
                (6, "  accumulate f16;"),
            ],
            at: (6, 14),
            message: "no generator accumulates f16 inputs in f16 (they accumulate in f32)",
            hint: Some("write `accumulate f32;` or leave it out"),
        },
        Case {
            name: "an amax of an operand that is not D",
            replace: &[(6, "  output amax: f32[] amax_of A;")],
            at: (6, 30),
            message: "`amax_of A`: the kernel's output D is `D`",
            hint: Some("write `amax_of D`"),
        },
        Case {
            name: "an amax that is not f32",
            replace: &[(6, "  output amax: bf16[M] amax_of D;")],
            at: (6, 16),
            message: "an amax is f32, `amax` is bf16",
            hint: Some("write `output amax: f32[M] amax_of D;`"),
        },
        Case {
            name: "an amax per column",
            replace: &[(6, "  output amax: f32[N] amax_of D;")],
            at: (6, 19),
            message: "`amax`: an amax is one value (`f32[]`) or one per row (`f32[M]`)",
            hint: Some("write `output amax: f32[] amax_of D;` or `output amax: f32[M] amax_of D;`"),
        },
        Case {
            name: "an amax input",
            replace: &[(6, "  input amax: f32[] amax_of D;")],
            at: (6, 9),
            message: "`amax` has `amax_of` but is an input",
            hint: Some("write `output amax: f32[] amax_of D;`"),
        },
        Case {
            name: "two amax outputs",
            replace: &[
                (6, "  output amax: f32[] amax_of D;"),
                (7, "  output rows: f32[M] amax_of D;"),
            ],
            at: (7, 10),
            message: "a kernel has at most one amax output",
            hint: Some("keep one: per tensor (`f32[]`) or per row (`f32[M]`)"),
        },
        Case {
            name: "i8 inputs into an i32 output",
            replace: &[
                (3, "  input A: i8[M, K] row;"),
                (4, "  input B: i8[K, N] col;"),
                (5, "  output D: i32[M, N] row;"),
            ],
            at: (5, 13),
            message: "output `D` is i32: no epilogue stores i32 outputs (they store f32, f16, \
                      bf16, e4m3 or e5m2)",
            hint: Some(
                "write `output D: f32...`: the integer sum converts to f32 exactly up to 2^24",
            ),
        },
        Case {
            name: "an extent past the kernel ABI's int names the limit",
            replace: &[(8, "  shape { M = 1099511627776; N = 64; K = 64; }")],
            at: (8, 15),
            message: "`M` reaches 1099511627776, more than the kernel ABI holds: kernels take \
                      `int M`, at most 2147418112 (2^31 - 2^16)",
            hint: Some("split the problem into GEMMs of at most 2147418112 along M"),
        },
        Case {
            name: "one past the limit, in a range too",
            replace: &[(8, "  shape { M = 64; N = 64; K in 1..=2147418113; }")],
            at: (8, 32),
            message: "`K` reaches 2147418113, more than the kernel ABI holds: kernels take \
                      `int K`, at most 2147418112 (2^31 - 2^16)",
            hint: Some("split the problem into GEMMs of at most 2147418112 along K"),
        },
        Case {
            name: "unknown dtype, with did-you-mean",
            replace: &[(3, "  input A: bf61[M, K] row;")],
            at: (3, 12),
            message: "unknown dtype `bf61`",
            hint: Some("did you mean \"bf16\"?"),
        },
        Case {
            name: "unknown target lists the known ones",
            replace: &[(2, "  target b200;")],
            at: (2, 10),
            message: "unknown target `b200`",
            hint: Some("did you mean \"h200\"?"),
        },
        Case {
            name: "e4m3 on a100 names a target that has it",
            replace: &[
                (2, "  target a100;"),
                (3, "  input A: e4m3[M, K] row;"),
                (4, "  input B: e4m3[K, N] col;"),
            ],
            at: (3, 12),
            message: "e4m3 inputs are not supported on a100 (sm_80)",
            hint: Some("h200"),
        },
        Case {
            name: "B declared [N, K] fits no role",
            replace: &[(4, "  input B: bf16[N, K] row;")],
            at: (4, 16),
            message: "`B` has dims [N, K], which fit no operand role",
            hint: Some("B is always [K, N]; a B stored as N rows of K is `[K, N] col`"),
        },
        Case {
            name: "duplicate symbol",
            replace: &[(6, "  input A: bf16[M];")],
            at: (6, 9),
            message: "`A` is declared twice",
            hint: Some("the first `A` is on line 3"),
        },
        Case {
            name: "param and operand share a name",
            replace: &[(6, "  param D: f32 = 1.0;")],
            at: (6, 9),
            message: "`D` is declared twice",
            hint: Some("line 5"),
        },
        Case {
            name: "epilogue uses an undeclared name",
            replace: &[(6, "  input bias: bf16[N];"), (7, "  epilogue D = acc + bais;")],
            at: (7, 22),
            message: "`bais` is not declared",
            hint: Some("did you mean \"bias\"?"),
        },
        Case {
            name: "empty range",
            replace: &[(8, "  shape { M in 10..=5; N = 64; K = 64; }")],
            at: (8, 16),
            message: "empty range: `M in 10..=5` has no values",
            hint: Some("`5..=10`"),
        },
        Case {
            name: "unknown constraint name",
            replace: &[(6, "  constraints { smme <= 200 KiB; }")],
            at: (6, 17),
            message: "unknown name `smme` in a constraint",
            hint: Some("did you mean \"smem\"?"),
        },
        Case {
            name: "unterminated comment",
            replace: &[(9, "} /* the end")],
            at: (9, 3),
            message: "unterminated block comment",
            hint: Some("close this one with `*/`"),
        },
        Case {
            name: "missing semicolon",
            replace: &[(3, "  input A: bf16[M, K] row")],
            at: (3, 26),
            message: "missing `;` (found `input`)",
            hint: None,
        },
        Case {
            name: "exclusive range",
            replace: &[(8, "  shape { M in 1..64; N = 64; K = 64; }")],
            at: (8, 17),
            message: "ranges are inclusive and written `..=`",
            hint: Some("`M in 1..=8192`"),
        },
        Case {
            name: "unknown item keyword",
            replace: &[(6, "  inptu C: bf16[M, N] row;")],
            at: (6, 3),
            message: "unknown kernel item `inptu`",
            hint: Some("did you mean \"input\"?"),
        },
        Case {
            name: "A and B dtypes differ",
            replace: &[(4, "  input B: f16[K, N] col;")],
            at: (4, 12),
            message: "A (`A`) is bf16 but B (`B`) is f16; A and B must have the same dtype",
            hint: Some("e4m3 x e5m2 only"),
        },
        Case {
            name: "no output",
            replace: &[(5, "")],
            at: (1, 8),
            message: "kernel `k` has no output D [M, N] operand",
            hint: Some("output D: bf16[M, N] row;"),
        },
        Case {
            name: "two outputs",
            replace: &[(6, "  output E: f32[M, N] row;")],
            at: (6, 10),
            message: "`E` is a second output; a kernel has exactly one",
            hint: Some("line 5"),
        },
        Case {
            name: "epilogue reads a GEMM operand",
            replace: &[(6, "  epilogue D = acc + A;")],
            at: (6, 22),
            message: "the epilogue cannot read `A`: it is the A [M, K] operand",
            hint: None,
        },
        Case {
            name: "unknown function",
            replace: &[(6, "  epilogue D = gleu(acc);")],
            at: (6, 16),
            message: "unknown function `gleu`",
            hint: Some("did you mean \"gelu\"?"),
        },
        Case {
            name: "wrong number of arguments",
            replace: &[(6, "  epilogue D = min(acc);")],
            at: (6, 16),
            message: "`min` takes 2 arguments, found 1",
            hint: None,
        },
        Case {
            name: "scale dims that fit no granularity",
            replace: &[
                (3, "  input A: e4m3[M, K] row;"),
                (4, "  input B: e4m3[K, N] col;"),
                (6, "  input sa: f32[K/128, M] scale_of A;"),
            ],
            at: (6, 16),
            message: "scale dims [K/128, M] do not fit A [M, K] `A`",
            hint: None,
        },
        Case {
            name: "scale of a bf16 operand",
            replace: &[(6, "  input sa: f32[M, K/128] row scale_of A;")],
            at: (6, 40),
            message: "`A` is bf16; `scale_of` applies to FP8 operands (e4m3, e5m2)",
            hint: None,
        },
        Case {
            name: "scale of an unknown operand",
            replace: &[
                (3, "  input A: e4m3[M, K] row;"),
                (4, "  input B: e4m3[K, N] col;"),
                (6, "  input sb: f32[N/128, K/128] scale_of Bb;"),
            ],
            at: (6, 40),
            message: "`scale_of Bb`: no A or B operand is called `Bb`",
            hint: Some("did you mean \"B\"?"),
        },
        Case {
            name: "illegal accumulator",
            replace: &[(6, "  accumulate i32;")],
            at: (6, 14),
            message: "no generator accumulates bf16 inputs in i32 (they accumulate in f32)",
            hint: Some("`accumulate f32;`"),
        },
        Case {
            name: "unknown tile variable",
            replace: &[(6, "  tiling { TILE_MM in {64, 128}; }")],
            at: (6, 12),
            message: "unknown tile variable `TILE_MM`",
            hint: Some("did you mean \"TILE_M\"?"),
        },
        Case {
            name: "observable in a tiling condition",
            replace: &[(6, "  tiling { TILE_M in [64, 256] where smem < 100; }")],
            at: (6, 38),
            message: "`smem` cannot be used in a tiling condition",
            hint: Some("put model limits in `constraints`"),
        },
        Case {
            name: "shape misses K",
            replace: &[(8, "  shape { M = 64; N = 64; }")],
            at: (8, 3),
            message: "the shape of kernel `k` does not give K",
            hint: Some("`K = 4096;`"),
        },
        Case {
            name: "unterminated string",
            replace: &[(2, "  hardware \"gpu.yaml;")],
            at: (2, 12),
            message: "unterminated string",
            hint: None,
        },
        Case {
            name: "unexpected character",
            replace: &[(6, "  param alpha: f32 = $1;")],
            at: (6, 22),
            message: "unexpected character `$`",
            hint: None,
        },
        Case {
            name: "strict comparison as a constraint",
            replace: &[(6, "  constraints { registers < 128; }")],
            at: (6, 27),
            message: "`<` is not a constraint operator",
            hint: Some("`~` (soft)"),
        },
        Case {
            name: "non-f32 param (the hint keeps its default)",
            replace: &[(6, "  param alpha: bf16 = 1;")],
            at: (6, 16),
            message: "param `alpha` is bf16; params are f32",
            hint: Some("`param alpha: f32 = 1;`"),
        },
        Case {
            name: "layout on a vector",
            replace: &[(6, "  input bias: f32[N] col;")],
            at: (6, 22),
            message: "a layout applies only to matrices (2 dims)",
            hint: Some("remove `col`"),
        },
        Case {
            name: "no target",
            replace: &[(2, "")],
            at: (1, 8),
            message: "kernel `k` has no target",
            hint: Some("`hardware \"file.yaml\";`"),
        },
        Case {
            name: "backend compared with <=",
            replace: &[(6, "  constraints { backend <= sm90; }")],
            at: (6, 17),
            message: "a backend constraint is `backend == NAME`",
            hint: None,
        },
        Case {
            name: "unknown shape symbol",
            replace: &[(8, "  shape { M = 64; N = 64; L = 64; }")],
            at: (8, 27),
            message: "unknown shape symbol `L`",
            hint: Some("M, N and K"),
        },
        Case {
            name: "unknown shape fallback",
            replace: &[(8, "  shape { M = 64; N = 64; K = 64; fallback farthest; }")],
            at: (8, 44),
            message: "unknown fallback `farthest`",
            hint: Some("`fallback nearest;`"),
        },
        Case {
            name: "shape fallback without a mode",
            replace: &[(8, "  shape { M = 64; N = 64; K = 64; fallback; }")],
            at: (8, 35),
            message: "`fallback` needs a mode",
            hint: Some("`fallback nearest;`"),
        },
        Case {
            name: "shape fallback given twice",
            replace: &[(
                8,
                "  shape { M = 64; N = 64; K = 64; fallback nearest; fallback nearest; }",
            )],
            at: (8, 62),
            message: "`fallback` is given twice in `shape`",
            hint: None,
        },
        Case {
            name: "tile variable given twice",
            replace: &[(6, "  tiling { STAGES in 2..=4; STAGES in {3}; }")],
            at: (6, 29),
            message: "`STAGES` is given twice in `tiling`",
            hint: None,
        },
        Case {
            name: "epilogue writes a name that is not the output",
            replace: &[(6, "  epilogue E = acc;")],
            at: (6, 12),
            message: "the epilogue writes `E`, but the output is `D`",
            hint: Some("`epilogue D = ...;`"),
        },
        Case {
            name: "fraction where an integer is needed",
            replace: &[(8, "  shape { M = 1.5; N = 64; K = 64; }")],
            at: (8, 15),
            message: "expected an integer, found `1.5`",
            hint: None,
        },
        Case {
            name: "a dtype no target multiplies",
            replace: &[
                (3, "  input A: i32[M, K] row;"),
                (4, "  input B: i32[K, N] col;"),
                (5, "  output D: f32[M, N] row;"),
            ],
            at: (3, 12),
            message: "i32 inputs are not supported on h200 (sm_90a)",
            hint: Some("no built-in target multiplies i32 inputs"),
        },
        Case {
            name: "block dims without scale_of",
            replace: &[(6, "  input s: f32[M, K/128];")],
            at: (6, 15),
            message: "`s` has a block dim but no `scale_of`",
            hint: Some("scale_of A"),
        },
        Case {
            name: "three dims",
            replace: &[(6, "  input T: f32[M, N, K];")],
            at: (6, 15),
            message: "`T` has 3 dims; operands have at most 2",
            hint: None,
        },
        Case {
            name: "expression nested too deeply",
            replace: &[(
                6,
                "  epilogue D = (((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((acc)))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))));",
            )],
            at: (6, 80),
            message: "expression nested too deeply",
            hint: Some("at most 64 levels"),
        },
        Case {
            name: "zero-sized shape",
            replace: &[(8, "  shape { M = 0; N = 64; K = 64; }")],
            at: (8, 15),
            message: "`M` must be at least 1",
            hint: None,
        },
        Case {
            name: "an input the epilogue never reads",
            replace: &[(6, "  input bias: f32[N];")],
            at: (6, 9),
            message: "input `bias` is never read: the epilogue does not use it",
            hint: Some("`epilogue D = ...;`"),
        },
        Case {
            name: "two targets",
            replace: &[(6, "  target h100;")],
            at: (6, 10),
            message: "the target is given twice",
            hint: Some("one `target` or `hardware` line"),
        },
        Case {
            name: "misspelled layout",
            replace: &[(4, "  input B: bf16[K, N] column;")],
            at: (4, 23),
            message: "unexpected `column` after the operand's dims",
            hint: Some("did you mean \"col\"?"),
        },
        Case {
            name: "a layout spelled out",
            replace: &[(3, "  input A: bf16[M, K] rowmajor;")],
            at: (3, 23),
            message: "unexpected `rowmajor` after the operand's dims",
            hint: Some("did you mean \"row\"?"),
        },
        Case {
            name: "an observable abbreviated",
            replace: &[(6, "  constraints { regs <= 128; }")],
            at: (6, 17),
            message: "unknown name `regs` in a constraint",
            hint: Some("did you mean \"registers\"?"),
        },
        Case {
            name: "a size in KB",
            replace: &[(6, "  constraints { smem <= 100 KB; }")],
            at: (6, 29),
            message: "unknown size unit `KB`",
            hint: Some("write `100 KiB`"),
        },
        // The seed documents' dialect: each form gets the v1 spelling in its hint.
        Case {
            name: "a seed-document setting `use_hmma: true`",
            replace: &[(6, "  constraints { use_hmma: true; }")],
            at: (6, 25),
            message: "`:` is not a constraint operator",
            hint: Some("write `use_tensor_cores == 1`"),
        },
        Case {
            name: "a seed-document setting `sm_mem_limit: 96`",
            replace: &[(6, "  constraints { sm_mem_limit: 96; }")],
            at: (6, 29),
            message: "`:` is not a constraint operator",
            hint: Some("write `smem <= 96 KiB`"),
        },
        Case {
            name: "a seed-document setting `l2_hit_rate_min: 0.85`",
            replace: &[(6, "  constraints { l2_hit_rate_min: 0.85; }")],
            at: (6, 32),
            message: "`:` is not a constraint operator",
            hint: Some("write `l2_hit_rate >= 0.85`"),
        },
        Case {
            name: "a seed-document observable",
            replace: &[(6, "  constraints { register_usage <= 256; }")],
            at: (6, 17),
            message: "unknown name `register_usage` in a constraint",
            hint: Some("the observable is `registers`"),
        },
        Case {
            name: "a seed-document tensor type",
            replace: &[(3, "  input A: tensor<bf16>[M, K];")],
            at: (3, 12),
            message: "`tensor<bf16>` is not a dtype",
            hint: Some("write `bf16[M, K] row`"),
        },
        Case {
            name: "a seed-document `op` block",
            replace: &[(1, "op k {")],
            at: (1, 1),
            message: "`op` is not a `.dgml` item",
            hint: Some("a kernel is declared `kernel NAME { ... }`"),
        },
    ];

    /// What of the seed documents' dialect fits the language is accepted: `∧` in a tiling
    /// domain is its `where`, and `alu_utilization` is `tensor_util`.
    #[test]
    fn the_seed_documents_dialect_that_fits_is_accepted() {
        let parse = |replace: &[(usize, &str)]| {
            spec::parse_str(&base_with(replace), "case.dgml", Path::new("."))
                .unwrap_or_else(|d| panic!("{d}"))
        };
        let seed = parse(&[(6, "  tiling { TILE_M ∈ [16, 256] ∧ TILE_M % 16 == 0; }")]);
        let v1 = parse(&[(
            6,
            "  tiling { TILE_M in [16, 256] where TILE_M % 16 == 0; }",
        )]);
        assert_eq!(seed, v1);
        let seed = parse(&[(6, "  constraints { alu_utilization >= 0.85; }")]);
        let v1 = parse(&[(6, "  constraints { tensor_util >= 0.85; }")]);
        assert_eq!(
            seed.kernels[0].constraints[0].lhs,
            v1.kernels[0].constraints[0].lhs
        );
    }

    #[test]
    fn each_malformed_input_reports_one_precise_error() {
        assert!(CASES.len() >= 25);
        let mut failures = Vec::new();
        for case in CASES {
            let src = base_with(case.replace);
            let diags = diagnostics(&src);
            let ok = match diags.as_slice() {
                [d] => {
                    (d.line, d.col) == case.at
                        && d.message == case.message
                        && match case.hint {
                            Some(h) => d.hint.as_deref().is_some_and(|got| got.contains(h)),
                            None => true,
                        }
                }
                _ => false,
            };
            if !ok {
                let got: Vec<String> = diags
                    .iter()
                    .map(|d| format!("{}:{} {} (hint: {:?})", d.line, d.col, d.message, d.hint))
                    .collect();
                failures.push(format!(
                    "{}: want {}:{} {:?} hint {:?}\n  got {:#?}",
                    case.name, case.at.0, case.at.1, case.message, case.hint, got
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn several_errors_in_one_file_are_all_reported() {
        let src = [
            "kernel k {",                              // 1
            "  target h200;",                          // 2
            "  input A: bf61[M, K] row;",              // 3 unknown dtype
            "  input B: bf16[K, N] col",               // 4 missing ;
            "  output D: bf16[M, N] row;",             // 5
            "  epilogue D = relu(acc) + nope;",        // 6 undeclared
            "  shape { M in 9..=3; N = 64; K = 64; }", // 7 empty range
            "  constraints { regs <= 128; }",          // 8 unknown name
            "}",
            "kernel k {",     // 10 duplicate kernel
            "  target h900;", // 11 unknown target
            "  input A: bf16[M, K] row;",
            "  input B: bf16[K, N] col;",
            "  output D: bf16[M, N] row;",
            "  shape { M = 1; N = 1; K = 1; }",
            "}",
        ]
        .join("\n");
        let got: Vec<(u32, u32)> = diagnostics(&src).iter().map(|d| (d.line, d.col)).collect();
        assert_eq!(
            got,
            vec![
                (3, 12),
                (4, 26),
                (6, 28),
                (7, 16),
                (8, 17),
                (10, 8),
                (11, 10)
            ]
        );
    }

    #[test]
    fn file_level_errors() {
        let cases: [(&str, (u32, u32), &str); 4] = [
            ("", (1, 1), "no kernel in this file"),
            ("// only a comment\n", (1, 1), "no kernel in this file"),
            (
                &format!("target h200;\n{}", BASE.join("\n")),
                (1, 1),
                "expected `kernel`, found `target`",
            ),
            (
                "kernel k {\n  target h200;\n",
                (1, 10),
                "kernel `k` is not closed",
            ),
        ];
        for (src, at, message) in cases {
            let diags = diagnostics(src);
            assert_eq!(diags.len(), 1, "{src:?}: {diags:#?}");
            assert_eq!(
                ((diags[0].line, diags[0].col), diags[0].message.as_str()),
                (at, message)
            );
        }
        let outside = diagnostics(&format!("target h200;\n{}", BASE.join("\n")));
        assert_eq!(
            outside[0].hint.as_deref(),
            Some(
                "`target` belongs inside a `kernel NAME { ... }` block; each kernel names its \
                 own (`kernel NAME { target h200; ... }`)"
            )
        );
    }

    #[test]
    fn rendering_shows_file_line_caret_expected_and_hint() {
        let src = base_with(&[(3, "  input A: bf61[M, K] row;")]);
        let err = spec::parse_str(&src, "gemm.dgml", Path::new(".")).unwrap_err();
        let text = err.render();
        assert_eq!(
            text,
            "error: unknown dtype `bf61`\n \
             --> gemm.dgml:3:12\n  \
             |\n\
             3 |   input A: bf61[M, K] row;\n  \
             |            ^^^^ expected a dtype: f32, tf32, f16, bf16, e4m3, e5m2, i8, i32\n  \
             |\n  \
             = hint: did you mean \"bf16\"?\n\
             \n\
             error: could not check the spec: 1 error\n"
        );
        assert_eq!(err.to_string(), text);
    }

    #[test]
    fn a_flood_of_errors_is_cut_off_with_a_note() {
        let src = format!("kernel k {{\n{}}}", "  bogus;\n".repeat(300));
        let diags = diagnostics(&src);
        assert_eq!(diags.len(), 101);
        assert_eq!(
            (diags[99].line, diags[99].message.as_str()),
            (101, "unknown kernel item `bogus`")
        );
        assert_eq!(
            diags[100].message,
            "too many errors; the rest of the file is not checked"
        );
        // The total counts the errors shown, not the note, and says more may follow.
        let rendered = spec::parse_str(&src, "case.dgml", Path::new("."))
            .unwrap_err()
            .render();
        assert!(
            rendered.ends_with(
                "error: could not check the spec: 100 errors shown, and checking stopped there \
                 (the rest of the file may hold more)\n"
            ),
            "{}",
            &rendered[rendered.len() - 200..]
        );
    }

    #[test]
    fn a_run_of_unknown_characters_is_one_error() {
        let src = base_with(&[(6, "  @@@ ### param x: f32;")]);
        let got: Vec<(u32, u32, String)> = diagnostics(&src)
            .into_iter()
            .map(|d| (d.line, d.col, d.message))
            .collect();
        assert_eq!(
            got,
            [
                (6, 3, "unexpected characters `@@@`".to_string()),
                (6, 7, "unexpected characters `###`".to_string())
            ]
        );
    }

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("deepgemm-spec-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn hardware_files_are_resolved_next_to_the_spec() {
        let dir = temp_dir("hw");
        std::fs::create_dir_all(dir.join("hw")).unwrap();
        let yaml = deepgemm::hw::PRESETS[1].yaml();
        std::fs::write(dir.join("hw/my_gpu.yaml"), yaml).unwrap();
        std::fs::write(dir.join("hw/broken.yaml"), "name: [").unwrap();
        let spec_text = base_with(&[(2, "  hardware \"hw/my_gpu.yaml\";")]);
        std::fs::write(dir.join("k.dgml"), &spec_text).unwrap();
        let file = spec::parse_file(&dir.join("k.dgml")).unwrap_or_else(|d| panic!("{d}"));
        assert_eq!(
            file.kernels[0].hardware,
            deepgemm::hw::preset("h200").unwrap()
        );

        for (path, message) in [
            (
                "hw/missing.yaml",
                "cannot use hardware file \"hw/missing.yaml\": cannot read",
            ),
            (
                "hw/broken.yaml",
                "cannot use hardware file \"hw/broken.yaml\": malformed",
            ),
        ] {
            let line = format!("  hardware \"{path}\";");
            let diags = match spec::parse_str(&base_with(&[(2, &line)]), "k.dgml", &dir) {
                Ok(_) => panic!("{path} accepted"),
                Err(d) => d.items,
            };
            assert_eq!(diags.len(), 1, "{diags:#?}");
            assert_eq!((diags[0].line, diags[0].col), (2, 12));
            assert!(
                diags[0].message.starts_with(message),
                "{}",
                diags[0].message
            );
            // One line naming the YAML file itself, never the parser's `<input>` snippet.
            let message = &diags[0].message;
            assert!(
                !message.contains('\n') && !message.contains("<input>"),
                "{message}"
            );
        }
        let line = "  hardware \"hw/broken.yaml\";";
        let diags = spec::parse_str(&base_with(&[(2, line)]), "k.dgml", &dir).unwrap_err();
        assert!(
            diags.items[0]
                .message
                .ends_with("hw/broken.yaml:1:7: expected string scalar"),
            "{}",
            diags.items[0].message
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unreadable_file_is_one_diagnostic() {
        let err = spec::parse_file(Path::new("/nonexistent/dir/x.dgml")).unwrap_err();
        assert_eq!(err.items.len(), 1);
        assert!(err.items[0]
            .message
            .starts_with("cannot read /nonexistent/dir/x.dgml"));
    }
}
