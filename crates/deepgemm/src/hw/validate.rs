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
        field: &'static str,
        value: String,
        why: &'static str,
    },
}

fn invalid(field: &'static str, value: impl ToString, why: &'static str) -> HwError {
    HwError::Invalid {
        field,
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
        for (field, value) in [
            ("calibration.mma_efficiency_sm90", c.mma_efficiency_sm90),
            ("calibration.mma_efficiency_sm80", c.mma_efficiency_sm80),
            ("calibration.mma_efficiency_simt", c.mma_efficiency_simt),
            ("calibration.dram_efficiency", c.dram_efficiency),
            ("calibration.l2_efficiency", c.l2_efficiency),
            ("calibration.smem_efficiency", c.smem_efficiency),
            ("calibration.smem_efficiency_sm90", c.smem_efficiency_sm90),
            ("calibration.l2_efficiency_sm90", c.l2_efficiency_sm90),
            ("calibration.l2_resident_fraction", c.l2_resident_fraction),
        ] {
            if !(value > 0.0 && value <= 1.0) {
                return Err(invalid(field, value, "a fraction must lie in (0, 1]"));
            }
        }
        for (field, value) in [
            ("calibration.launch_overhead_us", c.launch_overhead_us),
            ("calibration.queued_launch_us", c.queued_launch_us),
            ("calibration.syncthreads_cycles", c.syncthreads_cycles),
            ("calibration.mbarrier_wait_cycles", c.mbarrier_wait_cycles),
            (
                "calibration.kblock_scale_cycles_sm90",
                c.kblock_scale_cycles_sm90,
            ),
            ("calibration.regs_per_copy", c.regs_per_copy),
        ] {
            if !(value >= 0.0 && value.is_finite()) {
                return Err(invalid(field, value, "must be a non-negative number"));
            }
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
        if c.producer_regs_sm90 == 0 || c.producer_regs_sm90 > self.max_regs_per_thread {
            return Err(invalid(
                "calibration.producer_regs_sm90",
                c.producer_regs_sm90,
                "must lie in 1..=max_regs_per_thread",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::hw::preset;

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
        let cases: [(&str, Mutation); 9] = [
            ("l2_efficiency", |c| c.l2_efficiency = 1.5),
            ("smem_efficiency", |c| c.smem_efficiency = 0.0),
            ("smem_efficiency_sm90", |c| c.smem_efficiency_sm90 = 0.0),
            ("l2_efficiency_sm90", |c| c.l2_efficiency_sm90 = 0.0),
            ("syncthreads_cycles", |c| c.syncthreads_cycles = -1.0),
            ("queued_launch_us", |c| c.queued_launch_us = f64::NAN),
            ("warps_for_peak_math", |c| c.warps_for_peak_math = 0.5),
            ("address_regs_per_thread", |c| {
                c.address_regs_per_thread = 250
            }),
            ("producer_regs_sm90", |c| c.producer_regs_sm90 = 0),
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
    fn missing_field_is_reported() {
        let yaml = preset("h200").unwrap().to_yaml().replace("sms: 132\n", "");
        let e = crate::hw::Hardware::from_yaml(&yaml)
            .unwrap_err()
            .to_string();
        assert!(e.contains("sms"), "{e}");
    }
}
