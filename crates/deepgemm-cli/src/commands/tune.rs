//! `deepgemm tune SPEC [--top K]`: time the model's top K plans per shape, keep the fastest in
//! the tuning cache, and judge the model: ranking quality (best timed ÷ the model's first pick,
//! as speed) and time error. `--replay FILE` re-judges a saved run with the current hardware
//! model, without a GPU: how calibration is checked.

use super::common::{self, Progress};
use super::measure::Bench;
use crate::Failure;
use comfy_table::{presets::ASCII_MARKDOWN, Table};
use deepgemm::model;
use deepgemm::plan::{Plan, Shape};
use deepgemm::search::SOFT_PENALTY_PER_DISTANCE;
use deepgemm::spec::KernelSpec;
use deepgemm_cuda::device::Gpu;
use deepgemm_cuda::timing::{Timer, TimingOptions};
use deepgemm_cuda::tuning::{TunedPlan, TuningCache};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const SCHEMA_VERSION: u32 = 1;

/// Tune a spec on GPU 0: per shape (--shape, or each shape bucket's largest), check and time the
/// model's top K plans, store the fastest in the tuning cache (`run` then uses it), and report
/// the model's ranking quality and time error.
#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  deepgemm tune examples/gemm_bf16.dgml --top 8\n  \
                        deepgemm tune examples/gemm_bf16.dgml --shape 4095,4097,4093 --json t.json\n  \
                        deepgemm tune --replay t.json    # re-judge with the current model, no GPU"
)]
pub struct Args {
    /// The .dgml file.
    #[arg(required_unless_present = "replay")]
    spec: Option<PathBuf>,
    /// Plans to time per shape, in the model's order.
    #[arg(long, default_value_t = 8)]
    top: usize,
    /// Shapes to tune, M,N,K (repeatable); default: each bucket's largest shape.
    #[arg(long, value_parser = common::parse_shape)]
    shape: Vec<Shape>,
    /// The kernel, when the file declares several.
    #[arg(long, value_name = "NAME")]
    kernel: Option<String>,
    /// Timed runs per plan (at least 50).
    #[arg(long, default_value_t = 50)]
    runs: u32,
    /// Write every measurement as JSON (input of --replay).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Re-score the measurements of a saved --json with the current hardware model.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["spec", "shape", "json"])]
    replay: Option<PathBuf>,
}

/// What `--json` writes.
#[derive(Serialize, Deserialize)]
struct Record {
    schema_version: u32,
    gpu: String,
    /// As given on the command line (relative to where `tune` ran).
    spec: PathBuf,
    kernel: String,
    shapes: Vec<ShapeRecord>,
}

#[derive(Serialize, Deserialize)]
struct ShapeRecord {
    shape: Shape,
    /// In the model's order at the time of tuning.
    plans: Vec<Measured>,
}

#[derive(Serialize, Deserialize)]
struct Measured {
    label: String,
    plan: Plan,
    predicted_us: f64,
    /// The soft constraints' distance: the search ranks by predicted_us x (1 + penalty).
    #[serde(default)]
    soft_distance: f64,
    /// Median time; `None` when the plan failed its check or could not run.
    measured_us: Option<f64>,
    note: Option<String>,
}

/// The model judged on one shape.
struct Judgement {
    /// best measured time / measured time of the model's first pick (1.0 = perfect).
    ranking_quality: f64,
    /// |predicted / measured - 1| of every measured plan.
    errors: Vec<f64>,
    pick: usize,
    best: usize,
}

pub fn run(args: Args) -> Result<(), Failure> {
    if let Some(path) = &args.replay {
        return replay(path);
    }
    let path = args
        .spec
        .as_ref()
        .expect("clap requires SPEC without --replay");
    let spec = common::one_kernel(path, args.kernel.as_deref())?;
    let shapes = common::shapes_or_buckets(&spec, &args.shape)?;
    if args.top == 0 {
        return Err(Failure::Invalid("--top must be at least 1".into()));
    }
    let gpu = common::open_gpu_for(&spec)?;
    let timer = Timer::new(&gpu).map_err(common::cuda)?;
    let timing = TimingOptions {
        runs: args.runs,
        ..TimingOptions::default()
    };
    let cache = TuningCache::from_env();
    if cache.is_none() {
        eprintln!(
            "warning: neither DEEPGEMM_CACHE_DIR nor HOME is set: the tuned plans are reported \
             but not kept for `run`"
        );
    }
    let mut record = Record {
        schema_version: SCHEMA_VERSION,
        gpu: gpu.info().name.clone(),
        spec: path.clone(),
        kernel: spec.name.clone(),
        shapes: Vec::new(),
    };
    for shape in shapes {
        let plans = tune_shape(&gpu, &timer, &spec, shape, args.top, timing)?;
        let judged = judge(&plans);
        print_shape(shape, &plans, judged.as_ref());
        if let (Some(j), Some(cache)) = (&judged, &cache) {
            let best = &plans[j.best];
            let tuned = TunedPlan {
                gpu: gpu.info().name.clone(),
                driver_version: gpu.info().driver_version,
                kernel: spec.name.clone(),
                shape,
                plan: best.plan.clone(),
                label: best.label.clone(),
                time_us: best.measured_us.expect("the best was measured"),
                model_pick: plans[j.pick].label.clone(),
                model_pick_us: plans[j.pick].measured_us.expect("the pick was measured"),
                tuned_at: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
            };
            if let Err(e) = cache.store(gpu.info(), &spec, &tuned) {
                eprintln!("warning: the tuning cache could not be written: {e}");
            }
        }
        record.shapes.push(ShapeRecord { shape, plans });
    }
    summarize(&record);
    if let Some(out) = &args.json {
        let text = serde_json::to_string_pretty(&record).expect("the record serializes");
        common::write_file(out, text.as_bytes())?;
    }
    let unserved: Vec<String> = record
        .shapes
        .iter()
        .filter(|s| judge(&s.plans).is_none())
        .map(|s| s.shape.to_string())
        .collect();
    if unserved.is_empty() {
        Ok(())
    } else {
        Err(Failure::Error(format!(
            "no plan ran correctly at {}",
            unserved.join(", ")
        )))
    }
}

fn tune_shape(
    gpu: &Gpu,
    timer: &Timer,
    spec: &KernelSpec,
    shape: Shape,
    top: usize,
    timing: TimingOptions,
) -> Result<Vec<Measured>, Failure> {
    let spec = common::at_shape(spec, shape);
    let result = common::plan(&spec)?;
    let candidates: Vec<_> = result.buckets[0].candidates.iter().take(top).collect();
    let bench = Bench::new(gpu, timer, &spec, shape, 1, timing).map_err(common::cuda)?;
    let progress = Progress::new(candidates.len());
    let mut out = Vec::new();
    for (i, c) in candidates.iter().enumerate() {
        progress.start(&format!("{shape} {}", c.label));
        let (measured_us, note) = match bench.plan(&c.plan, &format!("t{i}")) {
            Ok((o, _)) => match o.timing {
                Some(t) => (Some(t.median_us), None),
                None => (
                    None,
                    Some(format!(
                        "wrong result (error {:.2e}); not timed",
                        o.check.error
                    )),
                ),
            },
            Err(e) => (None, Some(e)),
        };
        if let Some(n) = &note {
            progress.note(&format!("{shape} {}: {n}", c.label));
        }
        out.push(Measured {
            label: c.label.clone(),
            plan: c.plan.clone(),
            predicted_us: c.prediction.time_us,
            soft_distance: c.soft_distance,
            measured_us,
            note,
        });
        progress.done_one();
    }
    progress.finish();
    Ok(out)
}

/// The model's pick is the measured plan the search ranks first: the lowest score (predicted time
/// with the soft-constraint penalty), ties to the earlier plan (plans are stored in the search's
/// order). `None` when nothing ran.
fn judge(plans: &[Measured]) -> Option<Judgement> {
    let score = |p: &Measured| p.predicted_us * (1.0 + SOFT_PENALTY_PER_DISTANCE * p.soft_distance);
    let measured: Vec<(usize, f64)> = plans
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.measured_us.map(|t| (i, t)))
        .collect();
    let &(pick, pick_us) = measured
        .iter()
        .min_by(|a, b| score(&plans[a.0]).total_cmp(&score(&plans[b.0])))?;
    let &(best, best_us) = measured.iter().min_by(|a, b| a.1.total_cmp(&b.1))?;
    Some(Judgement {
        ranking_quality: best_us / pick_us,
        errors: measured
            .iter()
            .map(|&(i, t)| (plans[i].predicted_us / t - 1.0).abs())
            .collect(),
        pick,
        best,
    })
}

fn print_shape(shape: Shape, plans: &[Measured], judged: Option<&Judgement>) {
    let mut table = Table::new();
    table.load_style(ASCII_MARKDOWN).set_header([
        format!("{shape}: plan"),
        "model us".into(),
        "measured us".into(),
        "TFLOP/s".into(),
        "model err".into(),
    ]);
    for p in plans {
        let (measured, tflops, err) = match p.measured_us {
            Some(t) => (
                format!("{t:.1}"),
                format!("{:.1}", shape.flops() / t * 1e-6),
                format!("{:+.0}%", 100.0 * (p.predicted_us / t - 1.0)),
            ),
            None => (p.note.clone().unwrap_or_default(), "-".into(), "-".into()),
        };
        table.add_row([
            p.label.clone(),
            format!("{:.1}", p.predicted_us),
            measured,
            tflops,
            err,
        ]);
    }
    println!("{table}");
    match judged {
        Some(j) => println!(
            "model's pick {} ({:.1} us); fastest {} ({:.1} us); ranking quality {:.1}%; median time error {:.1}%\n",
            plans[j.pick].label,
            plans[j.pick].measured_us.unwrap_or(f64::NAN),
            plans[j.best].label,
            plans[j.best].measured_us.unwrap_or(f64::NAN),
            100.0 * j.ranking_quality,
            100.0 * median(&j.errors)
        ),
        None => println!("no plan ran correctly at {shape}\n"),
    }
}

/// The whole run: mean ranking quality over shapes and the median error over every measured plan.
fn summarize(record: &Record) {
    let judged: Vec<(Judgement, &ShapeRecord)> = record
        .shapes
        .iter()
        .filter_map(|s| judge(&s.plans).map(|j| (j, s)))
        .collect();
    if judged.is_empty() {
        println!("{}: nothing measured", record.kernel);
        return;
    }
    let quality = judged.iter().map(|(j, _)| j.ranking_quality).sum::<f64>() / judged.len() as f64;
    let errors: Vec<f64> = judged.iter().flat_map(|(j, _)| j.errors.clone()).collect();
    let picks: Vec<f64> = judged
        .iter()
        .map(|(j, s)| {
            let p = &s.plans[j.pick];
            (p.predicted_us / p.measured_us.unwrap_or(f64::NAN) - 1.0).abs()
        })
        .collect();
    println!(
        "{} on {}: {} shapes; ranking quality {:.1}% (mean; goal >= 95%); median time error {:.1}% over {} plans, {:.1}% over the picks (goal <= 10%)",
        record.kernel,
        record.gpu,
        judged.len(),
        100.0 * quality,
        100.0 * median(&errors),
        errors.len(),
        100.0 * median(&picks)
    );
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Re-predicts every measured plan with the hardware model the spec loads now, then judges.
fn replay(path: &Path) -> Result<(), Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Invalid(format!("cannot read {}: {e}", path.display())))?;
    let mut record: Record = serde_json::from_str(&text).map_err(|e| {
        Failure::Invalid(format!("{} is not a tune --json file: {e}", path.display()))
    })?;
    println!("as recorded:");
    summarize(&record);
    let spec = common::one_kernel(&record.spec, Some(&record.kernel))?;
    for s in &mut record.shapes {
        let at = common::at_shape(&spec, s.shape);
        for p in &mut s.plans {
            p.predicted_us = model::predict(&at, &p.plan, s.shape).time_us;
        }
    }
    println!("with the current model ({}):", spec.hardware.name);
    for s in &record.shapes {
        print_shape(s.shape, &s.plans, judge(&s.plans).as_ref());
    }
    summarize(&record);
    Ok(())
}
