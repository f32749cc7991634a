//! `deepgemm inspect FILE.dgb`: what a bundle holds (docs/runtime.md, "Bundle format").

use crate::Failure;
use deepgemm_runtime::bundle::BundleFile;
use std::path::PathBuf;

/// Print a bundle's contents: format and architecture, each kernel's operands, params and
/// declared shapes, its variants (bucket, plan, threads, shared memory, registers, cubin size)
/// and dispatch table. Checks every binary against its SHA-256 on the way.
#[derive(clap::Args)]
#[command(after_help = "Examples:\n  deepgemm inspect out/gemm_bf16.dgb\n  \
                        deepgemm inspect out/gemm_bf16.dgb --json")]
pub struct Args {
    /// The bundle (`deepgemm compile` writes DIR/NAME.dgb).
    bundle: PathBuf,
    /// Print the header as JSON (without the CUDA sources).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let shown = args.bundle.display().to_string();
    let bytes = std::fs::read(&args.bundle)
        .map_err(|e| Failure::Io(format!("cannot read {shown}: {e}")))?;
    let file = BundleFile::from_bytes(&bytes)
        .map_err(|problem| Failure::Invalid(format!("{shown} is not a valid bundle: {problem}")))?;
    if args.json {
        let json = deepgemm_runtime::inspect::json(&file);
        println!(
            "{}",
            serde_json::to_string_pretty(&json).expect("JSON values serialize")
        );
    } else {
        print!("{}", deepgemm_runtime::inspect::render(&file, &shown));
    }
    Ok(())
}
