//! `deepgemm run SPEC [--shape M,N,K]`: fresh random inputs on the GPU, the planned kernel, a
//! check against the higher-precision CPU reference, then its time and TFLOP/s.

use super::common;
use crate::Failure;
use deepgemm::codegen;
use deepgemm::model::Roofline;
use deepgemm::search::variant_name;
use deepgemm_cuda::runner::{self, RunOptions};
use deepgemm_cuda::timing::TimingOptions;
use deepgemm_cuda::tuning::TuningCache;
use std::path::PathBuf;

/// Run one kernel of a spec on GPU 0 and verify it. The kernel is the variant whose shape
/// bucket holds --shape (default: the largest shape the spec declares). Exit code 1 when the
/// result is wrong.
#[derive(clap::Args)]
#[command(after_help = "Examples:\n  deepgemm run examples/gemm_bf16.dgml\n  \
                        deepgemm run examples/decode.dgml --shape 7,4096,4096 --seed 3")]
pub struct Args {
    /// The .dgml file.
    spec: PathBuf,
    /// M,N,K (default: the largest declared shape; others are planned on their own).
    #[arg(long, value_parser = common::parse_shape)]
    shape: Option<deepgemm::plan::Shape>,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The kernel, when the file declares several.
    #[arg(long, value_name = "NAME")]
    kernel: Option<String>,
    /// Extra elements on every matrix's leading dimension (1 makes ld = K+1 for a row-major A).
    #[arg(long, default_value_t = 0, value_name = "ELEMS")]
    ld_pad: u64,
    /// Offset every operand's base address by this many bytes (2 misaligns 16-byte copies).
    #[arg(long, default_value_t = 0, value_name = "BYTES")]
    misalign: u64,
    /// Check only; do not time.
    #[arg(long)]
    no_time: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// The checks beyond the relative error, when the spec has them: an fp8 D's worst element and
/// the amax output.
fn output_checks(report: &runner::RunReport) -> String {
    let fp8 = report.fp8.map_or(String::new(), |f| {
        format!(
            "; fp8 D: worst element {:.1e} beyond one ulp (allowed {:.1e})",
            f.worst_excess, f.allowed_excess
        )
    });
    let amax = report.amax.map_or(String::new(), |a| {
        format!(
            "; amax: {} value(s) within {:.1e} (tolerance {:.0e})",
            a.checked, a.error, a.tolerance
        )
    });
    fp8 + &amax
}

pub fn run(args: Args) -> Result<(), Failure> {
    let spec = common::one_kernel(&args.spec, args.kernel.as_deref())?;
    let shape = args.shape.unwrap_or_else(|| common::largest_shape(&spec));
    let declared = common::plan(&spec)?;
    // A shape the spec does not declare is planned on its own, as `bench` does.
    let (spec, result) = match declared.bucket_for(shape) {
        Some(_) => (spec, declared),
        None => {
            eprintln!(
                "note: {shape} is outside kernel `{}`'s declared shape ({}); planning for it alone",
                spec.name,
                deepgemm::spec::shape_text(&spec.shape)
            );
            let fixed = common::at_shape(&spec, shape);
            let result = common::plan(&fixed)?;
            (fixed, result)
        }
    };
    let (index, bucket) = result.bucket_for(shape).expect("the shape was planned");
    let name = variant_name(index, &bucket.bucket);
    let gpu = common::open_gpu_for(&spec)?;
    // A plan `deepgemm tune` measured fastest on this GPU and shape beats the model's pick.
    let tuned = TuningCache::from_env()
        .and_then(|cache| cache.load(gpu.info(), &spec, shape))
        .filter(|t| codegen::check_supported(&spec, &t.plan).is_ok());
    if let Some(t) = &tuned {
        eprintln!(
            "note: using the tuned plan {} ({:.1} us when tuned; the model picks {})",
            t.label,
            t.time_us,
            bucket.winner().label
        );
    }
    let plan = tuned.as_ref().map_or(&bucket.winner().plan, |t| &t.plan);
    let kernel = codegen::generate(&spec, plan, &name)
        .map_err(|e| Failure::Error(format!("{name}: {e}")))?;
    let options = RunOptions {
        seed: args.seed,
        ld_pad: args.ld_pad,
        base_offset_bytes: args.misalign,
        timing: (!args.no_time).then(TimingOptions::default),
        ..RunOptions::default()
    };
    let report = runner::run(&gpu, &spec, &kernel, shape, &options).map_err(common::cuda)?;
    let predicted = deepgemm::model::predict(&spec, plan, shape);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("the report serializes")
        );
    } else {
        let roof = Roofline::new(&spec, shape);
        println!("{} on {} ({})", spec.name, gpu.info().name, gpu.info().arch);
        println!("shape     {shape}  variant {name}: {}", report.plan);
        println!(
            "check     {}  relative error {:.2e} (tolerance {:.0e}){}, {} elements{}{}",
            if report.passed { "PASSED" } else { "FAILED" },
            report.error,
            report.tolerance,
            output_checks(&report),
            report.checked_elements,
            if report.sampled {
                " (sampled rows/columns)"
            } else {
                ""
            },
            if report.unwritten_count > 0 {
                format!(", {} never written", report.unwritten_count)
            } else {
                String::new()
            }
        );
        println!(
            "compiled  {} registers, {} B smem{}{}",
            report.resources.registers,
            kernel.smem_bytes,
            if report.from_cache {
                ", from the cache"
            } else {
                ""
            },
            if report.repacked.is_empty() {
                String::new()
            } else {
                format!("; repacked {}", report.repacked.join(", "))
            }
        );
        let (gx, gy, gz) = report.grid;
        println!(
            "launch    grid {gx}x{gy}x{gz}{}, {} threads per block",
            if report.cluster > 1 {
                format!(" ({} clusters of {})", gx / report.cluster, report.cluster)
            } else {
                String::new()
            },
            kernel.threads
        );
        if let (Some(us), Some(tflops)) = (report.time_us, report.tflops) {
            println!(
                "time      {us:.1} us, {tflops:.1} TFLOP/s ({:.0}% of this shape's roofline {:.0})",
                100.0 * tflops / roof.tflops,
                roof.tflops
            );
        }
        println!(
            "model     {:.1} us, {:.1} TFLOP/s, bound by {}",
            predicted.time_us, predicted.tflops, predicted.bottleneck
        );
    }
    if report.passed {
        Ok(())
    } else {
        Err(Failure::Error(format!(
            "{name} computed a wrong result at {shape}: relative error {:.3e} (tolerance {:.0e}){}",
            report.error,
            report.tolerance,
            output_checks(&report)
        )))
    }
}
