//! `deepgemm bench`: our kernel and cuBLASLt side by side on the same buffers, with the model's
//! prediction, as a table, JSON (schema in docs/bench-json.md) and an SVG chart.

mod plot;

use super::common::{self, Progress};
use super::measure::Bench;
use crate::Failure;
use comfy_table::{presets::ASCII_MARKDOWN, Cell, CellAlignment, Table};
use deepgemm::model::Roofline;
use deepgemm::plan::Shape;
use deepgemm::spec::KernelSpec;
use deepgemm::suite::Suite;
use deepgemm_cuda::cublaslt::Baseline;
use deepgemm_cuda::device::{Gpu, GpuInfo};
use deepgemm_cuda::timing::{tflops, Timer, TimingOptions};
use deepgemm_cuda::CudaError;
use serde::Serialize;
use std::path::{Path, PathBuf};

pub const SCHEMA_VERSION: u32 = 1;

/// Benchmark against cuBLASLt: each input is a suite file (bench/suites/*.toml) or a .dgml spec
/// (its declared shapes, or --shape). Every shape is checked against the CPU reference once before
/// it is timed; a wrong result is reported as failed and never timed, and makes the exit code 1.
#[derive(clap::Args)]
#[command(after_help = "Examples:\n  deepgemm bench bench/suites/odd.toml\n  \
                        deepgemm bench bench/suites/llm.toml --json llm.json --plot llm.svg\n  \
                        deepgemm bench examples/gemm_bf16.dgml --shape 4096,4096,4096")]
pub struct Args {
    /// Suite files (.toml) or specs (.dgml).
    #[arg(required = true, value_name = "SUITE|SPEC")]
    inputs: Vec<PathBuf>,
    /// The kernel of a spec (input or suite's) that declares several.
    #[arg(long, value_name = "NAME")]
    kernel: Option<String>,
    /// Shapes to run for a spec input, M,N,K (repeatable).
    #[arg(long, value_parser = common::parse_shape)]
    shape: Vec<Shape>,
    /// Timed runs per kernel (at least 50).
    #[arg(long, default_value_t = 50)]
    runs: u32,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the results as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write a chart per suite (ours vs cuBLAS, and a roofline); several suites get -NAME added.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

/// What `--json` writes.
#[derive(Serialize)]
struct Report {
    schema_version: u32,
    gpu: GpuInfo,
    timing: TimingJson,
    suites: Vec<SuiteReport>,
}

#[derive(Serialize)]
struct TimingJson {
    warmup: u32,
    runs: u32,
    flush_l2: bool,
}

#[derive(Serialize)]
struct SuiteReport {
    name: String,
    spec: String,
    kernel: String,
    /// Geometric mean of ours / cuBLAS over the shapes where both ran.
    geomean_ratio: Option<f64>,
    rows: Vec<BenchRow>,
}

/// One shape.
#[derive(Debug, Clone, Serialize)]
pub struct BenchRow {
    pub shape: Shape,
    /// `ok`, `failed` (our result was wrong: not timed) or `error` (it could not run).
    pub status: &'static str,
    pub plan: Option<String>,
    pub ours_us: Option<f64>,
    pub ours_tflops: Option<f64>,
    pub ours_error: Option<f64>,
    pub registers: Option<u32>,
    /// Blocks our kernel launched, and blocks per cluster: with the tile count, how many rounds
    /// of tiles a persistent kernel ran (clusters of 4 filled 120 of the 132 SMs of the H100 we
    /// measured).
    pub grid_blocks: Option<u32>,
    pub cluster_blocks: Option<u32>,
    pub cublas_us: Option<f64>,
    pub cublas_tflops: Option<f64>,
    pub cublas_algo: Option<String>,
    /// ‖D − ref‖ / ‖ref‖ of cuBLASLt's checked run, beside `ours_error`: how precise the
    /// baseline is (its fp8 accumulation, for one) is part of what its speed buys.
    pub cublas_error: Option<f64>,
    /// `ok`, `unsupported` (cuBLASLt cannot run this spec or shape: the reason is in `notes`),
    /// `failed` (its result was off the reference: not timed) or `error` (a cuBLASLt call
    /// failed); null when the shape stopped before the baseline (no plan, no inputs).
    pub cublas_status: Option<&'static str>,
    /// For FP8 inputs, the cuBLASLt scaling mode of A and of B, e.g.
    /// `A VEC128_32F (sa) x B BLK128x128_32F (sb)`.
    pub cublas_scale_mode: Option<String>,
    /// ours / cuBLAS TFLOP/s.
    pub ratio: Option<f64>,
    /// FLOP per byte of compulsory DRAM traffic.
    pub intensity: f64,
    /// min(peak, intensity x DRAM bandwidth) for this shape, TFLOP/s.
    pub roofline_tflops: f64,
    /// ours / roofline.
    pub roofline_fraction: Option<f64>,
    pub predicted_us: Option<f64>,
    pub predicted_bottleneck: Option<String>,
    /// predicted / measured - 1.
    pub model_error: Option<f64>,
    /// Why a kernel did not run or was not compared.
    pub notes: Vec<String>,
}

impl BenchRow {
    /// A shape's row before anything ran: `error` until ours has been checked.
    fn before_running(shape: Shape, roof: &Roofline) -> BenchRow {
        BenchRow {
            shape,
            status: "error",
            plan: None,
            ours_us: None,
            ours_tflops: None,
            ours_error: None,
            registers: None,
            grid_blocks: None,
            cluster_blocks: None,
            cublas_us: None,
            cublas_tflops: None,
            cublas_algo: None,
            cublas_error: None,
            cublas_status: None,
            cublas_scale_mode: None,
            ratio: None,
            intensity: roof.intensity,
            roofline_tflops: roof.tflops,
            roofline_fraction: None,
            predicted_us: None,
            predicted_bottleneck: None,
            model_error: None,
            notes: Vec::new(),
        }
    }
}

pub fn run(args: Args) -> Result<(), Failure> {
    let mut suites = Vec::new();
    for input in &args.inputs {
        suites.push(load_input(input, &args.shape, args.kernel.as_deref())?);
    }
    let gpu = common::open_gpu()?;
    for (_, spec, _) in &suites {
        common::check_gpu_runs(&gpu, spec)?;
    }
    let timer = Timer::new(&gpu).map_err(common::cuda)?;
    let timing = TimingOptions {
        runs: args.runs,
        ..TimingOptions::default()
    };
    let mut reports = Vec::new();
    let mut failures = 0;
    let several = suites.len() > 1;
    for (suite, spec, path) in &suites {
        let progress = Progress::new(suite.shapes.len());
        let mut rows = Vec::new();
        for &shape in &suite.shapes {
            progress.start(&format!("{} {shape}", suite.name));
            let row = bench_shape(&gpu, &timer, spec, shape, args.seed, timing);
            if row.status != "ok" {
                progress.note(&format!("{} {shape}: {}", suite.name, row.notes.join("; ")));
            }
            rows.push(row);
            progress.done_one();
        }
        progress.finish();
        failures += rows.iter().filter(|r| r.status != "ok").count();
        let geomean_ratio = geomean(rows.iter().filter_map(|r| r.ratio));
        println!("{}", table(&suite.name, &rows));
        match geomean_ratio {
            Some(g) => println!(
                "{}: geomean ours/cuBLAS = {g:.2}x over {} shapes\n",
                suite.name,
                rows.iter().filter(|r| r.ratio.is_some()).count()
            ),
            None => println!("{}: no shape where both ran\n", suite.name),
        }
        if let Some(plot) = &args.plot {
            let file = if several {
                suffixed(plot, &suite.name)
            } else {
                plot.clone()
            };
            let roof = Roofline::new(spec, suite.shapes[0]);
            plot::write_svg(&file, &suite.name, &rows, roof.peak_tflops, roof.dram_tbps)
                .map_err(|e| Failure::Error(format!("{}: {e}", file.display())))?;
        }
        reports.push(SuiteReport {
            name: suite.name.clone(),
            spec: path.display().to_string(),
            kernel: spec.name.clone(),
            geomean_ratio,
            rows,
        });
    }
    if let Some(path) = &args.json {
        let report = Report {
            schema_version: SCHEMA_VERSION,
            gpu: gpu.info().clone(),
            timing: TimingJson {
                warmup: timing.warmup,
                runs: timing.runs.max(deepgemm_cuda::timing::MIN_RUNS),
                flush_l2: timing.flush_l2,
            },
            suites: reports,
        };
        let text = serde_json::to_string_pretty(&report).expect("the report serializes");
        common::write_file(path, text.as_bytes())?;
    }
    if failures == 0 {
        Ok(())
    } else {
        Err(Failure::Error(format!(
            "{failures} shape(s) did not run correctly (status `failed` or `error` above)"
        )))
    }
}

/// A suite, or a spec seen as a suite of its declared (or given) shapes.
fn load_input(
    path: &Path,
    shapes: &[Shape],
    kernel: Option<&str>,
) -> Result<(Suite, KernelSpec, PathBuf), Failure> {
    let is_spec = path.extension().is_some_and(|e| e == "dgml");
    let suite = if is_spec {
        let spec = common::one_kernel(path, kernel)?;
        let shapes = common::shapes_or_buckets(&spec, shapes)?;
        Suite {
            name: spec.name.clone(),
            spec: path.to_path_buf(),
            kernel: Some(spec.name.clone()),
            shapes,
        }
    } else {
        if !shapes.is_empty() {
            return Err(Failure::Invalid(format!(
                "--shape applies to a .dgml input; {} is a suite with its own shapes",
                path.display()
            )));
        }
        Suite::load(path).map_err(|e| Failure::Invalid(e.to_string()))?
    };
    if suite.shapes.is_empty() {
        return Err(Failure::Invalid(format!(
            "{} has no shapes",
            path.display()
        )));
    }
    let spec = common::one_kernel(&suite.spec, kernel.or(suite.kernel.as_deref()))?;
    Ok((suite, spec, path.to_path_buf()))
}

fn bench_shape(
    gpu: &Gpu,
    timer: &Timer,
    spec: &KernelSpec,
    shape: Shape,
    seed: u64,
    timing: TimingOptions,
) -> BenchRow {
    let spec = common::at_shape(spec, shape);
    let roof = Roofline::new(&spec, shape);
    let mut row = BenchRow::before_running(shape, &roof);
    let winner = match deepgemm::search::search(&spec) {
        Ok(result) => result.buckets[0].winner().clone(),
        Err(e) => {
            row.notes.push(format!("no plan: {e}"));
            return row;
        }
    };
    row.plan = Some(winner.label.clone());
    row.predicted_us = Some(winner.prediction.time_us);
    row.predicted_bottleneck = Some(winner.prediction.bottleneck.to_string());
    let bench = match Bench::new(gpu, timer, &spec, shape, seed, timing) {
        Ok(b) => b,
        Err(e) => {
            row.notes.push(format!("inputs: {e}"));
            return row;
        }
    };
    match bench.plan(&winner.plan, "bench") {
        Ok((outcome, launched)) => {
            row.ours_error = Some(outcome.check.error);
            row.registers = Some(launched.registers);
            row.grid_blocks = Some(launched.grid_blocks);
            row.cluster_blocks = Some(launched.cluster_blocks);
            match outcome.timing {
                Some(t) => {
                    row.status = "ok";
                    let ours = tflops(shape, t.median_us);
                    row.ours_us = Some(t.median_us);
                    row.ours_tflops = Some(ours);
                    row.roofline_fraction = Some(ours / roof.tflops);
                    row.model_error = Some(winner.prediction.time_us / t.median_us - 1.0);
                }
                None => {
                    row.status = "failed";
                    row.notes.push(format!(
                        "wrong result: relative error {:.2e} > {:.0e}, {} unwritten; not timed",
                        outcome.check.error, outcome.check.tolerance, outcome.check.unwritten
                    ));
                }
            }
        }
        Err(e) => row.notes.push(format!("ours: {e}")),
    }
    match Baseline::new(gpu, &spec, &bench.device) {
        Ok(baseline) => {
            row.cublas_algo = Some(baseline.label().to_string());
            row.cublas_scale_mode = baseline.scale_mode().map(str::to_string);
            match bench.cublas(&baseline) {
                Ok(outcome) => match outcome.timing {
                    Some(t) => {
                        row.cublas_error = Some(outcome.check.error);
                        row.cublas_status = Some("ok");
                        row.cublas_us = Some(t.median_us);
                        row.cublas_tflops = Some(tflops(shape, t.median_us));
                    }
                    None => {
                        row.cublas_error = Some(outcome.check.error);
                        row.cublas_status = Some("failed");
                        row.notes.push(format!(
                            "cuBLASLt result off the reference by {:.2e}; not timed",
                            outcome.check.error
                        ))
                    }
                },
                Err(e) => {
                    row.cublas_status = Some("error");
                    row.notes.push(format!("cuBLASLt: {e}"))
                }
            }
        }
        Err(e) => {
            // A spec or shape cuBLASLt refuses is a fact about the baseline, reported as such;
            // it does not make the shape fail.
            row.cublas_status = Some(match e {
                CudaError::CublasUnsupported(_) => "unsupported",
                _ => "error",
            });
            row.notes.push(e.to_string())
        }
    }
    if let (Some(ours), Some(theirs)) = (row.ours_tflops, row.cublas_tflops) {
        row.ratio = Some(ours / theirs);
    }
    row
}

fn geomean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0), |(s, n), v| (s + v.ln(), n + 1));
    (n > 0).then(|| (sum / n as f64).exp())
}

fn suffixed(path: &Path, name: &str) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let ext = path
        .extension()
        .map_or("svg".into(), |e| e.to_string_lossy());
    path.with_file_name(format!("{stem}-{name}.{ext}"))
}

fn table(name: &str, rows: &[BenchRow]) -> Table {
    let opt =
        |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:+.0}%", 100.0 * v));
    let mut table = Table::new();
    table.load_style(ASCII_MARKDOWN).set_header([
        format!("{name}: M x N x K"),
        "plan".into(),
        "ours TFLOP/s".into(),
        "cuBLAS TFLOP/s".into(),
        "ratio".into(),
        "% roofline".into(),
        "ours us".into(),
        "model us".into(),
        "model err".into(),
        "check".into(),
    ]);
    for r in rows {
        let check = match (r.status, r.ours_error) {
            ("ok", Some(e)) => format!("ok {e:.1e}"),
            (status, _) => status.to_string(),
        };
        table.add_row([
            Cell::new(r.shape.to_string()),
            Cell::new(r.plan.clone().unwrap_or_default()),
            Cell::new(opt(r.ours_tflops, 1)).set_alignment(CellAlignment::Right),
            Cell::new(match (r.cublas_tflops, r.cublas_status) {
                (Some(v), _) => format!("{v:.1}"),
                (None, Some(status)) => status.to_string(),
                (None, None) => "-".to_string(),
            })
            .set_alignment(CellAlignment::Right),
            Cell::new(r.ratio.map_or("-".into(), |v| format!("{v:.2}x")))
                .set_alignment(CellAlignment::Right),
            Cell::new(
                r.roofline_fraction
                    .map_or("-".into(), |v| format!("{:.0}%", 100.0 * v)),
            )
            .set_alignment(CellAlignment::Right),
            Cell::new(opt(r.ours_us, 1)).set_alignment(CellAlignment::Right),
            Cell::new(opt(r.predicted_us, 1)).set_alignment(CellAlignment::Right),
            Cell::new(pct(r.model_error)).set_alignment(CellAlignment::Right),
            Cell::new(check),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/bench-json.md shows every field a row is written with, so that the schema a user
    /// reads is the one they get.
    #[test]
    fn every_row_field_is_documented() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let spec = deepgemm::spec::parse_file(&root.join("examples/gemm_bf16.dgml"))
            .unwrap_or_else(|d| panic!("{d}"))
            .kernels
            .remove(0);
        let shape = Shape::new(1000, 3000, 2000);
        let row = BenchRow::before_running(shape, &Roofline::new(&spec, shape));
        let doc = std::fs::read_to_string(root.join("docs/bench-json.md")).unwrap();
        let value = serde_json::to_value(&row).unwrap();
        let fields = value.as_object().unwrap();
        assert!(fields.contains_key("grid_blocks"));
        let missing: Vec<_> = fields
            .keys()
            .filter(|key| !doc.contains(&format!("\"{key}\"")))
            .collect();
        assert!(missing.is_empty(), "not in docs/bench-json.md: {missing:?}");
    }
}
