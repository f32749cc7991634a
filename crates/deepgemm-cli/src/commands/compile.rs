//! `deepgemm compile SPEC [-o DIR]`: plan every shape bucket, generate each variant's CUDA C++,
//! compile it with NVRTC (through the on-disk cubin cache), and write the sources, binaries, the
//! analysis and the bundle of every variant (`NAME.dgb`, docs/runtime.md, "Bundle format").

use super::common::{self, Progress};
use crate::Failure;
use deepgemm::codegen::{self, GeneratedKernel};
use deepgemm::plan::{ShapeBucket, Variant};
use deepgemm::report::{render_markdown, Analysis};
use deepgemm_cuda::cache::compile_kernel;
use deepgemm_cuda::nvrtc;
use deepgemm_cuda::pitch_copy::PitchCopy;
use deepgemm_runtime::bundle::{BundleBuilder, CompiledVariant};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Compile a spec: for each kernel, DIR/KERNEL/analysis.{md,json}, variants.json (the dispatch
/// table: shape bucket -> variant, with launch metadata), and DIR/KERNEL/VARIANT/kernel.{cu,ptx,
/// cubin}, and DIR/NAME.dgb (NAME: the spec file's name), the bundle the runtime loads. Without
/// NVRTC the sources and the analysis are still written (no cubins, no bundle). DIR/KERNEL is
/// replaced as a whole: it holds exactly this run's variants, never files of an earlier run.
#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  deepgemm compile examples/gemm_bf16.dgml -o out\n  \
                        deepgemm compile examples/decode.dgml -o out --top 8"
)]
pub struct Args {
    /// The .dgml file.
    spec: PathBuf,
    /// Output directory (created if missing).
    #[arg(short, long, default_value = "out", value_name = "DIR")]
    out: PathBuf,
    /// Candidates listed per bucket in analysis.md.
    #[arg(long, default_value_t = 5)]
    top: usize,
    /// Only this kernel of the file.
    #[arg(long, value_name = "NAME")]
    kernel: Option<String>,
}

/// One line of variants.json.
#[derive(Serialize)]
struct VariantEntry {
    name: String,
    bucket: ShapeBucket,
    plan: String,
    entry: String,
    arch: String,
    threads: u32,
    /// Dynamic shared memory, bytes.
    smem_bytes: u32,
    /// Blocks: ceil(M / tile_m) x ceil(N / tile_n) x split_k.
    grid: codegen::GridRule,
    /// Kernel parameters in order.
    args: Vec<codegen::KernelArg>,
    /// Byte alignment each operand's base and leading dimension need for the fast path (the
    /// launcher repacks operands that lack it).
    alignment: Vec<(String, u32)>,
    predicted_registers: u32,
    /// ptxas's report; null without NVRTC or when NVRTC gave none.
    compiled: Option<nvrtc::Resources>,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let kernels = common::kernels_of(&args.spec, args.kernel.as_deref(), common::Errors::Text)?;
    if !nvrtc::findable() && std::env::var_os("DEEPGEMM_NO_SETUP").is_none() {
        // The first command on a fresh machine: fetch the compiler rather than write no cubin.
        if let Err(e) = super::setup::install() {
            eprintln!("warning: could not install NVRTC: {e}");
        }
    }
    let nvrtc_missing = nvrtc::version().err();
    if let Some(e) = &nvrtc_missing {
        eprintln!("warning: {e}\nwriting sources and analysis only (no .ptx/.cubin, no bundle)");
    }
    let mut bundled: Vec<(&deepgemm::spec::KernelSpec, Vec<CompiledVariant>)> = Vec::new();
    for spec in &kernels {
        let result = common::plan(spec)?;
        let final_dir = args.out.join(&spec.name);
        // Built beside the old folder and swapped in at the end, so a failed run leaves the
        // previous output whole and a finished one leaves no stale variant (a .cu of one plan
        // beside the .cubin of another).
        let dir = args
            .out
            .join(format!(".{}.partial-{}", spec.name, std::process::id()));
        remove_dir(&dir)?;
        let mut analysis = Analysis::new(spec, &result, args.top);
        // What analysis.md says first, on the terminal too: a slow path is never silent.
        for note in &analysis.notes {
            eprintln!("note: {}: {note}", spec.name);
        }
        for cost in result.buckets.iter().flat_map(|b| &b.constraint_costs) {
            eprintln!("note: {}: {}", spec.name, cost.message);
        }
        let built = (|| -> Result<Vec<CompiledVariant>, Failure> {
            let variants = result.variants();
            let progress = Progress::new(variants.len());
            let mut entries = Vec::with_capacity(variants.len());
            let mut compiled_variants = Vec::with_capacity(variants.len());
            for (i, (variant, bucket)) in variants.iter().zip(&result.buckets).enumerate() {
                progress.start(&format!(
                    "{} {}: {}",
                    spec.name,
                    variant.name,
                    variant.plan.label()
                ));
                let kernel = codegen::generate(spec, &variant.plan, &variant.name)
                    .map_err(|e| Failure::Error(format!("{} {}: {e}", spec.name, variant.name)))?;
                let vdir = dir.join(&variant.name);
                write(&vdir.join("kernel.cu"), kernel.source.as_bytes())?;
                let compiled = if nvrtc_missing.is_none() {
                    let compiled = compile_variant(&kernel, &vdir, &final_dir.join(&variant.name))?;
                    let resources = compiled.resources.reported.then_some(compiled.resources);
                    compiled_variants.push(CompiledVariant {
                        name: variant.name.clone(),
                        bucket: variant.bucket,
                        kernel: kernel.clone(),
                        compiled,
                    });
                    if resources.is_none() {
                        progress.note(&format!(
                            "note: {} {}: NVRTC reported no resource figures; `deepgemm run` reads \
                             them from the driver",
                            spec.name, variant.name
                        ));
                    }
                    resources
                } else {
                    None
                };
                let predicted = bucket.winner().prediction.registers.total;
                if let Some(r) = &compiled {
                    // The analysis is written after the variants, so that it reports the
                    // occupancy of the registers ptxas allocated, not only the model's estimate.
                    analysis.record_ptxas(i, r.registers, &spec.hardware);
                    if r.spills() {
                        progress.note(&format!(
                            "warning: {} {} spills ({} registers, {} B spill stores)",
                            spec.name, variant.name, r.registers, r.spill_store_bytes
                        ));
                    }
                }
                entries.push(entry(variant, &kernel, predicted, compiled));
                progress.done_one();
            }
            progress.finish();
            let table = serde_json::to_string_pretty(&entries).expect("variants serialize");
            write(&dir.join("variants.json"), table.as_bytes())?;
            write(
                &dir.join("analysis.md"),
                render_markdown(&analysis).as_bytes(),
            )?;
            let json = serde_json::to_string_pretty(&analysis).expect("analysis serializes");
            write(&dir.join("analysis.json"), json.as_bytes())?;
            Ok(compiled_variants)
        })();
        let (variants, compiled_variants) = match built {
            Ok(compiled) => (result.buckets.len(), compiled),
            Err(e) => {
                // Best effort: the error being reported matters more than the leftover.
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        remove_dir(&final_dir)?;
        std::fs::rename(&dir, &final_dir).map_err(|e| {
            Failure::Io(format!(
                "cannot move {} to {}: {e}",
                dir.display(),
                final_dir.display()
            ))
        })?;
        println!(
            "{}: {} variant(s) in {}{}",
            spec.name,
            variants,
            final_dir.display(),
            if nvrtc_missing.is_some() {
                " (sources only)"
            } else {
                ""
            }
        );
        if nvrtc_missing.is_none() {
            bundled.push((spec, compiled_variants));
        }
    }
    if nvrtc_missing.is_none() {
        write_bundle(&args.spec, &args.out, bundled)?;
    }
    Ok(())
}

/// Writes DIR/NAME.dgb: every kernel compiled above, their dispatch tables and the repack copy
/// kernel, for the runtime (docs/runtime.md, "Bundle format").
fn write_bundle(
    spec_path: &Path,
    out: &Path,
    kernels: Vec<(&deepgemm::spec::KernelSpec, Vec<CompiledVariant>)>,
) -> Result<(), Failure> {
    let Some((first, _)) = kernels.first() else {
        return Ok(());
    };
    let arch = first.hardware.arch.clone();
    let nvrtc_version = nvrtc::version().map_err(common::cuda)?;
    let mut builder = BundleBuilder::new(&arch, &first.hardware.name, nvrtc_version);
    for (spec, variants) in kernels {
        builder.add_kernel(spec, variants).map_err(Failure::Error)?;
    }
    let pitch_copy = PitchCopy::compile(&arch).map_err(common::cuda)?;
    let bundle = builder.finish(&pitch_copy).map_err(Failure::Error)?;
    let name = spec_path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "bundle".into());
    let path = out.join(format!("{name}.dgb"));
    write(&path, &bundle.to_bytes())?;
    println!(
        "bundle: {} ({} kernel(s), {} for {}; `deepgemm inspect {}`)",
        path.display(),
        bundle.header.kernels.len(),
        arch,
        bundle.header.target,
        path.display()
    );
    Ok(())
}

/// Compiles through the cubin cache and writes the PTX and cubin. `shown` is the folder the
/// user will see (`dir` is its partial twin).
fn compile_variant(
    kernel: &GeneratedKernel,
    dir: &Path,
    shown: &Path,
) -> Result<nvrtc::Compiled, Failure> {
    let (compiled, _) =
        compile_kernel(kernel).map_err(|e| Failure::Error(format!("{}: {e}", shown.display())))?;
    write(&dir.join("kernel.ptx"), compiled.ptx.as_bytes())?;
    write(&dir.join("kernel.cubin"), &compiled.cubin)?;
    Ok(compiled)
}

fn entry(
    variant: &Variant,
    kernel: &GeneratedKernel,
    predicted_registers: u32,
    compiled: Option<nvrtc::Resources>,
) -> VariantEntry {
    VariantEntry {
        name: variant.name.clone(),
        bucket: variant.bucket,
        plan: variant.plan.label(),
        entry: kernel.entry.clone(),
        arch: kernel.arch.clone(),
        threads: kernel.threads,
        smem_bytes: kernel.smem_bytes,
        grid: kernel.grid,
        args: kernel.args.clone(),
        alignment: kernel.alignment.clone(),
        predicted_registers,
        compiled,
    }
}

/// Removes the folder at `path` and everything in it; nothing there is fine.
fn remove_dir(path: &Path) -> Result<(), Failure> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Failure::Io(format!(
            "cannot replace {}: {e}",
            path.display()
        ))),
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    common::write_file(path, bytes)
}
