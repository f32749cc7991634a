//! DeepGEMM's runtime: what an inference engine links to call DeepGEMM kernels.
//!
//! A bundle (`NAME.dgb`, written by `deepgemm compile`; format in `docs/runtime.md`) holds every
//! compiled variant of a spec's kernels, their launch metadata and a dispatch table from shape
//! bucket to variant. [`Runtime::load`] loads one on a GPU; [`Kernel::launch`] picks the variant
//! for (M, N, K) in O(1) and launches it on the caller's device pointers, leading dimensions and
//! stream. Nothing is compiled at run time (no NVRTC): the bundle carries the cubins, the
//! repack-copy kernel's included. Tensor maps are encoded once per operand address and cached,
//! and repack workspaces come from a per-stream pool, so a launch costs microseconds of host time.
//! Errors are values ([`RuntimeError`]); nothing here panics on bad input.
//!
//! The launch metadata is the compiler's own (`deepgemm::codegen::GeneratedKernel`, the spec's
//! operands): one definition, read by the compiler that writes it and the runtime that obeys it.

pub mod bundle;
#[cfg(feature = "compile")]
pub mod compile;
pub mod dispatch;
pub mod error;
pub mod inspect;
mod pool;
pub mod runtime;

pub use bundle::{BundleFile, BundleHeader, FORMAT_VERSION, MAGIC};
pub use deepgemm::dtype::DType;
pub use deepgemm::plan::Shape;
pub use deepgemm_cuda::device::RawStream;
pub use error::RuntimeError;
pub use runtime::{Bundle, Kernel, Operand, PreparedLaunch, Runtime};

/// The spec types a runtime caller reads (operand names, roles, dtypes, layouts), so that
/// front ends need not depend on the compiler crate themselves.
pub mod bundle_spec {
    pub use deepgemm::spec::{shape_text, KernelSpec, Layout, Operand, Param, Role};
}
