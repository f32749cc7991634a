//! Every way the GPU side can fail, as values with enough context to act on.

use cudarc::driver::DriverError;
use cudarc::nvrtc::result::NvrtcError;
use deepgemm::reference::ReferenceError;
use thiserror::Error;

/// How to get NVRTC onto a machine without the CUDA toolkit (no GPU needed).
pub const NVRTC_INSTALL_HINT: &str = "install it with `pip install --target .cuda-tools \
'nvidia-cuda-nvrtc==13.0.*'` and `export LD_LIBRARY_PATH=$PWD/.cuda-tools/nvidia/cu13/lib:$LD_LIBRARY_PATH` \
(or set DEEPGEMM_NVRTC_DIR to that folder), or install the CUDA 13 toolkit and add its lib64 to LD_LIBRARY_PATH";

#[derive(Debug, Error)]
pub enum CudaError {
    #[error(
        "no CUDA driver found (libcuda.so.1): this machine has no NVIDIA driver or GPU; run \
         GPU commands on a machine with an NVIDIA GPU and driver 580 or newer (CUDA 13)"
    )]
    NoDriver,
    #[error("the CUDA driver found no GPU (cuInit or device {ordinal}: {source})")]
    NoDevice { ordinal: usize, source: DriverError },
    #[error("NVRTC (libnvrtc.so.13) not found; {hint}. Looked in: {searched}")]
    NoNvrtc {
        searched: String,
        hint: &'static str,
    },
    #[error(
        "cuBLASLt (libcublasLt.so.13) not found; install the CUDA 13 toolkit (or `pip install \
         nvidia-cublas`) and add its lib folder to LD_LIBRARY_PATH"
    )]
    NoCublasLt,
    #[error("CUDA driver call {call} failed: {message}")]
    Driver { call: &'static str, message: String },
    #[error("NVRTC call {call} failed: {source:?}")]
    Nvrtc {
        call: &'static str,
        source: NvrtcError,
    },
    #[error("NVRTC could not compile `{entry}` for {arch}:\n{report}")]
    Compile {
        entry: String,
        arch: String,
        /// The compiler log with each error's generated source line quoted.
        report: String,
    },
    #[error("`{entry}` compiled, but ptxas's report in its log could not be read:\n{log}")]
    ResourceReport { entry: String, log: String },
    #[error(
        "kernel `{entry}` was built for {kernel_arch}, which cannot run on this GPU ({gpu}, \
         {gpu_arch}); generate it for target {gpu_arch}"
    )]
    ArchMismatch {
        entry: String,
        kernel_arch: String,
        gpu: String,
        gpu_arch: String,
    },
    #[error("kernel `{entry}` needs {needed} bytes of shared memory; this GPU allows {available} per block")]
    SharedMemory {
        entry: String,
        needed: u32,
        available: u32,
    },
    #[error("operand `{operand}`: {problem}")]
    InvalidOperand { operand: String, problem: String },
    #[error("kernel `{entry}` takes {what}, which the launch does not provide")]
    MissingArgument { entry: String, what: String },
    #[error("shape {shape}: {problem}")]
    InvalidShape {
        shape: deepgemm::plan::Shape,
        problem: String,
    },
    #[error("cuBLASLt cannot run this problem: {0}")]
    CublasUnsupported(String),
    #[error("cuBLASLt call {call} failed: {status}")]
    Cublas { call: String, status: String },
    #[error("kernel cache {path}: {message}")]
    Cache { path: String, message: String },
    #[error(transparent)]
    Reference(#[from] ReferenceError),
}

/// Wraps a driver error with the call that returned it, for `map_err`.
pub(crate) fn driver(call: &'static str) -> impl FnOnce(DriverError) -> CudaError {
    move |e| CudaError::Driver {
        call,
        message: describe(&e),
    }
}

/// `CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered`.
pub(crate) fn describe(e: &DriverError) -> String {
    let name = e.error_name().map(|s| s.to_string_lossy().into_owned());
    let text = e.error_string().map(|s| s.to_string_lossy().into_owned());
    match (name, text) {
        (Ok(name), Ok(text)) => format!("{name}: {text}"),
        _ => format!("{:?}", e.0),
    }
}

pub(crate) fn nvrtc(call: &'static str) -> impl FnOnce(NvrtcError) -> CudaError {
    move |source| CudaError::Nvrtc { call, source }
}
