//! What the tests that need NVRTC (but no GPU) share: NVRTC is required. Without it they fail
//! and say how to install it; `DEEPGEMM_SKIP_NVRTC=1` is the explicit opt-out, and each test it
//! skips says so on stderr. Included by the CLI's tests too (`#[path]`).

use std::io::Write as _;

/// Set to `1`, tests that need NVRTC skip instead of failing when it cannot be loaded.
pub const SKIP_VAR: &str = "DEEPGEMM_SKIP_NVRTC";

/// The command scripts/test.sh runs when NVRTC is missing.
pub const INSTALL: &str = "python3 -m pip install --target .cuda-tools 'nvidia-cuda-nvrtc==13.0.*'";

/// Whether `test` can use NVRTC: true once it is loaded (from the loader path or the usual
/// folders, `.cuda-tools/` included). Without NVRTC this panics with how to install it, unless
/// `DEEPGEMM_SKIP_NVRTC=1`: then it prints that `test` is skipped and returns false.
pub fn nvrtc_or_skip(test: &str) -> bool {
    let Err(e) = deepgemm_cuda::nvrtc::ensure_loaded() else {
        return true;
    };
    if std::env::var(SKIP_VAR).is_ok_and(|v| v == "1") {
        // Straight to stderr, past the test harness's capture: a skip is never silent.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: NVRTC cannot be loaded and {SKIP_VAR}=1"
        );
        return false;
    }
    panic!(
        "{test} needs NVRTC (no GPU needed): {e}\n`bash scripts/test.sh` installs it into \
         .cuda-tools/, where it is found, with\n    {INSTALL}\nor set {SKIP_VAR}=1 to skip the \
         tests that need it"
    );
}
