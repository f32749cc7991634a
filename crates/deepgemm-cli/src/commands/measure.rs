//! Measuring plans the way docs/cli.md ("Measuring") says: on one set of fresh random inputs, a
//! checked run (output poisoned first) before any timing, then the median of timed runs with the
//! L2 flushed. `bench` and `tune` both measure through here, so their numbers agree.

use deepgemm::codegen;
use deepgemm::plan::{Plan, Shape};
use deepgemm::spec::KernelSpec;
use deepgemm_cuda::cache::compile_kernel;
use deepgemm_cuda::cublaslt::Baseline;
use deepgemm_cuda::device::Gpu;
use deepgemm_cuda::runner::{self, DeviceProblem, Outcome, RunOptions};
use deepgemm_cuda::timing::{Timer, TimingOptions};
use deepgemm_cuda::CudaError;

/// How a measured plan ran.
pub struct Launched {
    /// Registers per thread, from ptxas (or the driver).
    pub registers: u32,
    /// Blocks launched (a persistent kernel: as many as its rounds of tiles need, at most the
    /// clusters the GPU holds at once times their blocks).
    pub grid_blocks: u32,
    /// Blocks per cluster (1: none).
    pub cluster_blocks: u32,
}

/// One shape's inputs on the device, shared by every kernel measured at that shape.
pub struct Bench<'g> {
    pub gpu: &'g Gpu,
    pub timer: &'g Timer,
    pub spec: &'g KernelSpec,
    pub device: DeviceProblem,
    pub timing: TimingOptions,
}

impl<'g> Bench<'g> {
    pub fn new(
        gpu: &'g Gpu,
        timer: &'g Timer,
        spec: &'g KernelSpec,
        shape: Shape,
        seed: u64,
        timing: TimingOptions,
    ) -> Result<Bench<'g>, CudaError> {
        let options = RunOptions {
            seed,
            ..RunOptions::default()
        };
        let device = DeviceProblem::upload(gpu, spec, shape, &options)?;
        Ok(Bench {
            gpu,
            timer,
            spec,
            device,
            timing,
        })
    }

    /// Generates, compiles (through the cubin cache), checks and times `plan`; also returns how
    /// it ran: the registers per thread it compiled to and its launch grid.
    pub fn plan(&self, plan: &Plan, variant: &str) -> Result<(Outcome, Launched), String> {
        let kernel = codegen::generate(self.spec, plan, variant).map_err(|e| e.to_string())?;
        let (compiled, _) = compile_kernel(&kernel).map_err(|e| e.to_string())?;
        let loaded = self
            .gpu
            .load(&kernel, &compiled)
            .map_err(|e| e.to_string())?;
        let prepared = loaded
            .prepare(self.gpu, self.spec, &self.device.launch_args())
            .map_err(|e| e.to_string())?;
        let outcome = self
            .checked(|| prepared.enqueue(self.gpu))
            .map_err(|e| e.to_string())?;
        let (x, y, z) = prepared.grid();
        let launched = Launched {
            registers: loaded.resources().registers,
            grid_blocks: x * y * z,
            cluster_blocks: kernel.grid.cluster.max(1),
        };
        Ok((outcome, launched))
    }

    /// Checks and times cuBLASLt on the same buffers.
    pub fn cublas(&self, baseline: &Baseline) -> Result<Outcome, CudaError> {
        self.checked(|| baseline.enqueue(self.gpu))
    }

    fn checked(
        &self,
        enqueue: impl FnMut() -> Result<(), CudaError>,
    ) -> Result<Outcome, CudaError> {
        let timing = Some((self.timer, self.timing));
        runner::check_then_time(self.gpu, &self.device, self.spec, timing, enqueue)
    }
}
