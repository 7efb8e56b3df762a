//! What a run writes at its end: pods.csv, nodes.csv and decisions.jsonl
//! finished, Batsim's outputs adopted (or jobs.csv written from the
//! broker's records), summary.json.

use std::path::Path;

use anyhow::Context;

use crate::broker::record;
use crate::broker::Broker;

pub(super) fn flags() -> std::collections::BTreeMap<String, String> {
    let args: Vec<String> = std::env::args().collect();
    let mut m = std::collections::BTreeMap::new();
    m.insert("command_line".into(), args.join(" "));
    m
}

/// `jobs_csv`: Batsim exports to `out` (`run`), so a jobs.csv it did not
/// write is written from the broker's records (pods.csv, streamed during
/// the run and finished here).
pub(super) fn write_outputs(
    out: &Path,
    broker: &mut Broker,
    summary: &record::Summary,
    jobs_csv: bool,
) -> anyhow::Result<()> {
    let ctx = |name: &str| format!("writing {}", out.join(name).display());
    broker
        .finish_records()
        .with_context(|| ctx("pods.csv, nodes.csv and decisions.jsonl"))?;
    if jobs_csv {
        adopt_batsim_outputs(out).with_context(|| ctx("Batsim's outputs"))?;
    }
    // Batsim writes jobs.csv when it ends; one that died did not.
    if jobs_csv && !wrote(&out.join("jobs.csv")) {
        let pods = record::read_pods_csv(&out.join("pods.csv"))
            .with_context(|| format!("reading {}", out.join("pods.csv").display()))?;
        write_jobs_csv(&out.join("jobs.csv"), &pods).with_context(|| ctx("jobs.csv"))?;
    }
    std::fs::write(
        out.join("summary.json"),
        serde_json::to_string_pretty(summary)? + "\n",
    )
    .with_context(|| ctx("summary.json"))?;
    Ok(())
}

/// Real Batsim names its outputs `<export prefix>_jobs.csv`, … (`src/export.cpp`
/// appends `_`), so with the prefix `DIR/` they land as `DIR/_jobs.csv`:
/// they take the names the stand-in gives them (`DIR/jobs.csv`, …). A file
/// Batsim left empty is not its output.
pub(super) fn adopt_batsim_outputs(out: &Path) -> std::io::Result<()> {
    const OUTPUTS: [&str; 6] = [
        "jobs.csv",
        "schedule.csv",
        "machine_states.csv",
        "schedule.trace",
        "consumed_energy.csv",
        "pstate_changes.csv",
    ];
    for name in OUTPUTS {
        let from = out.join(format!("_{name}"));
        if !from.exists() {
            continue;
        }
        if wrote(&from) {
            std::fs::rename(&from, out.join(name))?;
        } else {
            std::fs::remove_file(&from)?;
        }
    }
    Ok(())
}

/// Whether a file exists with something in it.
pub(super) fn wrote(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.len() > 0)
}

/// jobs.csv in Batsim's layout from the broker's records, for a Batsim
/// that ended without writing it: the jobs that reached a final state, as
/// far as the broker knows them (no profile, requested time -1).
pub(super) fn write_jobs_csv(path: &Path, pods: &[record::PodRecord]) -> std::io::Result<()> {
    use batsim::protocol::JobState;
    use batsim::standin::output::{job_line, JobRow, JOBS_HEADER};
    let mut text = format!("{JOBS_HEADER}\n");
    for p in pods {
        let rejected = p.outcome.starts_with("REJECTED");
        let (starting_time, execution_time) = match (p.started, p.finished) {
            (Some(s), Some(f)) if !rejected => (Some(s), Some(f - s)),
            _ if rejected => (None, None),
            _ => continue,
        };
        let state = if rejected {
            JobState::Rejected
        } else if p.outcome == "PREEMPTED" {
            JobState::CompletedKilled
        } else {
            JobState::parse(&p.outcome)
        };
        let row = JobRow {
            job_id: p
                .job_id
                .split_once('!')
                .map_or(&*p.job_id, |(_, j)| j)
                .into(),
            workload_name: p.job_id.split_once('!').map_or("", |(w, _)| w).into(),
            profile: String::new(),
            submission_time: p.created,
            requested_number_of_resources: 1,
            requested_time: -1.0,
            final_state: state,
            starting_time,
            execution_time,
            allocated_resources: String::new(),
            metadata: String::new(),
        };
        text += &job_line(&row);
        text.push('\n');
    }
    std::fs::write(path, text)
}
