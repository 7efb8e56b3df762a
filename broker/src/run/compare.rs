//! `batkube compare A B` and `batkube run --compare-exact`: two runs of one
//! case side by side, and their first difference.
//!
//! What is compared, in each run's output directory:
//!
//! - `jobs.csv`: every job's row (Batsim's), keyed by workload and job id;
//! - `pods.csv`: every pod's row, keyed by job, pod and occurrence;
//! - `requests.csv` (`--log-requests`), when both runs have it: each
//!   program's requests, instant by instant (at one simulated instant, a
//!   program's requests as a multiset: its goroutines may send them in any
//!   order), without the query string's resource versions (they count the
//!   store's writes, which differ whenever anything does).
//!
//! The first difference is the earliest in simulated time.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

/// `batkube compare`.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// A run's output directory (--out).
    pub a: PathBuf,
    /// Another run's output directory, of the same case.
    pub b: PathBuf,
}

/// One difference: where, when, what.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// `jobs.csv`, `pods.csv`, `requests.csv`.
    pub file: &'static str,
    /// Simulated time it shows at (the earliest of the two sides).
    pub time: f64,
    pub what: String,
}

/// Every file compared: how many rows (or instants) differ, and the first.
#[derive(Debug, Default)]
pub struct Comparison {
    /// (file, rows compared, rows differing)
    pub files: Vec<(&'static str, usize, usize)>,
    pub first: Option<Difference>,
}

impl Comparison {
    pub fn identical(&self) -> bool {
        self.first.is_none()
    }

    fn note(&mut self, d: Difference) {
        if self.first.as_ref().is_none_or(|f| d.time < f.time) {
            self.first = Some(d);
        }
    }
}

impl std::fmt::Display for Comparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (file, rows, differ) in &self.files {
            writeln!(f, "{file}: {rows} compared, {differ} differ")?;
        }
        match &self.first {
            None => write!(f, "identical"),
            Some(d) => write!(
                f,
                "first difference, at simulated time {:.6} s, in {}: {}",
                d.time, d.file, d.what
            ),
        }
    }
}

/// `batkube compare A B`: prints the comparison; an error when they differ.
pub fn run(args: CompareArgs) -> anyhow::Result<()> {
    let c = compare_dirs(&args.a, &args.b)?;
    println!("{c}");
    if !c.identical() {
        bail!(
            "{} and {} differ (first difference above)",
            args.a.display(),
            args.b.display()
        );
    }
    Ok(())
}

/// Compares two runs' outputs (see the module's documentation).
pub fn compare_dirs(a: &Path, b: &Path) -> anyhow::Result<Comparison> {
    let mut c = Comparison::default();
    for (file, key_cols, time_cols) in [
        (
            "jobs.csv",
            &["workload_name", "job_id"][..],
            &["starting_time", "finish_time", "submission_time"][..],
        ),
        (
            "pods.csv",
            &["job_id", "pod"][..],
            &["bound", "started", "finished", "created"][..],
        ),
    ] {
        let ta = Table::read(&a.join(file))?;
        let tb = Table::read(&b.join(file))?;
        compare_rows(&mut c, file, &ta, &tb, key_cols, time_cols)?;
    }
    let (ra, rb) = (a.join("requests.csv"), b.join("requests.csv"));
    match (ra.exists(), rb.exists()) {
        (true, true) => compare_requests(&mut c, &Table::read(&ra)?, &Table::read(&rb)?)?,
        (false, false) => {}
        (x, _) => bail!(
            "only {} has requests.csv: run both with --log-requests to compare the programs' requests",
            if x { a.display() } else { b.display() }
        ),
    }
    Ok(c)
}

/// A CSV file: its header and rows.
struct Table {
    path: PathBuf,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn read(path: &Path) -> anyhow::Result<Table> {
        let mut r = csv::ReaderBuilder::new()
            .has_headers(true)
            .from_path(path)
            .with_context(|| format!("reading {}", path.display()))?;
        let header = r
            .headers()
            .with_context(|| format!("reading {}", path.display()))?
            .iter()
            .map(str::to_string)
            .collect();
        let mut rows = Vec::new();
        for (i, row) in r.records().enumerate() {
            let row = row.with_context(|| format!("reading {} line {}", path.display(), i + 2))?;
            rows.push(row.iter().map(str::to_string).collect());
        }
        Ok(Table {
            path: path.to_path_buf(),
            header,
            rows,
        })
    }

    fn column(&self, name: &str) -> anyhow::Result<usize> {
        self.header
            .iter()
            .position(|h| h == name)
            .with_context(|| format!("{} has no column {name:?}", self.path.display()))
    }
}

fn compare_rows(
    c: &mut Comparison,
    file: &'static str,
    a: &Table,
    b: &Table,
    key_cols: &[&str],
    time_cols: &[&str],
) -> anyhow::Result<()> {
    if a.header != b.header {
        bail!(
            "{} and {} have other columns: {} / {}",
            a.path.display(),
            b.path.display(),
            a.header.join(","),
            b.header.join(",")
        );
    }
    let keys: Vec<usize> = key_cols
        .iter()
        .map(|k| a.column(k))
        .collect::<Result<_, _>>()?;
    let times: Vec<usize> = time_cols.iter().filter_map(|k| a.column(k).ok()).collect();
    // Keyed rows; a key seen again (a resubmitted job's pod) gets its occurrence.
    let index = |t: &Table| {
        let mut seen: BTreeMap<Vec<String>, usize> = BTreeMap::new();
        let mut m = BTreeMap::new();
        for row in &t.rows {
            let k: Vec<String> = keys
                .iter()
                .map(|&i| row.get(i).cloned().unwrap_or_default())
                .collect();
            let n = seen.entry(k.clone()).or_default();
            *n += 1;
            m.insert((k, *n), row.clone());
        }
        m
    };
    let (ma, mb) = (index(a), index(b));
    let all: BTreeSet<_> = ma.keys().chain(mb.keys()).cloned().collect();
    let earliest = |row: &[String]| {
        times
            .iter()
            .filter_map(|&i| row.get(i)?.parse::<f64>().ok())
            .filter(|t| *t >= 0.0)
            .reduce(f64::min)
            .unwrap_or(f64::INFINITY)
    };
    let mut differ = 0;
    for key in &all {
        let name = key.0.join(" ");
        let d = match (ma.get(key), mb.get(key)) {
            (Some(x), Some(y)) if x == y => continue,
            (Some(x), Some(y)) => {
                let cols: Vec<String> = a
                    .header
                    .iter()
                    .zip(x.iter().zip(y))
                    .filter(|(_, (u, v))| u != v)
                    .map(|(h, (u, v))| format!("{h} {u} / {v}"))
                    .collect();
                // The earliest time either side shows in a column that differs.
                let t = a
                    .header
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| times.contains(i) && x[*i] != y[*i])
                    .flat_map(|(i, _)| [x[i].parse::<f64>().ok(), y[i].parse::<f64>().ok()])
                    .flatten()
                    .filter(|t| *t >= 0.0)
                    .reduce(f64::min)
                    .unwrap_or_else(|| earliest(x).min(earliest(y)));
                Difference {
                    file,
                    time: t,
                    what: format!("{name}: {}", cols.join(", ")),
                }
            }
            (Some(x), None) => Difference {
                file,
                time: earliest(x),
                what: format!("{name} only in the first run"),
            },
            (None, Some(y)) => Difference {
                file,
                time: earliest(y),
                what: format!("{name} only in the second run"),
            },
            (None, None) => unreachable!("a key of one of them"),
        };
        differ += 1;
        c.note(d);
    }
    c.files.push((file, all.len(), differ));
    Ok(())
}

/// requests.csv: per program, per instant, the multiset of requests.
fn compare_requests(c: &mut Comparison, a: &Table, b: &Table) -> anyhow::Result<()> {
    type Instants = BTreeMap<(String, u64), BTreeMap<String, usize>>;
    let index = |t: &Table| -> anyhow::Result<Instants> {
        let [time, program, method, verb, resource, path, query, code] = [
            "time", "program", "method", "verb", "resource", "path", "query", "code",
        ]
        .map(|k| t.column(k));
        let (time, program, method, verb, resource, path, query, code) = (
            time?, program?, method?, verb?, resource?, path?, query?, code?,
        );
        let mut m: Instants = BTreeMap::new();
        for row in &t.rows {
            let ns = parse_ns(&row[time]).with_context(|| {
                format!("{}: time {:?} is not a number", t.path.display(), row[time])
            })?;
            let line = format!(
                "{} {} {} {}{} -> {}",
                row[method],
                row[verb],
                row[resource],
                row[path],
                stable_query(&row[query]),
                row[code]
            );
            *m.entry((row[program].clone(), ns))
                .or_default()
                .entry(line)
                .or_default() += 1;
        }
        Ok(m)
    };
    let (ma, mb) = (index(a)?, index(b)?);
    let all: BTreeSet<_> = ma.keys().chain(mb.keys()).cloned().collect();
    let empty = BTreeMap::new();
    let mut differ = 0;
    for key in &all {
        let (x, y) = (ma.get(key).unwrap_or(&empty), mb.get(key).unwrap_or(&empty));
        if x == y {
            continue;
        }
        differ += 1;
        let only = |p: &BTreeMap<String, usize>, q: &BTreeMap<String, usize>| {
            p.iter()
                .filter(|(l, n)| q.get(*l).is_none_or(|m| m < n))
                .map(|(l, n)| format!("{l} (x{})", n - q.get(l).copied().unwrap_or(0)))
                .take(3)
                .collect::<Vec<_>>()
                .join("; ")
        };
        let (ox, oy) = (only(x, y), only(y, x));
        let mut what = format!("{} at this instant:", key.0);
        if !ox.is_empty() {
            what += &format!(" only the first run made {ox}");
        }
        if !oy.is_empty() {
            what += &format!(
                "{} only the second run made {oy}",
                if ox.is_empty() { "" } else { ";" }
            );
        }
        c.note(Difference {
            file: "requests.csv",
            time: (key.1 as i128 - NS_OFFSET as i128) as f64 / 1e9,
            what,
        });
    }
    c.files.push(("requests.csv", all.len(), differ));
    Ok(())
}

/// Times are kept as nanoseconds from this offset (so negative warm-up
/// times order well as u64).
const NS_OFFSET: u64 = 1 << 62;

fn parse_ns(s: &str) -> Option<u64> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let int: u64 = int.parse().ok()?;
    let mut f = frac.to_string();
    f.truncate(9);
    while f.len() < 9 {
        f.push('0');
    }
    let ns = int.checked_mul(1_000_000_000)? + f.parse::<u64>().ok()?;
    Some(if neg { NS_OFFSET - ns } else { NS_OFFSET + ns })
}

/// The query without the parameters that count the store's writes
/// (`resourceVersion`, a list's `continue` token).
fn stable_query(q: &str) -> String {
    let kept: Vec<&str> = q
        .split('&')
        .filter(|p| !p.is_empty())
        .filter(|p| {
            let k = p.split('=').next().unwrap_or("");
            !matches!(k, "resourceVersion" | "continue")
        })
        .collect();
    if kept.is_empty() {
        String::new()
    } else {
        format!("?{}", kept.join("&"))
    }
}

/// `batkube run --compare-exact`: this program again, twice, with the same
/// arguments but --out DIR/exact --elide none and --out DIR/elided, both
/// with --log-requests; then [`compare_dirs`].
pub fn compare_exact(args: &super::RunArgs) -> anyhow::Result<()> {
    if !args.elide.any() {
        bail!(
            "--compare-exact compares a run under --elide RULES with the exact one: name the rules \
             (for example --elide idle)"
        );
    }
    let exe = std::env::current_exe().context("finding batkube's own binary")?;
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let exact = args.out.join("exact");
    let elided = args.out.join("elided");
    for (dir, elide) in [
        (&exact, "none".to_string()),
        (&elided, args.elide.to_string()),
    ] {
        let rewritten = rewrite_args(&argv, dir, &elide);
        eprintln!(
            "batkube: --compare-exact: the run with --elide {elide}, into {}",
            dir.display()
        );
        let status = std::process::Command::new(&exe)
            .args(&rewritten)
            .status()
            .with_context(|| format!("running {}", exe.display()))?;
        if !status.success() {
            bail!(
                "the run with --elide {elide} failed ({status}); its outputs are in {}",
                dir.display()
            );
        }
    }
    let c = compare_dirs(&exact, &elided)?;
    let text = format!(
        "exact: {}\nelided (--elide {}): {}\n{c}\n",
        exact.display(),
        args.elide,
        elided.display()
    );
    std::fs::write(args.out.join("compare.txt"), &text)
        .with_context(|| format!("writing {}", args.out.join("compare.txt").display()))?;
    print!("{text}");
    if !c.identical() {
        bail!(
            "the run under --elide {} differs from the exact one (see {})",
            args.elide,
            args.out.join("compare.txt").display()
        );
    }
    Ok(())
}

/// `run`'s arguments with --out, --elide replaced, --compare-exact left
/// out and --log-requests added.
fn rewrite_args(argv: &[OsString], out: &Path, elide: &str) -> Vec<OsString> {
    let mut v = Vec::new();
    let mut skip_next = false;
    for a in argv {
        if skip_next {
            skip_next = false;
            continue;
        }
        let s = a.to_string_lossy();
        match s.as_ref() {
            "--compare-exact" | "--log-requests" => continue,
            "--out" | "--elide" => {
                skip_next = true;
                continue;
            }
            _ if s.starts_with("--out=") || s.starts_with("--elide=") => continue,
            _ => v.push(a.clone()),
        }
    }
    v.push("--out".into());
    v.push(out.as_os_str().to_owned());
    v.push("--elide".into());
    v.push(elide.into());
    v.push("--log-requests".into());
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_rewritten_for_each_run() {
        let argv: Vec<OsString> = [
            "run",
            "-v",
            "--out",
            "o",
            "--elide=idle",
            "--compare-exact",
            "-p",
            "x",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let got = rewrite_args(&argv, Path::new("o/exact"), "none");
        let got: Vec<String> = got.iter().map(|s| s.to_string_lossy().into()).collect();
        assert_eq!(
            got,
            [
                "run",
                "-v",
                "-p",
                "x",
                "--out",
                "o/exact",
                "--elide",
                "none",
                "--log-requests"
            ]
        );
    }

    #[test]
    fn queries_lose_their_resource_versions() {
        assert_eq!(stable_query("resourceVersion=12&watch=true"), "?watch=true");
        assert_eq!(stable_query("resourceVersion=12"), "");
        assert_eq!(parse_ns("1.5"), Some(NS_OFFSET + 1_500_000_000));
        assert!(parse_ns("-1.0") < parse_ns("0.000000001"));
    }

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).unwrap();
    }

    #[test]
    fn the_first_difference_is_the_earliest() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let jobs = "job_id,workload_name,submission_time,starting_time,finish_time\n";
        write(
            a.path(),
            "jobs.csv",
            &format!("{jobs}1,w0,0,5,10\n2,w0,0,1,3\n"),
        );
        write(
            b.path(),
            "jobs.csv",
            &format!("{jobs}2,w0,0,1,3\n1,w0,0,6,11\n"),
        );
        let pods = "job_id,pod,created,bound,started,finished\n";
        write(a.path(), "pods.csv", &format!("{pods}w0!1,p1,0,5,5,10\n"));
        write(b.path(), "pods.csv", &format!("{pods}w0!1,p1,0,5,6,11\n"));
        let req = "time,program,method,verb,resource,path,query,code\n";
        write(
            a.path(),
            "requests.csv",
            &format!("{req}0.5,scheduler,GET,list,pods,/api/v1/pods,resourceVersion=3,200\n5.000000000,scheduler,POST,create,bindings,/x,,201\n"),
        );
        write(
            b.path(),
            "requests.csv",
            &format!("{req}0.5,scheduler,GET,list,pods,/api/v1/pods,resourceVersion=9,200\n6.0,scheduler,POST,create,bindings,/x,,201\n"),
        );
        let c = compare_dirs(a.path(), b.path()).unwrap();
        let first = c.first.clone().unwrap();
        assert_eq!(first.time, 5.0, "{c}");
        assert!(
            first.what.contains("starting_time 5 / 6")
                || first.what.contains("started 5 / 6")
                || first.what.contains("bindings"),
            "{c}"
        );
        assert_eq!(
            c.files,
            vec![
                ("jobs.csv", 2, 1),
                ("pods.csv", 1, 1),
                ("requests.csv", 3, 2)
            ]
        );
        assert!(compare_dirs(a.path(), a.path()).unwrap().identical());
    }
}
