//! DeepGEMM's link to the GPU: NVRTC compilation and the cubin cache, the driver (context,
//! module load, launch with operand checks and repacking), timing, the run-and-verify loop and
//! the cuBLASLt baseline. Everything CUDA is loaded at run time, so this crate builds and its
//! CPU parts run on machines without CUDA.

pub mod cache;
pub mod cublaslt;
pub mod device;
pub mod error;
pub mod launch;
pub mod nvrtc;
pub mod pitch_copy;
pub mod runner;
pub mod tensor_map;
pub mod timing;
pub mod tuning;

pub use error::CudaError;
