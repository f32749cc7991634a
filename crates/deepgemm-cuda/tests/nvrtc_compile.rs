//! NVRTC on a machine without a GPU: compile to PTX and cubin for every architecture DeepGEMM
//! targets, read ptxas's resource report, report errors with the source line, cache cubins.
//! These tests need NVRTC 13, which scripts/test.sh installs: without it they fail, unless
//! `DEEPGEMM_SKIP_NVRTC=1` skips them (see nvrtc_support).

mod nvrtc_support;

use deepgemm_cuda::cache::{compile_cached, KernelCache};
use deepgemm_cuda::nvrtc;
use deepgemm_cuda::CudaError;
use nvrtc_support::nvrtc_or_skip;

/// A small kernel with the features whose cost ptxas reports: registers, a barrier, static smem.
const SMALL: &str = r#"
extern "C" __global__ void axpy_bf16(float a, const unsigned short* x, float* y, int n) {
    __shared__ float tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? __uint_as_float(((unsigned)x[i]) << 16) : 0.f;
    __syncthreads();
    if (i < n) y[i] += a * tile[255 - threadIdx.x];
}
"#;

#[test]
fn nvrtc_compiles_for_every_target_arch_and_reports_resources() {
    if !nvrtc_or_skip("nvrtc_compiles_for_every_target_arch_and_reports_resources") {
        return;
    }
    assert_eq!(nvrtc::version().unwrap().0, 13);
    for arch in ["sm_80", "sm_86", "sm_89", "sm_90a"] {
        let compiled =
            nvrtc::compile(SMALL, "axpy_bf16", arch).unwrap_or_else(|e| panic!("{arch}: {e}"));
        // An ELF image, PTX for the same target, and the report of this entry.
        assert_eq!(&compiled.cubin[..4], b"\x7fELF", "{arch}");
        assert!(compiled.ptx.contains(".entry axpy_bf16"), "{arch}");
        assert!(compiled.ptx.contains(&format!(".target {arch}")), "{arch}");
        let r = compiled.resources;
        assert!(r.registers >= 4 && r.registers <= 64, "{arch}: {r:?}");
        assert_eq!(r.static_smem_bytes, 1024, "{arch}: {r:?}");
        assert!(!r.spills(), "{arch}: {r:?}");
    }
}

#[test]
fn nvrtc_reports_spills() {
    if !nvrtc_or_skip("nvrtc_reports_spills") {
        return;
    }
    // A large per-thread array indexed at run time lives in local memory: a stack frame.
    let source = r#"
extern "C" __global__ void spill(float* out, int i) {
    float big[512];
    for (int j = 0; j < 512; ++j) big[j] = out[j] * j;
    out[threadIdx.x] = big[i & 511];
}
"#;
    let compiled = nvrtc::compile(source, "spill", "sm_90a").unwrap();
    assert!(
        compiled.resources.stack_frame_bytes >= 2048,
        "{:?}",
        compiled.resources
    );
}

#[test]
fn nvrtc_errors_quote_the_generated_source() {
    if !nvrtc_or_skip("nvrtc_errors_quote_the_generated_source") {
        return;
    }
    let source =
        "extern \"C\" __global__ void broken(float* out) {\n  out[0] = undefined_name;\n}\n";
    let err = nvrtc::compile(source, "broken", "sm_90a").unwrap_err();
    let CudaError::Compile { report, .. } = &err else {
        panic!("expected a compile error, got {err}");
    };
    assert!(
        report.contains("identifier \"undefined_name\" is undefined"),
        "{report}"
    );
    assert!(
        report.contains(">    2 |   out[0] = undefined_name;"),
        "{report}"
    );
    assert!(err.to_string().contains("for sm_90a"), "{err}");
}

#[test]
fn nvrtc_cubins_are_cached_on_disk() {
    if !nvrtc_or_skip("nvrtc_cubins_are_cached_on_disk") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("deepgemm-nvrtc-cache-{}", std::process::id()));
    let cache = KernelCache::at(&dir);
    let (first, hit) = compile_cached(SMALL, "axpy_bf16", "sm_90a", Some(&cache)).unwrap();
    assert!(!hit);
    let (second, hit) = compile_cached(SMALL, "axpy_bf16", "sm_90a", Some(&cache)).unwrap();
    assert!(hit);
    assert_eq!(first, second);
    assert_eq!(first.cubin, second.cubin);
    // Another arch is another entry.
    let (_, hit) = compile_cached(SMALL, "axpy_bf16", "sm_80", Some(&cache)).unwrap();
    assert!(!hit);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// NVRTC is found without LD_LIBRARY_PATH when a `.cuda-tools/` install sits in the current
/// folder or above (the test runs itself again in a child process with the variable removed).
#[test]
fn nvrtc_is_found_without_ld_library_path() {
    const CHILD: &str = "DEEPGEMM_NVRTC_CHILD";
    if std::env::var_os(CHILD).is_some() {
        // No opt-out here: finding it without the loader path is what is tested.
        nvrtc::ensure_loaded().expect("NVRTC is found without LD_LIBRARY_PATH");
        nvrtc::compile(SMALL, "axpy_bf16", "sm_90a").expect("compiles after preloading");
        return;
    }
    if !nvrtc_or_skip("nvrtc_is_found_without_ld_library_path") {
        return;
    }
    // Where the parent found it: the child gets that folder only through DEEPGEMM_NVRTC_DIR
    // when it is not a `.cuda-tools/` above the working directory.
    let from_path = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    let dir = from_path
        .split(':')
        .find(|d| std::path::Path::new(d).join(nvrtc::NVRTC_LIBRARY).is_file());
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .args([
            "--exact",
            "nvrtc_is_found_without_ld_library_path",
            "--nocapture",
        ])
        .env_remove("LD_LIBRARY_PATH")
        .env(CHILD, "1");
    if let Some(dir) = dir.filter(|d| !d.contains(".cuda-tools")) {
        child.env("DEEPGEMM_NVRTC_DIR", dir);
    }
    let output = child.output().unwrap();
    assert!(
        output.status.success(),
        "child failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn nvrtc_compiles_the_repack_copy_kernels() {
    // The kernel's table has the room the launcher fills (checked with or without NVRTC).
    let define = format!(
        "#define DG_MAX_COPIES {}",
        deepgemm_cuda::pitch_copy::MAX_COPIES
    );
    assert!(
        deepgemm_cuda::pitch_copy::source().contains(&define),
        "{define}"
    );
    if !nvrtc_or_skip("nvrtc_compiles_the_repack_copy_kernels") {
        return;
    }
    for (entry, arch) in ["deepgemm_pitch_copy_batch", "deepgemm_transpose_bytes"]
        .into_iter()
        .flat_map(|entry| ["sm_80", "sm_86", "sm_89", "sm_90a"].map(|arch| (entry, arch)))
    {
        let compiled = nvrtc::compile(&deepgemm_cuda::pitch_copy::source(), entry, arch)
            .unwrap_or_else(|e| panic!("{arch} {entry}: {e}"));
        // The copies table stays in the parameter bank (`__grid_constant__`) and the words that
        // `dg_bytes_from` shifts stay in registers: no local memory.
        assert!(
            compiled.resources.reported,
            "{arch} {entry}: no ptxas report"
        );
        assert!(!compiled.resources.spills(), "{arch} {entry}");
        assert_eq!(compiled.resources.stack_frame_bytes, 0, "{arch} {entry}");
        assert!(compiled.ptx.contains(&format!(".entry {entry}")), "{arch}");
    }
}

/// The TMA + cluster smoke kernel of the launch contract (`gpu_runtime`'s
/// `gpu_tma_cluster_launch_moves_every_byte`) compiles for sm_90a with no local memory.
#[test]
fn nvrtc_compiles_the_tma_cluster_smoke_kernel() {
    if !nvrtc_or_skip("nvrtc_compiles_the_tma_cluster_smoke_kernel") {
        return;
    }
    let source = include_str!("kernels/tma_cluster_smoke.cu");
    let entry = "deepgemm_tma_cluster_smoke";
    let compiled = nvrtc::compile(source, entry, "sm_90a").unwrap_or_else(|e| panic!("{e}"));
    assert!(compiled.resources.reported, "no ptxas report");
    assert!(!compiled.resources.spills());
    assert_eq!(compiled.resources.stack_frame_bytes, 0);
    for instruction in [
        "cp.async.bulk.tensor.2d",
        "barrier.cluster",
        "mapa.shared::cluster",
    ] {
        assert!(compiled.ptx.contains(instruction), "no {instruction}");
    }
}
