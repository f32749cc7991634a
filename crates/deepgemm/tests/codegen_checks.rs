//! The generator's contract: argument order, launch metadata, the epilogue's C++ and the
//! reasons it gives for plans it cannot generate.

mod codegen_specs;

use codegen_specs::{gemv_plan, simt_plan, sm80_plan, sm90_plan, spec, SpecShape};
use deepgemm::codegen::{
    check_supported, generate, CodegenError, GridRule, KernelArg, PlacedRegion, TensorMapArg,
    Workspace,
};
use deepgemm::dtype::DType;
use deepgemm::plan::Shape;
use deepgemm::spec::{BinaryOp, Expr, Func, Layout, ShapeSym};

fn unsupported_reason(err: CodegenError) -> String {
    match err {
        CodegenError::Unsupported { reason, .. } => reason,
        other => panic!("expected an Unsupported error, got {other}"),
    }
}

#[test]
fn arguments_follow_the_abi_order() {
    let s = spec(&SpecShape {
        c_layout: Some(Layout::Col),
        bias_gelu: true,
        ..SpecShape::default()
    });
    let kernel = generate(&s, &sm80_plan(&s, (128, 128, 32), 4, (2, 2)), "v3").unwrap();
    let pointer = |n: &str| KernelArg::Pointer(n.to_string());
    let ld = |n: &str| KernelArg::LeadingDim(n.to_string());
    let param = |n: &str| KernelArg::Param(n.to_string());
    assert_eq!(
        kernel.args,
        vec![
            pointer("A"),
            pointer("B"),
            pointer("C"),
            pointer("bias"),
            pointer("D"),
            ld("A"),
            ld("B"),
            ld("C"),
            ld("D"),
            KernelArg::Extent(ShapeSym::M),
            KernelArg::Extent(ShapeSym::N),
            KernelArg::Extent(ShapeSym::K),
            param("alpha"),
            param("beta"),
        ]
    );
    // The C++ signature declares them in the same order.
    let signature = &kernel.source[kernel.source.find(&kernel.entry).unwrap()..];
    let order = [
        "op_A", "op_B", "op_C", "op_bias", "op_D", "ld_A", "ld_B", "ld_C", "ld_D",
    ];
    let positions: Vec<usize> = order.iter().map(|n| signature.find(n).unwrap()).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    assert!(
        signature.contains("int M,\n    int N,\n    int K,\n    float p_alpha,\n    float p_beta)")
    );
    assert_eq!(kernel.entry, "deepgemm_gemm_v3");
}

/// Split-K's workspace, as the metadata declares it: the partial sums, then the tile counters at
/// the next 256-byte boundary, zeroed before each launch; a shape too large saturates instead of
/// wrapping to a small buffer.
#[test]
fn split_k_workspace_regions() {
    let grid = GridRule {
        tile_m: 128,
        tile_n: 128,
        split_k: 3,
        persistent: false,
        cluster: 1,
    };
    let workspace = Workspace::split_k(3);
    let shape = Shape::new(100, 300, 512);
    let partials = 3 * 100 * 300 * 4;
    assert_eq!(
        workspace.layout(shape, &grid),
        vec![
            PlacedRegion {
                offset: 0,
                bytes: partials,
                zeroed: false,
            },
            PlacedRegion {
                offset: partials.next_multiple_of(256),
                bytes: 3 * 4, // 1 x 3 tiles of 128 x 128
                zeroed: true,
            },
        ]
    );
    assert_eq!(
        workspace.bytes(shape, &grid),
        partials.next_multiple_of(256) + 12
    );
    let huge = Shape::new(1 << 31, 1 << 31, 1);
    assert_eq!(workspace.bytes(huge, &grid), u64::MAX);
    assert_eq!(Workspace::default().bytes(shape, &grid), 0);
}

#[test]
fn launch_metadata_follows_the_plan() {
    let s = spec(&SpecShape::default());
    let plan = sm80_plan(&s, (128, 256, 32), 3, (2, 4));
    let kernel = generate(&s, &plan, "v0").unwrap();
    assert_eq!(kernel.threads, 256);
    // bf16 rows are swizzled, not padded: 3 stages of (128 + 256) rows of 32 elements.
    assert_eq!(kernel.smem_bytes, 3 * (128 * 32 + 256 * 32) * 2);
    assert_eq!(kernel.arch, "sm_90a");
    assert!(kernel.workspace.is_empty());
    assert_eq!(
        kernel.grid.grid(Shape::new(4095, 4097, 4093), 132),
        (32 * 17, 1, 1)
    );
    assert!(kernel.alignment.contains(&("A".to_string(), 16)));
    assert!(kernel.alignment.contains(&("D".to_string(), 2)));
    assert!(kernel.source.contains("constexpr int STAGES = 3;"));
    assert!(kernel
        .source
        .contains("__launch_bounds__(THREADS, 1) deepgemm_gemm_v0("));
    assert!(!kernel.source.contains("{{"), "an unfilled placeholder");
    assert!(
        !kernel.source.contains("#include"),
        "generated code is self-contained"
    );

    let simt = generate(&s, &simt_plan(&s, (64, 64, 16), 2), "v1").unwrap();
    assert_eq!(simt.threads, 256);
    assert!(
        simt.alignment.contains(&("A".to_string(), 2)),
        "simt loads elements"
    );
}

#[test]
fn epilogue_reads_c_vectors_and_params_in_their_layouts() {
    let mut s = spec(&SpecShape {
        c_layout: Some(Layout::Col),
        bias_gelu: true,
        ..SpecShape::default()
    });
    let kernel = generate(&s, &simt_plan(&s, (64, 64, 16), 2), "v0").unwrap();
    assert!(
        kernel.source.contains(
            "return dg_gelu(p_alpha * acc + p_beta * dg_to_float(op_C[(long long)n * ld_C + m]) + dg_to_float(op_bias[n]));"
        ),
        "{}",
        kernel.source
    );
    // min/max/clamp, negation, casts and literals.
    s.epilogue.expr = Expr::Cast(
        DType::Bf16,
        Box::new(Expr::Call(
            Func::Clamp,
            vec![
                Expr::Binary(
                    BinaryOp::Sub,
                    Box::new(Expr::Acc),
                    Box::new(Expr::Binary(
                        BinaryOp::Sub,
                        Box::new(Expr::Number(0.5)),
                        Box::new(Expr::Var("alpha".to_string())),
                    )),
                ),
                Expr::Unary(deepgemm::spec::UnaryOp::Neg, Box::new(Expr::Number(6.0))),
                Expr::Number(1e-7),
            ],
        )),
    );
    let kernel = generate(&s, &simt_plan(&s, (64, 64, 16), 2), "v0").unwrap();
    assert!(
        kernel
            .source
            .contains("return dg_round_bf16(dg_clamp(acc - (0.5f - p_alpha), -6.0f, 1e-7f));"),
        "{}",
        kernel.source
    );
    // A negation of a negation or of a negative literal keeps its parentheses: `--acc` would be
    // a C++ decrement, `--1.5f` does not compile. The comment prints the same tree as `.dgml`.
    let neg = |e: Expr| Expr::Unary(deepgemm::spec::UnaryOp::Neg, Box::new(e));
    s.epilogue.expr = Expr::Binary(
        BinaryOp::Mul,
        Box::new(neg(neg(Expr::Acc))),
        Box::new(neg(Expr::Number(-1.5))),
    );
    let kernel = generate(&s, &simt_plan(&s, (64, 64, 16), 2), "v0").unwrap();
    assert!(
        kernel.source.contains("return -(-acc) * -(-1.5f);"),
        "{}",
        kernel.source
    );
    assert!(
        kernel.source.contains("D = -(-acc) * -(-1.5)\n"),
        "{}",
        kernel.source
    );
}

#[test]
fn fp8_scales_index_their_blocks() {
    let s = spec(&SpecShape {
        input: DType::E4m3,
        block_scales: true,
        ..SpecShape::default()
    });
    let kernel = generate(&s, &simt_plan(&s, (128, 128, 8), 2), "v0").unwrap();
    // sa: f32[M, K/128] col-major (M contiguous); sb: f32[N/128, K/128] row-major.
    assert!(kernel
        .source
        .contains("op_sa[(long long)(k / 128) * M + m]"));
    assert!(kernel
        .source
        .contains("op_sb[(long long)(n / 128) * ((K + 127) / 128) + (k / 128)]"));
    assert!(kernel.source.contains("constexpr bool A_SCALED = true;"));
}

#[test]
fn unsupported_plans_say_why() {
    let fp8 = spec(&SpecShape {
        input: DType::E4m3,
        ..SpecShape::default()
    });
    let err = check_supported(&fp8, &sm80_plan(&fp8, (128, 128, 32), 4, (2, 2))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "sm80 backend: e4m3 inputs need the sm90 backend or simt"
    );
    assert!(check_supported(&fp8, &simt_plan(&fp8, (128, 128, 8), 2)).is_ok());

    let s = spec(&SpecShape::default());
    let mut plan = sm80_plan(&s, (128, 128, 32), 4, (2, 2));
    plan.split_k = 4;
    assert!(unsupported_reason(check_supported(&s, &plan).unwrap_err()).contains("split_k"));

    let mut plan = sm80_plan(&s, (128, 128, 32), 4, (2, 2));
    plan.smem.a_stage_bytes += 16;
    assert!(unsupported_reason(check_supported(&s, &plan).unwrap_err()).contains("smem_layout"));

    let plan = sm80_plan(&s, (256, 256, 64), 4, (2, 4));
    let reason = unsupported_reason(check_supported(&s, &plan).unwrap_err());
    assert!(reason.contains("exceed"), "{reason}");

    let plan = sm80_plan(&s, (256, 128, 32), 3, (2, 2));
    let reason = unsupported_reason(check_supported(&s, &plan).unwrap_err());
    assert!(reason.contains("accumulator registers"), "{reason}");

    // 96 bf16 of K = 192-byte rows: not a power of two of 16-byte chunks, which the swizzle needs.
    let plan = sm80_plan(&s, (128, 128, 96), 3, (2, 2));
    let reason = unsupported_reason(check_supported(&s, &plan).unwrap_err());
    assert!(reason.contains("XOR swizzle"), "{reason}");

    let plan = simt_plan(&s, (128, 128, 8), 3);
    let reason = unsupported_reason(check_supported(&s, &plan).unwrap_err());
    assert!(reason.contains("stages must be 1 or 2"), "{reason}");

    let mixed = spec(&SpecShape {
        input: DType::I8,
        accumulate: DType::I32,
        ..SpecShape::default()
    });
    let reason = unsupported_reason(
        check_supported(&mixed, &sm80_plan(&mixed, (128, 128, 32), 4, (2, 2))).unwrap_err(),
    );
    assert_eq!(reason, "i8 inputs need the simt backend");

    let mut reads_a = spec(&SpecShape::default());
    reads_a.epilogue.expr = Expr::Var("A".to_string());
    let err = check_supported(&reads_a, &simt_plan(&reads_a, (64, 64, 16), 2)).unwrap_err();
    assert!(matches!(err, CodegenError::Epilogue(_)), "{err}");

    let i8_out = spec(&SpecShape {
        output: DType::I8,
        ..SpecShape::default()
    });
    let reason = unsupported_reason(
        check_supported(&i8_out, &simt_plan(&i8_out, (64, 64, 16), 2)).unwrap_err(),
    );
    assert!(reason.contains("f32, f16, bf16, e4m3 or e5m2"), "{reason}");
}

#[test]
fn sm90_launch_metadata_is_persistent_clustered_and_takes_tensor_maps() {
    let s = spec(&SpecShape::default());
    let plan = sm90_plan(&s, (128, 256), 4, 2, false, 2);
    let kernel = generate(&s, &plan, "v0").unwrap();
    assert_eq!(kernel.threads, 384);
    assert!(kernel.grid.persistent);
    assert_eq!(kernel.grid.cluster, 2);
    // 32 x 17 tiles = 16 cluster rows x 17 columns = 272 cluster tiles; at most 66 clusters
    // resident take them in 5 rounds, which 55 clusters run as well.
    assert_eq!(kernel.grid.tiles(Shape::new(4095, 4097, 4093)), 32 * 17);
    assert_eq!(
        kernel.grid.grid(Shape::new(4095, 4097, 4093), 66),
        (110, 1, 1)
    );
    // Whole rounds keep every resident cluster: 22 x 12 = 264 cluster tiles are 4 rounds of 66.
    assert_eq!(
        kernel.grid.grid(Shape::new(5632, 3072, 64), 66),
        (132, 1, 1)
    );
    // Fewer cluster tiles than resident clusters: one block per tile, in whole clusters.
    assert_eq!(kernel.grid.grid(Shape::new(300, 200, 64), 66), (4, 1, 1));
    // K-major A in one box of the whole tile; B in halves, one multicast by each cluster block.
    let maps: Vec<&TensorMapArg> = kernel
        .args
        .iter()
        .filter_map(|a| match a {
            KernelArg::TensorMap(m) => Some(m),
            _ => None,
        })
        .collect();
    assert_eq!(maps.len(), 3);
    assert_eq!(
        (
            maps[0].operand.as_str(),
            maps[0].box_inner,
            maps[0].box_outer
        ),
        ("A", 64, 128)
    );
    assert_eq!(
        (
            maps[1].operand.as_str(),
            maps[1].box_inner,
            maps[1].box_outer
        ),
        ("B", 64, 128)
    );
    // bf16 D: the staged 16 x 64 pieces leave by TMA stores where D is 16-byte aligned (the
    // kernel tests it; the launcher passes a zeroed map otherwise, never refuses D).
    assert_eq!(
        (
            maps[2].operand.as_str(),
            maps[2].box_inner,
            maps[2].box_outer,
            maps[2].only_when_aligned
        ),
        ("D", 64, 16, true)
    );
    assert!(!maps[0].only_when_aligned && !maps[1].only_when_aligned);
    assert!(maps.iter().all(|m| m.swizzle_bytes == 128));
    // Tensor maps come last, after the ABI of every backend.
    assert!(matches!(kernel.args.last(), Some(KernelArg::TensorMap(_))));
    assert!(kernel.alignment.contains(&("A".to_string(), 16)));
    assert!(kernel.source.contains("constexpr bool PINGPONG = false;"));
    assert!(kernel
        .source
        .contains("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"));
}

#[test]
fn sm90_refuses_what_its_kernel_cannot_run() {
    let s = spec(&SpecShape::default());
    let reason = |plan| unsupported_reason(check_supported(&s, &plan).unwrap_err());
    // Two cooperating consumers of a 64-row tile would get 32 rows each: wgmma is m64.
    assert!(reason(sm90_plan(&s, (64, 128), 4, 2, false, 1)).contains("64 or 128 rows"));
    // 128 x 256 per consumer is 256 accumulators per thread.
    assert!(reason(sm90_plan(&s, (128, 256), 4, 1, false, 1)).contains("accumulator"));
    // A 2-block cluster shares B in halves that must start on 8-row swizzle atoms.
    assert!(reason(sm90_plan(&s, (128, 136), 4, 2, false, 2)).contains("swizzle atom"));
    let mut not_persistent = sm90_plan(&s, (128, 128), 4, 2, true, 1);
    not_persistent.persistent = false;
    assert!(reason(not_persistent).contains("persistent"));
    let ok = sm90_plan(&s, (128, 128), 6, 2, true, 2);
    assert!(check_supported(&s, &ok).is_ok());
    assert!(ok.label().contains(" pp"));
}

/// gemv names what it cannot run: operands that are not K-major, fp8, a tile with neither side
/// small, a chunk of K that is not 1, 2 or 4 warp-wide steps, and a ring of one stage.
#[test]
fn gemv_refuses_what_its_kernel_cannot_run() {
    let reason_for = |s: &deepgemm::spec::KernelSpec, plan| {
        unsupported_reason(check_supported(s, &plan).unwrap_err())
    };
    let nt = spec(&SpecShape::default());
    assert!(check_supported(&nt, &gemv_plan(&nt, (16, 8, 512), 4)).is_ok());
    assert!(check_supported(&nt, &gemv_plan(&nt, (1, 16, 256), 8)).is_ok());
    let tn = spec(&SpecShape {
        a_layout: Layout::Col,
        ..SpecShape::default()
    });
    let r = reason_for(&tn, gemv_plan(&tn, (16, 8, 512), 4));
    assert!(r.contains("K-major"), "{r}");
    let fp8 = spec(&SpecShape {
        input: DType::E4m3,
        ..SpecShape::default()
    });
    let r = reason_for(&fp8, gemv_plan(&fp8, (16, 8, 512), 4));
    assert!(r.contains("e4m3"), "{r}");
    let r = reason_for(&nt, gemv_plan(&nt, (16, 16, 512), 2));
    assert!(r.contains("1, 2, 4 or 8"), "{r}");
    // 1024 bf16 is 4 steps of 256, the longest chunk; 2048 is 8.
    assert!(check_supported(&nt, &gemv_plan(&nt, (16, 8, 1024), 2)).is_ok());
    let r = reason_for(&nt, gemv_plan(&nt, (16, 8, 2048), 2));
    assert!(r.contains("8 warp-wide steps"), "{r}");
    let r = reason_for(&nt, gemv_plan(&nt, (16, 8, 1000), 4));
    assert!(r.contains("multiple of 256"), "{r}");
    let r = reason_for(&nt, gemv_plan(&nt, (16, 8, 512), 1));
    assert!(r.contains("at least 2 stages"), "{r}");
}

/// f32 inputs are refused by sm80 with the measured reason (the tensor cores' f32 sums
/// truncate; they run on the CUDA cores), tf32 inputs take one tf32 product per tile.
#[test]
fn sm80_refuses_f32_inputs_and_takes_tf32_as_one_product() {
    let spec_of = |input| {
        spec(&SpecShape {
            input,
            output: DType::F32,
            ..SpecShape::default()
        })
    };
    let f32 = spec_of(DType::F32);
    let reason = unsupported_reason(
        check_supported(&f32, &sm80_plan(&f32, (128, 128, 32), 4, (2, 2))).unwrap_err(),
    );
    assert!(
        reason.contains("f32 inputs run on CUDA cores (simt)"),
        "{reason}"
    );
    assert!(
        reason.contains("2.9e-5 at K = 4096") && reason.contains("1.2e-4 at K = 16384"),
        "the measured error: {reason}"
    );
    assert!(reason.contains("write `tf32`"), "{reason}");
    assert!(generate(&f32, &sm80_plan(&f32, (128, 128, 32), 4, (2, 2)), "v0").is_err());

    let tf32 = spec_of(DType::Tf32);
    let source = generate(&tf32, &sm80_plan(&tf32, (128, 128, 32), 4, (2, 2)), "v0")
        .unwrap()
        .source;
    assert!(source.contains("constexpr bool TF32 = true;"));
    assert!(
        source.contains("mma.m16n8k8 (tf32)"),
        "the header names the path"
    );
    assert!(source.contains("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"));
    // One product per (i, j) tile and k-step: the main loop's only mma call.
    assert_eq!(source.matches("dg_mma(acc").count(), 1, "{source}");
}

#[test]
fn sm90_tests_elements_only_where_the_epilogue_reads_memory() {
    // The staged epilogue evaluates an expression that reads nothing at (m, n) without a bounds
    // test; one that reads C, a vector or a per-row scale there (as a per-column scale would) is
    // tested per element.
    let element_reads = |s: &deepgemm::spec::KernelSpec| {
        let kernel = generate(s, &sm90_plan(s, (128, 128), 4, 2, false, 1), "v0").unwrap();
        if kernel
            .source
            .contains("constexpr bool ELEMENT_READS = true;")
        {
            true
        } else {
            assert!(
                kernel
                    .source
                    .contains("constexpr bool ELEMENT_READS = false;"),
                "{}",
                kernel.source
            );
            false
        }
    };
    assert!(!element_reads(&spec(&SpecShape::default())));
    let block_scaled = spec(&SpecShape {
        input: DType::E4m3,
        block_scales: true,
        ..SpecShape::default()
    });
    assert!(!element_reads(&block_scaled));
    assert!(element_reads(&spec(&SpecShape {
        bias_gelu: true,
        ..SpecShape::default()
    })));
    assert!(element_reads(&spec(&SpecShape {
        c_layout: Some(Layout::Row),
        ..SpecShape::default()
    })));
    // A per-row scale of A multiplies the finished sum at (m, n): outer_scale reads it.
    let mut per_row = block_scaled.clone();
    let sa = per_row
        .operands
        .iter_mut()
        .find(|o| o.name == "sa")
        .unwrap();
    sa.dims = vec![deepgemm::spec::Dim::Sym(ShapeSym::M)];
    sa.role = deepgemm::spec::Role::Scale {
        of: "A".to_string(),
        granularity: deepgemm::spec::ScaleGranularity::PerRow,
    };
    assert!(element_reads(&per_row));
}

#[test]
fn sm90_epilogue_buffers_give_way_to_a_stage() {
    // A 128 x 192 bf16 tile: two buffers per warp (32 KiB) fit beside four stages, not five;
    // at five the warps have one (16 KiB) and wait for each TMA store's read. f32 D is stored by
    // the threads from one buffer a warp at any stage count.
    let buffers = |s: &deepgemm::spec::KernelSpec, stages| {
        let plan = sm90_plan(s, (128, 192), stages, 2, false, 1);
        let kernel = generate(s, &plan, "v0").unwrap();
        let in_kernel = plan.smem.epilogue_buffers.max(1);
        let piece = 8 * 16 * 64 * s.d().dtype.size_bytes();
        assert_eq!(plan.smem.epilogue_bytes, in_kernel * piece);
        assert!(plan.smem_bytes() <= s.hardware.smem_per_block_bytes);
        let line = format!("constexpr int EPI_WARP_BUFFERS = {in_kernel};");
        assert!(kernel.source.contains(&line), "{}", kernel.source);
        (
            plan.smem.epilogue_buffers,
            plan.smem.epilogue_waits_for_stores(),
        )
    };
    let bf16 = spec(&SpecShape::default());
    assert_eq!(buffers(&bf16, 4), (2, false));
    assert_eq!(buffers(&bf16, 5), (1, true));
    let f32_d = spec(&SpecShape {
        output: DType::F32,
        ..SpecShape::default()
    });
    assert_eq!(buffers(&f32_d, 3), (0, false));
}
