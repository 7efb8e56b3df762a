//! A run's output directory read back for the report: whatever of
//! `summary.json`, `pods.csv`, `nodes.csv`, `timeline.csv`, `jobs.csv` and
//! `decisions.jsonl` (`--explain`: the decision trail) and `queues.csv`
//! (per-queue allocation) is there, tolerantly. A missing file is one line in [`RunData::missing`]
//! saying what the page lacks without it; a row that cannot be read is one
//! line in [`RunData::problems`] (file, line, reason) and is left out. The
//! report of a run that was killed half-way, or of a directory that is not
//! a run's at all, is still a page.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One pod (a row of pods.csv, or of jobs.csv when pods.csv is missing).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pod {
    /// Batsim's job id (`w0!12`).
    pub job: String,
    pub name: String,
    /// Index into [`RunData::machines`].
    pub node: Option<u32>,
    pub created: f64,
    pub bound: Option<f64>,
    pub started: Option<f64>,
    pub finished: Option<f64>,
    pub attempts: u32,
    pub reason: String,
    pub outcome: String,
    pub cpu_m: i64,
    pub memory: i64,
    /// The gang (empty for a job of one pod).
    pub group: String,
    /// Index into [`RunData::queue_names`]: the queue its job counts in.
    pub queue: Option<u32>,
}

/// One explained scheduling attempt (a line of decisions.jsonl).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attempt {
    pub pod: String,
    pub time: f64,
    /// The scheduler's number for it, when it gives one.
    pub attempt: Option<u64>,
    /// The node chosen, or none (the attempt failed).
    pub node: Option<String>,
    pub reason: Option<String>,
    /// Each node the filters looked at, in name order: `None` when it
    /// passed every filter, else the refusing plugin and its message.
    pub filter: Vec<(String, Option<(String, String)>)>,
    /// The score plugins, in name order.
    pub plugins: Vec<String>,
    /// Each scored node: raw and final scores, one per plugin of `plugins`.
    pub scores: Vec<(String, Vec<i64>, Vec<i64>)>,
}

/// decisions.jsonl beyond this many bytes is left out of the page (the
/// attempts before it are shown; the file has every one).
pub const MAX_DECISION_BYTES: u64 = 12 * 1024 * 1024;

/// A machine (a Kubernetes node, a row of the Gantt chart).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Machine {
    pub name: String,
    /// Millicores, as nodes.csv first gives it (0: unknown).
    pub cpu_m: i64,
}

/// A total over the cluster that changes at instants: (time, value) from
/// that time on, in time order.
pub type Steps = Vec<(f64, f64)>;

/// One queue over the run (queues.csv): each a step function in time order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueSeries {
    /// Cpu allocated to its jobs' pods, in cpus.
    pub cpu: Steps,
    /// Its cpu quota or capability, in cpus (empty: none known).
    pub quota: Steps,
    /// Jobs waiting to start.
    pub pending: Steps,
    /// Jobs running.
    pub running: Steps,
}

/// What the report knows of a run.
#[derive(Debug, Default)]
pub struct RunData {
    pub dir: PathBuf,
    /// `summary.json` as written (any fields).
    pub summary: Option<serde_json::Value>,
    pub pods: Vec<Pod>,
    /// In natural order of their names (`node-2` before `node-10`).
    pub machines: Vec<Machine>,
    /// Periods a machine was unavailable: (machine, from, to).
    pub unavailable: Vec<(u32, f64, f64)>,
    /// Allocated cpu over allocatable cpu of the whole cluster (nodes.csv).
    pub utilisation: Steps,
    /// The bars came from jobs.csv (no pods.csv): machines are Batsim's
    /// resource ids, no scheduling details.
    pub from_jobs_csv: bool,
    /// The last instant anything is known to have happened.
    pub end: f64,
    /// One line per expected file that is not there.
    pub missing: Vec<String>,
    /// One line per row or file that could not be read (capped).
    pub problems: Vec<String>,
    /// Rows left out beyond those named in `problems`.
    pub more_problems: usize,
    /// Files in the directory: (name, bytes).
    pub files: Vec<(String, u64)>,
    /// The explained attempts (decisions.jsonl), in the file's order.
    pub decisions: Vec<Attempt>,
    /// decisions.jsonl is there (even empty).
    pub explained: bool,
    /// Attempts of decisions.jsonl left out of the page (over
    /// [`MAX_DECISION_BYTES`]).
    pub decisions_left_out: usize,
    /// The queues jobs counted in (pods.csv's `queue`, queues.csv), in
    /// natural order.
    pub queue_names: Vec<String>,
    /// Per queue of `queue_names`, from queues.csv (empty series when it
    /// has no row there).
    pub queues: Vec<QueueSeries>,
}

const MAX_PROBLEMS: usize = 8;

/// Orders names as people do: digit runs by value (`node-2` < `node-10`).
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return std::cmp::Ordering::Equal,
            (None, _) => return std::cmp::Ordering::Less,
            (_, None) => return std::cmp::Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let da = a.iter().take_while(|c| c.is_ascii_digit()).count();
                let db = b.iter().take_while(|c| c.is_ascii_digit()).count();
                let (na, nb) = (&a[..da], &b[..db]);
                // Without leading zeros, the longer run is the larger number.
                let ta = &na[na.iter().take_while(|&&c| c == b'0').count()..];
                let tb = &nb[nb.iter().take_while(|&&c| c == b'0').count()..];
                let ord = ta.len().cmp(&tb.len()).then(ta.cmp(tb)).then(da.cmp(&db));
                if ord != std::cmp::Ordering::Equal {
                    return ord;
                }
                a = &a[da..];
                b = &b[db..];
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(y);
                }
                a = &a[1..];
                b = &b[1..];
            }
        }
    }
}

impl RunData {
    fn problem(&mut self, line: String) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(line);
        } else {
            self.more_problems += 1;
        }
    }

    /// The next record of `r` into `rec`: `None` at the end, `Some(None)`
    /// for a row that cannot be read (named in `problems`), else its line.
    fn next_row(
        &mut self,
        name: &str,
        r: &mut csv::Reader<std::fs::File>,
        rec: &mut csv::StringRecord,
    ) -> Option<Option<u64>> {
        let line = r.position().line();
        match r.read_record(rec) {
            Ok(false) => None,
            Ok(true) => Some(Some(line)),
            Err(e) => {
                self.problem(format!("{name} line {line}: {e}"));
                Some(None)
            }
        }
    }

    /// Whatever of a run's outputs `dir` holds.
    pub fn read(dir: &Path) -> RunData {
        let mut d = RunData {
            dir: dir.to_path_buf(),
            ..Default::default()
        };
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                if let Ok(m) = e.metadata() {
                    if m.is_file() {
                        d.files
                            .push((e.file_name().to_string_lossy().into_owned(), m.len()));
                    }
                }
            }
        }
        d.files.sort_by(|a, b| a.0.cmp(&b.0));
        let mut names = MachineNames::default();
        let mut queues = MachineNames::default();
        d.read_summary();
        d.read_nodes(&mut names);
        let pods_csv = dir.join("pods.csv");
        if pods_csv.is_file() {
            d.read_pods(&pods_csv, &mut names, &mut queues);
        } else if dir.join("jobs.csv").is_file() {
            d.missing.push(
                "pods.csv: not found; bars drawn from jobs.csv (machines by Batsim resource id, \
                 no binding times, attempts or reasons)"
                    .into(),
            );
            d.read_jobs(&dir.join("jobs.csv"), &mut names);
        } else {
            d.missing
                .push("pods.csv: not found; no Gantt chart, no pod table, no distributions".into());
        }
        if !dir.join("jobs.csv").is_file() {
            d.missing
                .push("jobs.csv: not found (Batsim's own record of the jobs)".into());
        }
        let down = d.read_timeline(&mut names);
        d.read_decisions(&dir.join("decisions.jsonl"), MAX_DECISION_BYTES);
        let series = d.read_queues(&mut queues);
        // Queues in natural order, as machines below.
        let mut qorder: Vec<u32> = (0..queues.list.len() as u32).collect();
        qorder.sort_by(|&a, &b| natural_cmp(&queues.list[a as usize], &queues.list[b as usize]));
        let mut qremap = vec![0u32; qorder.len()];
        for (new, &old) in qorder.iter().enumerate() {
            qremap[old as usize] = new as u32;
        }
        d.queue_names = qorder
            .iter()
            .map(|&o| queues.list[o as usize].clone())
            .collect();
        let mut series: HashMap<u32, QueueSeries> = series;
        d.queues = qorder
            .iter()
            .map(|o| series.remove(o).unwrap_or_default())
            .collect();
        for p in &mut d.pods {
            p.queue = p.queue.map(|q| qremap[q as usize]);
        }
        // Machines in natural order; indices given while reading remapped.
        let mut order: Vec<u32> = (0..names.list.len() as u32).collect();
        order.sort_by(|&a, &b| natural_cmp(&names.list[a as usize], &names.list[b as usize]));
        let mut remap = vec![0u32; order.len()];
        for (new, &old) in order.iter().enumerate() {
            remap[old as usize] = new as u32;
        }
        d.machines = order
            .iter()
            .map(|&old| Machine {
                name: names.list[old as usize].clone(),
                cpu_m: names.cpu.get(&old).copied().unwrap_or(0),
            })
            .collect();
        for p in &mut d.pods {
            p.node = p.node.map(|n| remap[n as usize]);
        }
        let mut end: f64 = 0.0;
        if let Some(s) = &d.summary {
            for k in ["end_time", "makespan"] {
                if let Some(x) = s.get(k).and_then(|v| v.as_f64()) {
                    end = end.max(x);
                }
            }
        }
        for p in &d.pods {
            for t in [Some(p.created), p.bound, p.started, p.finished]
                .into_iter()
                .flatten()
            {
                end = end.max(t);
            }
        }
        if let Some(&(t, _)) = d.utilisation.last() {
            end = end.max(t);
        }
        for q in &d.queues {
            if let Some(&(t, _)) = q.cpu.last() {
                end = end.max(t);
            }
        }
        for &(_, _, t) in &down {
            if t.is_finite() {
                end = end.max(t);
            }
        }
        d.end = end;
        d.unavailable = down
            .into_iter()
            .map(|(m, a, b)| (remap[m as usize], a, if b.is_finite() { b } else { end }))
            .collect();
        d.unavailable
            .sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        d
    }

    /// decisions.jsonl, up to `budget` bytes of lines.
    pub fn read_decisions(&mut self, path: &Path, budget: u64) {
        use std::io::BufRead;
        let Ok(f) = std::fs::File::open(path) else {
            return;
        };
        self.explained = true;
        let mut used = 0u64;
        for (k, line) in std::io::BufReader::new(f).lines().enumerate() {
            let Ok(line) = line else {
                self.problem(format!("decisions.jsonl line {}: not text", k + 1));
                break;
            };
            if line.trim().is_empty() {
                continue;
            }
            used += line.len() as u64 + 1;
            if used > budget {
                self.decisions_left_out += 1;
                continue;
            }
            match serde_json::from_str::<serde_json::Value>(&line)
                .map_err(|e| e.to_string())
                .and_then(|v| attempt_from(&v))
            {
                Ok(a) => self.decisions.push(a),
                Err(why) => self.problem(format!("decisions.jsonl line {}: {why}", k + 1)),
            }
        }
        if self.decisions_left_out > 0 {
            self.missing.push(format!(
                "decisions.jsonl: the trail of {} later attempts is not in the page (over {} MiB; the file has it)",
                self.decisions_left_out,
                budget / (1024 * 1024)
            ));
        }
    }

    fn read_summary(&mut self) {
        let path = self.dir.join("summary.json");
        match std::fs::read_to_string(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => self.missing.push(
                "summary.json: not found; how the run ended, its statistics and flags are unknown"
                    .into(),
            ),
            Err(e) => self.problem(format!("summary.json: cannot be read: {e}")),
            Ok(text) => match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(v) if v.is_object() => self.summary = Some(v),
                Ok(_) => self.problem("summary.json: not a JSON object".into()),
                Err(e) => self.problem(format!(
                    "summary.json:{}:{}: not valid JSON: {e}",
                    e.line(),
                    e.column()
                )),
            },
        }
    }

    /// A CSV file's reader and the index of each wanted column, or why not.
    fn open_csv(
        &mut self,
        name: &str,
        path: &Path,
        wanted: &[&str],
    ) -> Option<(csv::Reader<std::fs::File>, Vec<Option<usize>>)> {
        let mut r = match csv::ReaderBuilder::new().flexible(true).from_path(path) {
            Ok(r) => r,
            Err(e) => {
                self.problem(format!("{name}: cannot be read: {e}"));
                return None;
            }
        };
        let header = match r.headers() {
            Ok(h) => h.clone(),
            Err(e) => {
                self.problem(format!("{name}: no header line: {e}"));
                return None;
            }
        };
        let cols = wanted
            .iter()
            .map(|w| header.iter().position(|h| h == *w))
            .collect();
        Some((r, cols))
    }

    fn read_pods(&mut self, path: &Path, names: &mut MachineNames, queues: &mut MachineNames) {
        const COLS: [&str; 14] = [
            "job_id",
            "pod",
            "node",
            "created",
            "bound",
            "started",
            "finished",
            "attempts",
            "last_unschedulable_reason",
            "outcome",
            "cpu_request_m",
            "memory_request",
            "group",
            "queue",
        ];
        let Some((mut r, cols)) = self.open_csv("pods.csv", path, &COLS) else {
            return;
        };
        for required in [0usize, 3] {
            if cols[required].is_none() {
                self.problem(format!(
                    "pods.csv: no `{}` column in the header; is it a batkube pods.csv?",
                    COLS[required]
                ));
                return;
            }
        }
        let mut rec = csv::StringRecord::new();
        while let Some(row) = self.next_row("pods.csv", &mut r, &mut rec) {
            let Some(line) = row else { continue };
            let get = |i: usize| cols[i].and_then(|c| rec.get(c)).unwrap_or("");
            match pod_from_row(&get) {
                Ok(mut p) => {
                    let node = get(2);
                    if !node.is_empty() {
                        p.node = Some(names.id(node));
                    }
                    let queue = get(13);
                    if !queue.is_empty() {
                        p.queue = Some(queues.id(queue));
                    }
                    self.pods.push(p);
                }
                Err(why) => self.problem(format!("pods.csv line {line}: {why}")),
            }
        }
    }

    /// Bars from Batsim's jobs.csv: one pod per allocated resource.
    fn read_jobs(&mut self, path: &Path, names: &mut MachineNames) {
        const COLS: [&str; 7] = [
            "job_id",
            "workload_name",
            "submission_time",
            "final_state",
            "starting_time",
            "finish_time",
            "allocated_resources",
        ];
        let Some((mut r, cols)) = self.open_csv("jobs.csv", path, &COLS) else {
            return;
        };
        self.from_jobs_csv = true;
        let mut rec = csv::StringRecord::new();
        while let Some(row) = self.next_row("jobs.csv", &mut r, &mut rec) {
            let Some(line) = row else { continue };
            let get = |i: usize| cols[i].and_then(|c| rec.get(c)).unwrap_or("");
            let job = match get(1) {
                "" => get(0).to_string(),
                w => format!("{w}!{}", get(0)),
            };
            let created = match number(get(2), "submission_time") {
                Ok(Some(x)) => x,
                Ok(None) => 0.0,
                Err(why) => {
                    self.problem(format!("jobs.csv line {line}: {why}"));
                    continue;
                }
            };
            let (started, finished) = match (
                number(get(4), "starting_time"),
                number(get(5), "finish_time"),
            ) {
                (Ok(s), Ok(f)) => (s.filter(|&x| x >= 0.0), f.filter(|&x| x >= 0.0)),
                (Err(why), _) | (_, Err(why)) => {
                    self.problem(format!("jobs.csv line {line}: {why}"));
                    continue;
                }
            };
            let alloc = get(6).trim();
            let resources = match batsim::IntervalSet::parse(alloc) {
                _ if alloc.is_empty() => Vec::new(),
                Ok(set) => set.iter().collect::<Vec<_>>(),
                Err(e) => {
                    self.problem(format!(
                        "jobs.csv line {line}: allocated_resources {:?}: {e}",
                        get(6)
                    ));
                    continue;
                }
            };
            let gang = resources.len() > 1;
            let base = Pod {
                job: job.clone(),
                name: job.replace('!', "-"),
                created,
                bound: started,
                started,
                finished,
                attempts: 0,
                outcome: get(3).to_string(),
                group: if gang {
                    job.replace('!', "-")
                } else {
                    String::new()
                },
                ..Default::default()
            };
            if resources.is_empty() {
                self.pods.push(base);
                continue;
            }
            for (k, rid) in resources.iter().enumerate() {
                let mut p = base.clone();
                if gang {
                    p.name = format!("{}-{k}", base.name);
                }
                p.node = Some(names.id(&format!("resource {rid}")));
                self.pods.push(p);
            }
        }
    }

    /// nodes.csv: each node's capacity and the cluster's allocated share
    /// of cpu over time.
    fn read_nodes(&mut self, names: &mut MachineNames) {
        let path = self.dir.join("nodes.csv");
        if !path.is_file() {
            self.missing.push(
                "nodes.csv: not found; no utilisation over time, machine capacities unknown".into(),
            );
            return;
        }
        const COLS: [&str; 4] = ["time", "node", "cpu_used_m", "cpu_allocatable_m"];
        let Some((mut r, cols)) = self.open_csv("nodes.csv", &path, &COLS) else {
            return;
        };
        if cols.iter().any(Option::is_none) {
            self.problem(
                "nodes.csv: the header lacks time, node, cpu_used_m or cpu_allocatable_m".into(),
            );
            return;
        }
        let cols: Vec<usize> = cols.into_iter().flatten().collect();
        let mut rows: Vec<(f64, u32, i64, i64)> = Vec::new();
        let mut rec = csv::ByteRecord::new();
        loop {
            let line = r.position().line();
            match r.read_byte_record(&mut rec) {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) => {
                    self.problem(format!("nodes.csv line {line}: {e}"));
                    continue;
                }
            }
            let text =
                |i: usize| std::str::from_utf8(rec.get(cols[i]).unwrap_or(b"")).unwrap_or("");
            let (Ok(t), Ok(used), Ok(alloc)) = (
                text(0).parse::<f64>(),
                text(2).parse::<i64>(),
                text(3).parse::<i64>(),
            ) else {
                self.problem(format!(
                    "nodes.csv line {line}: time, cpu_used_m or cpu_allocatable_m is not a number"
                ));
                continue;
            };
            let node = names.id(text(1));
            names.cpu.entry(node).or_insert(alloc);
            rows.push((t.max(0.0), node, used, alloc));
        }
        rows.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
        let mut state: HashMap<u32, (i64, i64)> = HashMap::new();
        let (mut used, mut alloc) = (0i64, 0i64);
        for &(t, node, u, a) in &rows {
            let old = state.insert(node, (u, a)).unwrap_or((0, 0));
            used += u - old.0;
            alloc += a - old.1;
            let v = if alloc > 0 {
                used as f64 / alloc as f64
            } else {
                0.0
            };
            match self.utilisation.last_mut() {
                Some(last) if last.0 == t => last.1 = v,
                _ => self.utilisation.push((t, v)),
            }
        }
    }

    /// Unavailable periods: the `machine-unavailable` / `machine-available`
    /// rows Batsim's events leave in timeline.csv. An open period ends
    /// with the run (`f64::INFINITY` until the end is known).
    fn read_timeline(&mut self, names: &mut MachineNames) -> Vec<(u32, f64, f64)> {
        let path = self.dir.join("timeline.csv");
        if !path.is_file() {
            self.missing
                .push("timeline.csv: not found; unavailable periods of machines unknown".into());
            return Vec::new();
        }
        const COLS: [&str; 4] = ["time", "source", "verb", "name"];
        let Some((mut r, cols)) = self.open_csv("timeline.csv", &path, &COLS) else {
            return Vec::new();
        };
        if cols.iter().any(Option::is_none) {
            self.problem("timeline.csv: the header lacks time, source, verb or name".into());
            return Vec::new();
        }
        let cols: Vec<usize> = cols.into_iter().flatten().collect();
        let mut open: HashMap<u32, f64> = HashMap::new();
        let mut out = Vec::new();
        let mut rec = csv::ByteRecord::new();
        loop {
            let line = r.position().line();
            match r.read_byte_record(&mut rec) {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) => {
                    self.problem(format!("timeline.csv line {line}: {e}"));
                    continue;
                }
            }
            // Most rows are API changes: look at the verb before anything else.
            let verb = rec.get(cols[2]).unwrap_or(b"");
            let down = match verb {
                b"machine-unavailable" => true,
                b"machine-available" => false,
                _ => continue,
            };
            let text =
                |i: usize| std::str::from_utf8(rec.get(cols[i]).unwrap_or(b"")).unwrap_or("");
            if text(1) != "batsim" {
                continue;
            }
            let Ok(t) = text(0).parse::<f64>() else {
                self.problem(format!("timeline.csv line {line}: time is not a number"));
                continue;
            };
            let node = names.id(text(3));
            if down {
                open.entry(node).or_insert(t);
            } else if let Some(from) = open.remove(&node) {
                out.push((node, from, t));
            }
        }
        out.extend(open.into_iter().map(|(n, from)| (n, from, f64::INFINITY)));
        out
    }
}

impl RunData {
    /// queues.csv, when there is one: each queue's series, by its index in
    /// `queues` (the names pods.csv gave first). Missing only matters when
    /// pods name queues or the summary counts some.
    fn read_queues(&mut self, queues: &mut MachineNames) -> HashMap<u32, QueueSeries> {
        let mut out: HashMap<u32, QueueSeries> = HashMap::new();
        let path = self.dir.join("queues.csv");
        if !path.is_file() {
            let summarised = self
                .summary
                .as_ref()
                .and_then(|s| s.get("queues"))
                .and_then(|q| q.as_object())
                .is_some_and(|q| !q.is_empty());
            if summarised || !queues.list.is_empty() {
                self.missing
                    .push("queues.csv: not found; no allocation per queue over time".into());
            }
            return out;
        }
        const COLS: [&str; 5] = ["time", "queue", "pending", "running", "cpu_allocated_m"];
        let Some((mut r, cols)) = self.open_csv("queues.csv", &path, &COLS) else {
            return out;
        };
        if cols.iter().any(Option::is_none) {
            self.problem(
                "queues.csv: the header lacks time, queue, pending, running or cpu_allocated_m"
                    .into(),
            );
            return out;
        }
        let quota_col = r
            .headers()
            .ok()
            .and_then(|h| h.iter().position(|c| c == "cpu_quota_m"));
        let cols: Vec<usize> = cols.into_iter().flatten().collect();
        let mut rec = csv::StringRecord::new();
        while let Some(row) = self.next_row("queues.csv", &mut r, &mut rec) {
            let Some(line) = row else { continue };
            let get = |i: usize| rec.get(cols[i]).unwrap_or("");
            let row = (|| -> Result<_, String> {
                let t = number(get(0), "time")?.ok_or("time is empty")?;
                let n = |i: usize, c: &str| number(get(i), c).map(|x| x.unwrap_or(0.0));
                let quota = match quota_col.and_then(|c| rec.get(c)) {
                    Some(q) => number(q, "cpu_quota_m")?,
                    None => None,
                };
                Ok((
                    t,
                    n(2, "pending")?,
                    n(3, "running")?,
                    n(4, "cpu_allocated_m")? / 1000.0,
                    quota.map(|q| q / 1000.0),
                ))
            })();
            let (t, pending, running, cpu, quota) = match row {
                Ok(r) => r,
                Err(why) => {
                    self.problem(format!("queues.csv line {line}: {why}"));
                    continue;
                }
            };
            if get(1).is_empty() {
                self.problem(format!("queues.csv line {line}: queue is empty"));
                continue;
            }
            let s = out.entry(queues.id(get(1))).or_default();
            for (steps, v) in [
                (&mut s.pending, pending),
                (&mut s.running, running),
                (&mut s.cpu, cpu),
            ] {
                push_step(steps, t, v);
            }
            if let Some(q) = quota {
                push_step(&mut s.quota, t, q);
            } else if !s.quota.is_empty() {
                push_step(&mut s.quota, t, 0.0);
            }
        }
        out
    }
}

/// Appends (t, v) to a step function, replacing a value at the same instant
/// and skipping one that does not change it.
fn push_step(steps: &mut Steps, t: f64, v: f64) {
    match steps.last_mut() {
        Some(last) if last.0 == t => last.1 = v,
        Some(last) if last.1 == v => {}
        _ => steps.push((t, v)),
    }
}

/// Machine names to indices in the order they are first met.
#[derive(Default)]
struct MachineNames {
    list: Vec<String>,
    index: HashMap<String, u32>,
    cpu: HashMap<u32, i64>,
}

impl MachineNames {
    fn id(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.list.len() as u32;
        self.list.push(name.to_string());
        self.index.insert(name.to_string(), i);
        i
    }
}

/// A number column: empty is `None`.
/// An attempt from its line of decisions.jsonl (see `broker::decisions`).
fn attempt_from(v: &serde_json::Value) -> Result<Attempt, String> {
    use serde_json::Value;
    let pod = v["pod"].as_str().ok_or("no `pod`")?.to_string();
    let time = v["time"].as_f64().ok_or("no `time`")?;
    let text = |x: &Value| x.as_str().filter(|s| !s.is_empty()).map(str::to_string);
    // A score as the simulator writes it: a decimal string.
    let score = |x: &Value| {
        x.as_str()
            .and_then(|s| s.parse::<i64>().ok())
            .or_else(|| x.as_i64())
            .unwrap_or(0)
    };
    let mut filter = Vec::new();
    if let Some(nodes) = v["filter"].as_object() {
        for (node, plugins) in nodes {
            let refused = plugins
                .as_object()
                .into_iter()
                .flatten()
                .find(|(_, verdict)| verdict.as_str() != Some("passed"))
                .map(|(p, verdict)| {
                    let m = verdict
                        .as_str()
                        .map_or_else(|| verdict.to_string(), str::to_string);
                    (p.clone(), m)
                });
            filter.push((node.clone(), refused));
        }
    }
    filter.sort_by(|a, b| natural_cmp(&a.0, &b.0));
    let mut plugins: Vec<String> = Vec::new();
    for per_node in v["finalscore"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, p)| p)
    {
        for p in per_node.as_object().into_iter().flatten().map(|(p, _)| p) {
            if !plugins.contains(p) {
                plugins.push(p.clone());
            }
        }
    }
    plugins.sort();
    let mut scores = Vec::new();
    if let Some(nodes) = v["finalscore"].as_object() {
        for (node, fin) in nodes {
            let raw = &v["score"][node.as_str()];
            scores.push((
                node.clone(),
                plugins.iter().map(|p| score(&raw[p.as_str()])).collect(),
                plugins.iter().map(|p| score(&fin[p.as_str()])).collect(),
            ));
        }
    }
    scores.sort_by(|a, b| natural_cmp(&a.0, &b.0));
    Ok(Attempt {
        pod,
        time,
        attempt: v["attempt"].as_u64(),
        node: text(&v["node"]),
        reason: text(&v["reason"]),
        filter,
        plugins,
        scores,
    })
}

fn number(text: &str, column: &str) -> Result<Option<f64>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(Some(x)),
        _ => Err(format!("{column} is not a number: {text:?}")),
    }
}

fn pod_from_row<'a>(get: &impl Fn(usize) -> &'a str) -> Result<Pod, String> {
    let created = number(get(3), "created")?.ok_or("created is empty")?;
    let int = |i: usize, col: &str| -> Result<i64, String> {
        match get(i) {
            "" => Ok(0),
            t => t
                .parse::<i64>()
                .map_err(|_| format!("{col} is not a whole number: {t:?}")),
        }
    };
    Ok(Pod {
        job: get(0).to_string(),
        name: get(1).to_string(),
        node: None,
        created,
        bound: number(get(4), "bound")?,
        started: number(get(5), "started")?,
        finished: number(get(6), "finished")?,
        attempts: int(7, "attempts")?.clamp(0, u32::MAX as i64) as u32,
        reason: get(8).to_string(),
        outcome: get(9).to_string(),
        cpu_m: int(10, "cpu_request_m")?,
        memory: int(11, "memory_request")?,
        group: get(12).to_string(),
        queue: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_as_people_read_them() {
        let mut v = vec!["node-10", "node-2", "node-1", "master", "node-02", "a"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["a", "master", "node-1", "node-2", "node-02", "node-10"]);
    }

    #[test]
    fn decisions_are_read_per_attempt_bad_lines_named_and_a_budget_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("decisions.jsonl");
        let ok = r#"{"time":3.0,"job":"w0!1","pod":"p","attempt":1,"node":null,"reason":"0/2 nodes are available: 1 Insufficient cpu.","filter":{"node-10":{"NodeName":"passed","NodeResourcesFit":"Insufficient cpu"},"node-2":{"NodeName":"passed","NodeResourcesFit":"passed"}},"score":{},"finalscore":{},"postfilter":{}}"#;
        let bound = r#"{"time":4.0,"job":"w0!1","pod":"p","attempt":2,"node":"node-2","reason":null,"filter":{"node-2":{"NodeResourcesFit":"passed"}},"score":{"node-2":{"TaintToleration":"0","NodeResourcesFit":"50"},"node-3":{"TaintToleration":"1","NodeResourcesFit":"40"}},"finalscore":{"node-2":{"TaintToleration":"300","NodeResourcesFit":"50"},"node-3":{"TaintToleration":"0","NodeResourcesFit":"40"}},"postfilter":{}}"#;
        std::fs::write(&path, format!("{ok}\nnot json\n{bound}\n{ok}\n")).unwrap();
        let mut d = RunData::default();
        d.read_decisions(&path, (ok.len() + bound.len() + 12) as u64);
        assert!(d.explained);
        assert_eq!(d.decisions.len(), 2);
        assert_eq!(d.decisions_left_out, 1);
        assert!(
            d.problems[0].starts_with("decisions.jsonl line 2:"),
            "{:?}",
            d.problems
        );
        let a = &d.decisions[0];
        assert_eq!(
            (a.pod.as_str(), a.time, a.attempt, a.node.as_deref()),
            ("p", 3.0, Some(1), None)
        );
        assert_eq!(
            a.filter,
            vec![
                ("node-2".to_string(), None),
                (
                    "node-10".to_string(),
                    Some((
                        "NodeResourcesFit".to_string(),
                        "Insufficient cpu".to_string()
                    ))
                ),
            ]
        );
        let b = &d.decisions[1];
        assert_eq!(b.node.as_deref(), Some("node-2"));
        assert_eq!(b.plugins, vec!["NodeResourcesFit", "TaintToleration"]);
        assert_eq!(
            b.scores[0],
            ("node-2".to_string(), vec![50, 0], vec![50, 300])
        );
        assert_eq!(
            b.scores[1],
            ("node-3".to_string(), vec![40, 1], vec![40, 0])
        );
    }

    #[test]
    fn a_directory_with_nothing_says_what_is_missing_file_by_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = RunData::read(dir.path());
        assert!(d.pods.is_empty() && d.summary.is_none());
        for f in [
            "summary.json",
            "pods.csv",
            "jobs.csv",
            "nodes.csv",
            "timeline.csv",
        ] {
            assert_eq!(
                d.missing.iter().filter(|l| l.starts_with(f)).count(),
                1,
                "{f} in {:?}",
                d.missing
            );
        }
    }

    #[test]
    fn a_truncated_pods_csv_keeps_its_good_rows_and_names_the_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("pods.csv"),
            "job_id,pod,node,created,bound,started,finished,attempts,last_unschedulable_reason,outcome,cpu_request_m,memory_request,group\n\
             w0!1,w0-1,node-10,0,0,0,10,1,,COMPLETED_SUCCESSFULLY,1000,0,\n\
             w0!2,w0-2,node-2,0,1,x,10,1,,COMPLETED_SUCCESSFULLY,1000,0,\n\
             w0!3,w0-3,node-2,0,1,2,",
        )
        .unwrap();
        let d = RunData::read(dir.path());
        assert_eq!(d.pods.len(), 2);
        assert_eq!(d.problems.len(), 1, "{:?}", d.problems);
        assert!(
            d.problems[0].starts_with("pods.csv line 3: started"),
            "{:?}",
            d.problems
        );
        // Natural order: node-2 is row 0.
        assert_eq!(d.machines[0].name, "node-2");
        assert_eq!(d.pods[0].node, Some(1));
        assert_eq!(d.pods[1].finished, None);
    }

    #[test]
    fn unavailable_periods_come_from_the_timeline_and_an_open_one_ends_with_the_run() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("timeline.csv"),
            "time,source,verb,kind,namespace,name,detail\n\
             10,batsim,machine-unavailable,Node,,node-1,resource=1\n\
             12,broker,create,Pod,default,w0-1,\n\
             20,batsim,machine-available,Node,,node-1,resource=1\n\
             30,batsim,machine-unavailable,Node,,node-0,resource=0\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("summary.json"),
            r#"{"completed": false, "end_reason": "sigint", "end_time": 50.0}"#,
        )
        .unwrap();
        let d = RunData::read(dir.path());
        assert_eq!(d.end, 50.0);
        assert_eq!(d.unavailable, vec![(0, 30.0, 50.0), (1, 10.0, 20.0)]);
    }
}
