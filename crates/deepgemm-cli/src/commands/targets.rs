//! `deepgemm targets [--show NAME]`: the built-in hardware presets.

use crate::Failure;
use deepgemm::hw::{preset, PRESETS};

/// List the built-in hardware presets, or print one as YAML (the format `hardware "x.yaml"` reads).
#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  deepgemm targets\n  deepgemm targets --show h200 > my_gpu.yaml"
)]
pub struct Args {
    /// Print this preset's hardware model as YAML.
    #[arg(long, value_name = "NAME")]
    show: Option<String>,
}

pub fn run(args: Args) -> Result<(), Failure> {
    if let Some(name) = args.show {
        let known = PRESETS
            .iter()
            .find(|p| p.name == name || p.aliases.contains(&name.as_str()));
        return match known {
            Some(p) => {
                print!("{}", p.yaml());
                Ok(())
            }
            None => {
                let names: Vec<_> = PRESETS.iter().map(|p| p.name).collect();
                eprintln!(
                    "error: unknown target `{name}`; the built-in targets are {}",
                    names.join(", ")
                );
                Err(Failure::BadInput)
            }
        };
    }
    println!(
        "{:<8} {:<8} {:>4} {:>9} {:>10} {:>12}  {:<9}  aliases",
        "name", "arch", "SMs", "smem/blk", "DRAM GB/s", "bf16 TFLOP/s", "figures"
    );
    for p in &PRESETS {
        let hw = preset(p.name).expect("built-in presets load (tested)");
        let bf16 = hw
            .mma
            .iter()
            .filter(|r| r.dtype == deepgemm::dtype::DType::Bf16)
            .map(|r| r.dense_flops_per_clk_per_sm)
            .fold(0.0, f64::max)
            * hw.sms as f64
            * hw.clock_mhz as f64
            * 1e-6;
        println!(
            "{:<8} {:<8} {:>4} {:>8}K {:>10} {:>12.0}  {:<9}  {}",
            hw.name,
            hw.arch,
            hw.sms,
            hw.smem_per_block_bytes / 1024,
            hw.dram_bw_gbps,
            bf16,
            // `measured` or `datasheet`, as the preset's YAML says.
            hw.provenance.name(),
            p.aliases.join(", ")
        );
    }
    Ok(())
}
