//! Checks that a hardware description is physically possible, with messages that name the field.

use super::Hardware;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum HwError {
    #[error("cannot read hardware file {path}: {message}")]
    Io { path: String, message: String },
    #[error("malformed hardware YAML: {0}")]
    Parse(String),
    #[error("hardware field `{field}` = {value}: {why}")]
    Invalid {
        field: String,
        value: String,
        why: &'static str,
    },
}

fn invalid(field: impl Into<String>, value: impl ToString, why: &'static str) -> HwError {
    HwError::Invalid {
        field: field.into(),
        value: value.to_string(),
        why,
    }
}

impl Hardware {
    /// Reject descriptions no GPU could have; the first problem found is reported.
    pub fn validate(&self) -> Result<(), HwError> {
        if self.name.trim().is_empty() {
            return Err(invalid("name", "\"\"", "must not be empty"));
        }
        let arch_ok = self
            .arch
            .strip_prefix("sm_")
            .map(|rest| {
                let digits = rest.strip_suffix('a').unwrap_or(rest);
                !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
            })
            .unwrap_or(false);
        if !arch_ok {
            return Err(invalid(
                "arch",
                &self.arch,
                "expected sm_<digits>[a], e.g. sm_90a",
            ));
        }
        if self.compute_capability() < 70 {
            return Err(invalid("arch", &self.arch, "DeepGEMM needs sm_70 or newer"));
        }
        let positive: [(&'static str, f64); 12] = [
            ("sms", self.sms as f64),
            ("clock_mhz", self.clock_mhz as f64),
            ("regs_per_sm", self.regs_per_sm as f64),
            ("max_threads_per_sm", self.max_threads_per_sm as f64),
            ("max_blocks_per_sm", self.max_blocks_per_sm as f64),
            ("smem_per_sm_bytes", self.smem_per_sm_bytes as f64),
            ("smem_per_block_bytes", self.smem_per_block_bytes as f64),
            ("smem_banks", self.smem_banks as f64),
            ("l2_bytes", self.l2_bytes as f64),
            ("dram_bw_gbps", self.dram_bw_gbps),
            ("l2_bw_gbps", self.l2_bw_gbps),
            (
                "smem_bw_bytes_per_clk_per_sm",
                self.smem_bw_bytes_per_clk_per_sm,
            ),
        ];
        for (field, value) in positive {
            if !(value.is_finite() && value > 0.0) {
                return Err(invalid(field, value, "must be a positive number"));
            }
        }
        if self.warp_size != 32 {
            return Err(invalid(
                "warp_size",
                self.warp_size,
                "NVIDIA GPUs have 32-thread warps",
            ));
        }
        if !(32..=255).contains(&self.max_regs_per_thread) {
            return Err(invalid(
                "max_regs_per_thread",
                self.max_regs_per_thread,
                "must be between 32 and 255",
            ));
        }
        if self.smem_per_block_bytes > self.smem_per_sm_bytes {
            return Err(invalid(
                "smem_per_block_bytes",
                self.smem_per_block_bytes,
                "cannot exceed smem_per_sm_bytes",
            ));
        }
        if self.mma.is_empty() {
            return Err(invalid("mma", "[]", "needs at least one instruction rate"));
        }
        for rate in &self.mma {
            if !(rate.dense_flops_per_clk_per_sm.is_finite()
                && rate.dense_flops_per_clk_per_sm > 0.0)
            {
                return Err(invalid(
                    "mma.dense_flops_per_clk_per_sm",
                    rate.dense_flops_per_clk_per_sm,
                    "must be a positive number",
                ));
            }
        }
        if self.features.wgmma && self.compute_capability() < 90 {
            return Err(invalid("features.wgmma", true, "wgmma needs sm_90a"));
        }
        let l = &self.latencies;
        for (field, idle, loaded) in [
            (
                "latencies.dram_idle_cycles",
                l.dram_idle_cycles,
                l.dram_cycles,
            ),
            ("latencies.l2_idle_cycles", l.l2_idle_cycles, l.l2_cycles),
        ] {
            if let Some(idle) = idle.filter(|&idle| idle == 0 || idle > loaded) {
                return Err(invalid(
                    field,
                    idle,
                    "must lie in 1..= the loaded latency (an idle memory system is not slower)",
                ));
            }
        }
        let c = &self.calibration;
        let fraction = |field: String, value: f64| {
            if value > 0.0 && value <= 1.0 {
                Ok(())
            } else {
                Err(invalid(field, value, "a fraction must lie in (0, 1]"))
            }
        };
        let non_negative = |field: String, value: f64| {
            if value >= 0.0 && value.is_finite() {
                Ok(())
            } else {
                Err(invalid(field, value, "must be a non-negative number"))
            }
        };
        for (field, value) in [
            ("dram_efficiency", c.dram_efficiency),
            ("l2_resident_fraction", c.l2_resident_fraction),
        ] {
            fraction(format!("calibration.{field}"), value)?;
        }
        for (backend, figures) in c.backends.iter() {
            let field = |name: &str| format!("calibration.backends.{backend}.{name}");
            fraction(field("mma_efficiency"), figures.mma_efficiency)?;
            fraction(field("l2_efficiency"), figures.l2_efficiency)?;
            fraction(field("smem_efficiency"), figures.smem_efficiency)?;
            if let Some(cycles) = figures.kblock_scale_cycles {
                non_negative(field("kblock_scale_cycles"), cycles)?;
            }
            if let Some(cycles) = figures.promotion_cycles {
                non_negative(field("promotion_cycles"), cycles)?;
            }
            if let Some(share) = figures.stream_efficiency {
                fraction(field("stream_efficiency"), share)?;
            }
            if let Some(us) = figures.launch_saving_us {
                non_negative(field("launch_saving_us"), us)?;
                if us > c.launch_overhead_us {
                    return Err(invalid(
                        field("launch_saving_us"),
                        us,
                        "is more than launch_overhead_us, which it is part of",
                    ));
                }
            }
            if let Some(regs) = figures.address_regs {
                if regs + c.epilogue_regs_per_thread >= self.max_regs_per_thread {
                    return Err(invalid(
                        field("address_regs"),
                        regs,
                        "with epilogue_regs_per_thread, leaves no registers for the math",
                    ));
                }
            }
            if let Some(regs) = figures.producer_regs {
                if regs == 0 || regs > self.max_regs_per_thread {
                    return Err(invalid(
                        field("producer_regs"),
                        regs,
                        "must lie in 1..=max_regs_per_thread",
                    ));
                }
            }
        }
        for (field, value) in [
            ("launch_overhead_us", c.launch_overhead_us),
            ("queued_launch_us", c.queued_launch_us),
            ("syncthreads_cycles", c.syncthreads_cycles),
            ("mbarrier_wait_cycles", c.mbarrier_wait_cycles),
            ("regs_per_copy", c.regs_per_copy),
        ] {
            non_negative(format!("calibration.{field}"), value)?;
        }
        if !(c.warps_for_peak_math >= 1.0 && c.warps_for_peak_math.is_finite()) {
            return Err(invalid(
                "calibration.warps_for_peak_math",
                c.warps_for_peak_math,
                "must be at least one warp",
            ));
        }
        let budget = c.address_regs_per_thread + c.epilogue_regs_per_thread;
        if budget >= self.max_regs_per_thread {
            return Err(invalid(
                "calibration.address_regs_per_thread",
                c.address_regs_per_thread,
                "with epilogue_regs_per_thread, leaves no registers for the math",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::hw::preset;
    use crate::plan::Backend;

    #[test]
    fn impossible_values_are_named() {
        let mut hw = preset("h200").unwrap();
        hw.smem_per_block_bytes = hw.smem_per_sm_bytes + 1;
        let e = hw.validate().unwrap_err().to_string();
        assert!(e.contains("smem_per_block_bytes"), "{e}");

        let mut hw = preset("h200").unwrap();
        hw.sms = 0;
        assert!(hw.validate().unwrap_err().to_string().contains("`sms`"));

        let mut hw = preset("a100").unwrap();
        hw.features.wgmma = true;
        assert!(hw.validate().unwrap_err().to_string().contains("wgmma"));

        let mut hw = preset("h200").unwrap();
        hw.latencies.dram_idle_cycles = Some(hw.latencies.dram_cycles + 1);
        let e = hw.validate().unwrap_err().to_string();
        assert!(e.contains("dram_idle_cycles"), "{e}");
    }

    #[test]
    fn impossible_calibration_constants_are_named() {
        type Mutation = fn(&mut crate::hw::Calibration);
        let cases: [(&str, Mutation); 12] = [
            ("backends.sm80.l2_efficiency", |c| {
                c.backends.get_mut(Backend::Sm80).l2_efficiency = 1.5
            }),
            ("backends.simt.smem_efficiency", |c| {
                c.backends.get_mut(Backend::Simt).smem_efficiency = 0.0
            }),
            ("backends.sm90.smem_efficiency", |c| {
                c.backends.get_mut(Backend::Sm90).smem_efficiency = 0.0
            }),
            ("backends.sm90.l2_efficiency", |c| {
                c.backends.get_mut(Backend::Sm90).l2_efficiency = 0.0
            }),
            ("backends.sm90.kblock_scale_cycles", |c| {
                c.backends.get_mut(Backend::Sm90).kblock_scale_cycles = Some(-1.0)
            }),
            ("backends.sm90.promotion_cycles", |c| {
                c.backends.get_mut(Backend::Sm90).promotion_cycles = Some(f64::NAN)
            }),
            ("syncthreads_cycles", |c| c.syncthreads_cycles = -1.0),
            ("queued_launch_us", |c| c.queued_launch_us = f64::NAN),
            ("warps_for_peak_math", |c| c.warps_for_peak_math = 0.5),
            ("address_regs_per_thread", |c| {
                c.address_regs_per_thread = 250
            }),
            ("backends.sm90.producer_regs", |c| {
                c.backends.get_mut(Backend::Sm90).producer_regs = Some(0)
            }),
            ("backends.sm90.address_regs", |c| {
                c.backends.get_mut(Backend::Sm90).address_regs = Some(250)
            }),
        ];
        for (field, mutate) in cases {
            let mut hw = preset("h200").unwrap();
            mutate(&mut hw.calibration);
            let e = hw.validate().unwrap_err().to_string();
            assert!(e.contains(field), "{field}: {e}");
        }
        for name in ["h100", "h200", "a100", "l40s", "rtx4090"] {
            preset(name).unwrap().validate().unwrap();
        }
    }

    #[test]
    fn backend_calibration_takes_known_backends_and_the_figures_they_read() {
        let h100 = crate::hw::PRESETS[0].yaml();
        let with = |entry: &str| {
            crate::hw::Hardware::from_yaml(&format!(
                "{h100}\ncalibration:\n  backends:\n    {entry}\n"
            ))
        };
        let e = with("sm95: { mma_efficiency: 0.5 }")
            .unwrap_err()
            .to_string();
        assert!(e.contains("sm95") && e.contains("sm90"), "{e}");
        let e = with("sm80: { producer_regs: 40 }").unwrap_err().to_string();
        assert!(e.contains("backends.sm80.producer_regs"), "{e}");
        let e = with("sm80: { address_regs: 32 }").unwrap_err().to_string();
        assert!(e.contains("backends.sm80.address_regs"), "{e}");
        let e = with("simt: { mma_eficiency: 0.5 }")
            .unwrap_err()
            .to_string();
        assert!(e.contains("mma_eficiency"), "{e}");
        let e = with("sm90: { mma_efficiency: 1.5 }")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("calibration.backends.sm90.mma_efficiency"),
            "{e}"
        );
        // A figure or a backend left out takes the backend's default.
        let hw = with("sm80: { mma_efficiency: 0.5 }").unwrap();
        let defaults = crate::hw::Calibration::default().backends;
        let sm80 = hw.calibration.backends.get(Backend::Sm80);
        assert_eq!(sm80.mma_efficiency, 0.5);
        assert_eq!(
            sm80.l2_efficiency,
            defaults.get(Backend::Sm80).l2_efficiency
        );
        assert_eq!(
            hw.calibration.backends.get(Backend::Sm90),
            defaults.get(Backend::Sm90)
        );
        // The printed form says every figure and reads back the same.
        let again = crate::hw::Hardware::from_yaml(&hw.to_yaml()).unwrap();
        assert_eq!(again, hw);
    }

    #[test]
    fn missing_field_is_reported() {
        let yaml = preset("h200").unwrap().to_yaml().replace("sms: 132\n", "");
        let e = crate::hw::Hardware::from_yaml(&yaml)
            .unwrap_err()
            .to_string();
        assert!(e.contains("sms"), "{e}");
    }
}
