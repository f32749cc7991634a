//! The bundle format, dispatch and the runtime's checks, on the CPU: a bundle round-trips
//! through bytes, damaged files are refused with a reason, a bundle for another architecture is
//! refused naming both, and every bad operand is an error before anything reaches a GPU.

use deepgemm::plan::Shape;
use deepgemm::spec::KernelSpec;
use deepgemm_cuda::device::GpuInfo;
use deepgemm_cuda::nvrtc::{Compiled, Resources};
use deepgemm_runtime::bundle::{BundleBuilder, BundleFile, CompiledVariant};
use deepgemm_runtime::dispatch::Dispatch;
use deepgemm_runtime::runtime::{bind, check_arch, route};
use deepgemm_runtime::{DType, Operand, RuntimeError};
use std::path::Path;

fn spec(file: &str) -> KernelSpec {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(file);
    deepgemm::spec::parse_file(&path)
        .unwrap_or_else(|d| panic!("{}", d.render()))
        .kernels
        .remove(0)
}

fn fake_compiled(entry: &str, arch: &str, marker: u8) -> Compiled {
    Compiled {
        entry: entry.into(),
        arch: arch.into(),
        ptx: String::new(),
        cubin: vec![0x7f, b'E', b'L', b'F', marker, 1, 2, 3],
        resources: Resources::default(),
        log: String::new(),
    }
}

/// A bundle of `spec`'s real variants (generated code and metadata) with stand-in cubins: the
/// format does not look inside them.
fn bundle_of(spec: &KernelSpec) -> BundleFile {
    let result = deepgemm::search::search(spec).unwrap();
    let arch = spec.hardware.arch.clone();
    let variants = result
        .variants()
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let kernel = deepgemm::codegen::generate(spec, &v.plan, &v.name).unwrap();
            CompiledVariant {
                compiled: fake_compiled(&kernel.entry, &arch, i as u8),
                name: v.name,
                bucket: v.bucket,
                kernel,
            }
        })
        .collect();
    let mut builder = BundleBuilder::new(&arch, &spec.hardware.name, (13, 0));
    builder.add_kernel(spec, variants).unwrap();
    builder
        .finish(&fake_compiled("deepgemm_pitch_copy_batch", &arch, 99))
        .unwrap()
}

#[test]
fn a_bundle_round_trips_and_dispatches_every_bucket() {
    let spec = spec("decode.dgml");
    let file = bundle_of(&spec);
    let bytes = file.to_bytes();
    assert_eq!(&bytes[..8], b"DGMMBNDL");
    let back = BundleFile::from_bytes(&bytes).unwrap();
    assert_eq!(back, file);
    let kernel = &back.header.kernels[0];
    assert!(kernel.variants.len() > 1, "decode.dgml declares an M range");
    let dispatch = Dispatch::new(&kernel.dispatch).unwrap();
    for (i, variant) in kernel.variants.iter().enumerate() {
        let b = variant.bucket;
        for m in [b.m.0, b.m.1, (b.m.0 + b.m.1) / 2] {
            assert_eq!(dispatch.lookup(Shape::new(m, b.n.0, b.k.0)), Some(i));
        }
        assert_eq!(back.blob(&variant.cubin).unwrap()[4], i as u8);
    }
    let text = deepgemm_runtime::inspect::render(&back, "decode.dgb");
    for needle in [
        "format 3",
        "sm_90a",
        "decode_qkv",
        "bf16[M, K] row",
        "M in 1..=256",
    ] {
        assert!(text.contains(needle), "inspect lacks `{needle}`:\n{text}");
    }
    for v in &kernel.variants {
        assert!(text.contains(&v.name), "{text}");
    }
}

#[test]
fn damaged_bundles_are_refused_with_a_reason() {
    let bytes = bundle_of(&spec("gemm_bf16.dgml")).to_bytes();
    let err = |bytes: &[u8]| BundleFile::from_bytes(bytes).unwrap_err();
    assert!(err(b"not a bundle at all, no").contains("magic"));
    for other in [2u8, 4] {
        let mut changed = bytes.clone();
        changed[8] = other;
        assert!(
            err(&changed).contains(&format!(
                "format version {other}; this runtime reads version 3 (rebuild the bundle"
            )),
            "{}",
            err(&changed)
        );
    }
    assert!(err(&bytes[..40]).contains("runs past the file's end"));
    assert!(err(&bytes[..bytes.len() - 3]).contains("truncated"));
    let mut flipped = bytes.clone();
    *flipped.last_mut().unwrap() ^= 0xff;
    assert!(err(&flipped).contains("SHA-256"));
    let mut garbled = bytes.clone();
    garbled[21] = b'#';
    assert!(err(&garbled).contains("the header does not parse"));
}

#[test]
fn one_bundle_holds_one_architecture() {
    let spec = spec("gemm_bf16.dgml");
    let mut builder = BundleBuilder::new("sm_80", "a100", (13, 0));
    let result = deepgemm::search::search(&spec).unwrap();
    let v = result.variants().remove(0);
    let kernel = deepgemm::codegen::generate(&spec, &v.plan, &v.name).unwrap();
    let err = builder
        .add_kernel(
            &spec,
            vec![CompiledVariant {
                compiled: fake_compiled(&kernel.entry, "sm_90a", 0),
                name: v.name,
                bucket: v.bucket,
                kernel,
            }],
        )
        .unwrap_err();
    assert!(
        err.contains("built for sm_90a, the bundle for sm_80"),
        "{err}"
    );
}

fn gpu_info(name: &str, cc: (u32, u32), arch: &str) -> GpuInfo {
    GpuInfo {
        ordinal: 0,
        name: name.into(),
        compute_capability: cc,
        arch: arch.into(),
        sms: 108,
        max_smem_per_block_bytes: 166 * 1024,
        l2_bytes: 40 << 20,
        total_memory_bytes: 80 << 30,
        clock_mhz: 1410,
        driver_version: 13000,
    }
}

#[test]
fn a_bundle_for_another_architecture_names_both() {
    let file = bundle_of(&spec("gemm_bf16.dgml"));
    let a100 = gpu_info("NVIDIA A100-SXM4-80GB", (8, 0), "sm_80");
    let err = check_arch(&file.header, &a100, "out/gemm_bf16.dgb").unwrap_err();
    assert!(matches!(err, RuntimeError::ArchMismatch { .. }));
    let text = err.to_string();
    for needle in [
        "out/gemm_bf16.dgb",
        "sm_90a",
        "h200",
        "NVIDIA A100-SXM4-80GB",
        "sm_80",
    ] {
        assert!(text.contains(needle), "`{text}` lacks `{needle}`");
    }
    let h200 = gpu_info("NVIDIA H200", (9, 0), "sm_90a");
    check_arch(&file.header, &h200, "x.dgb").unwrap();
}

#[test]
fn a_shape_outside_the_bundle_says_the_range() {
    let file = bundle_of(&spec("decode.dgml"));
    let kernel = &file.header.kernels[0];
    let dispatch = Dispatch::new(&kernel.dispatch).unwrap();
    let declared = &kernel.spec.shape;
    assert_eq!(
        route(&dispatch, "decode_qkv", declared, Shape::new(1, 6144, 4096)).unwrap(),
        0
    );
    for shape in [
        Shape::new(257, 6144, 4096),
        Shape::new(8, 6143, 4096),
        Shape::new(8, 6144, 1),
    ] {
        let err = route(&dispatch, "decode_qkv", declared, shape)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "kernel `decode_qkv`: shape {shape} is outside the bundle's declared range \
                 (M in 1..=256, N = 6144, K = 4096); `fallback nearest;` in the spec's shape \
                 block would run it on the nearest variant"
            )
        );
    }
}

/// With `fallback nearest;`, a shape outside the declared ones runs on the variant of the
/// bucket nearest it: each extent clamped into its domain, a set's nearest member.
#[test]
fn a_declared_fallback_routes_outside_shapes_to_the_nearest_bucket() {
    let text =
        "kernel t {\n  target h200;\n  input A: bf16[M, K] row;\n  input B: bf16[K, N] col;\n  \
                output D: bf16[M, N] row;\n  shape { M in 1..=256; N in {1024, 4096}; K = 512; \
                fallback nearest; }\n}\n";
    let spec = deepgemm::spec::parse_str(text, "t.dgml", Path::new("."))
        .unwrap_or_else(|d| panic!("{}", d.render()))
        .kernels
        .remove(0);
    let file = bundle_of(&spec);
    let kernel = &file.header.kernels[0];
    assert_eq!(
        kernel.spec.shape.fallback,
        deepgemm::spec::ShapeFallback::Nearest
    );
    let dispatch = Dispatch::new(&kernel.dispatch).unwrap();
    let declared = &kernel.spec.shape;
    let variant_of = |shape| route(&dispatch, "t", declared, shape).unwrap();
    let bucket_of = |shape: Shape| kernel.variants[variant_of(shape)].bucket;
    // Inside: the bucket that holds the shape.
    let inside = bucket_of(Shape::new(100, 4096, 512));
    assert!(inside.contains(100, 4096, 512), "{inside:?}");
    // Past the range's end, between and beyond the set's members, another K.
    for (outside, nearest) in [
        (Shape::new(10_000, 4096, 512), Shape::new(256, 4096, 512)),
        (Shape::new(7, 2000, 512), Shape::new(7, 1024, 512)),
        (Shape::new(7, 3000, 512), Shape::new(7, 4096, 512)),
        (Shape::new(7, 2560, 512), Shape::new(7, 4096, 512)),
        (Shape::new(7, 9000, 7), Shape::new(7, 4096, 512)),
        (Shape::new(300, 1, 100_000), Shape::new(256, 1024, 512)),
    ] {
        assert_eq!(declared.nearest_declared(outside), nearest, "{outside}");
        let bucket = bucket_of(outside);
        assert!(
            bucket.contains(nearest.m, nearest.n, nearest.k),
            "{outside} went to {bucket:?}"
        );
    }
}

/// A bf16 NT GEMM with a bias and alpha, 64x64x64: A row [64, 64], B col, D row.
fn epilogue_spec() -> KernelSpec {
    let text =
        "kernel t {\n  target h200;\n  input A: bf16[M, K] row;\n  input B: bf16[K, N] col;\n  \
                input bias: bf16[N];\n  output D: bf16[M, N] row;\n  param alpha: f32 = 1.0;\n  \
                epilogue D = alpha * acc + bias;\n  shape { M = 64; N = 64; K = 64; }\n}\n";
    deepgemm::spec::parse_str(text, "t.dgml", Path::new("."))
        .unwrap_or_else(|d| panic!("{}", d.render()))
        .kernels
        .remove(0)
}

#[test]
fn bad_operands_are_errors_before_any_gpu_work() {
    let spec = epilogue_spec();
    let shape = Shape::new(64, 64, 64);
    let good = [
        Operand {
            name: "A",
            ptr: 0x1000_0000,
            ld: 0,
            dtype: Some(DType::Bf16),
        },
        Operand {
            name: "B",
            ptr: 0x2000_0000,
            ld: 64,
            dtype: None,
        },
        Operand {
            name: "bias",
            ptr: 0x3000_0000,
            ld: 0,
            dtype: None,
        },
        Operand {
            name: "D",
            ptr: 0x4000_0000,
            ld: 72,
            dtype: None,
        },
    ];
    let args = bind(&spec, shape, &good, &[("alpha", 2.0)]).unwrap();
    assert_eq!(args.operands.len(), 4);
    assert_eq!(args.operands[0].geometry.ld, 64, "ld 0 means packed");
    assert_eq!(args.operands[3].geometry.ld, 72);
    assert_eq!(args.params, vec![("alpha".to_string(), 2.0)]);

    let expect = |operands: &[Operand], params: &[(&str, f64)], shape: Shape, needle: &str| {
        let err = bind(&spec, shape, operands, params)
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "`{err}` does not say `{needle}`");
    };
    let with = |i: usize, f: &dyn Fn(&mut Operand)| {
        let mut ops = good;
        f(&mut ops[i]);
        ops
    };
    expect(
        &with(0, &|o| o.ptr = 0),
        &[],
        shape,
        "operand `A`: null pointer",
    );
    expect(
        &with(3, &|o| o.ptr += 1),
        &[],
        shape,
        "operand `D`: address 0x40000001 is not aligned to its element (2 bytes of bf16)",
    );
    expect(
        &with(0, &|o| o.ld = 63),
        &[],
        shape,
        "operand `A`: leading dimension 63 is smaller than a row (64 elements)",
    );
    expect(
        &with(1, &|o| o.ld = 32),
        &[],
        shape,
        "operand `B`: leading dimension 32 is smaller than a column (64 elements)",
    );
    expect(
        &with(1, &|o| o.dtype = Some(DType::F16)),
        &[],
        shape,
        "operand `B`: is f16, the kernel takes bf16",
    );
    expect(
        &good[..3],
        &[],
        shape,
        "operand `D`: missing; the kernel takes A, B, bias, D",
    );
    expect(
        &with(2, &|o| o.name = "C"),
        &[],
        shape,
        "operand `C`: the kernel has no such operand; it takes A, B, bias, D",
    );
    expect(
        &[good[0], good[0], good[1], good[2], good[3]],
        &[],
        shape,
        "`A`: given twice",
    );
    expect(
        &good,
        &[("beta", 1.0)],
        shape,
        "no param `beta`; the kernel's params: alpha",
    );
    expect(
        &good,
        &[],
        Shape::new(0, 64, 64),
        "every extent must be at least 1",
    );
}
