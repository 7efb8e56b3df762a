//! `batkube report DIR`: one self-contained HTML page (`DIR/report.html`)
//! that shows a run, or compares the runs of a sweep.
//!
//! A run's page is drawn from its outputs alone (`summary.json`,
//! `pods.csv`, `nodes.csv`, `timeline.csv`, `jobs.csv`; [`data`]), so it
//! can be made again at any time, for any run, also one that did not
//! complete or a directory that holds only some of them. A sweep's page
//! (`experiments/sweep.py --out DIR`: `results.csv` and `runs/<id>/`)
//! links each run's page, written first where missing or older than the
//! run's summary.
//!
//! The pages need nothing once written: the charts are SVG drawn here, the
//! styles and the small script (zoom, details, the pod table) are the
//! project's own and inline; no network access, no third-party code.
//! `run`/`serve --report` call [`after_run`] at the end of a run.

pub mod data;
pub mod html;
pub mod queues;
pub mod run_page;
pub mod sweep;

use std::path::{Path, PathBuf};

use anyhow::Context;

/// The page's styles.
pub const CSS: &str = include_str!("report.css");
/// The page's script.
pub const JS: &str = include_str!("report.js");

/// `batkube report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// A run's output directory (`--out` of `batkube run` or `serve`), or a
    /// sweep's (`--out` of experiments/sweep.py: results.csv and runs/).
    pub dir: PathBuf,
    /// Where to write the page (default: DIR/report.html).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// A run's Gantt chart draws its bars one SVG element each up to this
    /// many, beyond as one path per colour (lighter to open; hover and
    /// click work the same).
    #[arg(long = "max-bar-elements", value_name = "N", default_value_t = run_page::MAX_BAR_ELEMENTS)]
    pub max_bar_elements: usize,
}

/// What was a directory's page of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Run,
    Sweep,
}

/// A page written.
#[derive(Debug)]
pub struct Written {
    pub path: PathBuf,
    pub bytes: u64,
    pub kind: Kind,
    /// What the page lacks, one line each (missing files, unreadable rows;
    /// for a sweep, runs whose page could not be written).
    pub notes: Vec<String>,
}

/// Why no page could be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{0}: not a directory (give the --out directory of a run or of a sweep)")]
    NotADirectory(PathBuf),
    #[error("{0}")]
    Sweep(String),
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Writes `DIR/report.html` (or `output`): a sweep's page when `dir` holds
/// a `results.csv`, else a run's.
pub fn write_report(
    dir: &Path,
    output: Option<&Path>,
    opts: &run_page::Options,
) -> Result<Written, ReportError> {
    if !dir.is_dir() {
        return Err(ReportError::NotADirectory(dir.to_path_buf()));
    }
    if dir.join("results.csv").is_file() {
        write_sweep_report(dir, output, opts)
    } else {
        write_run_report(dir, output, opts)
    }
}

/// A run's page, from whatever of its outputs `dir` holds.
pub fn write_run_report(
    dir: &Path,
    output: Option<&Path>,
    opts: &run_page::Options,
) -> Result<Written, ReportError> {
    if !dir.is_dir() {
        return Err(ReportError::NotADirectory(dir.to_path_buf()));
    }
    let d = data::RunData::read(dir);
    let page = run_page::render(&d, opts);
    let mut notes = d.missing.clone();
    notes.extend(d.problems.iter().cloned());
    let path = output.map_or_else(|| dir.join("report.html"), Path::to_path_buf);
    write_atomically(&path, page.as_bytes())?;
    Ok(Written {
        path,
        bytes: page.len() as u64,
        kind: Kind::Run,
        notes,
    })
}

/// A sweep's page; the page of each of its runs is written first when it
/// is missing or older than the run's summary.json.
pub fn write_sweep_report(
    dir: &Path,
    output: Option<&Path>,
    opts: &run_page::Options,
) -> Result<Written, ReportError> {
    let mut runs = sweep::read_results(dir).map_err(ReportError::Sweep)?;
    let mut notes = Vec::new();
    for r in &mut runs {
        let run_dir = dir.join("runs").join(&r.id);
        if r.id.is_empty() || r.id.contains(['/', '\\']) || r.id == ".." || !run_dir.is_dir() {
            notes.push(format!(
                "run {:?}: no directory runs/{} (not run yet?)",
                r.id, r.id
            ));
            continue;
        }
        let page = run_dir.join("report.html");
        let stale = match (
            page.metadata().and_then(|m| m.modified()),
            run_dir
                .join("summary.json")
                .metadata()
                .and_then(|m| m.modified()),
        ) {
            (Ok(p), Ok(s)) => p < s,
            (Ok(_), Err(_)) => false,
            (Err(_), _) => true,
        };
        if stale {
            if let Err(e) = write_run_report(&run_dir, None, opts) {
                notes.push(format!("run {}: {e}", r.id));
                continue;
            }
        }
        r.page = Some(sweep::run_page(&r.id));
    }
    let page = sweep::render(dir, &runs, &notes);
    let path = output.map_or_else(|| dir.join("report.html"), Path::to_path_buf);
    write_atomically(&path, page.as_bytes())?;
    Ok(Written {
        path,
        bytes: page.len() as u64,
        kind: Kind::Sweep,
        notes,
    })
}

/// Written whole or not at all: a reader never sees half a page.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    let err = |source| ReportError::Write {
        path: path.to_path_buf(),
        source,
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report.html".into());
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err(e)
    })
}

/// `batkube report DIR`: the page, and what it lacks on stderr.
pub fn run(args: ReportArgs) -> anyhow::Result<()> {
    let opts = run_page::Options {
        max_bar_elements: args.max_bar_elements,
    };
    let w = write_report(&args.dir, args.output.as_deref(), &opts)
        .with_context(|| format!("reporting on {}", args.dir.display()))?;
    for n in &w.notes {
        eprintln!("batkube report: {n}");
    }
    eprintln!(
        "batkube report: wrote {} (the page of a {}, {} bytes)",
        w.path.display(),
        match w.kind {
            Kind::Run => "run",
            Kind::Sweep => "sweep",
        },
        w.bytes
    );
    Ok(())
}

/// `--report` of `run` and `serve`: the run's page once its outputs are
/// written, whatever ended it. A page that cannot be written is a warning:
/// the run's own result stands.
pub fn after_run(out: &Path) {
    match write_run_report(out, None, &run_page::Options::default()) {
        Ok(w) => eprintln!("batkube: report {}", w.path.display()),
        Err(e) => eprintln!("batkube: warning: no report: {e}"),
    }
}
