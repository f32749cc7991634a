//! The Rust runtime on a GPU through bundles written to disk and loaded back: every backend's
//! whole correctness matrix (layouts, dtypes, epilogues, awkward shapes, padded and misaligned
//! operands, the sm90 schedules), cached tensor maps and pooled scratch on repeated launches, a
//! declared shape fallback, and bad input refused with the output untouched. Run by `scripts/gpu.sh run tests`; without a GPU every test fails.

#[path = "../../deepgemm-cuda/tests/gpu_support/mod.rs"]
mod gpu_support;

use deepgemm::plan::{Backend, Shape};
use deepgemm::spec::KernelSpec;
use deepgemm_cuda::runner::DeviceProblem;
use deepgemm_runtime::compile::build;
use deepgemm_runtime::{Bundle, Operand, Runtime, RuntimeError};
use gpu_support::{fresh_seed, Case};

fn runtime() -> Runtime {
    Runtime::new(0).unwrap_or_else(|e| panic!("gpu_* tests need an NVIDIA GPU and driver: {e}"))
}

/// `spec`'s bundle, written to a file and loaded from it.
fn bundle_from_disk(runtime: &Runtime, spec: &KernelSpec, dir: &std::path::Path) -> Bundle {
    let file = build(std::slice::from_ref(spec)).unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join(format!("{}.dgb", spec.name));
    std::fs::write(&path, file.to_bytes()).unwrap();
    runtime.load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn operands(device: &DeviceProblem) -> Vec<Operand<'_>> {
    device
        .operands()
        .iter()
        .map(|o| Operand {
            name: &o.name,
            ptr: o.ptr,
            ld: o.geometry.ld,
            dtype: Some(o.dtype),
        })
        .collect()
}

/// The problem's params as the runtime takes them.
fn params(device: &DeviceProblem) -> Vec<(&str, f64)> {
    device
        .problem
        .params
        .iter()
        .map(|(n, v)| (n.as_str(), *v))
        .collect()
}

fn check_cases(backend: Backend, cases: &[Case]) {
    let runtime = runtime();
    let gpu = runtime.gpu();
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for case in cases {
        let seed = fresh_seed();
        let spec = gpu_support::parse(&case.dgml(backend));
        let outcome = (|| -> Result<String, String> {
            let bundle = bundle_from_disk(&runtime, &spec, dir.path());
            let kernel = bundle.kernel(None).map_err(|e| e.to_string())?;
            let device = DeviceProblem::upload(gpu, &spec, case.shape, &case.options(seed))
                .map_err(|e| e.to_string())?;
            let params = params(&device);
            let ops = operands(&device);
            let launched = kernel.launch(case.shape, &ops, &params, gpu.raw_stream());
            // The runtime's contract: a pointer must be aligned to its element (the direct
            // launcher repacks such operands; a caller of the runtime cannot make an f32 tensor
            // start 2 bytes in). Those cases must be refused, and nothing else.
            let off_element = spec.operands.iter().any(|o| {
                !case
                    .base_offset_bytes
                    .is_multiple_of(o.dtype.size_bytes() as u64)
            });
            if off_element {
                return match launched {
                    Err(e) if e.to_string().contains("is not aligned to its element") => {
                        Ok(format!("{:<60} refused: {e}", case.name()))
                    }
                    other => Err(format!(
                        "{}: a base {} bytes off an element was not refused ({other:?})",
                        case.name(),
                        case.base_offset_bytes
                    )),
                };
            }
            launched.map_err(|e| e.to_string())?;
            let check = device.check(gpu, &spec).map_err(|e| e.to_string())?;
            let line = format!(
                "{:<60} error {:.2e} (< {:.0e}) unwritten {}",
                case.name(),
                check.error,
                check.tolerance,
                check.unwritten
            );
            if check.passed {
                Ok(line)
            } else {
                Err(line)
            }
        })();
        match outcome {
            Ok(line) => println!("ok   {line}"),
            Err(line) => {
                println!("FAIL {line} (seed {seed})");
                failures.push(line);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// The correctness matrix of each backend (`gpu_support::matrix`: every layout and dtype, edge
/// shapes, epilogues, ld = K+1 and misaligned bases, the sm90 schedules), each case through a
/// bundle written to disk and loaded back, launched by the runtime.
#[test]
fn gpu_bundle_sm90_matrix() {
    check_cases(Backend::Sm90, &gpu_support::matrix(Backend::Sm90));
}

#[test]
fn gpu_bundle_sm80_matrix() {
    check_cases(Backend::Sm80, &gpu_support::matrix(Backend::Sm80));
}

#[test]
fn gpu_bundle_simt_matrix() {
    check_cases(Backend::Simt, &gpu_support::matrix(Backend::Simt));
}

#[test]
fn gpu_bundle_gemv_matrix() {
    check_cases(Backend::Gemv, &gpu_support::matrix(Backend::Gemv));
}

#[test]
fn gpu_bundle_tiny_matrix() {
    check_cases(Backend::Tiny, &gpu_support::matrix(Backend::Tiny));
}

/// An M range (several variants, each picked by the dispatch table), at shapes inside every
/// bucket; repeated launches encode no new tensor map and allocate nothing.
#[test]
fn gpu_bundle_dispatch_and_caches() {
    let runtime = runtime();
    let gpu = runtime.gpu();
    let dir = tempfile::tempdir().unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/decode.dgml");
    let spec = deepgemm::spec::parse_file(&path).unwrap().kernels.remove(0);
    let bundle = bundle_from_disk(&runtime, &spec, dir.path());
    let kernel = bundle.kernel(None).unwrap();
    for m in [1, 16, 17, 33, 100, 129, 256] {
        let shape = Shape::new(m, 6144, 4096);
        let options = deepgemm_cuda::runner::RunOptions {
            seed: fresh_seed(),
            ..Default::default()
        };
        let device = DeviceProblem::upload(gpu, &spec, shape, &options).unwrap();
        let ops = operands(&device);
        kernel.launch(shape, &ops, &[], gpu.raw_stream()).unwrap();
        let first = kernel.pool_counters(shape).unwrap();
        for _ in 0..3 {
            kernel.launch(shape, &ops, &[], gpu.raw_stream()).unwrap();
        }
        assert_eq!(
            kernel.pool_counters(shape).unwrap(),
            first,
            "M = {m}: maps re-encoded or scratch re-allocated"
        );
        let check = device.check(gpu, &spec).unwrap();
        println!(
            "M = {m}: {} error {:.2e}",
            kernel.variant_for(shape).unwrap().name,
            check.error
        );
        assert!(check.passed, "M = {m}: error {:.2e}", check.error);
    }
}

/// A launch whose arguments are the last one's reuses its plan (no checks, no planning again);
/// a change of any pointer or param must plan again. Two problems (own buffers, own alpha and
/// beta), launched in the order 1, 1, 2, 2, 1, then problem 1 with a new alpha on the same
/// buffers: every launch's output is poisoned before and checked against the reference after.
#[test]
fn gpu_bundle_repeated_launches_follow_their_arguments() {
    let runtime = runtime();
    let gpu = runtime.gpu();
    let dir = tempfile::tempdir().unwrap();
    let spec = gpu_support::parse(
        "kernel axpby {
           target h200;
           input  A: bf16[M, K] row;
           input  B: bf16[K, N] col;
           input  C: bf16[M, N] row;
           output D: bf16[M, N] row;
           param  alpha: f32 = 1.0;
           param  beta: f32 = 0.5;
           epilogue D = alpha * acc + beta * C;
           shape { M = 256; N = 384; K = 320; }
         }",
    );
    let bundle = bundle_from_disk(&runtime, &spec, dir.path());
    let kernel = bundle.kernel(None).unwrap();
    let shape = Shape::new(256, 384, 320);
    let mut problems: Vec<DeviceProblem> = [(1.0, 0.5), (-2.0, 0.25)]
        .iter()
        .map(|&(alpha, beta)| {
            let options = deepgemm_cuda::runner::RunOptions {
                seed: fresh_seed(),
                params: vec![("alpha".into(), alpha), ("beta".into(), beta)],
                ..Default::default()
            };
            DeviceProblem::upload(gpu, &spec, shape, &options).unwrap()
        })
        .collect();
    let launch_and_check = |device: &DeviceProblem, what: &str| {
        device.poison_output(gpu).unwrap();
        let params = params(device);
        kernel
            .launch(shape, &operands(device), &params, gpu.raw_stream())
            .unwrap();
        let check = device.check(gpu, &spec).unwrap();
        println!(
            "{what}: error {:.2e}, unwritten {}",
            check.error, check.unwritten
        );
        assert!(check.passed, "{what}: error {:.2e}", check.error);
    };
    launch_and_check(&problems[0], "problem 1");
    launch_and_check(&problems[0], "problem 1 again");
    launch_and_check(&problems[1], "problem 2 (other buffers and params)");
    launch_and_check(&problems[1], "problem 2 again");
    launch_and_check(&problems[0], "problem 1 after problem 2");
    problems[0].problem.params[0].1 = 3.0;
    launch_and_check(&problems[0], "problem 1, alpha = 3 on the same buffers");
}

/// `fallback nearest;`: shapes outside the declared ones (past the M range, another N, another K)
/// run on the nearest bucket's variant with their own extents, and the result is exact.
#[test]
fn gpu_bundle_fallback_runs_outside_shapes_exactly() {
    let runtime = runtime();
    let gpu = runtime.gpu();
    let dir = tempfile::tempdir().unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/decode.dgml");
    let mut spec = deepgemm::spec::parse_file(&path).unwrap().kernels.remove(0);
    spec.shape.fallback = deepgemm::spec::ShapeFallback::Nearest;
    let bundle = bundle_from_disk(&runtime, &spec, dir.path());
    let kernel = bundle.kernel(None).unwrap();
    for shape in [
        Shape::new(300, 6144, 4096),
        Shape::new(1000, 1000, 4096),
        Shape::new(5, 6144, 100),
        Shape::new(257, 129, 4099),
    ] {
        let options = deepgemm_cuda::runner::RunOptions {
            seed: fresh_seed(),
            ..Default::default()
        };
        let device = DeviceProblem::upload(gpu, &spec, shape, &options).unwrap();
        let variant = kernel.variant_for(shape).unwrap();
        let nearest = spec.shape.nearest_declared(shape);
        assert!(
            variant.bucket.contains(nearest.m, nearest.n, nearest.k),
            "{shape}: served by {:?}",
            variant.bucket
        );
        kernel
            .launch(shape, &operands(&device), &[], gpu.raw_stream())
            .unwrap_or_else(|e| panic!("{shape}: {e}"));
        let check = device.check(gpu, &spec).unwrap();
        println!(
            "{shape}: {} error {:.2e} unwritten {}",
            variant.name, check.error, check.unwritten
        );
        assert!(check.passed, "{shape}: error {:.2e}", check.error);
    }
}

#[test]
fn gpu_bundle_bad_input_is_refused_and_writes_nothing() {
    let runtime = runtime();
    let gpu = runtime.gpu();
    let dir = tempfile::tempdir().unwrap();
    let case = Case::new("bf16", "bf16", (128, 256, 64));
    let spec = gpu_support::parse(&case.dgml(Backend::Sm90));
    let bundle = bundle_from_disk(&runtime, &spec, dir.path());
    let kernel = bundle.kernel(None).unwrap();
    let device =
        DeviceProblem::upload(gpu, &spec, case.shape, &case.options(fresh_seed())).unwrap();
    let poisoned = device.download_output(gpu).unwrap();
    let good = operands(&device);
    let expect = |ops: &[Operand], shape: Shape, needle: &str| {
        let err = kernel
            .launch(shape, ops, &[], gpu.raw_stream())
            .unwrap_err();
        assert!(
            err.to_string().contains(needle),
            "`{err}` does not say `{needle}`"
        );
    };
    let with = |i: usize, f: &dyn Fn(&mut Operand)| {
        let mut ops = good.clone();
        f(&mut ops[i]);
        ops
    };
    let shape = case.shape;
    expect(&with(0, &|o| o.ptr = 0), shape, "null pointer");
    expect(
        &with(2, &|o| o.ptr += 1),
        shape,
        "not aligned to its element",
    );
    expect(
        &with(0, &|o| o.ld = 63),
        shape,
        "leading dimension 63 is smaller than a row",
    );
    expect(
        &good,
        Shape::new(129, 256, 64),
        "outside the bundle's declared range (M = 128, N = 256, K = 64)",
    );
    expect(
        &with(1, &|o| o.dtype = Some(deepgemm::dtype::DType::F16)),
        shape,
        "is f16, the kernel takes bf16",
    );
    assert_eq!(
        device.download_output(gpu).unwrap(),
        poisoned,
        "a refused launch wrote to D"
    );

    // A bundle for another architecture is refused, naming both.
    let other = gpu_support::parse(
        &case
            .dgml(Backend::Sm80)
            .replace("target h200", "target a100"),
    );
    let file = build(&[other]).unwrap();
    let path = dir.path().join("a100.dgb");
    std::fs::write(&path, file.to_bytes()).unwrap();
    match runtime.load(&path) {
        Err(e @ RuntimeError::ArchMismatch { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("sm_80") && text.contains(&gpu.info().arch),
                "{text}"
            );
        }
        Err(e) => panic!("expected an architecture error, got `{e}`"),
        Ok(_) => panic!("a bundle for sm_80 loaded on {}", gpu.info().arch),
    }
}
