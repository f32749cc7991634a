//! `deepgemm check SPEC...`: validate specs and print a normalized summary of each kernel.

use super::common;
use crate::Failure;
use deepgemm::search::paths;
use deepgemm::spec;
use std::path::PathBuf;

/// Parse and check .dgml specs; print each kernel's operands, roles, epilogue, shape buckets and
/// constraints. Exit code 2 when any spec has errors (all of them are reported).
#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  deepgemm check examples/gemm_bf16.dgml examples/mlp_up.dgml\n  \
                        deepgemm check examples/decode.dgml --json"
)]
pub struct Args {
    /// One or more .dgml files.
    #[arg(required = true, value_name = "SPEC")]
    specs: Vec<PathBuf>,
    /// Print JSON (a list, one object per file: its kernels' summaries, or its errors) on stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let mut failed = false;
    let mut unreadable = false;
    let mut json = Vec::new();
    for path in &args.specs {
        match spec::parse_file(path) {
            Ok(file) if args.json => {
                let kernels: Vec<serde_json::Value> = file
                    .kernels
                    .iter()
                    .map(|kernel| {
                        let mut value = serde_json::to_value(spec::summary_record(kernel))
                            .expect("a summary serializes");
                        value["notes"] = paths::notes(kernel).into();
                        value
                    })
                    .collect();
                json.push(serde_json::json!({
                    "schema_version": deepgemm::report::SCHEMA_VERSION,
                    "file": path.display().to_string(),
                    "kernels": kernels,
                }));
            }
            Ok(file) => {
                for kernel in &file.kernels {
                    println!("{}", spec::summary(kernel));
                    // How the math runs when it is not the fast tensor-core path the user may
                    // assume (precision, CUDA-core fallback): explain and compile say it too.
                    for note in paths::notes(kernel) {
                        println!("  note: {note}");
                    }
                }
            }
            Err(diagnostics) => {
                let io = diagnostics.is_unreadable();
                if args.json {
                    json.push(common::spec_errors_json(path, &diagnostics));
                } else if io {
                    for d in &diagnostics.items {
                        eprintln!("error: {}", d.message);
                    }
                } else {
                    eprint!("{}", diagnostics.render());
                }
                unreadable |= io;
                failed |= !io;
            }
        }
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json).expect("JSON values serialize")
        );
    }
    match (failed, unreadable, args.json) {
        (true, _, _) => Err(Failure::BadInput),
        (false, true, true) => Err(Failure::IoReported),
        (false, true, false) => Err(Failure::Io("a spec could not be read".to_string())),
        (false, false, _) => Ok(()),
    }
}
