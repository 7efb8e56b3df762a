//! Making workloads: `generate` (synthetic, seeded), `convert swf` (Parallel
//! Workloads Archive traces, the way the 2020 Batkube study made
//! KIT_10h_80.json) and `convert volcano` (Volcano simulator `pods.csv`).
//!
//! Every job is a `delay` profile carrying the requests of one pod (`cpu` in
//! cores, `memory` as a quantity), as the 2020 files do, and `res`: the
//! number of machines the job runs on at once, one pod on each (1 unless
//! `generate --res` or a parallel SWF job says otherwise). Files are written
//! one job per line so `batkube workload validate` can point at lines.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use super::quantity;

/// The seeded generator: the project's splitmix64 (`batsim::rng`), so a
/// seed names a workload forever.
pub use batsim::rng::SplitMix64;

/// A distribution of non-negative values, written on the command line as
/// `V` or `const:V`, `uniform:A:B`, `exp:MEAN`, `normal:MEAN:SD`,
/// `lognormal:MU:SIGMA` (of the log), `choice:A,B,C` (even odds) or
/// `choice:A:WA,B:WB,…` (odds in proportion to the weights).
#[derive(Debug, Clone, PartialEq)]
pub enum Dist {
    Const(f64),
    Uniform(f64, f64),
    Exp(f64),
    Normal(f64, f64),
    LogNormal(f64, f64),
    Choice(Vec<f64>),
    /// (value, weight) pairs; weights are positive, not necessarily summing to 1.
    Weighted(Vec<(f64, f64)>),
}

impl Dist {
    /// Parses a spec; `unit` reads one value (seconds, cpu or memory).
    pub fn parse(spec: &str, unit: &dyn Fn(&str) -> Result<f64, String>) -> Result<Dist, String> {
        let parts: Vec<&str> = spec.split(':').collect();
        let bad = || {
            format!(
                "distribution {spec:?}: expected V, const:V, uniform:A:B, exp:MEAN, \
                 normal:MEAN:SD, lognormal:MU:SIGMA, choice:A,B,… or choice:A:WEIGHT,B:WEIGHT,…"
            )
        };
        let plain = |s: &str| s.parse::<f64>().map_err(|_| bad());
        if let Some(list) = spec.strip_prefix("choice:") {
            return Self::parse_choice(spec, list, unit);
        }
        Ok(match parts.as_slice() {
            [v] => Dist::Const(unit(v)?),
            ["const", v] => Dist::Const(unit(v)?),
            ["uniform", a, b] => {
                let (a, b) = (unit(a)?, unit(b)?);
                if b < a {
                    return Err(format!("distribution {spec:?}: B must not be below A"));
                }
                Dist::Uniform(a, b)
            }
            ["exp", m] => Dist::Exp(unit(m)?),
            ["normal", m, s] => Dist::Normal(unit(m)?, unit(s)?),
            ["lognormal", m, s] => Dist::LogNormal(plain(m)?, plain(s)?),
            _ => return Err(bad()),
        })
    }

    /// `A,B,C` or `A:WA,B:WB,…` (every item weighted or none, so a typo
    /// does not silently give one value the default weight).
    fn parse_choice(
        spec: &str,
        list: &str,
        unit: &dyn Fn(&str) -> Result<f64, String>,
    ) -> Result<Dist, String> {
        let items: Vec<&str> = list.split(',').map(str::trim).collect();
        let weighted = items.iter().filter(|i| i.contains(':')).count();
        if weighted == 0 {
            return Ok(Dist::Choice(
                items.iter().map(|v| unit(v)).collect::<Result<_, _>>()?,
            ));
        }
        if weighted != items.len() {
            return Err(format!(
                "distribution {spec:?}: give every choice a weight (A:WEIGHT) or none"
            ));
        }
        let pairs = items
            .iter()
            .map(|i| {
                let (v, w) = i.split_once(':').unwrap_or((i, ""));
                let w = w
                    .parse::<f64>()
                    .ok()
                    .filter(|w| w.is_finite() && *w > 0.0)
                    .ok_or_else(|| {
                        format!(
                            "distribution {spec:?}: weight {w:?} of {v:?} is not a positive number"
                        )
                    })?;
                Ok((unit(v)?, w))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Dist::Weighted(pairs))
    }

    pub fn sample(&self, rng: &mut SplitMix64) -> f64 {
        let v = match self {
            Dist::Const(v) => *v,
            Dist::Uniform(a, b) => a + (b - a) * rng.unit(),
            Dist::Exp(m) => -m * (1.0 - rng.unit()).ln(),
            Dist::Normal(m, s) => m + s * rng.normal(),
            Dist::LogNormal(m, s) => (m + s * rng.normal()).exp(),
            Dist::Choice(v) => v[(rng.next_u64() % v.len() as u64) as usize],
            Dist::Weighted(v) => {
                let total: f64 = v.iter().map(|(_, w)| w).sum();
                let mut x = rng.unit() * total;
                let mut pick = v[v.len() - 1].0;
                for (value, w) in v {
                    if x < *w {
                        pick = *value;
                        break;
                    }
                    x -= w;
                }
                pick
            }
        };
        v.max(0.0)
    }

    /// A whole number of at least 1 (a machine count): `uniform:A:B` draws
    /// the integers A..=B with even odds; other shapes are rounded to the
    /// nearest integer (and raised to 1).
    pub fn sample_count(&self, rng: &mut SplitMix64) -> u32 {
        let v = match self {
            Dist::Uniform(a, b) => (a + ((b - a + 1.0) * rng.unit()).floor()).min(*b),
            d => d.sample(rng).round(),
        };
        v.clamp(1.0, f64::from(u32::MAX)) as u32
    }
}

/// Parses `--res`: any distribution of [`Dist`], whose fixed values
/// (`V`, the bounds of `uniform:A:B`, the values of `choice`) must be whole
/// numbers of at least 1; drawn with [`Dist::sample_count`].
pub fn parse_res_dist(spec: &str) -> Result<Dist, String> {
    let number = |s: &str| {
        s.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| format!("res {spec:?}: {s:?} is not a non-negative number"))
    };
    let d = Dist::parse(spec, &number)?;
    let whole = |x: f64| x >= 1.0 && x.fract() == 0.0 && x <= f64::from(u32::MAX);
    let ok = match &d {
        Dist::Const(v) => whole(*v),
        Dist::Uniform(a, b) => whole(*a) && whole(*b),
        Dist::Choice(v) => v.iter().all(|x| whole(*x)),
        Dist::Weighted(v) => v.iter().all(|(x, _)| whole(*x)),
        Dist::Exp(_) | Dist::Normal(..) | Dist::LogNormal(..) => true,
    };
    if ok {
        Ok(d)
    } else {
        Err(format!(
            "res {spec:?}: machine counts must be whole numbers of at least 1"
        ))
    }
}

/// When jobs arrive: `burst` (all at 0), `interval:S` (one every S
/// seconds), `poisson:MEAN` (exponential gaps of mean MEAN seconds).
#[derive(Debug, Clone, PartialEq)]
pub enum Arrival {
    Burst,
    Interval(f64),
    Poisson(f64),
}

impl std::str::FromStr for Arrival {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let num = |v: &str| {
            v.parse::<f64>()
                .ok()
                .filter(|x| *x >= 0.0 && x.is_finite())
                .ok_or_else(|| format!("arrival {s:?}: {v:?} is not a non-negative number"))
        };
        match s.split_once(':') {
            None if s == "burst" => Ok(Arrival::Burst),
            Some(("interval", v)) => Ok(Arrival::Interval(num(v)?)),
            Some(("poisson", v)) => Ok(Arrival::Poisson(num(v)?)),
            _ => Err(format!(
                "arrival {s:?}: expected burst, interval:SECONDS or poisson:MEAN_SECONDS"
            )),
        }
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn num(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

/// Jobs and profiles on their way to a file; profiles are shared between
/// jobs with the same delay and requests.
#[derive(Debug, Default)]
pub struct WorkloadBuilder {
    jobs: Vec<Map<String, Value>>,
    profiles: BTreeMap<String, Map<String, Value>>,
    /// Profile names in first-use order.
    order: Vec<String>,
    /// How many jobs ask for each number of machines.
    res: BTreeMap<u32, usize>,
}

/// What one job asks for.
#[derive(Debug, Clone)]
pub struct JobSpec {
    pub id: String,
    pub subtime: f64,
    pub delay: f64,
    /// Machines the job runs on at once, one pod each (at least 1).
    pub res: u32,
    /// Cores of each pod (rounded to millicores, at least 1m when given).
    pub cpu: Option<f64>,
    /// Bytes, of each pod.
    pub memory: Option<f64>,
    pub walltime: Option<f64>,
    /// Extra job fields (priority, nodeSelector, labels, …).
    pub extra: Map<String, Value>,
}

impl Default for JobSpec {
    fn default() -> Self {
        JobSpec {
            id: String::new(),
            subtime: 0.0,
            delay: 0.0,
            res: 1,
            cpu: None,
            memory: None,
            walltime: None,
            extra: Map::new(),
        }
    }
}

impl WorkloadBuilder {
    /// The first job (in submission order) whose delay is not strictly
    /// positive, with its delay: Batsim 4.2.1 refuses such a workload.
    pub fn first_non_positive_delay(&self) -> Option<(String, f64)> {
        self.jobs.iter().find_map(|j| {
            let p = self.profiles.get(j.get("profile")?.as_str()?)?;
            let d = p.get("delay")?.as_f64()?;
            let id = j.get("id")?.as_str()?.to_string();
            (d <= 0.0).then_some((id, d))
        })
    }

    pub fn push(&mut self, spec: JobSpec) {
        let delay = round3(spec.delay);
        let cpu = spec.cpu.map(|c| round3(c).max(0.001));
        let memory = spec.memory.map(quantity::format_memory);
        let mut name = format!("delay{}", num(delay));
        if let Some(c) = cpu {
            let _ = write!(name, "_cpu{}", quantity::format_cpu(c));
        }
        if let Some(m) = &memory {
            let _ = write!(name, "_mem{m}");
        }
        if !self.profiles.contains_key(&name) {
            let mut p = Map::new();
            p.insert("type".into(), json!("delay"));
            p.insert("delay".into(), num(delay));
            if let Some(c) = cpu {
                p.insert("cpu".into(), num(c));
            }
            if let Some(m) = memory {
                p.insert("memory".into(), json!(m));
            }
            self.profiles.insert(name.clone(), p);
            self.order.push(name.clone());
        }
        let mut j = Map::new();
        j.insert("id".into(), json!(spec.id));
        j.insert("subtime".into(), num(round3(spec.subtime)));
        if let Some(w) = spec.walltime {
            j.insert("walltime".into(), num(round3(w)));
        }
        let res = spec.res.max(1);
        *self.res.entry(res).or_default() += 1;
        j.insert("res".into(), json!(res));
        j.insert("profile".into(), json!(name));
        for (k, v) in spec.extra {
            j.insert(k, v);
        }
        self.jobs.push(j);
    }

    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// How many jobs ask for each number of machines.
    pub fn res_counts(&self) -> &BTreeMap<u32, usize> {
        &self.res
    }

    /// The counts of [`Self::res_counts`] in power-of-two classes, for a
    /// summary line: `res 1: 10, 2-3: 4, 4-7: 1`.
    pub fn res_summary(&self) -> String {
        let mut classes: BTreeMap<u32, usize> = BTreeMap::new();
        for (&r, &n) in &self.res {
            *classes.entry(r.ilog2()).or_default() += n;
        }
        let parts: Vec<String> = classes
            .iter()
            .map(|(&k, n)| {
                let (lo, hi) = (1u64 << k, (2u64 << k) - 1);
                if lo == hi {
                    format!("{lo}: {n}")
                } else {
                    format!("{lo}-{hi}: {n}")
                }
            })
            .collect();
        format!("res {}", parts.join(", "))
    }

    /// The workload as Batsim JSON, one job and one profile per line.
    /// `nb_res` is the largest `res` (Batsim 4.2 ignores it; older tools
    /// read it as the machines the workload needs).
    pub fn to_json(&self, description: &str) -> String {
        let mut s = String::from("{\n");
        let _ = writeln!(s, "  \"description\": {},", json!(description));
        let nb_res = self.res.keys().next_back().copied().unwrap_or(1);
        let _ = write!(s, "  \"nb_res\": {nb_res},\n  \"jobs\": [\n");
        for (i, j) in self.jobs.iter().enumerate() {
            let comma = if i + 1 < self.jobs.len() { "," } else { "" };
            let _ = writeln!(s, "    {}{comma}", Value::Object(j.clone()));
        }
        s.push_str("  ],\n  \"profiles\": {\n");
        for (i, name) in self.order.iter().enumerate() {
            let comma = if i + 1 < self.order.len() { "," } else { "" };
            let _ = writeln!(
                s,
                "    {}: {}{comma}",
                json!(name),
                Value::Object(self.profiles[name].clone())
            );
        }
        s.push_str("  }\n}\n");
        s
    }
}

/// Options of `batkube workload generate`.
#[derive(Debug, Clone)]
pub struct GenerateSpec {
    pub jobs: usize,
    pub arrival: Arrival,
    pub duration: Dist,
    pub cpu: Option<Dist>,
    pub memory: Option<Dist>,
    /// Machines per job (see [`parse_res_dist`]); `None`: 1.
    pub res: Option<Dist>,
    pub walltime: Option<f64>,
    pub seed: u64,
}

/// A synthetic workload; the same spec always gives the same file.
pub fn generate(spec: &GenerateSpec) -> WorkloadBuilder {
    // Separate streams so changing one distribution leaves the others alone.
    let mut arrivals = SplitMix64::new(spec.seed);
    let mut durations = SplitMix64::new(spec.seed ^ 0xD0D0_D0D0);
    let mut cpus = SplitMix64::new(spec.seed ^ 0xC9C9_C9C9);
    let mut mems = SplitMix64::new(spec.seed ^ 0x3E3E_3E3E);
    let mut ress = SplitMix64::new(spec.seed ^ 0x7E5E_7E5E);
    let mut b = WorkloadBuilder::default();
    let mut t = 0.0;
    for i in 0..spec.jobs {
        let subtime = match spec.arrival {
            Arrival::Burst => 0.0,
            Arrival::Interval(s) => s * i as f64,
            Arrival::Poisson(mean) => {
                if i > 0 {
                    t += -mean * (1.0 - arrivals.unit()).ln();
                }
                t
            }
        };
        b.push(JobSpec {
            id: (i + 1).to_string(),
            subtime,
            delay: spec.duration.sample(&mut durations),
            res: spec.res.as_ref().map_or(1, |d| d.sample_count(&mut ress)),
            cpu: spec.cpu.as_ref().map(|d| d.sample(&mut cpus)),
            memory: spec.memory.as_ref().map(|d| d.sample(&mut mems).round()),
            walltime: spec.walltime,
            extra: Map::new(),
        });
    }
    b
}

/// One job of a Standard Workload Format trace.
#[derive(Debug, Clone, PartialEq)]
pub struct SwfJob {
    pub id: String,
    pub submit: f64,
    pub wait: f64,
    pub run: f64,
    /// Allocated processors (else requested ones).
    pub procs: f64,
    /// Used memory per processor, KB (-1: unknown).
    pub memory_kb: f64,
    /// The line in the trace.
    pub line: usize,
}

/// A parsed SWF trace.
#[derive(Debug, Clone)]
pub struct SwfTrace {
    pub jobs: Vec<SwfJob>,
    /// `; MaxProcs:` from the header: processors of the machine.
    pub max_procs: Option<f64>,
    /// `; MaxNodes:` from the header: nodes of the machine (SWF 2.1+: when
    /// it differs from MaxProcs, each node holds MaxProcs / MaxNodes).
    pub max_nodes: Option<f64>,
    /// Lines skipped (no run time or no processors), with the reason.
    pub skipped: usize,
}

pub fn parse_swf(text: &str) -> Result<SwfTrace, String> {
    let mut jobs = Vec::new();
    let mut max_procs = None;
    let mut max_nodes = None;
    let mut skipped = 0;
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if let Some(h) = l.strip_prefix(';') {
            if let Some((k, v)) = h.split_once(':') {
                match k.trim() {
                    "MaxProcs" => max_procs = v.trim().parse::<f64>().ok(),
                    "MaxNodes" => max_nodes = v.trim().parse::<f64>().ok(),
                    _ => {}
                }
            }
            continue;
        }
        if l.is_empty() {
            continue;
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 8 {
            return Err(format!(
                "line {}: an SWF job line has 18 fields, found {}",
                i + 1,
                f.len()
            ));
        }
        let n = |k: usize| {
            f[k].parse::<f64>().map_err(|_| {
                format!(
                    "line {}: field {} ({:?}) is not a number",
                    i + 1,
                    k + 1,
                    f[k]
                )
            })
        };
        let (submit, wait, run) = (n(1)?, n(2)?, n(3)?);
        // Allocated processors, else requested ones.
        let mut procs = n(4)?;
        if procs <= 0.0 {
            procs = n(7)?;
        }
        if run < 0.0 || procs <= 0.0 || submit < 0.0 {
            skipped += 1;
            continue;
        }
        jobs.push(SwfJob {
            id: f[0].to_string(),
            submit,
            wait: wait.max(0.0),
            run,
            procs,
            memory_kb: n(6)?,
            line: i + 1,
        });
    }
    jobs.sort_by(|a, b| a.submit.total_cmp(&b.submit));
    Ok(SwfTrace {
        jobs,
        max_procs,
        max_nodes,
        skipped,
    })
}

/// Utilisation of `[start, start+len)` as the trace ran it: processor-seconds
/// used in the window over the machine's processor-seconds.
pub fn window_utilisation(trace: &SwfTrace, machine_procs: f64, start: f64, len: f64) -> f64 {
    let end = start + len;
    let used: f64 = trace
        .jobs
        .iter()
        .map(|j| {
            let s = j.submit + j.wait;
            let e = s + j.run;
            let overlap = (e.min(end) - s.max(start)).max(0.0);
            overlap * j.procs
        })
        .sum();
    used / (machine_procs * len)
}

/// What becomes of a job on several processors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Parallel {
    /// One pod per traced node: `res` = ceil(processors / procs per node),
    /// each pod with the per-node share of the job.
    Split,
    /// One pod with all of the job (`res` 1), as the 2020 study did.
    Fold,
}

/// Options of `batkube workload convert swf`.
#[derive(Debug, Clone)]
pub struct SwfSpec {
    pub parallel: Parallel,
    /// Processors of one traced node (split); `None`: the header's
    /// MaxProcs / MaxNodes when that is a whole number, else 1.
    pub procs_per_node: Option<f64>,
    /// Jobs on more machines are left out (listed in the selection).
    pub max_res: Option<u32>,
    /// The target platform: its compute machines and its name; jobs on
    /// more machines are left out too.
    pub platform: Option<(u32, String)>,
    /// Window start, seconds of trace time (submit field); `None`: the first job.
    pub start: Option<f64>,
    /// Window length in seconds; `None`: to the end.
    pub length: Option<f64>,
    /// Pick the first window of `length` whose utilisation is within
    /// `tolerance` of this (as evalys' extract_periods_with_given_utilisation).
    pub utilisation: Option<f64>,
    pub tolerance: f64,
    /// Cap on job duration (the 2020 study used 3600 s).
    pub trim: Option<f64>,
    /// Cpu of a pod that holds `procs_reference` processors.
    pub node_cpu: f64,
    /// Largest request written (2020: 5.9 on a 6-cpu node).
    pub cpu_cap: Option<f64>,
    /// Processors that map to `node_cpu`; `None`: split: the procs per
    /// node (a pod on a whole traced node asks for `node_cpu`); fold: the
    /// largest job of the selection (what the 2020 conversion did).
    pub procs_reference: Option<f64>,
    /// Memory per pod when the trace gives none.
    pub memory: Option<f64>,
}

impl Default for SwfSpec {
    /// Split, no window, no trim, 1 cpu per processor-reference.
    fn default() -> Self {
        SwfSpec {
            parallel: Parallel::Split,
            procs_per_node: None,
            max_res: None,
            platform: None,
            start: None,
            length: None,
            utilisation: None,
            tolerance: 0.01,
            trim: None,
            node_cpu: 1.0,
            cpu_cap: None,
            procs_reference: None,
            memory: None,
        }
    }
}

/// A job the conversion left out, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub id: String,
    /// The job's line in the trace.
    pub line: usize,
    pub res: u32,
    pub reason: String,
}

/// What a conversion selected, for the report printed to the user.
#[derive(Debug, Clone)]
pub struct SwfSelection {
    pub start: f64,
    pub utilisation: Option<f64>,
    pub procs_reference: f64,
    /// Processors per traced node (split), and where that number came from.
    pub procs_per_node: f64,
    pub procs_per_node_from: &'static str,
    pub trimmed: usize,
    /// Run times of 0 s (under SWF's one-second resolution) raised to 1 s:
    /// Batsim 4.2.1 refuses a `delay` that is not strictly positive.
    pub raised: usize,
    /// Jobs on more machines than `max_res` or the platform, in trace order.
    pub refused: Vec<Refused>,
}

/// Processors per traced node: `--procs-per-node`, else MaxProcs / MaxNodes
/// of the header when both are there and the ratio is a whole number (an
/// SMP machine), else 1 (one processor per node, MaxProcs = MaxNodes).
fn procs_per_node(trace: &SwfTrace, spec: &SwfSpec) -> (f64, &'static str) {
    if let Some(p) = spec.procs_per_node {
        return (p, "--procs-per-node");
    }
    match (trace.max_procs, trace.max_nodes) {
        (Some(p), Some(n)) if n > 0.0 && p / n >= 1.0 && (p / n).fract() == 0.0 => {
            (p / n, "the header's MaxProcs / MaxNodes")
        }
        (Some(_), Some(_)) => (
            1.0,
            "1: the header's MaxProcs / MaxNodes is not a whole number",
        ),
        _ => (1.0, "1: the header gives no MaxProcs and MaxNodes"),
    }
}

pub fn convert_swf(
    trace: &SwfTrace,
    spec: &SwfSpec,
) -> Result<(WorkloadBuilder, SwfSelection), String> {
    if trace.jobs.is_empty() {
        return Err("the trace has no usable job".into());
    }
    let machine = trace
        .max_procs
        .unwrap_or_else(|| trace.jobs.iter().map(|j| j.procs).fold(0.0, f64::max));
    let mut start = spec.start.unwrap_or(trace.jobs[0].submit);
    let mut achieved = None;
    if let Some(target) = spec.utilisation {
        let len = spec
            .length
            .ok_or("--utilisation needs --window-length (the window to search for)")?;
        let mut best: Option<(f64, f64)> = None;
        for j in trace.jobs.iter().filter(|j| j.submit >= start) {
            let u = window_utilisation(trace, machine, j.submit, len);
            if !best.is_some_and(|(_, bu)| (u - target).abs() >= (bu - target).abs()) {
                best = Some((j.submit, u));
            }
            if (u - target).abs() <= spec.tolerance {
                break;
            }
        }
        let (s, u) = best.ok_or("no job after the window start")?;
        if (u - target).abs() > spec.tolerance {
            return Err(format!(
                "no window of {len} s reaches utilisation {target} ± {} (closest: {u:.3} at {s})",
                spec.tolerance
            ));
        }
        start = s;
        achieved = Some(u);
    }
    let end = spec.length.map_or(f64::INFINITY, |l| start + l);
    let selected: Vec<&SwfJob> = trace
        .jobs
        .iter()
        .filter(|j| j.submit >= start && j.submit < end)
        .collect();
    if selected.is_empty() {
        return Err(format!(
            "no job is submitted in the window [{start}, {end})"
        ));
    }
    let (ppn, ppn_from) = procs_per_node(trace, spec);
    if !(ppn >= 1.0 && ppn.is_finite()) {
        return Err(format!(
            "--procs-per-node {ppn} is not a number of at least 1"
        ));
    }
    let split = spec.parallel == Parallel::Split;
    let reference = spec.procs_reference.unwrap_or_else(|| {
        if split {
            ppn
        } else {
            selected.iter().map(|j| j.procs).fold(0.0, f64::max)
        }
    });
    let cap = spec.cpu_cap.unwrap_or(spec.node_cpu);
    let first = selected[0].submit;
    let mut b = WorkloadBuilder::default();
    let mut trimmed = 0;
    let mut raised = 0;
    let mut refused = Vec::new();
    for j in selected {
        let res = if split {
            (j.procs / ppn).ceil().clamp(1.0, f64::from(u32::MAX)) as u32
        } else {
            1
        };
        let too_many = spec
            .max_res
            .filter(|&m| res > m)
            .map(|m| format!("res {res} > --max-res {m}"))
            .or_else(|| {
                spec.platform
                    .as_ref()
                    .filter(|(n, _)| res > *n)
                    .map(|(n, name)| format!("res {res} > the {n} compute machines of {name}"))
            });
        if let Some(reason) = too_many {
            refused.push(Refused {
                id: j.id.clone(),
                line: j.line,
                res,
                reason,
            });
            continue;
        }
        // Each pod holds an even share of the job's processors; with res 1
        // (fold) that is the whole job, as in 2020.
        let share = j.procs / f64::from(res);
        let mut delay = j.run;
        if delay <= 0.0 {
            delay = 1.0;
            raised += 1;
        }
        if let Some(t) = spec.trim {
            if delay > t {
                delay = t;
                trimmed += 1;
            }
        }
        let cpu = (round3(share / reference * spec.node_cpu)).clamp(0.001, cap);
        // SWF's used memory is per processor.
        let memory = if j.memory_kb > 0.0 {
            Some(j.memory_kb * 1024.0 * share)
        } else {
            spec.memory
        };
        b.push(JobSpec {
            id: j.id.clone(),
            subtime: j.submit - first,
            delay,
            res,
            cpu: Some(cpu),
            memory,
            walltime: None,
            extra: Map::new(),
        });
    }
    if b.is_empty() {
        return Err(format!(
            "every job of the window was left out ({} first: job {} on line {})",
            refused[0].reason, refused[0].id, refused[0].line
        ));
    }
    Ok((
        b,
        SwfSelection {
            start,
            utilisation: achieved,
            procs_reference: reference,
            procs_per_node: ppn,
            procs_per_node_from: ppn_from,
            trimmed,
            raised,
            refused,
        },
    ))
}

/// Parses a node selector or label set as Volcano's CSVs write it:
/// empty, `{}`, a JSON object, `map[k:v k2:v2]` (Go's fmt), or `k=v;k2=v2`
/// (`,` also separates when the field is quoted).
pub fn parse_label_map(s: &str) -> Result<Map<String, Value>, String> {
    let t = s.trim();
    let mut m = Map::new();
    if t.is_empty() || t == "{}" || t == "map[]" || t.eq_ignore_ascii_case("none") || t == "<none>"
    {
        return Ok(m);
    }
    if t.starts_with('{') {
        let v: Value = serde_json::from_str(t).map_err(|e| format!("labels {t:?}: {e}"))?;
        let o = v
            .as_object()
            .ok_or(format!("labels {t:?} are not an object"))?;
        for (k, v) in o {
            let v = v
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string());
            m.insert(k.clone(), Value::String(v));
        }
        return Ok(m);
    }
    let (body, kv_sep, seps): (&str, char, &[char]) =
        match t.strip_prefix("map[").and_then(|b| b.strip_suffix(']')) {
            Some(b) => (b, ':', &[' ']),
            None => (t, '=', &[';', ',', ' ']),
        };
    for part in body.split(seps).filter(|p| !p.trim().is_empty()) {
        let (k, v) = part
            .split_once(kv_sep)
            .ok_or_else(|| format!("labels {t:?}: {part:?} is not key{kv_sep}value"))?;
        m.insert(k.trim().to_string(), Value::String(v.trim().to_string()));
    }
    Ok(m)
}

/// Finds a column by any of its accepted names (case-insensitive).
pub fn column(headers: &csv::StringRecord, names: &[&str]) -> Option<usize> {
    headers
        .iter()
        .position(|h| names.iter().any(|n| h.trim().eq_ignore_ascii_case(n)))
}

/// Converts a Volcano-simulator `pods.csv` (columns cpu_request,
/// memory_request, runsec, createtime, nodeSelector, priority, queueName;
/// optionally name) into a workload. Times are seconds; the first pod is
/// submitted at 0.
pub fn convert_volcano_pods(text: &str) -> Result<WorkloadBuilder, String> {
    let mut rdr = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .flexible(true)
        .from_reader(text.as_bytes());
    let headers = rdr.headers().map_err(|e| format!("pods.csv: {e}"))?.clone();
    let need = |names: &[&str]| {
        column(&headers, names).ok_or_else(|| format!("pods.csv has no {} column", names[0]))
    };
    let c_cpu = need(&["cpu_request", "cpu"])?;
    let c_mem = need(&["memory_request", "memory"])?;
    let c_run = need(&["runsec", "runtime", "duration"])?;
    let c_create = need(&["createtime", "create_time", "submit"])?;
    let c_sel = column(&headers, &["nodeSelector", "node_selector"]);
    let c_prio = column(&headers, &["priority"]);
    let c_queue = column(&headers, &["queueName", "queue"]);
    let c_name = column(&headers, &["name", "podName", "pod_name", "job_id"]);
    let mut rows = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        let line = i + 2;
        let rec = rec.map_err(|e| format!("pods.csv line {line}: {e}"))?;
        let field = |c: usize| rec.get(c).unwrap_or("");
        let at = |e: String| format!("pods.csv line {line}: {e}");
        let cpu = quantity::parse_cpu(field(c_cpu)).map_err(at)?;
        let mem = quantity::parse_memory(field(c_mem)).map_err(at)?;
        let run: f64 = field(c_run)
            .parse()
            .ok()
            .filter(|x: &f64| *x >= 0.0)
            .ok_or_else(|| {
                at(format!(
                    "runsec {:?} is not a non-negative number of seconds",
                    field(c_run)
                ))
            })?;
        let create: f64 = field(c_create)
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite())
            .ok_or_else(|| {
                at(format!(
                    "createtime {:?} is not a number of seconds",
                    field(c_create)
                ))
            })?;
        let mut extra = Map::new();
        if let Some(c) = c_prio {
            let p = field(c);
            if !p.is_empty() {
                let v: i64 = p
                    .parse()
                    .map_err(|_| at(format!("priority {p:?} is not an integer")))?;
                extra.insert("priority".into(), json!(v));
            }
        }
        if let Some(c) = c_sel {
            let sel = parse_label_map(field(c)).map_err(at)?;
            if !sel.is_empty() {
                extra.insert("nodeSelector".into(), Value::Object(sel));
            }
        }
        if let Some(c) = c_queue {
            let q = field(c);
            if !q.is_empty() {
                extra.insert("labels".into(), json!({ "queue": q }));
            }
        }
        let id = c_name
            .map(|c| field(c).to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| (i + 1).to_string());
        rows.push((create, id, run, cpu, mem, extra));
    }
    if rows.is_empty() {
        return Err("pods.csv has no pod".into());
    }
    // Stable: pods created together keep file order.
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let first = rows[0].0;
    let mut b = WorkloadBuilder::default();
    for (create, id, run, cpu, mem, extra) in rows {
        b.push(JobSpec {
            id,
            subtime: create - first,
            delay: run,
            cpu: Some(cpu),
            memory: if mem > 0.0 { Some(mem) } else { None },
            extra,
            ..JobSpec::default()
        });
    }
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_and_follows_the_arrival_pattern() {
        let spec = GenerateSpec {
            jobs: 50,
            arrival: Arrival::Poisson(10.0),
            duration: Dist::parse("uniform:10:100", &|s| s.parse().map_err(|_| s.to_string()))
                .unwrap(),
            cpu: Some(Dist::Choice(vec![0.5, 1.0])),
            memory: None,
            res: None,
            walltime: None,
            seed: 7,
        };
        let a = generate(&spec).to_json("x");
        assert_eq!(a, generate(&spec).to_json("x"));
        assert_ne!(
            a,
            generate(&GenerateSpec {
                seed: 8,
                ..spec.clone()
            })
            .to_json("x")
        );
        let v: Value = serde_json::from_str(&a).unwrap();
        let times: Vec<f64> = v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["subtime"].as_f64().unwrap())
            .collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]));
        let spaced = generate(&GenerateSpec {
            arrival: Arrival::Interval(10.0),
            ..spec
        })
        .to_json("x");
        let v: Value = serde_json::from_str(&spaced).unwrap();
        assert_eq!(v["jobs"][3]["subtime"], json!(30));
    }

    #[test]
    fn swf_conversion_reproduces_kit_10h_80() {
        let swf = "; MaxProcs: 24048\n\
982\t1230492\t13817\t61596\t1024\t-1\t-1\t1024\t172800\t-1\t1\t10\t10\t-1\t1\t1\t-1\t-1\n\
983\t1231217\t13092\t51693\t1000\t-1\t-1\t1000\t259200\t-1\t1\t1\t1\t-1\t1\t1\t-1\t-1\n\
1016\t1258266\t9\t83\t32\t-1\t-1\t32\t900\t-1\t1\t14\t14\t-1\t1\t1\t-1\t-1\n";
        let t = parse_swf(swf).unwrap();
        let (b, sel) = convert_swf(
            &t,
            &SwfSpec {
                parallel: Parallel::Fold,
                trim: Some(3600.0),
                node_cpu: 6.0,
                cpu_cap: Some(5.9),
                ..SwfSpec::default()
            },
        )
        .unwrap();
        assert_eq!(sel.procs_reference, 1024.0);
        let v: Value = serde_json::from_str(&b.to_json("kit")).unwrap();
        let p = |i: usize| v["profiles"][v["jobs"][i]["profile"].as_str().unwrap()].clone();
        assert_eq!(v["jobs"][1]["subtime"], json!(725));
        assert_eq!(p(0)["cpu"], json!(5.9));
        assert_eq!(p(0)["delay"], json!(3600));
        assert_eq!(p(1)["cpu"], json!(5.859));
        assert_eq!(p(2)["cpu"], json!(0.188));
        assert_eq!(p(2)["delay"], json!(83));
    }

    #[test]
    fn swf_window_search_finds_the_requested_utilisation() {
        // A 10-processor machine: an idle first hour, then 8 processors busy
        // for an hour from t=3600, then idle again.
        let swf = "; MaxProcs: 10\n\
1 0 0 60 1 -1 -1 1 -1 -1 1 1 1 -1 1 1 -1 -1\n\
2 3600 0 3600 8 -1 -1 8 -1 -1 1 1 1 -1 1 1 -1 -1\n\
3 3700 0 100 1 -1 -1 1 -1 -1 1 1 1 -1 1 1 -1 -1\n\
4 9000 0 10 1 -1 -1 1 -1 -1 1 1 1 -1 1 1 -1 -1\n";
        let t = parse_swf(swf).unwrap();
        assert!(
            (window_utilisation(&t, 10.0, 3600.0, 3600.0) - (8.0 * 3600.0 + 100.0) / 36000.0).abs()
                < 1e-9
        );
        let spec = SwfSpec {
            parallel: Parallel::Fold,
            length: Some(3600.0),
            utilisation: Some(0.8),
            procs_reference: Some(10.0),
            ..SwfSpec::default()
        };
        let (b, sel) = convert_swf(&t, &spec).unwrap();
        assert_eq!(sel.start, 3600.0);
        assert_eq!(b.len(), 2, "jobs 2 and 3, submitted in the window");
        let v: Value = serde_json::from_str(&b.to_json("w")).unwrap();
        assert_eq!(v["jobs"][1]["subtime"], json!(100));
        assert!(convert_swf(
            &t,
            &SwfSpec {
                utilisation: Some(0.5),
                ..spec
            }
        )
        .is_err());
    }

    /// A machine of 16 nodes of 4 processors; jobs on 1, 4, 10 and 64
    /// processors, the second using 1 MiB per processor.
    const SMP_SWF: &str = "; MaxNodes: 16\n; MaxProcs: 64\n\
1 0 0 100 1 -1 -1 1 -1 -1 1 1 1 -1 1 1 -1 -1\n\
2 10 0 100 4 -1 1024 4 -1 -1 1 1 1 -1 1 1 -1 -1\n\
3 20 0 100 10 -1 -1 10 -1 -1 1 1 1 -1 1 1 -1 -1\n\
4 30 0 100 64 -1 -1 64 -1 -1 1 1 1 -1 1 1 -1 -1\n";

    /// (res, cpu, memory) of every job, the requests read from its profile.
    fn shapes(b: &WorkloadBuilder) -> Vec<(u64, f64, Option<String>)> {
        let v: Value = serde_json::from_str(&b.to_json("t")).unwrap();
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| {
                let p = &v["profiles"][j["profile"].as_str().unwrap()];
                (
                    j["res"].as_u64().unwrap(),
                    p["cpu"].as_f64().unwrap(),
                    p["memory"].as_str().map(str::to_string),
                )
            })
            .collect()
    }

    #[test]
    fn swf_parallel_jobs_split_over_the_header_nodes_or_fold_into_one_pod() {
        let t = parse_swf(SMP_SWF).unwrap();
        assert_eq!((t.max_procs, t.max_nodes), (Some(64.0), Some(16.0)));
        let spec = SwfSpec {
            node_cpu: 8.0,
            ..SwfSpec::default()
        };
        let (b, sel) = convert_swf(&t, &spec).unwrap();
        assert_eq!(sel.procs_per_node, 4.0);
        assert_eq!(sel.procs_reference, 4.0);
        // res = ceil(procs / 4); each pod procs / res / 4 x 8 cpu.
        assert_eq!(
            shapes(&b),
            vec![
                (1, 2.0, None),
                (1, 8.0, Some("4Mi".into())),
                (3, 6.667, None),
                (16, 8.0, None),
            ]
        );
        assert!(b.to_json("t").contains("\"nb_res\": 16,"));
        assert_eq!(b.res_summary(), "res 1: 2, 2-3: 1, 16-31: 1");
        let (fold, sel) = convert_swf(
            &t,
            &SwfSpec {
                parallel: Parallel::Fold,
                ..spec.clone()
            },
        )
        .unwrap();
        assert_eq!(sel.procs_reference, 64.0);
        assert_eq!(
            shapes(&fold),
            vec![
                (1, 0.125, None),
                (1, 0.5, Some("4Mi".into())),
                (1, 1.25, None),
                (1, 8.0, None),
            ]
        );
        assert!(fold.to_json("t").contains("\"nb_res\": 1,"));
        // --procs-per-node wins over the header; no MaxNodes means 1.
        let (one, sel) = convert_swf(
            &t,
            &SwfSpec {
                procs_per_node: Some(1.0),
                ..spec.clone()
            },
        )
        .unwrap();
        assert_eq!(sel.procs_per_node_from, "--procs-per-node");
        assert_eq!(
            shapes(&one).iter().map(|s| s.0).collect::<Vec<_>>(),
            [1, 4, 10, 64]
        );
        let bare = parse_swf(&SMP_SWF.replace("; MaxNodes: 16\n", "")).unwrap();
        assert_eq!(convert_swf(&bare, &spec).unwrap().1.procs_per_node, 1.0);
    }

    #[test]
    fn swf_jobs_on_too_many_machines_are_left_out_with_their_line() {
        let t = parse_swf(SMP_SWF).unwrap();
        let (b, sel) = convert_swf(
            &t,
            &SwfSpec {
                max_res: Some(8),
                platform: Some((2, "p.xml".into())),
                ..SwfSpec::default()
            },
        )
        .unwrap();
        assert_eq!(b.len(), 2);
        let why: Vec<(&str, usize, u32, &str)> = sel
            .refused
            .iter()
            .map(|r| (r.id.as_str(), r.line, r.res, r.reason.as_str()))
            .collect();
        assert_eq!(
            why,
            [
                ("3", 5, 3, "res 3 > the 2 compute machines of p.xml"),
                ("4", 6, 16, "res 16 > --max-res 8"),
            ]
        );
        let all = convert_swf(
            &t,
            &SwfSpec {
                parallel: Parallel::Split,
                procs_per_node: Some(1.0),
                platform: Some((0, "empty.xml".into())),
                ..SwfSpec::default()
            },
        )
        .unwrap_err();
        assert!(all.contains("every job") && all.contains("line 3"), "{all}");
    }

    #[test]
    fn weighted_choices_and_machine_counts() {
        let unit = |s: &str| s.parse::<f64>().map_err(|_| s.to_string());
        let w = Dist::parse("choice:1:0.5,4:0.3,16:0.2", &unit).unwrap();
        assert_eq!(w, Dist::Weighted(vec![(1.0, 0.5), (4.0, 0.3), (16.0, 0.2)]));
        assert_eq!(
            Dist::parse("choice:1,4", &unit).unwrap(),
            Dist::Choice(vec![1.0, 4.0])
        );
        assert!(Dist::parse("choice:1:1,4", &unit)
            .unwrap_err()
            .contains("every choice"));
        assert!(Dist::parse("choice:1:-1", &unit).is_err());
        let mut rng = SplitMix64::new(5);
        let mut seen = BTreeMap::new();
        for _ in 0..10_000 {
            *seen.entry(w.sample_count(&mut rng)).or_insert(0) += 1;
        }
        assert_eq!(seen.keys().copied().collect::<Vec<u32>>(), [1, 4, 16]);
        // Odds follow the weights (5000/3000/2000 expected; a wide margin).
        assert!((4500..5500).contains(&seen[&1]), "{seen:?}");
        assert!((1500..2500).contains(&seen[&16]), "{seen:?}");
        let u = parse_res_dist("uniform:2:4").unwrap();
        let drawn: std::collections::BTreeSet<u32> =
            (0..1000).map(|_| u.sample_count(&mut rng)).collect();
        assert_eq!(drawn.into_iter().collect::<Vec<_>>(), [2, 3, 4]);
        assert_eq!(parse_res_dist("exp:0").unwrap().sample_count(&mut rng), 1);
        for bad in [
            "0",
            "2.5",
            "uniform:1:2.5",
            "choice:1,0",
            "choice:3:1,0.5:1",
            "x",
        ] {
            assert!(parse_res_dist(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn res_is_drawn_from_its_own_stream() {
        let spec = GenerateSpec {
            jobs: 40,
            arrival: Arrival::Poisson(10.0),
            duration: Dist::Exp(60.0),
            cpu: Some(Dist::Choice(vec![0.5, 1.0])),
            memory: None,
            res: None,
            walltime: None,
            seed: 3,
        };
        let one = generate(&spec).to_json("x");
        let gang = GenerateSpec {
            res: Some(parse_res_dist("choice:1:0.5,4:0.3,16:0.2").unwrap()),
            ..spec
        };
        let many = generate(&gang).to_json("x");
        assert_eq!(many, generate(&gang).to_json("x"));
        // Only res (and nb_res) differ: arrivals, durations, requests stay.
        let strip = |s: &str| {
            let v: Value = serde_json::from_str(s).unwrap();
            let mut jobs = v["jobs"].clone();
            for j in jobs.as_array_mut().unwrap() {
                j.as_object_mut().unwrap().remove("res");
            }
            (jobs, v["profiles"].clone())
        };
        assert_eq!(strip(&one), strip(&many));
        let v: Value = serde_json::from_str(&many).unwrap();
        let res: std::collections::BTreeSet<u64> = v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["res"].as_u64().unwrap())
            .collect();
        assert_eq!(res.into_iter().collect::<Vec<_>>(), [1, 4, 16]);
        assert_eq!(v["nb_res"], json!(16));
    }

    #[test]
    fn volcano_pods_become_jobs_with_requests_selectors_and_queues() {
        let csv = "cpu_request,memory_request,runsec,createtime,nodeSelector,priority,queueName\n\
2,4Gi,60,100,,1,default\n\
500m,512Mi,30,90,\"zone=a,disk=ssd\",5,q1\n";
        let b = convert_volcano_pods(csv).unwrap();
        let v: Value = serde_json::from_str(&b.to_json("v")).unwrap();
        assert_eq!(v["jobs"][0]["id"], json!("2"));
        assert_eq!(v["jobs"][0]["subtime"], json!(0));
        assert_eq!(v["jobs"][0]["nodeSelector"]["disk"], json!("ssd"));
        assert_eq!(v["jobs"][1]["subtime"], json!(10));
        assert_eq!(v["jobs"][1]["labels"]["queue"], json!("default"));
        let p = &v["profiles"][v["jobs"][1]["profile"].as_str().unwrap()];
        assert_eq!(p["memory"], json!("4Gi"));
        assert!(
            convert_volcano_pods("cpu_request,memory_request,runsec,createtime\nx,1,1,1\n")
                .unwrap_err()
                .contains("line 2")
        );
    }

    #[test]
    fn label_maps_in_every_spelling() {
        assert_eq!(parse_label_map("map[a:1 b:2]").unwrap().len(), 2);
        assert_eq!(parse_label_map("{\"a\":\"1\"}").unwrap()["a"], json!("1"));
        assert!(parse_label_map("").unwrap().is_empty());
        assert!(parse_label_map("nonsense").is_err());
    }
}
