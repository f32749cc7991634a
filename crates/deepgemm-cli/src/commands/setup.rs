//! `deepgemm setup`: install NVRTC 13.0 (the compiler DeepGEMM uses; no GPU or CUDA toolkit
//! needed) into ~/.cache/deepgemm/cuda-tools with pip, where every `deepgemm` command looks.
//! `deepgemm compile` runs it by itself when NVRTC is missing (DEEPGEMM_NO_SETUP=1 stops that).

use crate::Failure;
use deepgemm_cuda::nvrtc;
use std::process::Command;

/// Install NVRTC 13.0 with pip into ~/.cache/deepgemm/cuda-tools (needs python3 with pip and
/// network access to PyPI), unless it is already found.
#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> Result<(), Failure> {
    if nvrtc::findable() {
        let version = nvrtc::version().map_err(super::common::cuda)?;
        println!(
            "NVRTC {}.{} found; nothing to install",
            version.0, version.1
        );
        return Ok(());
    }
    install().map_err(Failure::Error)?;
    let version = nvrtc::version().map_err(super::common::cuda)?;
    println!("NVRTC {}.{} installed", version.0, version.1);
    Ok(())
}

/// `python3 -m pip install --target ~/.cache/deepgemm/cuda-tools nvidia-cuda-nvrtc==13.0.*`.
pub fn install() -> Result<(), String> {
    let dir = nvrtc::setup_dir().ok_or("HOME is not set: nowhere to install NVRTC")?;
    eprintln!(
        "NVRTC not found: installing nvidia-cuda-nvrtc 13.0 into {} (pip)",
        dir.display()
    );
    let status = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--upgrade",
        ])
        .arg("--target")
        .arg(&dir)
        .arg("nvidia-cuda-nvrtc==13.0.*")
        .status()
        .map_err(|e| format!("cannot run python3 -m pip: {e}"))?;
    if !status.success() {
        return Err(format!("pip failed ({status})"));
    }
    Ok(())
}
