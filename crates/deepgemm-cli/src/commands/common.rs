//! What several commands share: reading a spec, choosing a kernel and a shape, planning, and
//! opening the GPU.

use crate::Failure;
use deepgemm::plan::Shape;
use deepgemm::search::{self, SearchResult};
use deepgemm::spec::{self, DimDomain, KernelSpec, ShapeSpec};
use deepgemm_cuda::device::Gpu;
use deepgemm_cuda::CudaError;
use std::path::Path;

/// How a command reports a spec's errors: rendered for a person on stderr, or as JSON on stdout
/// for a program (`--json`), so a caller of `--json` always gets JSON to parse.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Errors {
    Text,
    Json,
}

/// Parses `path`; on errors prints every diagnostic (as `errors` says) and fails as bad input,
/// or as I/O when the file cannot be read.
fn load_kernels(path: &Path, errors: Errors) -> Result<Vec<KernelSpec>, Failure> {
    match spec::parse_file(path) {
        Ok(file) => Ok(file.kernels),
        Err(diagnostics) if errors == Errors::Json => {
            println!(
                "{}",
                serde_json::to_string_pretty(&spec_errors_json(path, &diagnostics))
                    .expect("JSON values serialize")
            );
            Err(if diagnostics.is_unreadable() {
                Failure::IoReported
            } else {
                Failure::BadInput
            })
        }
        Err(diagnostics) if diagnostics.is_unreadable() => {
            let messages: Vec<&str> = diagnostics
                .items
                .iter()
                .map(|d| d.message.as_str())
                .collect();
            Err(Failure::Io(messages.join("; ")))
        }
        Err(diagnostics) => {
            eprint!("{}", diagnostics.render());
            Err(Failure::BadInput)
        }
    }
}

/// `{"schema_version", "file", "errors": [...]}`: the diagnostics of a spec that did not check
/// (docs/analysis-json.md).
pub fn spec_errors_json(path: &Path, diagnostics: &spec::Diagnostics) -> serde_json::Value {
    let errors: Vec<serde_json::Value> = diagnostics.items.iter().map(diagnostic_json).collect();
    serde_json::json!({
        "schema_version": deepgemm::report::SCHEMA_VERSION,
        "file": path.display().to_string(),
        "errors": errors,
    })
}

/// One diagnostic; `line` and `column` are null for a file that could not be read, which has no
/// position to point at.
fn diagnostic_json(d: &spec::Diagnostic) -> serde_json::Value {
    let located = d.span.is_some();
    serde_json::json!({
        "message": d.message,
        "line": located.then_some(d.line),
        "column": located.then_some(d.col),
        "expected": d.expected,
        "hint": d.hint,
        "source_line": located.then_some(&d.source_line),
    })
}

/// The kernels of the file at `path`: the one named by `--kernel`, or all of them.
pub fn kernels_of(
    path: &Path,
    name: Option<&str>,
    errors: Errors,
) -> Result<Vec<KernelSpec>, Failure> {
    select_kernels(load_kernels(path, errors)?, name, path)
}

fn select_kernels(
    kernels: Vec<KernelSpec>,
    name: Option<&str>,
    path: &Path,
) -> Result<Vec<KernelSpec>, Failure> {
    let Some(name) = name else {
        return Ok(kernels);
    };
    let names: Vec<String> = kernels.iter().map(|k| k.name.clone()).collect();
    let chosen: Vec<KernelSpec> = kernels.into_iter().filter(|k| k.name == name).collect();
    if chosen.is_empty() {
        return Err(Failure::Invalid(format!(
            "{} has no kernel `{name}` (it has: {})",
            path.display(),
            names.join(", ")
        )));
    }
    Ok(chosen)
}

/// Exactly one kernel: the one named, or the file's only one.
pub fn one_kernel(path: &Path, name: Option<&str>) -> Result<KernelSpec, Failure> {
    let mut kernels = kernels_of(path, name, Errors::Text)?;
    if kernels.len() > 1 {
        let names: Vec<&str> = kernels.iter().map(|k| k.name.as_str()).collect();
        return Err(Failure::Invalid(format!(
            "{} declares {} kernels ({}); choose one with --kernel NAME",
            path.display(),
            kernels.len(),
            names.join(", ")
        )));
    }
    Ok(kernels.remove(0))
}

/// Parses `M,N,K` (also `MxNxK`), each at least 1.
pub fn parse_shape(text: &str) -> Result<Shape, String> {
    let parts: Vec<&str> = text.split([',', 'x']).map(str::trim).collect();
    let [m, n, k] = parts.as_slice() else {
        return Err(format!("`{text}` is not M,N,K (e.g. 4096,4096,4096)"));
    };
    let dim = |name: &str, value: &str| -> Result<u64, String> {
        let limit = deepgemm::codegen::MAX_EXTENT;
        match value.parse::<u64>() {
            Ok(v) if v > limit => Err(format!(
                "{name} = {v} is more than the kernel ABI holds: kernels take `int {name}`, at \
                 most {limit} (2^31 - 2^16)"
            )),
            Ok(v) if v >= 1 => Ok(v),
            _ => Err(format!("{name} = `{value}` must be a whole number >= 1")),
        }
    };
    Ok(Shape::new(dim("M", m)?, dim("N", n)?, dim("K", k)?))
}

/// `spec` with its shape fixed to `shape`: what `bench` and `tune` plan, so each measured shape
/// gets the plan the model ranks best for exactly that shape.
pub fn at_shape(spec: &KernelSpec, shape: Shape) -> KernelSpec {
    let mut fixed = spec.clone();
    fixed.shape = ShapeSpec::fixed(shape);
    fixed
}

/// Searches `spec`; an impossible spec is the user's to fix (exit code 2).
pub fn plan(spec: &KernelSpec) -> Result<SearchResult, Failure> {
    search::search(spec).map_err(|e| Failure::Invalid(format!("kernel `{}`: {e}", spec.name)))
}

/// The shapes to measure: those given, else each shape bucket's largest (what it is planned for).
pub fn shapes_or_buckets(spec: &KernelSpec, given: &[Shape]) -> Result<Vec<Shape>, Failure> {
    if !given.is_empty() {
        return Ok(given.to_vec());
    }
    Ok(plan(spec)?.buckets.iter().map(|b| b.shape).collect())
}

/// The largest shape the spec declares: the default of `run`.
pub fn largest_shape(spec: &KernelSpec) -> Shape {
    let top = |d: &DimDomain| match d {
        DimDomain::Fixed(v) => *v,
        DimDomain::Set(values) => values.iter().copied().max().unwrap_or(1),
        DimDomain::Range { hi, .. } => *hi,
    };
    Shape::new(top(&spec.shape.m), top(&spec.shape.n), top(&spec.shape.k))
}

/// Opens GPU 0 for `spec`.
pub fn open_gpu_for(spec: &KernelSpec) -> Result<Gpu, Failure> {
    let gpu = open_gpu()?;
    check_gpu_runs(&gpu, spec)?;
    Ok(gpu)
}

/// Refuses a spec whose target is another architecture: a kernel built for the target would not
/// run here, and one built for this GPU would not be the kernel the user asked for.
pub fn check_gpu_runs(gpu: &Gpu, spec: &KernelSpec) -> Result<(), Failure> {
    let info = gpu.info();
    let target = &spec.hardware.arch;
    if deepgemm_cuda::device::arch_runs_on(target, info.compute_capability) {
        return Ok(());
    }
    Err(Failure::Error(format!(
        "kernel `{}` targets {} ({target}), but GPU 0 is {} ({}); change `target` in the spec \
         (see `deepgemm targets`) to build for this GPU",
        spec.name, spec.hardware.name, info.name, info.arch
    )))
}

/// Opens GPU 0; no driver or no device is its own failure (exit 69).
pub fn open_gpu() -> Result<Gpu, Failure> {
    Gpu::open(0).map_err(cuda)
}

/// A CUDA failure as the CLI reports it.
pub fn cuda(e: CudaError) -> Failure {
    match e {
        CudaError::NoDriver | CudaError::NoDevice { .. } => Failure::NoGpu(e.to_string()),
        other => Failure::Error(other.to_string()),
    }
}

/// Writes `bytes` to `path`, creating its folder; failures are I/O errors (exit 74).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| Failure::Io(format!("cannot create {}: {e}", parent.display())))?;
    }
    std::fs::write(path, bytes)
        .map_err(|e| Failure::Io(format!("cannot write {}: {e}", path.display())))
}

/// Progress of long work: a bar on a terminal, one plain line per step otherwise (logs, CI).
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    pub fn new(steps: usize) -> Progress {
        use std::io::IsTerminal;
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(steps as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {msg}")
                    .expect("the template is valid"),
            );
            bar
        });
        Progress { bar }
    }

    /// Announces the step about to run.
    pub fn start(&self, what: &str) {
        match &self.bar {
            Some(bar) => bar.set_message(what.to_string()),
            None => eprintln!("{what}"),
        }
    }

    pub fn done_one(&self) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    /// A line that stays (a failure, a finding), printed above the bar.
    pub fn note(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
