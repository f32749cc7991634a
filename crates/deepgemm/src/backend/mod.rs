//! The backends: one module per kernel family, each owning everything particular to it.
//!
//! A backend says whether a target has its instructions and which specs it runs
//! ([`BackendImpl::refusal`]), proposes plans ([`BackendImpl::propose`]), decides which plans are
//! legal ([`BackendImpl::check`], the one source of that rule: the search keeps the proposals
//! that pass it), lays out their shared memory, renders its `kernels/*.cu` template, and answers
//! the questions the four model layers ask about its instructions (registers, fragment reads,
//! barriers, latencies). [`of`] maps a [`Backend`] to its module; nothing else matches on one.
//!
//! Adding a backend is a module implementing [`BackendImpl`], its template, a [`Backend`]
//! variant and its line in [`of`].

mod gemv;
mod simt;
mod sm80;
mod sm90;
mod tiny;

use crate::codegen::{epilogue, CodegenError, KernelArg};
use crate::dtype::DType;
use crate::hw::{BackendCalibration, Calibration, Hardware};
use crate::model::sync::BarrierKind;
use crate::model::Problem;
use crate::plan::{Backend, EpilogueStrategy, Plan, RecordedWarps, SmemLayout, ThreadLayout, Tile};
use crate::spec::{KernelSpec, Layout, Operand, Role};
use std::borrow::Cow;

/// The module that implements `backend`.
pub fn of(backend: Backend) -> &'static dyn BackendImpl {
    match backend {
        Backend::Sm90 => &sm90::Sm90,
        Backend::Sm80 => &sm80::Sm80,
        Backend::Simt => &simt::Simt,
        Backend::Gemv => &gemv::Gemv,
        Backend::Tiny => &tiny::Tiny,
    }
}

/// What a backend's generator fills into its template, and how the kernel is launched.
pub struct Rendering {
    /// The template's file name (for error messages) and text.
    pub template_name: &'static str,
    pub template: &'static str,
    /// `{{NAME}}` -> value; the shared entries (entry point, parameters, epilogue) are added by
    /// [`crate::codegen::generated_parts`].
    pub values: Vec<(&'static str, String)>,
    /// Plan-specific lines of the header comment.
    pub described: Vec<String>,
    /// Kernel parameters after the spec's own (sm90's tensor maps).
    pub extra_args: Vec<KernelArg>,
}

/// Everything particular to one backend. The model layers, the search and codegen call these
/// hooks instead of asking which backend a plan is.
pub trait BackendImpl: Sync {
    // --- The target and the spec ---

    /// Whether the target has the instructions the backend is built on at all (an A100 has no
    /// wgmma): reports leave out a backend the target lacks, which is no choice the user has there.
    fn target_has(&self, hw: &Hardware) -> bool;

    /// Why the backend has no plan space for the spec on its hardware (`None`: it has one),
    /// naming what is missing. [`refusal`] adds the rule every backend shares.
    fn refusal(&self, spec: &KernelSpec) -> Option<String>;

    /// The backend's figures where a hardware file does not give them
    /// (`calibration.backends.NAME`). An optional figure left `None` is one the backend does not
    /// read, and a hardware file may not set it.
    fn default_calibration(&self) -> BackendCalibration;

    /// Whether DeepGEMM generates kernels for it; a backend without a generator yet is predicted
    /// (the report says what it would give) but its plans are never returned.
    fn has_generator(&self) -> bool {
        true
    }

    // --- The plan space ---

    /// The plans to consider for `spec`, in a fixed order; the search keeps those [`check`]
    /// accepts, so a proposal need not be legal.
    ///
    /// [`check`]: BackendImpl::check
    fn propose(&self, spec: &KernelSpec) -> Vec<Plan>;

    /// How the epilogue of the backend's kernel for `spec` gets results to memory.
    fn epilogue_strategy(&self, _spec: &KernelSpec) -> EpilogueStrategy {
        EpilogueStrategy::Direct
    }

    /// This backend's thread layout in a plan recorded before layouts had a type (a `tune
    /// --json` record that `tune --replay` reads).
    fn recorded_threads(&self, warps: RecordedWarps) -> ThreadLayout;

    /// The shared-memory layout for this spec, tile, thread layout and stage count: the search,
    /// the model and the kernel read it from the plan, so they agree on every byte.
    fn smem_layout(
        &self,
        spec: &KernelSpec,
        tile: Tile,
        threads: &ThreadLayout,
        stages: u32,
    ) -> SmemLayout;

    /// Whether the generator renders `plan` for `spec`, after the checks every backend shares
    /// ([`crate::codegen::check_supported`]); the error names the first reason it cannot.
    fn check(&self, spec: &KernelSpec, plan: &Plan) -> Result<(), CodegenError>;

    // --- Code generation ---

    /// The template and its values for a checked plan.
    fn render(&self, spec: &KernelSpec, plan: &Plan) -> Result<Rendering, CodegenError>;

    /// Whether the launcher transposes A and B (each given as its dtype and declared layout)
    /// before every launch, because this backend's kernel reads the other layout; the kernel is
    /// then generated, checked and modelled for that layout ([`kernel_view`]). None by default.
    fn transposes(&self, _a: (DType, Layout), _b: (DType, Layout)) -> [bool; 2] {
        [false, false]
    }

    /// The alignment in bytes the kernel's global copies need of `operand`'s pointer and leading
    /// dimension: by default the plan's copy width for A and B, an element for the others.
    fn operand_alignment(&self, _spec: &KernelSpec, plan: &Plan, operand: &Operand) -> u32 {
        copy_alignment(plan, operand)
    }

    // --- The model's questions ---

    /// Whether the math on inputs of `input` runs on tensor cores (the `use_tensor_cores`
    /// observable); by default it does.
    fn uses_tensor_cores(&self, _input: DType) -> bool {
        true
    }

    /// The math instruction's dtype for inputs of `input`: by default the input's own (tensor
    /// cores multiply it as it is).
    fn math_dtype(&self, input: DType) -> DType {
        input
    }

    /// The math instruction's dtype in one of this backend's plans: by default the backend's
    /// ([`BackendImpl::math_dtype`]); a backend whose plans sum on different units says so per
    /// plan.
    fn plan_math_dtype(&self, input: DType, _plan: &Plan) -> DType {
        self.math_dtype(input)
    }

    /// Registers per math thread that hold A/B fragments (`accumulators`: its result registers).
    fn fragment_registers(&self, plan: &Plan, accumulators: u32, input_bytes: u32) -> u32;

    /// Whether the epilogue's temporaries reuse the fragment registers (dead by then) instead of
    /// adding to them.
    fn epilogue_reuses_fragments(&self, _plan: &Plan, _input_bytes: u32) -> bool {
        false
    }

    /// Whether a cooperative persistent kernel runs a tile's epilogue while the next tile's first
    /// k-tile computes, instead of stopping its math for all of it.
    fn defers_epilogue(&self, _plan: &Plan, _input_bytes: u32) -> bool {
        false
    }

    /// Global -> shared copies one thread issues per stage, each holding registers.
    fn copies_per_thread(&self, _plan: &Plan, _input_bytes: u32) -> u32 {
        0
    }

    /// The most registers one math thread of `plan` may use.
    fn register_cap(&self, _plan: &Plan, hw: &Hardware) -> u32 {
        hw.max_regs_per_thread
    }

    /// Shared-memory bytes the block's threads read per k-block to feed the math instructions
    /// (`a`, `b`: the operands' element types).
    fn fragment_read_bytes(&self, plan: &Plan, a: DType, b: DType) -> f64;

    /// The main loop's barrier: its kind, how many per k-block and the cost of one, cycles.
    fn barrier(&self, plan: &Plan, cal: &Calibration) -> (BarrierKind, u32, f64);

    /// Cycles the load path adds to each stage's round trip on top of the memory latency.
    fn load_round_trip_cycles(&self, _hw: &Hardware) -> f64 {
        0.0
    }

    /// The share of a plan's copies that carry the operand DRAM streams, which scales the
    /// backend's `stream_efficiency`: 1 but for gemv, whose ring copies the small operand's
    /// rows beside the streamed ones.
    fn stream_share(&self, _plan: &Plan) -> f64 {
        1.0
    }

    /// The `WARPGROUPS` tile variable: warpgroups that do the math.
    fn warpgroups(&self, plan: &Plan) -> u32 {
        plan.threads.threads().div_ceil(128)
    }
}

/// `spec` as `backend`'s kernel sees it: the operands it has the launcher transpose
/// ([`BackendImpl::transposes`]) in the other layout. Everything of a backend (its proposals,
/// checks, rendering) reads this view; the launcher checks the caller's operands against `spec`.
pub fn kernel_view(spec: &KernelSpec, backend: Backend) -> Cow<'_, KernelSpec> {
    let transposed = transposed_roles(spec, backend);
    if transposed.is_empty() {
        return Cow::Borrowed(spec);
    }
    let mut view = spec.clone();
    for operand in view.operands.iter_mut() {
        if transposed.contains(&operand.role) {
            operand.layout = operand.layout.transposed();
        }
    }
    Cow::Owned(view)
}

/// The roles (A, B) of `spec` that `backend`'s launcher transposes.
pub fn transposed_roles(spec: &KernelSpec, backend: Backend) -> Vec<Role> {
    let (a, b) = (spec.a(), spec.b());
    let [ta, tb] = of(backend).transposes((a.dtype, a.layout), (b.dtype, b.layout));
    [(ta, Role::A), (tb, Role::B)]
        .into_iter()
        .filter_map(|(t, role)| t.then_some(role))
        .collect()
}

/// [`transposed_roles`] for the model's [`Problem`]: whether A and B are transposed.
pub fn transposed_problem_roles(problem: &Problem, backend: Backend) -> [bool; 2] {
    of(backend).transposes((problem.a, problem.a_layout), (problem.b, problem.b_layout))
}

/// The backends with a generator, in [`Backend::ALL`] order.
pub fn generated_backends() -> Vec<Backend> {
    Backend::ALL
        .into_iter()
        .filter(|&b| of(b).has_generator())
        .collect()
}

/// Why `backend` has no plan space for the spec on its hardware (`None`: it has one): the
/// backend's own reason, or a hardware file that lists no rate for its math.
pub fn refusal(spec: &KernelSpec, backend: Backend) -> Option<String> {
    of(backend).refusal(spec).or_else(|| {
        let hw = &spec.hardware;
        let math = of(backend).math_dtype(spec.a().dtype);
        hw.mma_rate(math, backend).is_none().then(|| {
            format!(
                "{} lists no {math} rate for {backend} in its hardware model",
                hw.name
            )
        })
    })
}

/// Whether `backend` runs the spec's dtypes on its hardware.
pub fn runs(spec: &KernelSpec, backend: Backend) -> bool {
    refusal(spec, backend).is_none()
}

/// The plans the search considers for `backend`: its proposals, none when it cannot run the spec.
pub fn proposals(spec: &KernelSpec, backend: Backend) -> Vec<Plan> {
    if runs(spec, backend) {
        of(backend).propose(&kernel_view(spec, backend))
    } else {
        Vec::new()
    }
}

/// A plan of one stage, row-order rasterization and no split or cluster, with the layout
/// `backend` gives it; proposers vary it with [`push_variants`].
fn base_plan(
    spec: &KernelSpec,
    backend: Backend,
    tile: Tile,
    threads: ThreadLayout,
    settings: PlanSettings,
) -> Plan {
    Plan {
        backend,
        tile,
        threads,
        stages: 1,
        cluster_m: 1,
        cluster_n: 1,
        raster: crate::plan::Raster { group_m: 1 },
        split_k: 1,
        persistent: settings.persistent,
        smem: of(backend).smem_layout(spec, tile, &threads, 1),
        epilogue: settings.epilogue,
        operands: settings.operands,
    }
}

/// What a backend fixes in every plan it proposes.
struct PlanSettings {
    persistent: bool,
    epilogue: EpilogueStrategy,
    operands: crate::plan::OperandPath,
}

/// `plan` at `stages` stages, with the shared-memory layout its backend gives that count.
fn with_stages(spec: &KernelSpec, plan: &Plan, stages: u32) -> Plan {
    Plan {
        stages,
        smem: of(plan.backend).smem_layout(spec, plan.tile, &plan.threads, stages),
        ..plan.clone()
    }
}

/// Adds one plan per stage count in `stages` and per rasterization group.
fn push_variants(
    out: &mut Vec<Plan>,
    spec: &KernelSpec,
    base: Plan,
    stages: impl Iterator<Item = u32>,
) {
    for s in stages {
        for group_m in [1, 8] {
            let mut plan = with_stages(spec, &base, s);
            plan.raster.group_m = group_m;
            out.push(plan);
        }
    }
}

/// The template values of the declared operands as they are: `A_ROW`, `B_ROW`, `D_ROW` (row-major
/// or not) and `A_TYPE`, `B_TYPE`, `D_TYPE` (element types), for the kernels that read every
/// layout and dtype as declared (gemv, tiny).
fn declared_operand_values(spec: &KernelSpec) -> [(&'static str, String); 6] {
    let row = |o: &Operand| (o.layout == Layout::Row).to_string();
    let ty = |o: &Operand| crate::codegen::abi::element_type(o.dtype).to_string();
    [
        ("A_ROW", row(spec.a())),
        ("B_ROW", row(spec.b())),
        ("D_ROW", row(spec.d())),
        ("A_TYPE", ty(spec.a())),
        ("B_TYPE", ty(spec.b())),
        ("D_TYPE", ty(spec.d())),
    ]
}

/// The alignment of the tensor-core kernels: A and B at the plan's copy width, the other
/// operands at their element size.
fn copy_alignment(plan: &Plan, operand: &Operand) -> u32 {
    match operand.role {
        crate::spec::Role::A => plan.operands.a_copy_bytes,
        crate::spec::Role::B => plan.operands.b_copy_bytes,
        _ => operand.dtype.size_bytes(),
    }
}

/// Fragment reads of the warp-tiled kernels: each warp (warpgroup) reads the A rows and B
/// columns of its own sub-tile, so A is read once per warp column and B once per warp row.
fn warp_fragment_read_bytes(plan: &Plan, a: DType, b: DType) -> f64 {
    let (a_bytes, b_bytes) = (a.size_bytes() as f64, b.size_bytes() as f64);
    let t = plan.tile;
    let (tm, tn, tk) = (t.m as f64, t.n as f64, t.k as f64);
    let (wm, wn) = plan.threads.tile_split();
    let (wm, wn) = (wm as f64, wn as f64);
    tk * (wn * tm * a_bytes + wm * tn * b_bytes)
}

/// The `mma.sync` of 16-bit inputs (m16n8k16) or tf32 (m16n8k8), f32 sums: the sm80 and gemv
/// templates' `{{MMA_INSTRUCTION}}`. Both shapes take 4 A and 2 B registers per thread.
fn mma_sync_instruction(input: DType) -> &'static str {
    match input {
        DType::F16 => "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        DType::Bf16 => "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        _ => "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
    }
}

fn unsupported(backend: Backend, reason: String) -> CodegenError {
    CodegenError::Unsupported { backend, reason }
}

/// For the backends that launch one block per output tile and store from registers: clusters, a
/// persistent grid and a staged epilogue are sm90 features.
fn require_block_per_tile(backend: Backend, plan: &Plan) -> Result<(), CodegenError> {
    if plan.cluster_m * plan.cluster_n != 1 || plan.persistent {
        return Err(unsupported(
            backend,
            "clusters and persistent scheduling are sm90 features".to_string(),
        ));
    }
    if plan.epilogue != EpilogueStrategy::Direct {
        return Err(unsupported(
            backend,
            "only the direct (registers -> global) epilogue is implemented here".to_string(),
        ));
    }
    Ok(())
}

/// For the tensor-core backends: they accumulate in f32 and do not dequantize scaled inputs
/// (`instruction` names the mma in the message).
fn require_unscaled_f32_accumulation(
    backend: Backend,
    spec: &KernelSpec,
    instruction: &str,
) -> Result<(), CodegenError> {
    if spec.accumulate != DType::F32 {
        return Err(unsupported(
            backend,
            format!(
                "accumulate {} is not supported ({instruction} accumulates in f32 here)",
                spec.accumulate
            ),
        ));
    }
    if let Some(scale) = input_scale(spec) {
        return Err(unsupported(
            backend,
            format!("scale operand `{}` needs the simt backend", scale.name),
        ));
    }
    Ok(())
}

/// The first scale operand of A or B (`None`: the inputs are unscaled), for the backends that
/// multiply the inputs as they are.
fn input_scale(spec: &KernelSpec) -> Option<&Operand> {
    [spec.a(), spec.b()]
        .into_iter()
        .find_map(|o| epilogue::scales_of(spec, o).into_iter().next())
}

/// The refusal the tensor-core backends share: one input dtype for both operands
/// (`mixed_fp8_ok`: except e4m3 x e5m2), and f32 inputs kept on the CUDA cores.
fn tensor_core_dtype_refusal(spec: &KernelSpec, mixed_fp8_ok: bool) -> Option<String> {
    let (a, b) = (spec.a().dtype, spec.b().dtype);
    let fp8 = |d: DType| matches!(d, DType::E4m3 | DType::E5m2);
    if a != b && !(mixed_fp8_ok && fp8(a) && fp8(b)) {
        return Some(format!(
            "A is {a} and B is {b}; tensor-core plans take one input dtype (sm90 also takes \
             e4m3 x e5m2)"
        ));
    }
    // The tensor cores' f32 sums truncate (see the sm80 `check`): f32 inputs are computed on
    // the CUDA cores, `tf32` ones on the tensor cores.
    (a == DType::F32).then(|| {
        "f32 inputs are computed on CUDA cores (simt) to keep f32 accuracy; declare them `tf32` \
         for tensor cores at tf32 precision"
            .to_string()
    })
}
