//! The page of one run: how it ended, the summary in words, the inputs,
//! the Gantt chart of machines with the cluster's totals under it on the
//! same time axis, the wait and bounded-slowdown distributions, and the
//! pod table.
//!
//! Everything is drawn here as SVG; the page's script only zooms, pans,
//! shows details and fills the pod table from the JSON the page carries.
//! The Gantt and the time series share one coordinate system: time maps to
//! `0..W` user units and the script zooms them all by moving their viewBox.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use super::data::{Pod, RunData, Steps};
use super::html::{self, esc, num, num_into, percent, plural, secs, thousands};

/// Width of the time axis in SVG user units.
pub const W: f64 = 10_000.0;
/// Above this many bars, a run's Gantt chart draws its bars as one path per
/// colour instead of one element each: a browser opens a page of 100,000
/// elements in seconds, of a few paths at once (the script finds a bar
/// under the pointer from the paths).
pub const MAX_BAR_ELEMENTS: usize = 20_000;

/// How a run's page is drawn.
#[derive(Debug, Clone)]
pub struct Options {
    /// Bars drawn one SVG element each up to this many, as paths beyond.
    pub max_bar_elements: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_bar_elements: MAX_BAR_ELEMENTS,
        }
    }
}
/// Runs with more bars than this draw the ones no screen can show (narrower
/// than [`AGG_FRACTION`] of the run) as grey aggregates.
pub const MAX_BARS: usize = 150_000;
const AGG_FRACTION: f64 = 1.0 / 3000.0;
/// A bar is at least this wide (user units), so every bar can be seen and hovered.
const MIN_BAR: f64 = W / 4000.0;
/// Buckets of the time series (more than a screen has pixels across).
pub(super) const BUCKETS: usize = 1200;
/// Bounded slowdown's threshold (seconds): a job shorter than this counts as this long.
pub const BSLD_TAU: f64 = 10.0;

/// How a pod ended, for colours and counts.
pub const OUTCOME_CLASSES: [(&str, &str); 6] = [
    ("succeeded", "completed successfully"),
    ("failed", "failed or walltime reached"),
    ("killed", "killed or preempted"),
    ("evicted", "evicted"),
    ("rejected", "rejected"),
    ("unfinished", "not finished when the run ended"),
];

pub fn outcome_class(outcome: &str) -> usize {
    let head = outcome.split(':').next().unwrap_or("").trim();
    match head {
        "COMPLETED_SUCCESSFULLY" => 0,
        "" => 5,
        "EVICTED before it started" | "EVICTED" => 3,
        "COMPLETED_KILLED" | "PREEMPTED" | "KILLED" => 2,
        h if h.starts_with("REJECTED") => 4,
        h if h.starts_with("EVICTED") => 3,
        h if h.starts_with("KILLED") => 2,
        _ => 1,
    }
}

pub(super) struct Span {
    pub(super) t0: f64,
    pub(super) t1: f64,
}

impl Span {
    pub(super) fn x(&self, t: f64) -> f64 {
        ((t - self.t0) / (self.t1 - self.t0) * W).clamp(0.0, W)
    }
}

/// The statistics of jobs (a job counted once, by its first pod).
#[derive(Default)]
pub struct JobStats {
    pub jobs: usize,
    pub waits: Vec<f64>,
    pub bslds: Vec<f64>,
    pub never_started: usize,
}

pub fn job_stats(pods: &[Pod]) -> JobStats {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut s = JobStats::default();
    for p in pods {
        if !seen.insert(&p.job) {
            continue;
        }
        s.jobs += 1;
        match (p.started, p.finished) {
            (Some(st), f) => {
                let wait = (st - p.created).max(0.0);
                s.waits.push(wait);
                if let Some(f) = f {
                    let run = (f - st).max(0.0);
                    s.bslds.push(((wait + run) / run.max(BSLD_TAU)).max(1.0));
                }
            }
            (None, _) => s.never_started += 1,
        }
    }
    s
}

pub fn render(d: &RunData, opts: &Options) -> String {
    let span = Span {
        t0: 0.0,
        t1: if d.end > 0.0 { d.end } else { 1.0 },
    };
    let mut body = String::with_capacity(d.pods.len() * 90 + 100_000);
    header(&mut body, d);
    summary_section(&mut body, d);
    let bars = gantt_section(&mut body, d, &span, opts);
    super::queues::queues_section(&mut body, d, &span);
    distributions_section(&mut body, d);
    pods_section(&mut body, d);
    inputs_section(&mut body, d);
    body.push_str(
        "<div id=\"details\" hidden=\"hidden\"><button type=\"button\" id=\"details-close\" \
         title=\"close\">\u{00d7}</button><div id=\"details-body\"></div></div>\
         <div id=\"tip\" hidden=\"hidden\"></div>",
    );
    let title = format!("batkube report: {}", d.dir.display());
    html::page(&title, &body, &data_json(d, &span, bars))
}

fn str_field<'a>(s: &'a serde_json::Value, k: &str) -> Option<&'a str> {
    s.get(k).and_then(|v| v.as_str())
}

fn f64_field(s: &serde_json::Value, k: &str) -> Option<f64> {
    s.get(k).and_then(|v| v.as_f64())
}

fn header(out: &mut String, d: &RunData) {
    let _ = write!(
        out,
        "<header><h1>batkube run report</h1><p class=\"dir\">{}</p>",
        esc(&d.dir.display().to_string())
    );
    let is_run = !(d.summary.is_none() && d.pods.is_empty() && d.utilisation.is_empty());
    match &d.summary {
        Some(s) => {
            let completed = s
                .get("completed")
                .and_then(|v| v.as_bool())
                .unwrap_or(false);
            let reason = str_field(s, "end_reason").unwrap_or("unknown");
            let at = f64_field(s, "end_time").map(|t| format!(" at simulated time {}", secs(t)));
            let _ = write!(
                out,
                "<p id=\"ending\" class=\"ending {}\">end_reason: <b>{}</b> \u{2014} {}{}</p>",
                if completed { "ok" } else { "bad" },
                esc(reason),
                if completed {
                    "the simulation completed"
                } else {
                    "the run did not complete"
                },
                esc(&at.unwrap_or_default())
            );
            if let Some(e) = str_field(s, "error") {
                let _ = write!(out, "<p class=\"error\">{}</p>", esc(e));
            }
        }
        None => {
            let _ = write!(
                out,
                "<p id=\"ending\" class=\"ending bad\">end_reason: <b>unknown</b> \u{2014} {}</p>",
                if is_run {
                    "no summary.json: the run may not have ended"
                } else {
                    "this is not the output directory of a batkube run: none of summary.json, \
                     pods.csv, jobs.csv, nodes.csv, timeline.csv is there"
                }
            );
        }
    }
    if !d.missing.is_empty() || !d.problems.is_empty() {
        out.push_str("<ul id=\"missing\" class=\"missing\">");
        for m in d.missing.iter().chain(&d.problems) {
            let _ = write!(out, "<li>{}</li>", esc(m));
        }
        if d.more_problems > 0 {
            let _ = write!(
                out,
                "<li>and {} more unreadable rows, left out</li>",
                thousands(d.more_problems as f64)
            );
        }
        out.push_str("</ul>");
    }
    out.push_str(
        "<nav><a href=\"#summary\">summary</a> <a href=\"#machines\">machines</a> \
         <a href=\"#distributions\">distributions</a> <a href=\"#pods-section\">pods</a> \
         <a href=\"#inputs\">inputs and flags</a></nav></header>\n",
    );
}

/// `summary.json` in sentences.
pub fn summary_words(s: &serde_json::Value) -> Vec<String> {
    let f = |k: &str| f64_field(s, k).unwrap_or(0.0);
    let u = |k: &str| s.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
    let mut p = Vec::new();
    let completed = s
        .get("completed")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let reason = str_field(s, "end_reason").unwrap_or("unknown");
    if completed {
        p.push(format!(
            "The simulation completed (end_reason {reason}) at simulated time {}.",
            secs(f("end_time"))
        ));
    } else {
        p.push(format!(
            "The run did not complete: it ended with end_reason {reason} at simulated time {}{}.",
            secs(f("end_time")),
            str_field(s, "error")
                .map(|e| format!(" ({})", e.lines().next().unwrap_or("")))
                .unwrap_or_default()
        ));
    }
    let jobs = u("jobs");
    let (ok, failed, rejected) = (u("jobs_succeeded"), u("jobs_failed"), u("jobs_rejected"));
    let unfinished = jobs.saturating_sub(ok + failed + rejected);
    p.push(format!(
        "{}: {} succeeded, {} failed, {} rejected{}. Makespan {}; jobs waited {} on average and \
         {} at most; the cluster's cpu was {} used (busy cpu time over allocatable cpu time up \
         to the makespan).",
        plural(jobs, "job", "jobs"),
        thousands(ok as f64),
        thousands(failed as f64),
        thousands(rejected as f64),
        if unfinished > 0 {
            format!(", {} not finished", thousands(unfinished as f64))
        } else {
            String::new()
        },
        secs(f("makespan")),
        secs(f("mean_wait")),
        secs(f("max_wait")),
        percent(f("utilisation"))
    ));
    let over = u("overcommit_count");
    p.push(if over == 0 {
        "No node was ever overcommitted.".to_string()
    } else {
        format!(
            "{}: a node ran pods whose requests exceed its allocatable (see nodes.csv).",
            plural(over, "overcommit", "overcommits")
        )
    });
    let mut extra = Vec::new();
    if u("gangs_started") > 0 || f("partial_gang_node_seconds") > 0.0 {
        extra.push(format!(
            "{} started; partly bound gangs held nodes for {} node-seconds",
            plural(u("gangs_started"), "gang", "gangs"),
            num(f("partial_gang_node_seconds"), 3)
        ));
    }
    if u("evictions") > 0 || u("resubmissions") > 0 {
        extra.push(format!(
            "{} evicted, {} resubmitted, {} of work lost",
            plural(u("evictions"), "pod", "pods"),
            plural(u("resubmissions"), "job", "jobs"),
            secs(f("lost_work_seconds"))
        ));
    }
    if u("pods_garbage_collected") > 0 {
        extra.push(format!(
            "{} terminated pods garbage-collected from the API",
            thousands(u("pods_garbage_collected") as f64)
        ));
    }
    if !extra.is_empty() {
        let mut t = extra.join("; ");
        t[..1].make_ascii_uppercase();
        p.push(t + ".");
    }
    let mut run = format!(
        "The scheduler got simulated time through the {} shim. The run took {} of wall time \
         ({}x faster than real time): {} with Batsim in {}, {} asked",
        str_field(s, "shim")
            .filter(|x| !x.is_empty())
            .unwrap_or("(unknown)"),
        secs(f("wall_seconds")),
        thousands(f("simulated_to_wall_ratio")),
        plural(u("messages_exchanged"), "message", "messages"),
        plural(u("windows"), "window", "windows"),
        plural(u("wake_ups_requested"), "wake-up", "wake-ups")
    );
    if u("partial_instants") > 0 {
        let _ = write!(
            run,
            "; {} did not fit in the scheduler's receive windows",
            plural(u("partial_instants"), "instant", "instants")
        );
    }
    if u("quiescence_contradicted") > 0 {
        let _ = write!(
            run,
            "; the scheduler moved after {} found it quiescent (what it did landed at the next instant)",
            plural(u("quiescence_contradicted"), "window", "windows")
        );
    }
    if u("windows_bound_hit") > 0 {
        let _ = write!(
            run,
            "; {} hit --window-bound",
            plural(u("windows_bound_hit"), "window", "windows")
        );
    }
    if u("spins_held") > 0 {
        let _ = write!(
            run,
            "; a program spinning at one instant was held at --spin-bound {}",
            plural(u("spins_held"), "time", "times")
        );
    }
    if let Some(v) = str_field(s, "batkube_version") {
        let _ = write!(run, ". batkube {v}");
    }
    p.push(run + ".");
    if let Some(w) = s.get("warnings").and_then(|v| v.as_array()) {
        for x in w.iter().filter_map(|x| x.as_str()) {
            p.push(format!("Warning: {x}"));
        }
    }
    p
}

fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, x, out);
            }
        }
        serde_json::Value::String(s) => out.push((prefix.to_string(), s.clone())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

fn summary_section(out: &mut String, d: &RunData) {
    out.push_str("<section id=\"summary\"><h2>Summary</h2>");
    match &d.summary {
        None => out.push_str("<p>No summary.json: the statistics below are the pods' own.</p>"),
        Some(s) => {
            for line in summary_words(s) {
                let _ = write!(out, "<p>{}</p>", esc(&line));
            }
            out.push_str(
                "<details><summary>summary.json, every field</summary><table class=\"kv\">",
            );
            let mut rows = Vec::new();
            flatten("", s, &mut rows);
            for (k, v) in rows {
                let _ = write!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(&k), esc(&v));
            }
            out.push_str("</table></details>");
        }
    }
    out.push_str("</section>\n");
}

fn inputs_section(out: &mut String, d: &RunData) {
    out.push_str("<section id=\"inputs\"><h2>Inputs and flags</h2>");
    let flags = d
        .summary
        .as_ref()
        .and_then(|s| s.get("flags"))
        .and_then(|f| f.as_object());
    match flags {
        Some(f) if !f.is_empty() => {
            if let Some(cl) = f.get("command_line").and_then(|v| v.as_str()) {
                let _ = write!(
                    out,
                    "<p>Command line:</p><pre id=\"command-line\">{}</pre>",
                    esc(cl)
                );
            }
            let others: Vec<_> = f.iter().filter(|(k, _)| *k != "command_line").collect();
            if !others.is_empty() {
                out.push_str("<table class=\"kv\">");
                for (k, v) in others {
                    let v = v
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string());
                    let _ = write!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(&v));
                }
                out.push_str("</table>");
            }
        }
        _ => out.push_str("<p>The flags are unknown (no summary.json).</p>"),
    }
    if !d.files.is_empty() {
        out.push_str("<p>Files in the directory:</p><table class=\"kv files\">");
        for (name, bytes) in &d.files {
            let _ = write!(
                out,
                "<tr><th><a href=\"{}\">{}</a></th><td>{} bytes</td></tr>",
                esc(&percent_encode(name)),
                esc(name),
                thousands(*bytes as f64)
            );
        }
        out.push_str("</table>");
    }
    out.push_str("</section>\n");
}

/// A file name as a relative URL.
pub fn percent_encode(name: &str) -> String {
    let mut s = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            s.push(b as char);
        } else {
            let _ = write!(s, "%{b:02X}");
        }
    }
    s
}

/// A bar of the Gantt chart.
struct Bar {
    pod: u32,
    machine: u32,
    start: f64,
    end: f64,
}

/// The bars: every pod that was bound, from its start (or binding) to its
/// end (or the run's end).
fn bars(d: &RunData) -> Vec<Bar> {
    let mut out = Vec::new();
    for (i, p) in d.pods.iter().enumerate() {
        let (Some(m), Some(start)) = (p.node, p.started.or(p.bound)) else {
            continue;
        };
        let end = p.finished.unwrap_or(d.end).max(start);
        out.push(Bar {
            pod: i as u32,
            machine: m,
            start,
            end,
        });
    }
    out
}

fn row_height(n: usize) -> f64 {
    match n {
        0..=24 => 22.0,
        25..=64 => 14.0,
        65..=200 => 8.0,
        201..=1000 => 5.0,
        _ => 3.0,
    }
}

/// Draws the Gantt chart section; returns how many bars were drawn one by one.
fn gantt_section(out: &mut String, d: &RunData, span: &Span, opts: &Options) -> usize {
    out.push_str("<section id=\"machines\"><h2>Machines over simulated time</h2>");
    let n = d.machines.len();
    let mut counts = [0usize; 6];
    for p in &d.pods {
        counts[outcome_class(&p.outcome)] += 1;
    }
    if !d.queue_names.is_empty() {
        out.push_str(
            "<p class=\"controls\">Colour by: <label><input type=\"radio\" name=\"colour-by\" \
             value=\"outcome\" checked=\"checked\"/> outcome</label> <label><input type=\"radio\" \
             name=\"colour-by\" value=\"queue\"/> queue</label></p><p class=\"legend\" id=\"legend-queue\" \
             hidden=\"hidden\">",
        );
        let mut per_queue = vec![0usize; d.queue_names.len()];
        let mut none = 0usize;
        for p in &d.pods {
            match p.queue {
                Some(q) => per_queue[q as usize] += 1,
                None => none += 1,
            }
        }
        for (k, name) in d.queue_names.iter().enumerate() {
            let _ = write!(
                out,
                "<span class=\"key\"><svg width=\"14\" height=\"12\"><rect class=\"qkey q{}\" x=\"0\" \
                 y=\"1\" width=\"14\" height=\"10\"/></svg> {} ({})</span>",
                queue_colour(Some(k as u32)),
                esc(name),
                thousands(per_queue[k] as f64)
            );
        }
        if none > 0 {
            let _ = write!(
                out,
                "<span class=\"key\"><svg width=\"14\" height=\"12\"><rect class=\"qkey q0\" x=\"0\" \
                 y=\"1\" width=\"14\" height=\"10\"/></svg> no queue ({})</span>",
                thousands(none as f64)
            );
        }
        out.push_str("</p>");
    }
    out.push_str("<p class=\"legend\" id=\"legend-outcome\">");
    for (k, (name, what)) in OUTCOME_CLASSES.iter().enumerate() {
        let _ = write!(
            out,
            "<span class=\"key\"><svg width=\"14\" height=\"12\"><rect class=\"b o{k}\" x=\"0\" \
             y=\"1\" width=\"14\" height=\"10\"/></svg> {name} ({}) <small>{what}</small></span>",
            thousands(counts[k] as f64)
        );
    }
    out.push_str(
        "<span class=\"key\"><svg width=\"14\" height=\"12\"><rect class=\"b o0 nb\" x=\"0\" y=\"1\" \
         width=\"14\" height=\"10\"/></svg> bound, not started</span>\
         <span class=\"key\"><svg width=\"14\" height=\"12\"><rect class=\"b o0 g\" x=\"1\" y=\"1\" \
         width=\"12\" height=\"10\"/></svg> pod of a gang (a line joins its machines)</span>\
         <span class=\"key\"><svg width=\"14\" height=\"12\"><rect class=\"down\" x=\"0\" y=\"0\" \
         width=\"14\" height=\"12\" fill=\"url(#hatch)\"/></svg> machine unavailable</span></p>",
    );
    if d.from_jobs_csv {
        out.push_str("<p class=\"note\">Bars from jobs.csv: rows are Batsim's resource ids.</p>");
    }
    let all = bars(d);
    if n == 0 || all.is_empty() && d.unavailable.is_empty() {
        out.push_str("<p class=\"note\">Nothing ran on any machine.</p>");
    }
    out.push_str(
        "<p class=\"controls\"><button type=\"button\" id=\"zoom-in\">zoom in</button> \
         <button type=\"button\" id=\"zoom-out\">zoom out</button> \
         <button type=\"button\" id=\"zoom-reset\">whole run</button> \
         <span class=\"hint\">Ctrl+wheel (or pinch) zooms, drag pans, a click on a bar shows \
         its pod; the charts below follow the zoom.</span> <span id=\"zoom-range\"></span></p>",
    );
    let rh = row_height(n);
    let height = (n as f64 * rh).max(rh);
    // Stacking: each pod as tall as its cpu share of the machine, at the
    // lowest offset free when it starts (a machine's row shows how full it was).
    let mut per_machine: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (k, b) in all.iter().enumerate() {
        per_machine[b.machine as usize].push(k);
    }
    let aggregate = all.len() > MAX_BARS;
    let min_w = (span.t1 - span.t0) * AGG_FRACTION;
    let mut svg = String::with_capacity(all.len() * 80 + 4096);
    let mut drawn: Vec<(BarLook, u32, f64, f64, f64, f64)> = Vec::with_capacity(all.len());
    let mut aggregates = 0usize;
    let mut gang_rows: HashMap<&str, (f64, f64, f64)> = HashMap::new();
    let _ = write!(
        svg,
        "<svg id=\"gantt\" class=\"timeview{thin}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {h}\" \
         preserveAspectRatio=\"none\" width=\"100%\" height=\"{h}\" data-rows=\"{n}\" data-rh=\"{rh}\">\
         <defs><pattern id=\"hatch\" patternUnits=\"userSpaceOnUse\" width=\"{pw}\" height=\"8\">\
         <path d=\"M0,8 L{pw},0\" class=\"hatchline\"/></pattern></defs><g class=\"rows\">",
        h = num(height, 2),
        pw = num(W / 150.0, 2),
        rh = num(rh, 2),
        // Rows a few pixels high: bars without their separating outline.
        thin = if rh < 10.0 { " thin" } else { "" },
    );
    for r in (1..n).step_by(2) {
        let _ = write!(
            svg,
            "<rect class=\"row\" x=\"0\" y=\"{}\" width=\"{W}\" height=\"{}\"/>",
            num(r as f64 * rh, 2),
            num(rh, 2)
        );
    }
    svg.push_str("</g><g class=\"bars\">");
    for (m, list) in per_machine.iter_mut().enumerate() {
        list.sort_by(|&a, &b| {
            all[a]
                .start
                .partial_cmp(&all[b].start)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(all[a].pod.cmp(&all[b].pod))
        });
        let cap = d.machines[m].cpu_m;
        let share = |b: &Bar| -> f64 {
            let cpu = d.pods[b.pod as usize].cpu_m;
            if cap > 0 && cpu > 0 {
                (cpu as f64 / cap as f64).clamp(0.05, 1.0)
            } else {
                1.0
            }
        };
        // Placement first, to know how high the row's stack goes.
        let mut placed: Vec<(usize, f64, f64)> = Vec::with_capacity(list.len());
        let mut active: Vec<(f64, f64, f64)> = Vec::new(); // (end, off, h)
        let mut tiny: Vec<usize> = Vec::new();
        let mut top: f64 = 1.0;
        for &k in list.iter() {
            let b = &all[k];
            if aggregate && b.end - b.start < min_w {
                tiny.push(k);
                continue;
            }
            let h = share(b);
            active.retain(|&(end, _, _)| end > b.start);
            let mut busy: Vec<(f64, f64)> = active.iter().map(|&(_, o, h)| (o, o + h)).collect();
            busy.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
            let mut off = 0.0;
            for (lo, hi) in busy {
                if off + h <= lo + 1e-9 {
                    break;
                }
                off = f64::max(off, hi);
            }
            active.push((b.end.max(b.start + 1e-12), off, h));
            top = top.max(off + h);
            placed.push((k, off, h));
        }
        // Thin rows (many machines) keep one pixel between them, not two.
        let margin = if rh < 10.0 { 0.5 } else { 1.0 };
        let y0 = m as f64 * rh + margin;
        let inner = rh - 2.0 * margin;
        let scale = inner / top;
        for (k, off, h) in placed {
            let b = &all[k];
            let p = &d.pods[b.pod as usize];
            let x = span.x(b.start);
            let w = (span.x(b.end) - x).max(MIN_BAR);
            let y = y0 + off * scale;
            let look = BarLook {
                outcome: outcome_class(&p.outcome) as u8,
                queue: queue_colour(p.queue),
                not_started: p.started.is_none(),
                gang: !p.group.is_empty(),
                over: off + h > 1.0 + 1e-9,
            };
            // At least a pixel high, so that a small pod on a large machine shows.
            drawn.push((look, b.pod, x, y, w, (h * scale).max(1.0_f64.min(inner))));
            if !p.group.is_empty() {
                let e = gang_rows.entry(p.group.as_str()).or_insert((
                    f64::INFINITY,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                ));
                e.0 = e.0.min(x);
                e.1 = e.1.min(y);
                e.2 = e.2.max(y + h * scale);
            }
        }
        // Bars no screen can show, merged where they touch.
        let mut seg: Option<(f64, f64, usize, u32)> = None;
        let flush = |svg: &mut String, s: (f64, f64, usize, u32), aggregates: &mut usize| {
            let x = span.x(s.0);
            let _ = write!(
                svg,
                "<rect class=\"agg\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" data-n=\"{}\" data-i=\"{}\"/>",
                num(x, 2),
                num(y0, 2),
                num((span.x(s.1) - x).max(MIN_BAR), 2),
                num(inner, 2),
                s.2,
                s.3
            );
            *aggregates += 1;
        };
        for k in tiny {
            let b = &all[k];
            seg = match seg {
                Some((a, e, c, first)) if b.start <= e + min_w => {
                    Some((a, e.max(b.end), c + 1, first))
                }
                Some(s) => {
                    flush(&mut svg, s, &mut aggregates);
                    Some((b.start, b.end, 1, b.pod))
                }
                None => Some((b.start, b.end, 1, b.pod)),
            };
        }
        if let Some(s) = seg {
            flush(&mut svg, s, &mut aggregates);
        }
    }
    let as_paths = drawn.len() > opts.max_bar_elements;
    draw_bars(&mut svg, &mut drawn, as_paths);
    svg.push_str("</g><g class=\"gangs\">");
    let mut gangs: Vec<_> = gang_rows
        .into_iter()
        .filter(|(_, (_, lo, hi))| hi - lo > rh)
        .collect();
    gangs.sort_by(|a, b| a.0.cmp(b.0));
    for (g, (x, lo, hi)) in gangs {
        let _ = write!(
            svg,
            "<line class=\"gang\" x1=\"{x}\" x2=\"{x}\" y1=\"{}\" y2=\"{}\" data-g=\"{}\"/>",
            num(lo, 2),
            num(hi, 2),
            esc(g),
            x = num(x, 2)
        );
    }
    svg.push_str("</g><g class=\"downs\">");
    for &(m, a, b) in &d.unavailable {
        let x = span.x(a);
        let _ = write!(
            svg,
            "<rect class=\"down\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"url(#hatch)\" \
             data-m=\"{m}\" data-from=\"{}\" data-to=\"{}\"/>",
            num(x, 2),
            num(m as f64 * rh, 2),
            num((span.x(b) - x).max(MIN_BAR), 2),
            num(rh, 2),
            num(a, 6),
            num(b, 6)
        );
    }
    svg.push_str("</g></svg>");
    if aggregates > 0 {
        let _ = write!(
            out,
            "<p class=\"note\">{} bars: those narrower than 1/3000 of the run are drawn as {} grey \
             aggregates (hover one for its count); every pod is in the table below.</p>",
            thousands(all.len() as f64),
            thousands(aggregates as f64)
        );
    }
    // Machine names, in a column that does not zoom.
    let mut labels = String::new();
    let every = (11.0 / rh).ceil().max(1.0) as usize;
    let font = (every as f64 * rh - 2.0).clamp(6.0, 11.0);
    let _ = write!(
        labels,
        "<svg class=\"labels\" xmlns=\"http://www.w3.org/2000/svg\" width=\"170\" height=\"{}\">",
        num(height, 2)
    );
    for (m, mach) in d.machines.iter().enumerate() {
        if m % every != 0 {
            continue;
        }
        let mut name = mach.name.clone();
        if mach.cpu_m > 0 {
            let _ = write!(name, " ({} cpu)", num(mach.cpu_m as f64 / 1000.0, 3));
        }
        let _ = write!(
            labels,
            "<text x=\"166\" y=\"{}\" font-size=\"{}\">{}</text>",
            num((m as f64 * rh + rh / 2.0 + font * 0.35).max(font * 0.8), 2),
            num(font, 1),
            esc(&name)
        );
    }
    labels.push_str("</svg>");
    axis_lane(out, span, "axis-top");
    let _ = write!(
        out,
        "<div id=\"gantt-scroll\" class=\"scroll\"><div class=\"lane\"><div class=\"lab\">{labels}</div>\
         <div class=\"plot\">{svg}</div></div></div>"
    );
    // The cluster's totals on the same time axis.
    let util = bucketize(&d.utilisation, span, BUCKETS);
    if !d.utilisation.is_empty() {
        series_lane(
            out,
            "utilisation",
            "cpu allocated / allocatable",
            &util,
            1.0,
            true,
        );
    }
    let (running, pending) = pod_counts(&d.pods);
    let running = bucketize(&running, span, BUCKETS);
    let pending = bucketize(&pending, span, BUCKETS);
    if !d.pods.is_empty() {
        let max_r = running.iter().map(|b| b.2).fold(0.0, f64::max);
        let max_p = pending.iter().map(|b| b.2).fold(0.0, f64::max);
        series_lane(out, "running", "pods running", &running, max_r, false);
        series_lane(
            out,
            "pending",
            "pods waiting to be bound",
            &pending,
            max_p,
            false,
        );
    }
    axis_lane(out, span, "axis-bottom");
    out.push_str("</section>\n");
    drawn.len()
}

/// How a bar looks: its CSS classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct BarLook {
    outcome: u8,
    /// The queue's colour: 0 for no queue, else 1 + its index modulo
    /// [`QUEUE_COLOURS`].
    queue: u8,
    not_started: bool,
    gang: bool,
    over: bool,
}

/// Colours of queues (CSS classes `q1` to `q10`); more queues reuse them.
pub const QUEUE_COLOURS: usize = 10;

/// The colour class number of queue `q` (an index of `queue_names`).
pub fn queue_colour(q: Option<u32>) -> u8 {
    q.map_or(0, |q| 1 + (q as usize % QUEUE_COLOURS) as u8)
}

impl BarLook {
    fn class(&self) -> String {
        format!(
            "b o{} q{}{}{}{}",
            self.outcome,
            self.queue,
            if self.not_started { " nb" } else { "" },
            if self.gang { " g" } else { "" },
            if self.over { " over" } else { "" }
        )
    }
}

/// The bars, each a `rect` (its pod in `data-i`), or, as `paths`, one
/// `path` per look whose subpaths are its bars, in the order of the pods
/// listed in its `data-i`.
fn draw_bars(svg: &mut String, bars: &mut [(BarLook, u32, f64, f64, f64, f64)], paths: bool) {
    if !paths {
        for &(look, pod, x, y, w, h) in bars.iter() {
            let _ = write!(svg, "<rect class=\"{}\" x=\"", look.class());
            num_into(svg, x, 2);
            svg.push_str("\" y=\"");
            num_into(svg, y, 2);
            svg.push_str("\" width=\"");
            num_into(svg, w, 2);
            svg.push_str("\" height=\"");
            num_into(svg, h, 2);
            let _ = write!(svg, "\" data-i=\"{pod}\"/>");
        }
        return;
    }
    bars.sort_by_key(|b| b.0); // stable: pods keep their order within a look
    for group in bars.chunk_by(|a, b| a.0 == b.0) {
        let _ = write!(svg, "<path class=\"{}\" d=\"", group[0].0.class());
        for (k, &(_, _, x, y, w, h)) in group.iter().enumerate() {
            if k > 0 {
                svg.push(' ');
            }
            svg.push('M');
            num_into(svg, x, 2);
            svg.push(',');
            num_into(svg, y, 2);
            svg.push('h');
            num_into(svg, w, 2);
            svg.push('v');
            num_into(svg, h, 2);
            svg.push('h');
            num_into(svg, -w, 2);
            svg.push('z');
        }
        svg.push_str("\" data-i=\"");
        for (k, b) in group.iter().enumerate() {
            if k > 0 {
                svg.push(' ');
            }
            let _ = write!(svg, "{}", b.1);
        }
        svg.push_str("\"/>");
    }
}

/// A time axis in percent of the plot's width (the script redraws it on zoom).
pub(super) fn axis_lane(out: &mut String, span: &Span, id: &str) {
    let _ = write!(
        out,
        "<div class=\"lane\"><div class=\"lab axis-name\">simulated time (s)</div><div class=\"plot\">\
         <svg id=\"{id}\" class=\"timeaxis\" xmlns=\"http://www.w3.org/2000/svg\" width=\"100%\" height=\"20\">"
    );
    for t in html::ticks(span.t0, span.t1, 8) {
        let pct = span.x(t) / W * 100.0;
        // The end ticks' labels stay inside the plot.
        let anchor = if pct < 2.0 {
            "start"
        } else if pct > 98.0 {
            "end"
        } else {
            "middle"
        };
        let _ = write!(
            out,
            "<line x1=\"{p}%\" x2=\"{p}%\" y1=\"0\" y2=\"5\"/><text x=\"{p}%\" y=\"16\" \
             text-anchor=\"{anchor}\">{}</text>",
            num(t, 3),
            p = num(pct, 3)
        );
    }
    out.push_str("</svg></div></div>");
}

/// Pods running and pods pending (created, not yet bound) over time.
fn pod_counts(pods: &[Pod]) -> (Steps, Steps) {
    let mut run: Vec<(f64, i64)> = Vec::new();
    let mut pend: Vec<(f64, i64)> = Vec::new();
    for p in pods {
        if let Some(s) = p.started {
            run.push((s, 1));
            if let Some(f) = p.finished {
                run.push((f.max(s), -1));
            }
        }
        pend.push((p.created, 1));
        if let Some(t) = p.bound.or(p.started).or(p.finished) {
            pend.push((t.max(p.created), -1));
        }
    }
    (cumulate(run), cumulate(pend))
}

fn cumulate(mut ev: Vec<(f64, i64)>) -> Steps {
    ev.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
    let mut out: Steps = Vec::new();
    let mut v = 0i64;
    for (t, dv) in ev {
        v += dv;
        match out.last_mut() {
            Some(last) if last.0 == t => last.1 = v as f64,
            _ => out.push((t, v as f64)),
        }
    }
    out
}

/// A step function over `n` equal buckets of the run: (mean, min, max) in
/// each, so a curve of a million changes is a few thousand points that
/// keep its area and its extremes.
pub(super) fn bucketize(steps: &[(f64, f64)], span: &Span, n: usize) -> Vec<(f64, f64, f64)> {
    let mut out = Vec::with_capacity(n);
    let width = (span.t1 - span.t0) / n as f64;
    let mut k = 0usize;
    let mut v = 0.0;
    while k < steps.len() && steps[k].0 <= span.t0 {
        v = steps[k].1;
        k += 1;
    }
    for i in 0..n {
        let a = span.t0 + i as f64 * width;
        let b = a + width;
        let (mut area, mut lo, mut hi, mut t) = (0.0, v, v, a);
        while k < steps.len() && steps[k].0 < b {
            area += v * (steps[k].0 - t).max(0.0);
            t = steps[k].0.max(a);
            v = steps[k].1;
            lo = lo.min(v);
            hi = hi.max(v);
            k += 1;
        }
        area += v * (b - t).max(0.0);
        out.push((area / width, lo, hi));
    }
    out
}

pub(super) fn series_lane(
    out: &mut String,
    id: &str,
    what: &str,
    b: &[(f64, f64, f64)],
    max: f64,
    fraction: bool,
) {
    let label = if fraction {
        format!("{what}<br/><small>band: min to max; line: mean</small>")
    } else {
        format!("{what}<br/><small>at most {}</small>", thousands(max))
    };
    let top = if max > 0.0 { max } else { 1.0 };
    let ymax = if fraction {
        percent(top)
    } else {
        thousands(max)
    };
    draw_lane(out, id, "timeview", &label, &ymax, 60.0, top, b, None);
}

/// A lane of the time charts: buckets (mean, min, max) as a band and a
/// mean line scaled to `top`, and an optional second series as a line
/// (its means), in an SVG of `class` (`timeview`: it zooms with the chart).
#[allow(clippy::too_many_arguments)]
pub(super) fn draw_lane(
    out: &mut String,
    id: &str,
    class: &str,
    label: &str,
    ymax: &str,
    h: f64,
    top: f64,
    b: &[(f64, f64, f64)],
    second: Option<&[(f64, f64, f64)]>,
) {
    let y = |v: f64| h - (v / top).clamp(0.0, 1.05) * (h - 2.0);
    let dx = W / b.len().max(1) as f64;
    let hi: Vec<f64> = b.iter().map(|v| y(v.2)).collect();
    let mean: Vec<f64> = b.iter().map(|v| y(v.0)).collect();
    let lo: Vec<f64> = b.iter().map(|v| y(v.1)).collect();
    let _ = write!(
        out,
        "<div class=\"lane series\"><div class=\"lab\"><span class=\"ymax\">{ymax}</span>{label}<span class=\"ymin\">0</span></div>\
         <div class=\"plot\"><svg id=\"series-{id}\" class=\"{class}\" xmlns=\"http://www.w3.org/2000/svg\" \
         viewBox=\"0 0 {W} {h}\" preserveAspectRatio=\"none\" width=\"100%\" height=\"{h}\">\
         <polygon class=\"band\" points=\"{} {}\"/><polyline class=\"mean\" points=\"{}\"/>",
        steps_path(&hi, dx, false),
        steps_path(&lo, dx, true),
        steps_path(&mean, dx, false),
    );
    if let Some(s) = second {
        let ys: Vec<f64> = s.iter().map(|v| y(v.0)).collect();
        let _ = write!(
            out,
            "<polyline class=\"second\" points=\"{}\"/>",
            steps_path(&ys, dx, false)
        );
    }
    out.push_str("</svg></div></div>");
}

/// The points of a step curve of one value per bucket `dx` wide, a point
/// only where the value changes (long flat stretches cost nothing), left to
/// right or right to left.
pub(super) fn steps_path(ys: &[f64], dx: f64, backwards: bool) -> String {
    let mut pts: Vec<(f64, f64)> = Vec::new();
    if let Some(&first) = ys.first() {
        pts.push((0.0, first));
        for i in 1..ys.len() {
            if ys[i] != ys[i - 1] {
                pts.push((i as f64 * dx, ys[i - 1]));
                pts.push((i as f64 * dx, ys[i]));
            }
        }
        pts.push((ys.len() as f64 * dx, *ys.last().expect("not empty")));
    }
    if backwards {
        pts.reverse();
    }
    let mut out = String::with_capacity(pts.len() * 12);
    for (k, (x, y)) in pts.into_iter().enumerate() {
        if k > 0 {
            out.push(' ');
        }
        num_into(&mut out, x, 1);
        out.push(',');
        num_into(&mut out, y, 2);
    }
    out
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn distributions_section(out: &mut String, d: &RunData) {
    out.push_str("<section id=\"distributions\"><h2>Distributions over jobs</h2>");
    let mut s = job_stats(&d.pods);
    s.waits
        .sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    s.bslds
        .sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    if s.jobs == 0 {
        out.push_str("<p class=\"note\">No job to count.</p></section>\n");
        return;
    }
    let _ = write!(
        out,
        "<p>{} ({} never started). Wait: start minus submission. Bounded slowdown: time in the \
         system over the run time, a run shorter than {} s counting as {} s, at least 1.</p>\
         <div class=\"dists\">",
        plural(s.jobs as u64, "job", "jobs"),
        thousands(s.never_started as f64),
        BSLD_TAU,
        BSLD_TAU
    );
    ecdf(out, "ecdf-wait", "wait (s)", &s.waits, 0.0, false);
    let log = s.bslds.last().copied().unwrap_or(1.0) > 50.0;
    ecdf(out, "ecdf-bsld", "bounded slowdown", &s.bslds, 1.0, log);
    out.push_str("</div><table class=\"quantiles\"><tr><th></th><th>jobs</th><th>mean</th><th>median</th><th>90%</th><th>99%</th><th>max</th></tr>");
    for (name, v) in [("wait (s)", &s.waits), ("bounded slowdown", &s.bslds)] {
        let mean = if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        };
        let _ = write!(
            out,
            "<tr><th>{name}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            thousands(v.len() as f64),
            num(mean, 3),
            num(quantile(v, 0.5), 3),
            num(quantile(v, 0.9), 3),
            num(quantile(v, 0.99), 3),
            num(v.last().copied().unwrap_or(0.0), 3)
        );
    }
    out.push_str("</table></section>\n");
}

/// The empirical distribution function of `sorted`, drawn at most 2,000 points.
/// `floor`: where the x axis starts (the values' least possible value).
fn ecdf(out: &mut String, id: &str, xlabel: &str, sorted: &[f64], floor: f64, log: bool) {
    const WD: f64 = 460.0;
    const HT: f64 = 220.0;
    const L: f64 = 46.0;
    const B: f64 = 34.0;
    let _ = write!(
        out,
        "<figure><svg id=\"{id}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WD}\" height=\"{HT}\" viewBox=\"0 0 {WD} {HT}\">"
    );
    if sorted.is_empty() {
        out.push_str("<text x=\"200\" y=\"100\">no values</text></svg></figure>");
        return;
    }
    let (lo, hi) = (sorted[0], *sorted.last().expect("not empty"));
    let tx = |v: f64| if log { v.max(1e-9).log10() } else { v };
    let (a, mut b) = (
        tx(floor.min(lo).max(if log { 1e-9 } else { f64::MIN })),
        tx(hi),
    );
    if b <= a {
        b = a + 1.0;
    }
    let px = |v: f64| L + (tx(v) - a) / (b - a) * (WD - L - 12.0);
    let py = |q: f64| 8.0 + (1.0 - q) * (HT - B - 8.0);
    // Axes and grid.
    for q in [0.0, 0.25, 0.5, 0.75, 1.0] {
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{L}\" x2=\"{}\" y1=\"{y}\" y2=\"{y}\"/><text class=\"yl\" x=\"{}\" y=\"{}\">{}</text>",
            WD - 12.0,
            L - 4.0,
            num(py(q) + 4.0, 1),
            num(q, 2),
            y = num(py(q), 1)
        );
    }
    let xt: Vec<f64> = if log {
        let mut v = Vec::new();
        let mut p = 10f64.powf(a.floor());
        while p <= 10f64.powf(b) * 1.0001 {
            if p >= 10f64.powf(a) * 0.9999 {
                v.push(p);
            }
            p *= 10.0;
        }
        v
    } else {
        html::ticks(a, b, 5)
    };
    for t in xt {
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{x}\" x2=\"{x}\" y1=\"8\" y2=\"{}\"/><text class=\"xl\" x=\"{x}\" y=\"{}\">{}</text>",
            num(HT - B, 1),
            num(HT - B + 14.0, 1),
            num(t, 3),
            x = num(px(t), 1)
        );
    }
    let _ = write!(
        out,
        "<text class=\"xl\" x=\"{}\" y=\"{}\">{}{}</text>",
        num((L + WD) / 2.0, 1),
        HT - 4.0,
        esc(xlabel),
        if log { " (log scale)" } else { "" }
    );
    let n = sorted.len();
    let step = (n / 2000).max(1);
    let mut pts = String::new();
    let mut prev_q = 0.0;
    let mut i = 0;
    while i < n {
        let j = (i + step).min(n);
        let x = px(sorted[j - 1]);
        let q = j as f64 / n as f64;
        let _ = write!(
            pts,
            "{},{} {},{} ",
            num(x, 2),
            num(py(prev_q), 2),
            num(x, 2),
            num(py(q), 2)
        );
        prev_q = q;
        i = j;
    }
    let _ = write!(
        out,
        "<polyline class=\"ecdf\" points=\"{}\"/></svg><figcaption>share of jobs at or below x</figcaption></figure>",
        pts.trim_end()
    );
}

fn pods_section(out: &mut String, d: &RunData) {
    let _ = write!(
        out,
        "<section id=\"pods-section\"><h2>Pods</h2><p class=\"controls\"><input type=\"search\" id=\"pod-filter\" \
         placeholder=\"filter: any text in a row\" size=\"40\"/> <select id=\"pod-outcome\"><option value=\"\">every outcome</option>"
    );
    for (k, (name, _)) in OUTCOME_CLASSES.iter().enumerate() {
        let _ = write!(out, "<option value=\"{k}\">{name}</option>");
    }
    let _ = write!(
        out,
        "</select> <span id=\"pod-count\">{} pods</span> <button type=\"button\" id=\"pod-prev\">previous</button> \
         <button type=\"button\" id=\"pod-next\">next</button></p>\
         <p class=\"hint\">A click on a header sorts; a click on a row shows the pod on the chart \
         and its decision trail: each attempt, each filter's verdict per node, the scores and the \
         choice (recorded when the run had --explain).</p>\
         <noscript><p>The table is filled by the page's script.</p></noscript>\
         <div class=\"tablewrap\"><table id=\"pods\"><thead><tr>",
        thousands(d.pods.len() as f64)
    );
    for (k, h) in POD_COLUMNS.iter().enumerate() {
        let _ = write!(out, "<th data-col=\"{k}\">{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody></tbody></table></div></section>\n");
}

/// The pod table's columns (the script knows them by position).
pub const POD_COLUMNS: [&str; 14] = [
    "job",
    "pod",
    "node",
    "created",
    "bound",
    "started",
    "finished",
    "wait",
    "attempts",
    "last unschedulable reason",
    "outcome",
    "gang",
    "queue",
    "decision trail",
];

/// The data the script needs: machine names and each pod, strings shared
/// through one table.
fn data_json<'a>(d: &'a RunData, span: &Span, bars: usize) -> String {
    let mut out = String::with_capacity(d.pods.len() * 90 + 1024);
    let _ = write!(out, "{{\"W\":{W},\"t0\":");
    num_into(&mut out, span.t0, 6);
    out.push_str(",\"t1\":");
    num_into(&mut out, span.t1, 6);
    let _ = write!(out, ",\"bars\":{bars},\"classes\":[");
    for (k, (name, _)) in OUTCOME_CLASSES.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        html::json_str(&mut out, name);
    }
    out.push_str("],\"machines\":[");
    for (k, m) in d.machines.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        html::json_str(&mut out, &m.name);
    }
    out.push_str("],\"pods\":[");
    let mut texts: Vec<&str> = vec![""];
    let mut index: HashMap<&str, usize> = HashMap::from([("", 0)]);
    for (k, p) in d.pods.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        out.push('[');
        html::json_str(&mut out, &p.job);
        out.push(',');
        html::json_str(&mut out, &p.name);
        out.push(',');
        match p.node {
            Some(n) => {
                let _ = write!(out, "{n}");
            }
            None => out.push_str("-1"),
        }
        out.push(',');
        num_into(&mut out, p.created, 6);
        for t in [p.bound, p.started, p.finished] {
            out.push(',');
            html::json_opt(&mut out, t);
        }
        let _ = write!(out, ",{}", p.attempts);
        for s in [p.reason.as_str(), p.outcome.as_str(), p.group.as_str()] {
            let id = *index.entry(s).or_insert_with(|| {
                texts.push(s);
                texts.len() - 1
            });
            let _ = write!(out, ",{id}");
        }
        let queue = p.queue.map_or("", |q| d.queue_names[q as usize].as_str());
        let id = *index.entry(queue).or_insert_with(|| {
            texts.push(queue);
            texts.len() - 1
        });
        let _ = write!(
            out,
            ",{},{},{},{id},{}]",
            outcome_class(&p.outcome),
            p.cpu_m,
            p.memory,
            queue_colour(p.queue)
        );
    }
    out.push_str("],\"explained\":");
    out.push_str(if d.explained { "true" } else { "false" });
    // The decision trail: per attempt [pod, time, attempt number, node,
    // reason, [nodes that passed], [[node, plugin, message]...] refused,
    // [score plugins], [[node, total, raw..., final...]...]], strings as
    // indices into `texts`.
    out.push_str(",\"trail\":[");
    let by_name: HashMap<&str, usize> = d
        .pods
        .iter()
        .enumerate()
        .map(|(k, p)| (p.name.as_str(), k))
        .collect();
    let mut first = true;
    for a in &d.decisions {
        let Some(&pod) = by_name.get(a.pod.as_str()) else {
            continue;
        };
        let mut id = |s: &'a str| -> usize {
            *index.entry(s).or_insert_with(|| {
                texts.push(s);
                texts.len() - 1
            })
        };
        if !first {
            out.push(',');
        }
        first = false;
        let _ = write!(out, "[{pod},");
        num_into(&mut out, a.time, 6);
        match a.attempt {
            Some(n) => {
                let _ = write!(out, ",{n}");
            }
            None => out.push_str(",null"),
        }
        let _ = write!(
            out,
            ",{},{},[",
            id(a.node.as_deref().unwrap_or("")),
            id(a.reason.as_deref().unwrap_or(""))
        );
        let mut k = 0;
        for (node, refused) in &a.filter {
            if refused.is_none() {
                if k > 0 {
                    out.push(',');
                }
                k += 1;
                let _ = write!(out, "{}", id(node));
            }
        }
        out.push_str("],[");
        let mut k = 0;
        for (node, refused) in &a.filter {
            if let Some((plugin, msg)) = refused {
                if k > 0 {
                    out.push(',');
                }
                k += 1;
                let _ = write!(out, "[{},{},{}]", id(node), id(plugin), id(msg));
            }
        }
        out.push_str("],[");
        for (k, p) in a.plugins.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            let _ = write!(out, "{}", id(p));
        }
        out.push_str("],[");
        for (k, (node, raw, fin)) in a.scores.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            let _ = write!(out, "[{},{}", id(node), fin.iter().sum::<i64>());
            for x in raw.iter().chain(fin) {
                let _ = write!(out, ",{x}");
            }
            out.push(']');
        }
        out.push_str("]]");
    }
    out.push_str("],\"texts\":[");
    for (k, t) in texts.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        html::json_str(&mut out, t);
    }
    out.push_str("]}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_keep_the_area_and_the_extremes() {
        let span = Span { t0: 0.0, t1: 10.0 };
        // 0 until 1, 4 from 1 to 1.5, 2 from 1.5 on.
        let b = bucketize(&[(0.0, 0.0), (1.0, 4.0), (1.5, 2.0)], &span, 5);
        assert_eq!(b[0], ((0.0 * 1.0 + 4.0 * 0.5 + 2.0 * 0.5) / 2.0, 0.0, 4.0));
        assert_eq!(b[4], (2.0, 2.0, 2.0));
    }

    #[test]
    fn outcomes_fall_in_their_class() {
        assert_eq!(outcome_class("COMPLETED_SUCCESSFULLY"), 0);
        assert_eq!(outcome_class("COMPLETED_WALLTIME_REACHED"), 1);
        assert_eq!(outcome_class("PREEMPTED"), 2);
        assert_eq!(outcome_class("KILLED: pod w0-1-1 of its gang evicted"), 2);
        assert_eq!(outcome_class("EVICTED: drain of node-10"), 3);
        assert_eq!(
            outcome_class("EVICTED before it started: node node-0 unreachable"),
            3
        );
        assert_eq!(
            outcome_class("REJECTED: unschedulable at the end of the simulation: x"),
            4
        );
        assert_eq!(outcome_class(""), 5);
    }

    #[test]
    fn bounded_slowdown_counts_a_job_once_and_short_jobs_as_tau() {
        let pod = |job: &str, c: f64, s: f64, f: f64| Pod {
            job: job.into(),
            created: c,
            started: Some(s),
            finished: Some(f),
            ..Default::default()
        };
        let s = job_stats(&[
            pod("a", 0.0, 10.0, 12.0),
            pod("a", 0.0, 10.0, 12.0),
            pod("b", 0.0, 0.0, 100.0),
        ]);
        assert_eq!(s.jobs, 2);
        assert_eq!(s.waits, [10.0, 0.0]);
        assert_eq!(s.bslds, [1.2, 1.0]);
    }
}
