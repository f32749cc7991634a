//! Every way loading or launching can fail, as values whose message says what to do.

use deepgemm::plan::Shape;
use deepgemm_cuda::CudaError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum RuntimeError {
    #[error("bundle {path}: {message}")]
    Io { path: String, message: String },
    #[error("bundle {path} is not a valid DeepGEMM bundle: {problem}")]
    Format { path: String, problem: String },
    #[error(
        "bundle {path} was built for {bundle_arch} (target {target}), but this GPU is {gpu} \
         ({gpu_arch}); rebuild it with a `target` for this GPU (see `deepgemm targets`)"
    )]
    ArchMismatch {
        path: String,
        bundle_arch: String,
        target: String,
        gpu: String,
        gpu_arch: String,
    },
    #[error("the bundle has no kernel `{name}`; it holds: {available}")]
    NoKernel { name: String, available: String },
    #[error(
        "kernel `{kernel}`: shape {shape} is outside the bundle's declared range ({range}); \
         `fallback nearest;` in the spec's shape block would run it on the nearest variant"
    )]
    ShapeOutOfRange {
        kernel: String,
        shape: Shape,
        range: String,
    },
    #[error("kernel `{kernel}`: operand `{operand}`: {problem}")]
    Operand {
        kernel: String,
        operand: String,
        problem: String,
    },
    #[error("kernel `{kernel}`: {problem}")]
    Launch { kernel: String, problem: String },
    #[error("cannot build the bundle: {0}")]
    Build(String),
    #[error(transparent)]
    Cuda(#[from] CudaError),
}
