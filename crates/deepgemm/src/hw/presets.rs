//! Built-in hardware presets, stored as YAML next to this file (one schema for presets and user
//! files; `deepgemm targets --show NAME` prints them back).

use super::Hardware;

/// A preset's canonical name and the YAML that defines it.
pub struct PresetName {
    pub name: &'static str,
    /// Other names accepted for it in `target` (docs/language.md §3: `hopper` = h100,
    /// `ampere` = a100).
    pub aliases: &'static [&'static str],
    yaml: &'static str,
}

pub const PRESETS: [PresetName; 5] = [
    PresetName {
        name: "h100",
        aliases: &["hopper"],
        yaml: include_str!("presets/h100.yaml"),
    },
    PresetName {
        name: "h200",
        aliases: &[],
        yaml: include_str!("presets/h200.yaml"),
    },
    PresetName {
        name: "a100",
        aliases: &["ampere"],
        yaml: include_str!("presets/a100.yaml"),
    },
    PresetName {
        name: "l40s",
        aliases: &[],
        yaml: include_str!("presets/l40s.yaml"),
    },
    PresetName {
        name: "rtx4090",
        aliases: &[],
        yaml: include_str!("presets/rtx4090.yaml"),
    },
];

/// Every name `target` accepts: canonical names, then aliases.
pub fn preset_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
    names.extend(PRESETS.iter().flat_map(|p| p.aliases.iter().copied()));
    names
}

/// The preset called `name` (or one of its aliases).
pub fn preset(name: &str) -> Option<Hardware> {
    let p = PRESETS
        .iter()
        .find(|p| p.name == name || p.aliases.contains(&name))?;
    Some(Hardware::from_yaml(p.yaml).expect("built-in presets are valid (tested)"))
}

impl PresetName {
    /// The preset's YAML as shipped, comments included.
    pub fn yaml(&self) -> &'static str {
        self.yaml
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_loads_and_round_trips() {
        for p in &PRESETS {
            let hw = Hardware::from_yaml(p.yaml).unwrap_or_else(|e| panic!("{}: {e}", p.name));
            assert_eq!(hw.name, p.name);
            let again = Hardware::from_yaml(&hw.to_yaml()).unwrap();
            assert_eq!(hw, again, "{} does not round-trip through YAML", p.name);
        }
    }

    #[test]
    fn aliases_resolve() {
        assert_eq!(preset("hopper").unwrap().name, "h100");
        assert_eq!(preset("ampere").unwrap().name, "a100");
        assert!(preset("v100").is_none());
    }

    #[test]
    fn h200_dense_bf16_peak_matches_datasheet() {
        let hw = preset("h200").unwrap();
        let rate = hw
            .mma_rate(crate::dtype::DType::Bf16, crate::plan::Backend::Sm90)
            .unwrap();
        let tflops = rate.dense_flops_per_clk_per_sm * hw.sms as f64 * hw.clock_mhz as f64 * 1e-6;
        assert!((tflops - 989.4).abs() < 2.0, "{tflops}");
    }

    #[test]
    fn fp8_only_where_the_hardware_has_it() {
        use crate::dtype::DType::E4m3;
        assert!(!preset("a100").unwrap().supports_dtype(E4m3));
        for name in ["h100", "h200", "l40s", "rtx4090"] {
            assert!(preset(name).unwrap().supports_dtype(E4m3), "{name}");
        }
    }
}
