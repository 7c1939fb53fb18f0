//! Configuration files: the storage config (`[meta]`, `[node]`,
//! `[node.io]`, `[node.flash]`, `[cluster]`, `[auth]`, `[tls]`), the
//! planner service's config, and the simulator's mix files. Parsed and
//! validated as the daemons do at start; a config that validates is then
//! turned into the settings the daemons run with, and written back as
//! text that parses to the same config.

use crate::Target;
use dingo_cluster::StorageConfig;
use dingo_planner_service::{ClientEntry, ServiceConfig};
use dingo_sim::mix::Mix;
use std::path::PathBuf;

/// The TOML examples in a source file's module documentation.
fn toml_examples(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in source.lines().filter_map(|l| l.strip_prefix("//!")) {
        let line = line.strip_prefix(' ').unwrap_or(line);
        match (&mut current, line.trim_start().starts_with("```")) {
            (None, true) if line.contains("toml") => current = Some(String::new()),
            (Some(_), true) => out.extend(current.take()),
            (Some(text), false) => {
                text.push_str(line);
                text.push('\n');
            }
            _ => {}
        }
    }
    out
}

/// Which config a [`Configs`] target parses.
#[derive(Clone, Copy, Debug)]
pub enum ConfigKind {
    Storage,
    Planner,
    Mix,
}

pub struct Configs(pub ConfigKind);

impl Target for Configs {
    fn name(&self) -> &'static str {
        match self.0 {
            ConfigKind::Storage => "storage-config",
            ConfigKind::Planner => "planner-config",
            ConfigKind::Mix => "mix-file",
        }
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let texts: Vec<String> = match self.0 {
            ConfigKind::Storage => {
                let parts: Vec<String> = [
                    include_str!("../../../dingo-meta/src/config_file.rs"),
                    include_str!("../../../dingo-node/src/config_file.rs"),
                    include_str!("../../../dingo-cluster/src/config_file.rs"),
                ]
                .iter()
                .flat_map(|s| toml_examples(s))
                .collect();
                let mut all = parts.clone();
                all.push(parts.concat());
                all
            }
            ConfigKind::Planner => {
                let mut cfg = ServiceConfig::new("admin-token");
                cfg.clients = vec![ClientEntry { name: "scrubber".into(), token: "t".into() }];
                let mut texts = toml_examples(include_str!("../../../dingo-planner-service/src/config.rs"));
                texts.push(cfg.to_toml());
                texts
            }
            ConfigKind::Mix => {
                let mut presets: Vec<String> = ["cluster-1", "cluster-2", "bench"]
                    .iter()
                    .filter_map(|n| Mix::preset_toml(n))
                    .map(String::from)
                    .collect();
                // The presets show `[timing]` only in comments: one seed with
                // it in force, so that its values get fuzzed too.
                let timed = presets[0]
                    .replace("# [timing", "[timing")
                    .replace("# period_hours", "period_hours")
                    .replace("# deadline_hours", "deadline_hours");
                presets.push(timed);
                presets
            }
        };
        assert!(!texts.is_empty(), "no seed config for {}", self.name());
        texts.into_iter().map(String::into_bytes).collect()
    }

    fn run(&mut self, input: &[u8]) {
        let text = String::from_utf8_lossy(input);
        match self.0 {
            ConfigKind::Storage => storage(&text),
            ConfigKind::Planner => planner(&text),
            ConfigKind::Mix => {
                if let Ok(mix) = Mix::from_toml(&text) {
                    let total: f64 = mix.shares.iter().sum();
                    assert!((total - 1.0).abs() < 1e-6, "shares of an accepted mix sum to {total}");
                }
            }
        }
    }
}

fn storage(text: &str) {
    let Ok(cfg) = toml::from_str::<StorageConfig>(text) else { return };
    if cfg.validate().is_err() {
        return;
    }
    let back: StorageConfig =
        toml::from_str(&toml::to_string(&cfg).expect("a valid config encodes")).expect("reparses");
    assert_eq!(back, cfg);
    let _ = cfg.meta.meta_config(PathBuf::from("/nonexistent"), None, None);
    let _ = cfg.node.disk_specs(vec![PathBuf::from("/d0"), PathBuf::from("/d1")], Some(1 << 40));
    let _ = cfg.node.flash_settings();
    let _ = (cfg.node.heartbeat(), cfg.node.orphan_grace(), cfg.node.cache_bytes(), cfg.node.pinned_bytes());
}

fn planner(text: &str) {
    let Ok(cfg) = ServiceConfig::from_toml(text) else { return };
    if cfg.validate().is_err() {
        return;
    }
    let _ = (cfg.listen_addr(), cfg.metrics_addr(), cfg.quantum(), cfg.planner_config());
    let base = cfg.base_budget();
    let _ = cfg.budget_at(&base, 1_700_000_000_000);
    let _ = dingo_planner_service::config::core_budget(&base);
    let back = ServiceConfig::from_toml(&cfg.to_toml()).expect("a valid config's text parses");
    assert_eq!(back.to_toml(), cfg.to_toml());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_config_kind_has_seeds_that_parse() {
        for kind in [ConfigKind::Storage, ConfigKind::Planner, ConfigKind::Mix] {
            let t = Configs(kind);
            let seeds = t.seeds();
            assert!(!seeds.is_empty(), "{kind:?}");
            let text = String::from_utf8(seeds.last().unwrap().clone()).unwrap();
            let parses = match kind {
                ConfigKind::Storage => toml::from_str::<StorageConfig>(&text).is_ok(),
                ConfigKind::Planner => ServiceConfig::from_toml(&text).is_ok(),
                ConfigKind::Mix => Mix::from_toml(&text).is_ok(),
            };
            assert!(parses, "{kind:?} seed does not parse:\n{text}");
        }
    }
}
