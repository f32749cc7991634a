//! Every `examples/*.dgml` parses without errors, round-trips through `to_dgml`, and means what
//! its comments say; one summary is pinned by a snapshot.

mod spec_examples {
    use deepgemm::dtype::DType;
    use deepgemm::spec::{
        self, DimDomain, Role, ScaleGranularity, SpecFile, TargetRef, TileValues,
    };
    use std::path::{Path, PathBuf};

    fn examples_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
    }

    fn load(name: &str) -> SpecFile {
        let path = examples_dir().join(name);
        spec::parse_file(&path).unwrap_or_else(|d| panic!("{name}:\n{d}"))
    }

    #[test]
    fn every_example_parses_and_round_trips() {
        let mut count = 0;
        for entry in std::fs::read_dir(examples_dir()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "dgml") {
                continue;
            }
            let file =
                spec::parse_file(&path).unwrap_or_else(|d| panic!("{}:\n{d}", path.display()));
            let printed = spec::to_dgml(&file);
            let again = spec::parse_str(&printed, "printed.dgml", &examples_dir())
                .unwrap_or_else(|d| panic!("{} printed:\n{printed}\n{d}", path.display()));
            assert_eq!(
                file,
                again,
                "{} does not round-trip:\n{printed}",
                path.display()
            );
            count += 1;
        }
        assert!(count >= 7, "expected at least 7 examples, found {count}");
    }

    #[test]
    fn default_example_is_a_plain_bf16_nt_gemm() {
        let file = load("gemm_bf16.dgml");
        let k = &file.kernels[0];
        assert_eq!(k.target, TargetRef::Preset("h200".into()));
        assert_eq!(
            (k.a().dtype, k.a().layout),
            (DType::Bf16, spec::Layout::Row)
        );
        assert_eq!(
            (k.b().dtype, k.b().layout),
            (DType::Bf16, spec::Layout::Col)
        );
        assert_eq!(
            (k.d().dtype, k.d().layout),
            (DType::Bf16, spec::Layout::Row)
        );
        assert_eq!(k.accumulate, DType::F32);
        assert_eq!(k.epilogue.expr, spec::Expr::Acc);
        for d in [&k.shape.m, &k.shape.n, &k.shape.k] {
            assert_eq!(*d, DimDomain::Fixed(4096));
        }
    }

    #[test]
    fn layouts_example_has_nn_and_tn() {
        let file = load("gemm_nn_tn.dgml");
        let layouts: Vec<_> = file
            .kernels
            .iter()
            .map(|k| (k.a().layout, k.b().layout))
            .collect();
        use spec::Layout::{Col, Row};
        assert_eq!(layouts, vec![(Row, Row), (Col, Col)]);
    }

    #[test]
    fn alpha_beta_example_reads_c() {
        let k = &load("gemm_f16_alpha_beta.dgml").kernels[0];
        assert_eq!(k.c().map(|c| c.name.as_str()), Some("C"));
        assert_eq!(k.epilogue.expr.references(), vec!["alpha", "beta", "C"]);
        assert_eq!(k.constraints[0].text, "smem <= 160 KiB");
    }

    #[test]
    fn fp8_example_has_block_scales() {
        let k = &load("fp8_block_scaled.dgml").kernels[0];
        let scale = |name: &str| k.operand(name).map(|o| o.role.clone());
        assert_eq!(
            scale("sa"),
            Some(Role::Scale {
                of: "A".into(),
                granularity: ScaleGranularity::Block1x128
            })
        );
        assert_eq!(
            scale("sb"),
            Some(Role::Scale {
                of: "B".into(),
                granularity: ScaleGranularity::Block128x128
            })
        );
        assert_eq!(k.a().dtype, DType::E4m3);
    }

    #[test]
    fn fp8_to_fp8_example_quantizes_its_output() {
        let k = &load("fp8_to_fp8.dgml").kernels[0];
        assert_eq!(k.d().dtype, DType::E4m3);
        assert_eq!(
            k.params.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["d_scale"]
        );
        assert_eq!(
            k.operand("amax").map(|o| o.role.clone()),
            Some(Role::Amax {
                of: "D".into(),
                per_row: false
            })
        );
    }

    #[test]
    fn fp8_per_tensor_example_has_scalar_scales_in_cublas_form() {
        let k = &load("fp8_per_tensor.dgml").kernels[0];
        for (scale, of) in [("sa", "A"), ("sb", "B")] {
            assert_eq!(
                k.operand(scale).map(|o| (o.role.clone(), o.dims.len())),
                Some((
                    Role::Scale {
                        of: of.into(),
                        granularity: ScaleGranularity::PerTensor
                    },
                    0
                ))
            );
        }
        // K-major A and B: the "TN" form cuBLASLt's FP8 kernels take.
        assert_eq!(
            (k.a().dtype, k.a().layout, k.b().layout, k.d().dtype),
            (
                DType::E4m3,
                spec::Layout::Row,
                spec::Layout::Col,
                DType::Bf16
            )
        );
    }

    #[test]
    fn decode_and_odd_shapes() {
        let decode = &load("decode.dgml").kernels[0];
        assert_eq!(decode.shape.m, DimDomain::Range { lo: 1, hi: 256 });
        assert_eq!(
            decode.tiling[0].values,
            TileValues::Stepped {
                lo: 32,
                hi: 128,
                step: 32
            }
        );
        let odd = &load("odd_shape.dgml").kernels[0];
        let extents = [&odd.shape.m, &odd.shape.n, &odd.shape.k].map(DimDomain::max);
        assert_eq!(extents, [4095, 4097, 4093]);
    }

    #[test]
    fn mlp_up_summary() {
        let k = &load("mlp_up.dgml").kernels[0];
        insta::assert_snapshot!(spec::summary(k));
    }
}
