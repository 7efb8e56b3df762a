//! The page of a sweep (`experiments/sweep.py`'s output directory: a
//! `results.csv` with one row per run and `runs/<id>/` with each run's
//! outputs): every axis of the grid against makespan, mean wait and
//! utilisation, each run a dot that links to its own page, and the table
//! of runs.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use super::html::{self, esc, num};
use super::run_page::percent_encode;

/// The axes of a sweep's grid (sweep.py's `AXES`).
pub const AXES: [&str; 5] = ["workload", "platform", "scheduler", "flags", "seed"];
/// What the runs are compared on: (results.csv column, label).
pub const METRICS: [(&str, &str); 3] = [
    ("makespan", "makespan (s)"),
    ("mean_wait", "mean wait (s)"),
    ("utilisation", "utilisation"),
];

/// One row of results.csv.
#[derive(Debug, Clone, Default)]
pub struct SweepRun {
    pub id: String,
    pub fields: BTreeMap<String, String>,
    /// The run's page, relative to the sweep directory, if it has one.
    pub page: Option<String>,
}

impl SweepRun {
    fn get(&self, k: &str) -> &str {
        self.fields.get(k).map(String::as_str).unwrap_or("")
    }

    fn metric(&self, k: &str) -> Option<f64> {
        self.get(k).parse::<f64>().ok().filter(|x| x.is_finite())
    }
}

/// A sweep directory's runs, or why it cannot be read (file, line, reason).
pub fn read_results(dir: &Path) -> Result<Vec<SweepRun>, String> {
    let path = dir.join("results.csv");
    let mut r = csv::ReaderBuilder::new()
        .flexible(true)
        .from_path(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let header = r
        .headers()
        .map_err(|e| format!("{}: no header line: {e}", path.display()))?
        .clone();
    if !header.iter().any(|h| h == "id") {
        return Err(format!(
            "{}: no `id` column; is it the results.csv of experiments/sweep.py?",
            path.display()
        ));
    }
    let mut runs = Vec::new();
    for row in r.records() {
        let row = row.map_err(|e| format!("{}: {e}", path.display()))?;
        let fields: BTreeMap<String, String> = header
            .iter()
            .zip(row.iter())
            .map(|(h, v)| (h.to_string(), v.to_string()))
            .collect();
        runs.push(SweepRun {
            id: fields.get("id").cloned().unwrap_or_default(),
            fields,
            page: None,
        });
    }
    Ok(runs)
}

/// The sweep's page. `notes` are lines for the top (runs whose page could
/// not be written).
pub fn render(dir: &Path, runs: &[SweepRun], notes: &[String]) -> String {
    let mut body = String::new();
    let ok = runs.iter().filter(|r| r.get("status") == "ok").count();
    let _ = write!(
        body,
        "<header><h1>batkube sweep report</h1><p class=\"dir\">{}</p>\
         <p id=\"ending\" class=\"ending {}\">{} runs: {} ok, {} failed or not done</p>",
        esc(&dir.display().to_string()),
        if ok == runs.len() { "ok" } else { "bad" },
        runs.len(),
        ok,
        runs.len() - ok
    );
    if !notes.is_empty() {
        body.push_str("<ul id=\"missing\" class=\"missing\">");
        for n in notes {
            let _ = write!(body, "<li>{}</li>", esc(n));
        }
        body.push_str("</ul>");
    }
    body.push_str(
        "</header>\n<section id=\"compare\"><h2>The axes against the results</h2>\
                   <p class=\"hint\">One dot per run (hollow: failed); a bar marks the mean of the \
                   runs that succeeded; a click on a dot opens the run's page.</p>",
    );
    let mut axes: Vec<&str> = AXES
        .iter()
        .copied()
        .filter(|a| distinct(runs, a).len() > 1)
        .collect();
    if axes.is_empty() {
        axes.push("scheduler");
    }
    for axis in axes {
        let _ = write!(body, "<h3>{}</h3><div class=\"dists\">", esc(axis));
        for (metric, label) in METRICS {
            strip_plot(&mut body, runs, axis, metric, label);
        }
        body.push_str("</div>");
    }
    body.push_str("</section>\n<section id=\"runs\"><h2>Runs</h2><div class=\"tablewrap\"><table id=\"runs-table\" class=\"sortable\"><thead><tr><th>run</th>");
    let cols: Vec<&str> = AXES
        .iter()
        .copied()
        .chain([
            "repeat",
            "status",
            "makespan",
            "mean_wait",
            "utilisation",
            "jobs",
            "jobs_succeeded",
            "end_reason",
            "wall_s",
            "error",
        ])
        .collect();
    for c in &cols {
        let _ = write!(body, "<th>{}</th>", esc(c));
    }
    body.push_str("</tr></thead><tbody>");
    for r in runs {
        body.push_str("<tr>");
        match &r.page {
            Some(p) => {
                let _ = write!(body, "<td><a href=\"{}\">{}</a></td>", esc(p), esc(&r.id));
            }
            None => {
                let _ = write!(body, "<td>{}</td>", esc(&r.id));
            }
        }
        for c in &cols {
            let mut v = r.get(c).to_string();
            if *c == "error" {
                v = v.lines().next().unwrap_or("").to_string();
            } else if let Ok(x) = v.parse::<f64>() {
                // Summaries carry every bit; a table reads better with three decimals.
                if v.contains('.') && x.is_finite() {
                    v = num(x, 3);
                }
            }
            let _ = write!(body, "<td>{}</td>", esc(&v));
        }
        body.push_str("</tr>");
    }
    body.push_str("</tbody></table></div></section>\n");
    let title = format!("batkube sweep report: {}", dir.display());
    html::page(&title, &body, "{\"sweep\":true}")
}

/// The values of an axis, in the order of the grid.
fn distinct<'a>(runs: &'a [SweepRun], axis: &str) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for r in runs {
        let v = r.get(axis);
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

fn strip_plot(out: &mut String, runs: &[SweepRun], axis: &str, metric: &str, label: &str) {
    const WD: f64 = 380.0;
    const HT: f64 = 240.0;
    const L: f64 = 58.0;
    const B: f64 = 46.0;
    let cats = distinct(runs, axis);
    let values: Vec<f64> = runs.iter().filter_map(|r| r.metric(metric)).collect();
    let hi = values.iter().copied().fold(0.0, f64::max);
    let lo = values.iter().copied().fold(0.0, f64::min);
    // The axis ends on the first round value at or above the highest run.
    let ticks = html::ticks(lo, if hi > lo { hi } else { lo + 1.0 }, 4);
    let step = if ticks.len() > 1 {
        ticks[1] - ticks[0]
    } else {
        1.0
    };
    let mut top = ticks.last().copied().unwrap_or(lo + 1.0);
    if top < hi - step * 1e-9 {
        top += step;
    }
    if top <= lo {
        top = lo + 1.0;
    }
    let py = |v: f64| 8.0 + (1.0 - (v - lo) / (top - lo)) * (HT - B - 8.0);
    let band = (WD - L - 8.0) / cats.len().max(1) as f64;
    let cx = |k: usize| L + band * (k as f64 + 0.5);
    let _ = write!(
        out,
        "<figure><svg class=\"chart strip\" data-axis=\"{}\" data-metric=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" \
         width=\"{WD}\" height=\"{HT}\" viewBox=\"0 0 {WD} {HT}\">",
        esc(axis),
        esc(metric)
    );
    for t in html::ticks(lo, top, 4) {
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{L}\" x2=\"{}\" y1=\"{y}\" y2=\"{y}\"/><text class=\"yl\" x=\"{}\" y=\"{}\">{}</text>",
            WD - 8.0,
            L - 4.0,
            num(py(t) + 4.0, 1),
            num(t, 3),
            y = num(py(t), 1)
        );
    }
    for (k, c) in cats.iter().enumerate() {
        let short: String = if c.chars().count() > 16 {
            c.chars().take(15).collect::<String>() + "\u{2026}"
        } else {
            c.to_string()
        };
        let _ = write!(
            out,
            "<text class=\"xl\" x=\"{}\" y=\"{}\"><title>{}</title>{}</text>",
            num(cx(k), 1),
            num(HT - B + 16.0, 1),
            esc(c),
            esc(&short)
        );
        let mine: Vec<&SweepRun> = runs.iter().filter(|r| r.get(axis) == *c).collect();
        let oks: Vec<f64> = mine
            .iter()
            .filter(|r| r.get("status") == "ok")
            .filter_map(|r| r.metric(metric))
            .collect();
        if !oks.is_empty() {
            let mean = oks.iter().sum::<f64>() / oks.len() as f64;
            let _ = write!(
                out,
                "<line class=\"meanbar\" x1=\"{}\" x2=\"{}\" y1=\"{y}\" y2=\"{y}\"><title>mean {}</title></line>",
                num(cx(k) - band * 0.35, 1),
                num(cx(k) + band * 0.35, 1),
                num(mean, 6),
                y = num(py(mean), 1)
            );
        }
        let spread = (band * 0.6).min(60.0);
        for (j, r) in mine.iter().enumerate() {
            let Some(v) = r.metric(metric) else { continue };
            let dx = if mine.len() > 1 {
                (j as f64 / (mine.len() - 1) as f64 - 0.5) * spread
            } else {
                0.0
            };
            let what: Vec<String> = AXES
                .iter()
                .map(|a| format!("{a}={}", r.get(a)))
                .chain([format!("repeat={}", r.get("repeat"))])
                .collect();
            let circle = format!(
                "<circle class=\"run {}\" cx=\"{}\" cy=\"{}\" r=\"4.5\" data-id=\"{}\"><title>{} {}: {} = {}</title></circle>",
                if r.get("status") == "ok" { "ok" } else { "failed" },
                num(cx(k) + dx, 1),
                num(py(v), 1),
                esc(&r.id),
                esc(&r.id),
                esc(&what.join(" ")),
                esc(metric),
                num(v, 6)
            );
            match &r.page {
                Some(p) => {
                    let _ = write!(out, "<a href=\"{}\">{circle}</a>", esc(p));
                }
                None => out.push_str(&circle),
            }
        }
    }
    let _ = write!(
        out,
        "<text class=\"xl\" x=\"{}\" y=\"{}\">{}</text></svg><figcaption>{} by {}</figcaption></figure>",
        num((L + WD) / 2.0, 1),
        HT - 6.0,
        esc(axis),
        esc(label),
        esc(axis)
    );
}

/// `runs/<id>/report.html` relative to the sweep directory.
pub fn run_page(id: &str) -> String {
    format!("runs/{}/report.html", percent_encode(id))
}
