//! Batsim's output files, in its exact layout: `<prefix>jobs.csv` (one row
//! per job that reached a final state, in the order Batsim learned of it) and
//! `<prefix>schedule.csv` (one header line, one value line, columns in
//! alphabetical order as Batsim's `std::map` writes them).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::protocol::JobState;

/// One finished (or rejected) job, as a jobs.csv row.
#[derive(Debug, Clone)]
pub struct JobRow {
    pub job_id: String,
    pub workload_name: String,
    pub profile: String,
    pub submission_time: f64,
    pub requested_number_of_resources: u32,
    /// -1 when the job has no walltime.
    pub requested_time: f64,
    pub final_state: JobState,
    /// `None` for rejected jobs.
    pub starting_time: Option<f64>,
    pub execution_time: Option<f64>,
    pub allocated_resources: String,
    pub metadata: String,
}

impl JobRow {
    pub fn finish_time(&self) -> Option<f64> {
        Some(self.starting_time? + self.execution_time?)
    }
    pub fn waiting_time(&self) -> Option<f64> {
        Some(self.starting_time? - self.submission_time)
    }
    pub fn turnaround_time(&self) -> Option<f64> {
        Some(self.finish_time()? - self.submission_time)
    }
    /// Batsim replaces a zero runtime by 1e-5 for the stretch.
    pub fn stretch(&self) -> Option<f64> {
        let runtime = self.execution_time?;
        let runtime = if runtime == 0.0 { 1e-5 } else { runtime };
        Some(self.turnaround_time()? / runtime)
    }
}

pub const JOBS_HEADER: &str = "job_id,workload_name,profile,submission_time,\
requested_number_of_resources,requested_time,success,final_state,starting_time,\
execution_time,finish_time,waiting_time,turnaround_time,stretch,allocated_resources,\
consumed_energy,metadata";

fn f6(x: f64) -> String {
    format!("{x:.6}")
}

fn opt6(x: Option<f64>) -> String {
    x.map(f6).unwrap_or_default()
}

/// Formats one jobs.csv line (without newline).
pub fn job_line(r: &JobRow) -> String {
    let rejected = r.starting_time.is_none();
    format!(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},\"{}\"",
        r.job_id,
        r.workload_name,
        r.profile,
        f6(r.submission_time),
        r.requested_number_of_resources,
        f6(r.requested_time),
        u8::from(r.final_state.is_success()),
        r.final_state.as_str(),
        opt6(r.starting_time),
        opt6(r.execution_time),
        opt6(r.finish_time()),
        opt6(r.waiting_time()),
        opt6(r.turnaround_time()),
        opt6(r.stretch()),
        r.allocated_resources,
        if rejected { String::new() } else { f6(-1.0) },
        r.metadata,
    )
}

/// Aggregates over jobs.csv rows, as Batsim's schedule.csv reports them.
#[derive(Debug, Clone, Default)]
pub struct ScheduleStats {
    pub nb_jobs: u64,
    pub nb_jobs_finished: u64,
    pub nb_jobs_success: u64,
    pub nb_jobs_killed: u64,
    pub nb_jobs_rejected: u64,
    pub makespan: f64,
    pub max_turnaround_time: f64,
    pub max_waiting_time: f64,
    pub max_slowdown: f64,
    sum_waiting: f64,
    sum_turnaround: f64,
    sum_slowdown: f64,
}

impl ScheduleStats {
    pub fn add(&mut self, r: &JobRow) {
        self.nb_jobs += 1;
        if r.starting_time.is_none() {
            self.nb_jobs_rejected += 1;
            return;
        }
        self.nb_jobs_finished += 1;
        if r.final_state.is_success() {
            self.nb_jobs_success += 1;
        } else {
            self.nb_jobs_killed += 1;
        }
        let (w, t, s) = (
            r.waiting_time().unwrap_or(0.0),
            r.turnaround_time().unwrap_or(0.0),
            r.stretch().unwrap_or(0.0),
        );
        self.sum_waiting += w;
        self.sum_turnaround += t;
        self.sum_slowdown += s;
        self.max_waiting_time = self.max_waiting_time.max(w);
        self.max_turnaround_time = self.max_turnaround_time.max(t);
        self.max_slowdown = self.max_slowdown.max(s);
        self.makespan = self.makespan.max(r.finish_time().unwrap_or(0.0));
    }

    /// Batsim divides by every written job, rejected ones included.
    fn mean(&self, sum: f64) -> f64 {
        if self.nb_jobs == 0 {
            0.0
        } else {
            sum / self.nb_jobs as f64
        }
    }
    pub fn mean_waiting_time(&self) -> f64 {
        self.mean(self.sum_waiting)
    }
    pub fn mean_turnaround_time(&self) -> f64 {
        self.mean(self.sum_turnaround)
    }
    pub fn mean_slowdown(&self) -> f64 {
        self.mean(self.sum_slowdown)
    }
    pub fn success_rate(&self) -> f64 {
        self.mean(self.nb_jobs_success as f64)
    }
}

/// Time the machines spent in each state, summed over machines.
#[derive(Debug, Clone, Default)]
pub struct MachineTimes {
    pub computing: f64,
    pub idle: f64,
}

/// Writes jobs.csv as jobs end (buffered, flushed at the end or on error)
/// and schedule.csv at the end.
pub struct OutputWriter {
    jobs: Option<BufWriter<File>>,
    prefix: Option<PathBuf>,
    pub stats: ScheduleStats,
}

impl OutputWriter {
    /// `prefix` is Batsim's `-e`: files are `<prefix>jobs.csv` and
    /// `<prefix>schedule.csv`; the directory must exist, as with Batsim.
    /// `None` writes nothing (statistics are still kept).
    pub fn new(prefix: Option<&Path>) -> std::io::Result<Self> {
        let jobs = match prefix {
            None => None,
            Some(p) => {
                let path = suffixed(p, "jobs.csv");
                let mut w = BufWriter::new(File::create(&path).map_err(|e| {
                    std::io::Error::new(
                        e.kind(),
                        format!(
                            "cannot create {}: {e} (does the directory exist?)",
                            path.display()
                        ),
                    )
                })?);
                writeln!(w, "{JOBS_HEADER}")?;
                Some(w)
            }
        };
        Ok(Self {
            jobs,
            prefix: prefix.map(Path::to_path_buf),
            stats: ScheduleStats::default(),
        })
    }

    pub fn job(&mut self, row: &JobRow) -> std::io::Result<()> {
        self.stats.add(row);
        if let Some(w) = &mut self.jobs {
            writeln!(w, "{}", job_line(row))?;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        if let Some(w) = &mut self.jobs {
            w.flush()?;
        }
        Ok(())
    }

    /// Writes schedule.csv and flushes jobs.csv.
    pub fn finish(
        &mut self,
        machines: usize,
        times: &MachineTimes,
        scheduling_time: f64,
        simulation_time: f64,
    ) -> std::io::Result<()> {
        self.flush()?;
        let Some(prefix) = &self.prefix else {
            return Ok(());
        };
        let s = &self.stats;
        // Alphabetical, as Batsim's std::map orders them.
        let cols: Vec<(&str, String)> = vec![
            (
                "batsim_version",
                format!("4.2.1-batkube-{}", env!("CARGO_PKG_VERSION")),
            ),
            ("consumed_joules", f6(0.0)),
            ("makespan", f6(s.makespan)),
            ("max_slowdown", f6(s.max_slowdown)),
            ("max_turnaround_time", f6(s.max_turnaround_time)),
            ("max_waiting_time", f6(s.max_waiting_time)),
            ("mean_slowdown", f6(s.mean_slowdown())),
            ("mean_turnaround_time", f6(s.mean_turnaround_time())),
            ("mean_waiting_time", f6(s.mean_waiting_time())),
            ("nb_computing_machines", machines.to_string()),
            ("nb_grouped_switches", "0".into()),
            ("nb_jobs", s.nb_jobs.to_string()),
            ("nb_jobs_finished", s.nb_jobs_finished.to_string()),
            ("nb_jobs_killed", s.nb_jobs_killed.to_string()),
            ("nb_jobs_rejected", s.nb_jobs_rejected.to_string()),
            ("nb_jobs_success", s.nb_jobs_success.to_string()),
            ("nb_machine_switches", "0".into()),
            ("scheduling_time", f6(scheduling_time)),
            ("simulation_time", f6(simulation_time)),
            ("success_rate", f6(s.success_rate())),
            ("time_computing", f6(times.computing)),
            ("time_idle", f6(times.idle)),
            ("time_sleeping", f6(0.0)),
            ("time_switching_off", f6(0.0)),
            ("time_switching_on", f6(0.0)),
            ("time_unavailable", f6(0.0)),
        ];
        let path = suffixed(prefix, "schedule.csv");
        let mut w = BufWriter::new(File::create(&path)?);
        let header: Vec<&str> = cols.iter().map(|(k, _)| *k).collect();
        let values: Vec<&str> = cols.iter().map(|(_, v)| v.as_str()).collect();
        writeln!(w, "{}", header.join(","))?;
        writeln!(w, "{}", values.join(","))?;
        w.flush()
    }
}

/// `<prefix><name>`: Batsim concatenates, so `out/` gives `out/jobs.csv`.
pub fn suffixed(prefix: &Path, name: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(name);
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_in_batsim_layout() {
        let r = JobRow {
            job_id: "1".into(),
            workload_name: "w0".into(),
            profile: "delay10".into(),
            submission_time: 0.0,
            requested_number_of_resources: 1,
            requested_time: 100.0,
            final_state: JobState::CompletedSuccessfully,
            starting_time: Some(0.0),
            execution_time: Some(10.0),
            allocated_resources: "0".into(),
            metadata: String::new(),
        };
        assert_eq!(
            job_line(&r),
            "1,w0,delay10,0.000000,1,100.000000,1,COMPLETED_SUCCESSFULLY,0.000000,10.000000,\
             10.000000,0.000000,10.000000,1.000000,0,-1.000000,\"\""
        );
        let rej = JobRow {
            final_state: JobState::Rejected,
            starting_time: None,
            execution_time: None,
            allocated_resources: String::new(),
            ..r
        };
        assert_eq!(
            job_line(&rej),
            "1,w0,delay10,0.000000,1,100.000000,0,REJECTED,,,,,,,,,\"\""
        );
    }
}
