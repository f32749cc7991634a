//! Run and verify: fresh inputs on the device, poisoned output, launch, download, compare with
//! the CPU reference, and optionally time. Used by `deepgemm run`, `deepgemm bench` and the GPU
//! tests.

use crate::cache::compile_kernel;
use crate::device::{DeviceBuffer, Gpu};
use crate::error::CudaError;
use crate::launch::{DeviceOperand, LaunchArgs};
use crate::nvrtc::Resources;
use crate::timing::{tflops, Timer, Timing, TimingOptions};
use deepgemm::codegen::GeneratedKernel;
use deepgemm::plan::Shape;
use deepgemm::reference::{Check, Problem, ProblemOptions};
use deepgemm::spec::{KernelSpec, Role};
use serde::Serialize;

/// How to build the inputs and whether to time.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunOptions {
    /// Seeds the inputs and the reference's sample; use a fresh one per check.
    pub seed: u64,
    /// Extra elements on every matrix operand's leading dimension (1 gives ld = K+1 for a
    /// row-major A).
    pub ld_pad: u64,
    /// Bytes added to every operand's base address (2 misaligns every pointer for 16-byte
    /// copies, so the launcher must repack).
    pub base_offset_bytes: u64,
    /// Values for the spec's params; others take their default (or a seeded random value).
    pub params: Vec<(String, f64)>,
    /// Time the kernel after checking it.
    pub timing: Option<TimingOptions>,
}

/// The outcome of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    pub entry: String,
    /// `Plan::label()`, e.g. `sm80 128x128x32 s4 w2x4`.
    pub plan: String,
    pub shape: Shape,
    /// ‖D − ref‖ / ‖ref‖.
    pub error: f64,
    pub tolerance: f64,
    pub passed: bool,
    /// Output elements still poisoned (NaN) after the run.
    pub unwritten_count: u64,
    pub checked_elements: u64,
    /// Whether the reference covered sampled rows and columns (large shapes).
    pub sampled: bool,
    /// fp8 D: how far the worst element lies beyond one ulp of the reference, and what it may.
    pub fp8: Option<deepgemm::reference::Fp8Check>,
    /// The amax output's check, when the spec has one.
    pub amax: Option<deepgemm::reference::AmaxCheck>,
    /// Operands the launcher copied to an aligned workspace.
    pub repacked: Vec<String>,
    /// The launch grid (blocks) and the blocks per cluster.
    pub grid: (u32, u32, u32),
    pub cluster: u32,
    pub resources: Resources,
    pub from_cache: bool,
    /// Median of the timed runs, when timed.
    pub time_us: Option<f64>,
    pub tflops: Option<f64>,
}

/// A [`Problem`] uploaded to the device: one allocation per operand, each operand starting
/// `base_offset_bytes` into its allocation.
pub struct DeviceProblem {
    pub problem: Problem,
    buffers: Vec<DeviceBuffer>,
    operands: Vec<DeviceOperand>,
    base_offset: usize,
}

impl DeviceProblem {
    /// Generates fresh inputs for `spec` at `shape` and uploads them, output poisoned.
    pub fn upload(
        gpu: &Gpu,
        spec: &KernelSpec,
        shape: Shape,
        options: &RunOptions,
    ) -> Result<DeviceProblem, CudaError> {
        let problem = Problem::generate(
            spec,
            shape,
            &ProblemOptions {
                seed: options.seed,
                ld_pad: options.ld_pad,
                params: options.params.clone(),
            },
        )?;
        DeviceProblem::from_problem(gpu, problem, options.base_offset_bytes)
    }

    /// Uploads `problem` as it is (inputs a test wrote itself), each operand starting
    /// `base_offset_bytes` into its allocation.
    pub fn from_problem(
        gpu: &Gpu,
        problem: Problem,
        base_offset_bytes: u64,
    ) -> Result<DeviceProblem, CudaError> {
        let base_offset = base_offset_bytes as usize;
        let mut buffers = Vec::with_capacity(problem.tensors.len());
        let mut operands = Vec::with_capacity(problem.tensors.len());
        for tensor in &problem.tensors {
            let buffer = gpu.alloc(base_offset + tensor.bytes.len())?;
            gpu.upload(&buffer, base_offset, &tensor.bytes)?;
            operands.push(DeviceOperand {
                name: tensor.name.clone(),
                ptr: buffer.ptr() + base_offset as u64,
                dtype: tensor.dtype,
                geometry: tensor.geometry,
            });
            buffers.push(buffer);
        }
        Ok(DeviceProblem {
            problem,
            buffers,
            operands,
            base_offset,
        })
    }

    pub fn operands(&self) -> &[DeviceOperand] {
        &self.operands
    }

    pub fn operand(&self, name: &str) -> Option<&DeviceOperand> {
        self.operands.iter().find(|o| o.name == name)
    }

    pub fn launch_args(&self) -> LaunchArgs {
        LaunchArgs {
            shape: self.problem.shape,
            operands: self.operands.clone(),
            params: self.problem.params.clone(),
        }
    }

    fn output_index(&self) -> Result<usize, CudaError> {
        self.problem
            .tensors
            .iter()
            .position(|t| t.role == Role::D)
            .ok_or_else(|| CudaError::InvalidOperand {
                operand: "D".into(),
                problem: "the spec declares no output".into(),
            })
    }

    /// Writes the poison over the outputs again (before a run whose outputs will be checked).
    pub fn poison_output(&self, gpu: &Gpu) -> Result<(), CudaError> {
        for (index, tensor) in self.problem.tensors.iter().enumerate() {
            if tensor.role == Role::D || matches!(tensor.role, Role::Amax { .. }) {
                gpu.upload(&self.buffers[index], self.base_offset, &tensor.bytes)?;
            }
        }
        Ok(())
    }

    /// The output's bytes in its layout, after everything enqueued so far.
    pub fn download_output(&self, gpu: &Gpu) -> Result<Vec<u8>, CudaError> {
        let index = self.output_index()?;
        let mut out = vec![0u8; self.problem.tensors[index].bytes.len()];
        gpu.download(&self.buffers[index], self.base_offset, &mut out)?;
        Ok(out)
    }

    /// Compares the device's outputs (D, and an amax output) with the CPU reference.
    pub fn check(&self, gpu: &Gpu, spec: &KernelSpec) -> Result<Check, CudaError> {
        let out = self.download_output(gpu)?;
        let amax = match self
            .problem
            .tensors
            .iter()
            .position(|t| matches!(t.role, Role::Amax { .. }))
        {
            Some(index) => {
                let mut bytes = vec![0u8; self.problem.tensors[index].bytes.len()];
                gpu.download(&self.buffers[index], self.base_offset, &mut bytes)?;
                Some(bytes)
            }
            None => None,
        };
        Ok(self.problem.check_outputs(spec, &out, amax.as_deref())?)
    }
}

/// A checked and, if correct, timed piece of GPU work.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub check: Check,
    /// `None` when the check failed: a wrong kernel is never timed.
    pub timing: Option<Timing>,
}

/// Poisons `device`'s output, runs `enqueue` once and checks the result against the reference;
/// only a correct result is then timed (the same `enqueue`, with `timing`'s timer and options).
/// `run`, `bench` and `tune` measure ours and cuBLAS this way.
pub fn check_then_time(
    gpu: &Gpu,
    device: &DeviceProblem,
    spec: &KernelSpec,
    timing: Option<(&Timer, TimingOptions)>,
    mut enqueue: impl FnMut() -> Result<(), CudaError>,
) -> Result<Outcome, CudaError> {
    device.poison_output(gpu)?;
    enqueue()?;
    let check = device.check(gpu, spec)?;
    let timing = match timing {
        Some((timer, options)) if check.passed => Some(timer.time(gpu, options, &mut enqueue)?),
        _ => None,
    };
    Ok(Outcome { check, timing })
}

/// Compiles (through the cache), loads, runs and checks `kernel` on fresh inputs; times it when
/// `options.timing` says so and the check passed.
pub fn run(
    gpu: &Gpu,
    spec: &KernelSpec,
    kernel: &GeneratedKernel,
    shape: Shape,
    options: &RunOptions,
) -> Result<RunReport, CudaError> {
    let (compiled, from_cache) = compile_kernel(kernel)?;
    let loaded = gpu.load(kernel, &compiled)?;
    let device = DeviceProblem::upload(gpu, spec, shape, options)?;
    let prepared = loaded.prepare(gpu, spec, &device.launch_args())?;
    let timer = options.timing.map(|_| Timer::new(gpu)).transpose()?;
    let timing = timer.as_ref().zip(options.timing);
    let Outcome { check, timing } =
        check_then_time(gpu, &device, spec, timing, || prepared.enqueue(gpu))?;
    let time_us = timing.map(|t| t.median_us);
    Ok(RunReport {
        entry: kernel.entry.clone(),
        plan: kernel.plan.label(),
        shape,
        error: check.error,
        tolerance: check.tolerance,
        passed: check.passed,
        unwritten_count: check.unwritten,
        checked_elements: check.checked,
        sampled: check.sampled,
        fp8: check.fp8,
        amax: check.amax,
        repacked: prepared.repacked().into_iter().map(String::from).collect(),
        grid: prepared.grid(),
        cluster: kernel.grid.cluster.max(1),
        resources: loaded.resources(),
        from_cache,
        time_us,
        tflops: time_us.map(|us| tflops(shape, us)),
    })
}
