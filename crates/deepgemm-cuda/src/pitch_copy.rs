//! The repack copy: a small kernel that moves pitched operands into 16-byte-aligned workspaces
//! (kernels/pitch_copy.cu), up to four in one launch, and one that transposes fp8 operands into
//! the K-major layout wgmma reads. cuMemcpy2D handles any alignment but moved a 2-byte-aligned
//! 4095x4093 bf16 matrix at about 1 TB/s on the H200, a quarter of DRAM speed, which made the
//! repack a fifth of a misaligned GEMM's time.

use crate::cache::{compile_cached, KernelCache};
use crate::device::{Copy2d, Gpu};
use crate::error::{driver, CudaError};
use crate::nvrtc::Compiled;
use cudarc::driver::{result, sys};
use std::ffi::{c_void, CString};
use std::sync::Arc;

/// The kernel's CUDA source: the shared `dg_bytes_from`, then the kernel.
pub fn source() -> String {
    format!(
        "{}\n{}",
        deepgemm::codegen::BYTES_FROM_CUH,
        include_str!("../kernels/pitch_copy.cu")
    )
}
/// Its entry points: the pitched copies, and the transposition of 1-byte elements.
const ENTRY: &str = "deepgemm_pitch_copy_batch";
const TRANSPOSE_ENTRY: &str = "deepgemm_transpose_bytes";
/// The transpose kernel's block (256 threads) and the edge of its square tile of bytes.
const TRANSPOSE_BLOCK: (u32, u32, u32) = (256, 1, 1);
const TRANSPOSE_TILE: u64 = 64;
/// The most tile rows in one launch's grid (gridDim.y's limit); the kernel walks the rest.
const MAX_GRID_Y: u64 = 65535;
/// Copies one launch moves (the kernel's `DG_MAX_COPIES`; the model counts launches by it).
pub const MAX_COPIES: usize = deepgemm::codegen::REPACK_COPIES_PER_LAUNCH as usize;
const THREADS: u32 = 256;
/// The grid, in waves of the blocks the GPU holds at once; the kernel's grid-stride loop takes
/// the rest of a bigger copy, so that a thread's setup (two 64-bit divisions) serves several
/// chunks. Two waves rather than one: a block that starts late, its SM still busy with other
/// work, then carries half a share rather than a whole one.
const WAVES: u32 = 2;
/// Destinations must be this aligned (base and pitch): the kernel stores whole 16-byte chunks.
pub const DST_ALIGN: usize = 16;

/// One copy as the kernel's `dg_pitch_copy` lays it out.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct KernelCopy {
    src: u64,
    src_pitch: u64,
    dst: u64,
    dst_pitch: u64,
    width: u64,
    height: u64,
}

/// One transposition of 1-byte elements: `rows` lines of `cols` bytes at `src`, `src_pitch`
/// apart, become `cols` lines of `rows` bytes at `dst`, `dst_pitch` apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transpose {
    pub src: sys::CUdeviceptr,
    pub src_pitch: usize,
    pub dst: sys::CUdeviceptr,
    pub dst_pitch: usize,
    pub rows: usize,
    pub cols: usize,
}

/// The loaded module; unloaded on drop.
pub struct PitchCopy {
    module: sys::CUmodule,
    function: sys::CUfunction,
    transpose: sys::CUfunction,
    /// The most blocks a launch has: [`WAVES`] times those the GPU holds at once.
    max_blocks: u32,
    ctx: Arc<cudarc::driver::CudaContext>,
}

impl PitchCopy {
    /// Compiles (through the cubin cache) and loads the copy kernel for this GPU.
    pub fn load(gpu: &Gpu) -> Result<PitchCopy, CudaError> {
        let compiled = PitchCopy::compile(&gpu.info().arch)?;
        PitchCopy::from_cubin(gpu, &compiled.cubin)
    }

    /// Compiles the copy kernel for `arch` through the cubin cache (a bundle carries the result,
    /// so that the runtime needs no NVRTC).
    pub fn compile(arch: &str) -> Result<Compiled, CudaError> {
        let cache = KernelCache::from_env();
        compile_cached(&source(), ENTRY, arch, cache.as_ref()).map(|(c, _)| c)
    }

    /// Loads the copy kernel from a cubin that [`PitchCopy::compile`] made.
    pub fn from_cubin(gpu: &Gpu, cubin: &[u8]) -> Result<PitchCopy, CudaError> {
        gpu.bind()?;
        // SAFETY: the cubin is a complete image NVRTC produced; it outlives the call.
        let module = unsafe { result::module::load_data(cubin.as_ptr() as *const c_void) }
            .map_err(driver("cuModuleLoadData"))?;
        let function = |entry: &str| {
            let name = CString::new(entry).expect("no NUL");
            // SAFETY: the module is live; on error it is unloaded below.
            unsafe { result::module::get_function(module, name) }
                .map_err(driver("cuModuleGetFunction"))
        };
        let sized = function(ENTRY)
            .and_then(|copy| Ok((copy, function(TRANSPOSE_ENTRY)?, max_blocks(gpu, copy)?)));
        match sized {
            Ok((function, transpose, max_blocks)) => Ok(PitchCopy {
                module,
                function,
                transpose,
                max_blocks,
                ctx: gpu.context().clone(),
            }),
            Err(e) => {
                // SAFETY: loaded above, used by nothing else.
                let _ = unsafe { result::module::unload(module) };
                Err(e)
            }
        }
    }

    /// Whether `copy` can take this path (its destination is aligned for 16-byte stores).
    pub fn fits(copy: &Copy2d) -> bool {
        (copy.dst as usize).is_multiple_of(DST_ALIGN) && copy.dst_pitch.is_multiple_of(DST_ALIGN)
    }

    /// Enqueues `copies` on the GPU's stream, up to [`MAX_COPIES`] per launch; a copy that does
    /// not [`fit`](Self::fits) is an error (the kernel's 16-byte stores would fault). Empty copies
    /// are left out.
    pub fn enqueue(&self, gpu: &Gpu, copies: &[Copy2d]) -> Result<(), CudaError> {
        if let Some(copy) = copies.iter().find(|c| !Self::fits(c)) {
            return Err(CudaError::InvalidOperand {
                operand: "repack workspace".into(),
                problem: format!(
                    "destination {:#x} with a pitch of {} bytes is not {DST_ALIGN}-byte aligned",
                    copy.dst, copy.dst_pitch
                ),
            });
        }
        let copies: Vec<&Copy2d> = copies
            .iter()
            .filter(|c| c.width > 0 && c.height > 0)
            .collect();
        for batch in copies.chunks(MAX_COPIES) {
            self.launch(gpu, batch)?;
        }
        Ok(())
    }

    fn launch(&self, gpu: &Gpu, batch: &[&Copy2d]) -> Result<(), CudaError> {
        let mut table = [KernelCopy::default(); MAX_COPIES];
        let mut chunks = 0u64;
        for (slot, copy) in table.iter_mut().zip(batch) {
            *slot = KernelCopy {
                src: copy.src,
                src_pitch: copy.src_pitch as u64,
                dst: copy.dst,
                dst_pitch: copy.dst_pitch as u64,
                width: copy.width as u64,
                height: copy.height as u64,
            };
            chunks = chunks.max((copy.width.div_ceil(16) * copy.height) as u64);
        }
        // A thread per 16-byte chunk of the biggest copy, up to `max_blocks`: the kernel's
        // grid-stride loop takes the rest. The other copies' extra blocks return at once.
        let blocks = chunks.div_ceil(THREADS as u64).min(self.max_blocks as u64) as u32;
        let mut params: [*mut c_void; 1] = [&mut table as *mut _ as *mut c_void];
        gpu.bind()?;
        // SAFETY: the function is live while `self` is; its one parameter is the 192-byte
        // `dg_pitch_copies`, laid out as `table` is (`repr(C)`, six u64 per copy); grid.z never
        // exceeds the copies filled in; every range is device memory the caller owns.
        unsafe {
            result::launch_kernel(
                self.function,
                (blocks, 1, batch.len() as u32),
                (THREADS, 1, 1),
                0,
                gpu.stream(),
                &mut params,
            )
        }
        .map_err(driver("cuLaunchKernel(pitch copy)"))
    }
}

impl PitchCopy {
    /// Enqueues `t` on the GPU's stream (one launch); an empty one enqueues nothing.
    pub fn enqueue_transpose(&self, gpu: &Gpu, t: &Transpose) -> Result<(), CudaError> {
        if t.rows == 0 || t.cols == 0 {
            return Ok(());
        }
        if t.dst_pitch < t.rows || t.src_pitch < t.cols {
            return Err(CudaError::InvalidOperand {
                operand: "transpose workspace".into(),
                problem: format!(
                    "pitches {} -> {} bytes cannot hold {} lines of {} bytes transposed",
                    t.src_pitch, t.dst_pitch, t.rows, t.cols
                ),
            });
        }
        let grid = (
            u32::try_from((t.cols as u64).div_ceil(TRANSPOSE_TILE)).map_err(|_| {
                CudaError::InvalidOperand {
                    operand: "transpose".into(),
                    problem: format!("{} columns exceed the grid", t.cols),
                }
            })?,
            (t.rows as u64).div_ceil(TRANSPOSE_TILE).min(MAX_GRID_Y) as u32,
            1,
        );
        let (mut src, mut src_pitch, mut dst, mut dst_pitch, mut rows, mut cols) = (
            t.src,
            t.src_pitch as u64,
            t.dst,
            t.dst_pitch as u64,
            t.rows as u64,
            t.cols as u64,
        );
        let mut params: [*mut c_void; 6] = [
            &mut src as *mut u64 as *mut c_void,
            &mut src_pitch as *mut u64 as *mut c_void,
            &mut dst as *mut u64 as *mut c_void,
            &mut dst_pitch as *mut u64 as *mut c_void,
            &mut rows as *mut u64 as *mut c_void,
            &mut cols as *mut u64 as *mut c_void,
        ];
        gpu.bind()?;
        // SAFETY: the function is live while `self` is; its six parameters are the two pointers
        // and four u64 above, alive for the call; the ranges are device memory the caller owns
        // (the pitches were checked to hold the lines).
        unsafe {
            result::launch_kernel(
                self.transpose,
                grid,
                TRANSPOSE_BLOCK,
                0,
                gpu.stream(),
                &mut params,
            )
        }
        .map_err(driver("cuLaunchKernel(transpose)"))
    }
}

/// [`WAVES`] times the blocks of `function` the GPU holds at once, from the driver's occupancy
/// calculator.
fn max_blocks(gpu: &Gpu, function: sys::CUfunction) -> Result<u32, CudaError> {
    // SAFETY: the function is live (its module is loaded); it takes no dynamic shared memory.
    let per_sm = unsafe {
        result::occupancy::max_active_block_per_multiprocessor(function, THREADS as i32, 0)
    }
    .map_err(driver("cuOccupancyMaxActiveBlocksPerMultiprocessor"))?;
    Ok(WAVES * per_sm.max(1) as u32 * gpu.info().sms)
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
