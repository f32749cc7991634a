//! The repack copy: a small kernel that moves a pitched operand into a 16-byte-aligned
//! workspace (kernels/pitch_copy.cu). cuMemcpy2D handles any alignment but moved a 2-byte-aligned
//! 4095x4093 bf16 matrix at about 1 TB/s on the H200, a quarter of DRAM speed, which made the
//! repack a fifth of a misaligned GEMM's time.

use crate::cache::{compile_cached, KernelCache};
use crate::device::{Copy2d, Gpu};
use crate::error::{driver, CudaError};
use crate::nvrtc::Compiled;
use cudarc::driver::{result, sys};
use std::ffi::{c_void, CString};
use std::sync::Arc;

/// The kernels' CUDA source.
pub const SOURCE: &str = include_str!("../kernels/pitch_copy.cu");
/// Load widths, one entry point each; index i loads 2^i bytes.
const UNITS: [usize; 5] = [1, 2, 4, 8, 16];
const THREADS: u32 = 256;
/// Destinations must be this aligned (base and pitch): every thread stores one 16-byte chunk.
pub const DST_ALIGN: usize = 16;

/// The loaded module; unloaded on drop.
pub struct PitchCopy {
    module: sys::CUmodule,
    functions: Vec<sys::CUfunction>,
    ctx: Arc<cudarc::driver::CudaContext>,
}

impl PitchCopy {
    /// Compiles (through the cubin cache) and loads the copy kernels for this GPU.
    pub fn load(gpu: &Gpu) -> Result<PitchCopy, CudaError> {
        let compiled = PitchCopy::compile(&gpu.info().arch)?;
        PitchCopy::from_cubin(gpu, &compiled.cubin)
    }

    /// Compiles the copy kernels for `arch` through the cubin cache (a bundle carries the result,
    /// so that the runtime needs no NVRTC).
    pub fn compile(arch: &str) -> Result<Compiled, CudaError> {
        let cache = KernelCache::from_env();
        compile_cached(SOURCE, "deepgemm_pitch_copy_2", arch, cache.as_ref()).map(|(c, _)| c)
    }

    /// Loads the copy kernels from a cubin that [`PitchCopy::compile`] made.
    pub fn from_cubin(gpu: &Gpu, cubin: &[u8]) -> Result<PitchCopy, CudaError> {
        gpu.bind()?;
        // SAFETY: the cubin is a complete image NVRTC produced; it outlives the call.
        let module = unsafe { result::module::load_data(cubin.as_ptr() as *const c_void) }
            .map_err(driver("cuModuleLoadData"))?;
        let mut copy = PitchCopy {
            module,
            functions: Vec::with_capacity(UNITS.len()),
            ctx: gpu.context().clone(),
        };
        for unit in UNITS {
            let name = CString::new(format!("deepgemm_pitch_copy_{unit}")).expect("no NUL");
            // SAFETY: the module is live (and unloaded by `copy`'s drop on error).
            let function = unsafe { result::module::get_function(copy.module, name) }
                .map_err(driver("cuModuleGetFunction"))?;
            copy.functions.push(function);
        }
        Ok(copy)
    }

    /// Whether `copy` can take this path (its destination is aligned for 16-byte stores).
    pub fn fits(copy: &Copy2d) -> bool {
        (copy.dst as usize).is_multiple_of(DST_ALIGN) && copy.dst_pitch.is_multiple_of(DST_ALIGN)
    }

    /// Enqueues `copy` on the GPU's stream; `copy` must [`fit`](Self::fits).
    pub fn enqueue(&self, gpu: &Gpu, copy: Copy2d) -> Result<(), CudaError> {
        debug_assert!(Self::fits(&copy));
        if copy.width == 0 || copy.height == 0 {
            return Ok(());
        }
        // The widest load that every line start allows.
        let alignment = (copy.src as usize | copy.src_pitch).trailing_zeros().min(4) as usize;
        let function = self.functions[alignment];
        let chunks = copy.width.div_ceil(16) as u64;
        let grid_x = chunks.div_ceil(THREADS as u64).min(1024) as u32;
        let grid_y = (copy.height as u64).min(65535) as u32;
        let (mut src, mut src_pitch, mut dst) = (copy.src, copy.src_pitch as u64, copy.dst);
        let (mut dst_pitch, mut width, mut height) =
            (copy.dst_pitch as u64, copy.width as u64, copy.height as u64);
        let mut params: [*mut c_void; 6] = [
            &mut src as *mut u64 as *mut c_void,
            &mut src_pitch as *mut u64 as *mut c_void,
            &mut dst as *mut u64 as *mut c_void,
            &mut dst_pitch as *mut u64 as *mut c_void,
            &mut width as *mut u64 as *mut c_void,
            &mut height as *mut u64 as *mut c_void,
        ];
        gpu.bind()?;
        // SAFETY: the function is live while `self` is; the six parameters are 64-bit values in
        // the kernel's order; both ranges are device memory the caller owns.
        unsafe {
            result::launch_kernel(
                function,
                (grid_x, grid_y, 1),
                (THREADS, 1, 1),
                0,
                gpu.stream(),
                &mut params,
            )
        }
        .map_err(driver("cuLaunchKernel(pitch copy)"))
    }
}

// SAFETY: the module and function handles are driver objects usable from any thread; they are
// only read after loading (launches may share one PitchCopy across threads and launches).
unsafe impl Send for PitchCopy {}
// SAFETY: as above.
unsafe impl Sync for PitchCopy {}

impl Drop for PitchCopy {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: loaded in this context and unloaded only here.
            let _ = unsafe { result::module::unload(self.module) };
        }
    }
}
