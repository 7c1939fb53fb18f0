//! DINGO's reports: charts ([`plots`], SVG and PNG) and the HTML pages
//! ([`html`]) of a simulator run ([`run`]), a sweep ([`sweep`]), the
//! paper reproduction ([`paper`]) and the flash benchmark ([`flash`]).
//! Each writer takes the typed results of `dingo_sim` or `dingo_flash` and
//! a directory.

pub mod flash;
pub mod html;
pub mod markers;
pub mod paper;
pub mod plots;
pub mod run;
pub mod stats;
pub mod sweep;

use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ReportError {
    #[error("the embedded font does not load")]
    Font,
    #[error("drawing {}: {message}", path.display())]
    Draw { path: PathBuf, message: String },
    #[error("{action} {}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("encoding JSON")]
    Json(#[from] serde_json::Error),
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ReportError {
    let path = path.to_path_buf();
    move |source| ReportError::Io { action, path, source }
}

/// Creates `dir` and its parents.
fn create_dir(dir: &Path) -> Result<(), ReportError> {
    std::fs::create_dir_all(dir).map_err(io_error("creating", dir))
}

/// Writes `text` to `dir/name`.
fn write_file(dir: &Path, name: &str, text: &str) -> Result<(), ReportError> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(io_error("writing", &path))
}

fn read_file(path: &Path) -> Result<String, ReportError> {
    std::fs::read_to_string(path).map_err(io_error("reading", path))
}
