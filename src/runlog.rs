//! The run's outputs: upstream-format lines on stdout and in train.log, metrics.jsonl and
//! summary.json (written atomically at the end).
use anyhow::{Context, Result};
use corpus::fs::write_atomic;
use serde::Serialize;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Metric {
    Train {
        step: u64,
        loss: f64,
        lr: f64,
        #[serde(skip_serializing_if = "Option::is_none")]
        grad_norm: Option<f64>,
        tokens: u64,
        train_time_ms: f64,
    },
    Val {
        step: u64,
        val_loss: f64,
        train_time_ms: f64,
    },
}

#[derive(Serialize)]
pub struct Summary {
    pub record: Option<u32>,
    pub scale: crate::recipe::Scale,
    pub device: String,
    pub ranks: usize,
    pub steps: u64,
    pub tokens: u64,
    pub final_val_loss: f64,
    pub train_time_ms: f64,
    pub step_avg_ms: f64,
    pub peak_memory_mib: Option<i64>,
}

pub struct RunLog {
    out: Option<PathBuf>,
    log: Option<File>,
    print: bool,
    metrics: Vec<Metric>,
}

impl RunLog {
    /// Logs into `out/train.log` when `out` is given, and to stdout when `print` (rank 0).
    pub fn new(out: Option<&Path>, print: bool) -> Result<Self> {
        let log = match out {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
                let path = dir.join("train.log");
                Some(File::create(&path).with_context(|| format!("creating {}", path.display()))?)
            }
            None => None,
        };
        Ok(RunLog { out: out.map(Path::to_path_buf), log, print, metrics: Vec::new() })
    }

    /// One line, as upstream prints it (print0).
    pub fn line(&mut self, text: &str) -> Result<()> {
        if self.print {
            println!("{text}");
            std::io::stdout().flush()?;
        }
        if let Some(f) = &mut self.log {
            writeln!(f, "{text}")?;
        }
        Ok(())
    }

    pub fn metric(&mut self, m: Metric) {
        self.metrics.push(m);
    }

    /// Writes metrics.jsonl, summary.json and the recipe used, each atomically.
    pub fn finish(&mut self, summary: &Summary, recipe: &crate::recipe::Recipe) -> Result<()> {
        let Some(dir) = &self.out else { return Ok(()) };
        let mut jsonl = String::new();
        for m in &self.metrics {
            jsonl.push_str(&serde_json::to_string(m)?);
            jsonl.push('\n');
        }
        write_atomic(&dir.join("metrics.jsonl"), jsonl.as_bytes())?;
        write_atomic(&dir.join("summary.json"), serde_json::to_string_pretty(summary)?.as_bytes())?;
        write_atomic(&dir.join("recipe.toml"), toml::to_string(recipe)?.as_bytes())?;
        if let Some(f) = &mut self.log {
            f.sync_all()?;
        }
        Ok(())
    }
}
