//! Measuring plans the way shared/docs/GPU.md says: on one set of fresh random inputs, a checked
//! run (output poisoned first) before any timing, then the median of timed runs with the L2
//! flushed. `bench` and `tune` both measure through here, so their numbers agree.

use deepgemm::codegen;
use deepgemm::plan::{Plan, Shape};
use deepgemm::reference::Check;
use deepgemm::spec::KernelSpec;
use deepgemm_cuda::cache::compile_kernel;
use deepgemm_cuda::cublaslt::Baseline;
use deepgemm_cuda::device::Gpu;
use deepgemm_cuda::runner::{self, DeviceProblem, RunOptions};
use deepgemm_cuda::timing::{Timer, Timing, TimingOptions};
use deepgemm_cuda::CudaError;

/// One shape's inputs on the device, shared by every kernel measured at that shape.
pub struct Bench<'g> {
    pub gpu: &'g Gpu,
    pub timer: &'g Timer,
    pub spec: &'g KernelSpec,
    pub device: DeviceProblem,
    pub timing: TimingOptions,
}

/// A measured kernel: its check, its timing when the check passed, and its registers.
pub struct Outcome {
    pub check: Check,
    /// `None` when the check failed: a wrong kernel is never timed.
    pub timing: Option<Timing>,
    pub registers: Option<u32>,
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

    /// Generates, compiles (through the cubin cache), checks and times `plan`.
    pub fn plan(&self, plan: &Plan, variant: &str) -> Result<Outcome, String> {
        let kernel = codegen::generate(self.spec, plan, variant).map_err(|e| e.to_string())?;
        let (compiled, _) = compile_kernel(&kernel).map_err(|e| e.to_string())?;
        let loaded = self
            .gpu
            .load(&kernel, &compiled)
            .map_err(|e| e.to_string())?;
        let prepared = loaded
            .prepare(self.gpu, self.spec, &self.device.launch_args())
            .map_err(|e| e.to_string())?;
        let mut outcome = self
            .checked(|| prepared.enqueue(self.gpu))
            .map_err(|e| e.to_string())?;
        outcome.registers = Some(loaded.resources().registers);
        Ok(outcome)
    }

    /// Checks and times cuBLASLt on the same buffers.
    pub fn cublas(&self, baseline: &Baseline) -> Result<Outcome, CudaError> {
        self.checked(|| baseline.enqueue(self.gpu))
    }

    fn checked(
        &self,
        enqueue: impl FnMut() -> Result<(), CudaError>,
    ) -> Result<Outcome, CudaError> {
        let outcome = runner::check_then_time(
            self.gpu,
            self.timer,
            &self.device,
            self.spec,
            self.timing,
            enqueue,
        )?;
        Ok(Outcome {
            check: outcome.check,
            timing: outcome.timing,
            registers: None,
        })
    }
}
