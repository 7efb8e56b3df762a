//! The per-queue panels of a run's page, for runs whose jobs name queues
//! (`pods.csv`'s `queue`, `queues.csv`): a table of each queue's jobs,
//! waits, slowdowns and share of the cluster, then, on the Gantt chart's
//! time axis (they zoom with it), each queue's allocated cpu against its
//! quota or capability and its jobs waiting and running.

use std::fmt::Write;

use super::data::RunData;
use super::html::{esc, num, percent, secs, thousands};
use super::run_page::{axis_lane, bucketize, draw_lane, job_stats, queue_colour, Span, BUCKETS};

/// Queues drawn over time beyond this many are in the table only.
pub const MAX_QUEUE_LANES: usize = 12;

/// The section, or nothing when no job named a queue.
pub(super) fn queues_section(out: &mut String, d: &RunData, span: &Span) {
    if d.queue_names.is_empty() {
        return;
    }
    out.push_str(
        "<section id=\"queues\"><h2>Queues</h2><p class=\"hint\">Per queue: its jobs (a gang \
         counted once), their mean wait and bounded slowdown (run time under 10 s counted as \
         10 s), its share of the cluster's cpu-seconds up to the makespan and the most cpu it \
         held at once (from summary.json), its cpu quota or capability (queues.csv). Below, on \
         the chart's time axis: cpu allocated to the queue's pods from binding to end (line: \
         mean per pixel-wide bucket; band: minimum to maximum; dashed: the quota), and its \
         jobs waiting to start and running.</p>",
    );
    let summary = d
        .summary
        .as_ref()
        .and_then(|s| s.get("queues"))
        .and_then(|q| q.as_object());
    out.push_str(
        "<table class=\"sortable queues\"><thead><tr><th>queue</th><th>jobs</th><th>finished</th>\
         <th>mean wait</th><th>mean bounded slowdown</th><th>cpu share</th><th>peak cpu</th>\
         <th>cpu quota</th><th>most over quota</th></tr></thead><tbody>",
    );
    for (k, name) in d.queue_names.iter().enumerate() {
        let pods: Vec<_> = d
            .pods
            .iter()
            .filter(|p| p.queue == Some(k as u32))
            .cloned()
            .collect();
        let stats = job_stats(&pods);
        let mean = |v: &[f64]| {
            if v.is_empty() {
                "\u{2014}".to_string()
            } else {
                num(v.iter().sum::<f64>() / v.len() as f64, 3)
            }
        };
        let s = summary.and_then(|m| m.get(name));
        let field = |f: &str| s.and_then(|s| s.get(f)).and_then(|v| v.as_f64());
        let series = &d.queues[k];
        let quota = series
            .quota
            .iter()
            .map(|q| q.1)
            .fold(None, |m: Option<f64>, q| Some(m.map_or(q, |m| m.max(q))));
        let over = over_quota(&series.cpu, &series.quota);
        let _ = write!(
            out,
            "<tr><td><svg width=\"12\" height=\"10\"><rect class=\"qkey q{}\" width=\"12\" \
             height=\"10\"/></svg> {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            queue_colour(Some(k as u32)),
            esc(name),
            thousands(stats.jobs as f64),
            thousands(stats.bslds.len() as f64),
            if stats.waits.is_empty() {
                "\u{2014}".to_string()
            } else {
                secs(stats.waits.iter().sum::<f64>() / stats.waits.len() as f64)
            },
            mean(&stats.bslds),
            field("cpu_share").map_or("\u{2014}".into(), percent),
            field("peak_cpu_allocated_m").map_or("\u{2014}".into(), |m| num(m / 1000.0, 3)),
            quota.map_or("none".into(), |q| num(q, 3)),
            match (quota, over) {
                (None, _) => "\u{2014}".to_string(),
                (Some(_), o) => num(o, 3),
            },
        );
    }
    out.push_str("</tbody></table>");
    if d.queues.iter().all(|q| q.cpu.is_empty()) {
        out.push_str(
            "<p class=\"note\">No allocation over time: queues.csv has no row.</p></section>\n",
        );
        return;
    }
    axis_lane(out, span, "axis-queues");
    for (k, name) in d.queue_names.iter().enumerate().take(MAX_QUEUE_LANES) {
        let q = &d.queues[k];
        if q.cpu.is_empty() && q.pending.is_empty() {
            continue;
        }
        let colour = queue_colour(Some(k as u32));
        let cpu = bucketize(&q.cpu, span, BUCKETS);
        let quota = bucketize(&q.quota, span, BUCKETS);
        let top = cpu
            .iter()
            .map(|b| b.2)
            .chain(quota.iter().map(|b| b.2))
            .fold(0.0, f64::max);
        lane(
            out,
            &format!("queue-cpu-{k}"),
            colour,
            &format!(
                "{}: cpu allocated{}",
                esc(name),
                if q.quota.is_empty() {
                    ""
                } else {
                    " <small>(dashed: quota)</small>"
                }
            ),
            top,
            &cpu,
            (!q.quota.is_empty()).then_some(&quota),
        );
        let pending = bucketize(&q.pending, span, BUCKETS);
        let running = bucketize(&q.running, span, BUCKETS);
        let top = pending
            .iter()
            .chain(running.iter())
            .map(|b| b.2)
            .fold(0.0, f64::max);
        lane(
            out,
            &format!("queue-jobs-{k}"),
            colour,
            &format!(
                "{}: jobs waiting <small>(dashed: running)</small>",
                esc(name)
            ),
            top,
            &pending,
            Some(&running),
        );
    }
    if d.queue_names.len() > MAX_QUEUE_LANES {
        let _ = write!(
            out,
            "<p class=\"note\">{} queues: the first {MAX_QUEUE_LANES} are drawn over time, every \
             one is in the table.</p>",
            d.queue_names.len()
        );
    }
    axis_lane(out, span, "axis-queues-bottom");
    out.push_str("</section>\n");
}

/// The most cpu allocated beyond the quota at any instant (0 when never).
pub fn over_quota(cpu: &[(f64, f64)], quota: &[(f64, f64)]) -> f64 {
    let (mut i, mut j) = (0usize, 0usize);
    let (mut c, mut q): (f64, Option<f64>) = (0.0, None);
    let mut worst: f64 = 0.0;
    while i < cpu.len() || j < quota.len() {
        let ti = cpu.get(i).map_or(f64::INFINITY, |x| x.0);
        let tj = quota.get(j).map_or(f64::INFINITY, |x| x.0);
        let t = ti.min(tj);
        while i < cpu.len() && cpu[i].0 == t {
            c = cpu[i].1;
            i += 1;
        }
        while j < quota.len() && quota[j].0 == t {
            q = Some(quota[j].1);
            j += 1;
        }
        if let Some(q) = q {
            worst = worst.max(c - q);
        }
    }
    worst
}

/// One lane of a queue: a series as band and mean line in the queue's
/// colour, with a second series as a dashed line (the quota, or the
/// running jobs beside the waiting ones).
fn lane(
    out: &mut String,
    id: &str,
    colour: u8,
    label: &str,
    max: f64,
    b: &[(f64, f64, f64)],
    second: Option<&Vec<(f64, f64, f64)>>,
) {
    let top = if max > 0.0 { max * 1.05 } else { 1.0 };
    draw_lane(
        out,
        id,
        &format!("timeview qlane q{colour}"),
        label,
        &num(max, 3),
        48.0,
        top,
        b,
        second.map(Vec::as_slice),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_quota_follows_both_step_functions() {
        let cpu = [(0.0, 2.0), (10.0, 6.0), (20.0, 3.0)];
        let quota = [(0.0, 4.0), (15.0, 8.0)];
        assert_eq!(over_quota(&cpu, &quota), 2.0);
        assert_eq!(over_quota(&cpu, &[(0.0, 8.0)]), 0.0);
        // A quota that appears later does not judge what came before.
        assert_eq!(over_quota(&cpu, &[(20.0, 1.0)]), 2.0);
        assert_eq!(over_quota(&cpu, &[]), 0.0);
    }
}
