//! Building a bundle in-process: parse, plan every shape bucket, generate, compile with NVRTC
//! through the on-disk cubin cache (shared by concurrent processes), assemble.

use crate::bundle::{BundleBuilder, BundleFile, CompiledVariant};
use crate::error::RuntimeError;
use deepgemm::spec::KernelSpec;
use deepgemm_cuda::cache::compile_kernel;
use deepgemm_cuda::pitch_copy::PitchCopy;
use std::path::Path;

/// The bundle of the kernels of the `.dgml` file at `path` (only `kernel`, when named).
pub fn build_from_file(path: &Path, kernel: Option<&str>) -> Result<BundleFile, RuntimeError> {
    let file = deepgemm::spec::parse_file(path)
        .map_err(|d| RuntimeError::Build(format!("{}:\n{}", path.display(), d.render())))?;
    let specs: Vec<KernelSpec> = file
        .kernels
        .into_iter()
        .filter(|k| kernel.is_none_or(|name| k.name == name))
        .collect();
    if specs.is_empty() {
        return Err(RuntimeError::Build(format!(
            "{} has no kernel{}",
            path.display(),
            kernel.map(|k| format!(" `{k}`")).unwrap_or_default()
        )));
    }
    build(&specs)
}

/// The bundle of `specs`, which must share one target architecture.
pub fn build(specs: &[KernelSpec]) -> Result<BundleFile, RuntimeError> {
    let first = specs
        .first()
        .ok_or_else(|| RuntimeError::Build("no kernels to bundle".into()))?;
    let arch = first.hardware.arch.clone();
    let nvrtc_version = deepgemm_cuda::nvrtc::version()?;
    let mut builder = BundleBuilder::new(&arch, &first.hardware.name, nvrtc_version);
    for spec in specs {
        let result = deepgemm::search::search(spec)
            .map_err(|e| RuntimeError::Build(format!("kernel `{}`: {e}", spec.name)))?;
        let mut variants = Vec::new();
        for variant in result.variants() {
            let kernel = deepgemm::codegen::generate(spec, &variant.plan, &variant.name)
                .map_err(|e| RuntimeError::Build(format!("{} {}: {e}", spec.name, variant.name)))?;
            let (compiled, _) = compile_kernel(&kernel)?;
            variants.push(CompiledVariant {
                name: variant.name,
                bucket: variant.bucket,
                kernel,
                compiled,
            });
        }
        builder
            .add_kernel(spec, variants)
            .map_err(RuntimeError::Build)?;
    }
    builder
        .finish(&PitchCopy::compile(&arch)?)
        .map_err(RuntimeError::Build)
}
