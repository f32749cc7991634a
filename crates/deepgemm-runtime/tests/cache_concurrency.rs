//! Eight processes compile the same spec at once through one on-disk cubin cache: each gets a
//! complete, identical bundle, and the cache ends with one entry per compiled kernel and no
//! temporary files. Needs NVRTC (CI installs it), no GPU.
//!
//! The test binary is its own child: run with DEEPGEMM_TEST_CHILD=OUT it compiles the spec
//! into OUT instead of spawning (the same test function, so it never passes vacuously).

use deepgemm_runtime::compile::build_from_file;
use deepgemm_runtime::BundleFile;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const CHILD: &str = "DEEPGEMM_TEST_CHILD";
const PROCESSES: usize = 8;

#[test]
fn concurrent_compiles_share_one_cache_entry_per_kernel() {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/c/gemm.dgml");
    if let Some(out) = std::env::var_os(CHILD) {
        // Start together: wait for the parent's go file.
        let go = Path::new(&out).with_file_name("go");
        let start = Instant::now();
        while !go.exists() {
            assert!(start.elapsed() < Duration::from_secs(60), "no go signal");
            std::thread::sleep(Duration::from_millis(5));
        }
        let bundle = build_from_file(&spec, None).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&out, bundle.to_bytes()).unwrap();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..PROCESSES)
        .map(|i| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "concurrent_compiles_share_one_cache_entry_per_kernel",
                ])
                .args(["--nocapture", "--test-threads", "1"])
                .env(CHILD, dir.path().join(format!("bundle{i}.dgb")))
                .env("DEEPGEMM_CACHE_DIR", &cache)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    std::fs::write(dir.path().join("go"), b"").unwrap();
    for mut child in children {
        assert!(
            child.wait().unwrap().success(),
            "a compiling process failed"
        );
    }
    let bundles: Vec<BundleFile> = (0..PROCESSES)
        .map(|i| {
            let bytes = std::fs::read(dir.path().join(format!("bundle{i}.dgb"))).unwrap();
            BundleFile::from_bytes(&bytes).unwrap()
        })
        .collect();
    let variants = bundles[0].header.kernels[0].variants.len();
    assert!(variants > 1, "examples/c/gemm.dgml declares an M range");
    for b in &bundles[1..] {
        assert_eq!(b, &bundles[0], "every process got the same kernels");
    }
    let entries: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        entries
            .iter()
            .all(|e| e.ends_with(".cubin") && !e.starts_with('.')),
        "{entries:?}"
    );
    // One entry per variant, plus the repack copy kernel.
    assert_eq!(entries.len(), variants + 1, "{entries:?}");
}
