//! `deepgemm check SPEC...`: validate specs and print a normalized summary of each kernel.

use crate::Failure;
use deepgemm::search::paths;
use deepgemm::spec;
use std::path::PathBuf;

/// Parse and check .dgml specs; print each kernel's operands, roles, epilogue, shape buckets and
/// constraints. Exit code 2 when any spec has errors (all of them are reported).
#[derive(clap::Args)]
#[command(after_help = "Example:\n  deepgemm check examples/gemm_bf16.dgml examples/mlp_up.dgml")]
pub struct Args {
    /// One or more .dgml files.
    #[arg(required = true, value_name = "SPEC")]
    specs: Vec<PathBuf>,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let mut failed = false;
    let mut unreadable = false;
    for path in &args.specs {
        match spec::parse_file(path) {
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
            Err(diagnostics) if diagnostics.is_unreadable() => {
                for d in &diagnostics.items {
                    eprintln!("error: {}", d.message);
                }
                unreadable = true;
            }
            Err(diagnostics) => {
                eprint!("{}", diagnostics.render());
                failed = true;
            }
        }
    }
    if failed {
        Err(Failure::BadInput)
    } else if unreadable {
        Err(Failure::Io("a spec could not be read".to_string()))
    } else {
        Ok(())
    }
}
