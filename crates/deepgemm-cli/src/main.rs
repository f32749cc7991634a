//! `deepgemm`: the command line of the DeepGEMM kernel compiler.

mod commands;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// DeepGEMM: a GEMM kernel compiler for NVIDIA GPUs. Declare what to compute and what must hold
/// in a `.dgml` file; DeepGEMM models the hardware, chooses a plan, explains why, and generates,
/// compiles, verifies and runs the kernel.
#[derive(Parser)]
#[command(name = "deepgemm", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Check(commands::check::Args),
    Targets(commands::targets::Args),
}

/// Exit codes: 0 success, 1 a failure while doing the work (GPU, NVRTC, I/O), 2 bad input
/// (a spec, a suite or an argument that is wrong).
pub enum Failure {
    /// Already reported to the user (diagnostics printed).
    BadInput,
    /// A message to print.
    Error(String),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => commands::check::run(args),
        Command::Targets(args) => commands::targets::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::BadInput) => ExitCode::from(2),
        Err(Failure::Error(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}
