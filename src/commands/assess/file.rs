//! The plan as written: a campaign file or the embedded plans, every key
//! optional, and how one overlays another (flags over a file over a
//! default). plan.rs checks it and builds what it names.

use anyhow::{Result, anyhow};
use rtscope_model::analysis::rta;
use rtscope_model::analysis::usage::Usage;
use rtscope_model::settings::{CellDuration, Checkpoint, CpuList, InstancesMode, ScoreTime, Warmup};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The embedded default assessment (`rtscope run`).
pub const DEFAULT_PLAN: &str = include_str!("../../../plans/default.toml");
/// `rtscope run --quick`.
pub const QUICK_PLAN: &str = include_str!("../../../plans/quick.toml");

/// A plan's `usage`, by `--usage`'s parser.
fn usage_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Usage>, D::Error> {
    let text = String::deserialize(d)?;
    Usage::parse("usage", &text).map(Some).map_err(serde::de::Error::custom)
}

/// A campaign file, or the embedded plans: every key optional.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    pub probes: Option<Vec<String>>,
    pub loads: Option<Vec<String>>,
    /// Per cell.
    pub duration: Option<CellDuration>,
    pub warmup: Option<Warmup>,
    pub ramp_up: Option<Warmup>,
    /// How long the CPU score measures.
    pub score: Option<ScoreTime>,
    pub shuffle: Option<bool>,
    /// How instances of one probe (`wakeup@95`, `wakeup@80`) are measured:
    /// `together` (the default) or `in-turn`.
    pub instances: Option<InstancesMode>,
    pub seed: Option<u64>,
    /// Measured CPUs.
    pub cpus: Option<CpuList>,
    /// The loads' CPUs.
    pub load_cpus: Option<CpuList>,
    pub trace: Option<bool>,
    pub checkpoint: Option<Checkpoint>,
    /// Requirements stored with the run (as `--profile` and `--require`).
    pub profiles: Option<Vec<String>>,
    pub require: Option<Vec<String>>,
    /// A requirement without enough data passes the gate (as
    /// `--allow-insufficient`); else it fails it.
    pub allow_insufficient: Option<bool>,
    /// A task set stored with the run: a task file (relative to the plan
    /// file), or `[[task]]` tables in the plan itself; and its error rate.
    pub tasks: Option<String>,
    pub task: Option<Vec<rta::TaskSpec>>,
    pub error_rate: Option<f64>,
    /// What a day and a week of the expected worst cases are (as
    /// `--usage`): `8h/day,5d/week`; absent: continuous operation.
    #[serde(default, deserialize_with = "usage_text")]
    pub usage: Option<Usage>,
    /// Each probe's own arguments.
    #[serde(default)]
    pub args: BTreeMap<String, Vec<String>>,
}

impl PlanFile {
    /// Parses a plan's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<PlanFile> {
        toml::from_str(text).map_err(|e| anyhow!("{origin}: {}", e.to_string().trim_end()))
    }

    /// A plan read from `path`: its task file is relative to the plan's directory.
    pub fn read(path: &Path) -> Result<PlanFile> {
        let name = path.display().to_string();
        let text = crate::sys::fs::read_input_text(path, &format!("the campaign file {name}"), "give a shorter plan")
            .map_err(anyhow::Error::msg)?;
        let mut file = PlanFile::parse(&text, &name)?;
        let dir = path.parent().unwrap_or(Path::new(""));
        file.tasks =
            file.tasks.map(|t| if Path::new(&t).is_relative() { dir.join(t).display().to_string() } else { t });
        Ok(file)
    }

    /// `other`'s keys over this plan's. A task file replaces `[[task]]` tables.
    pub fn overlay(mut self, other: PlanFile) -> PlanFile {
        macro_rules! take {
            ($($f:ident),*) => { $( if other.$f.is_some() { self.$f = other.$f; } )* };
        }
        if other.tasks.is_some() || other.task.is_some() {
            (self.tasks, self.task) = (None, None);
        }
        take!(
            probes,
            loads,
            duration,
            warmup,
            ramp_up,
            score,
            shuffle,
            instances,
            seed,
            cpus,
            load_cpus,
            trace,
            checkpoint,
            profiles,
            require,
            allow_insufficient,
            tasks,
            task,
            error_rate,
            usage
        );
        self.args.extend(other.args);
        self
    }
}
