//! The upstream kube-scheduler, unmodified, under the seccomp supervisor:
//! built from Go modules (`schedulers/build-go.sh --check` once per test
//! process, see `common/go.rs`: the machine's Go and the module proxy; it
//! also vets both Go modules and runs the example plugin's Go tests; quick
//! when up to date), then run by `batkube run
//! --shim seccomp` on the 2020 study's burst workload. Its decisions must
//! be those of a scheduler on exact simulated time: the makespan and mean
//! wait of batkube-scheduler (same profile semantics), on every run.
//!
//! Then as researchers deploy it: only `--kubeconfig` (protobuf bodies,
//! leader election on the lease `kube-system/kube-scheduler`, the HTTPS
//! endpoint on its default port), and the example plugin from its
//! KubeSchedulerConfiguration; and side by side with batkube-scheduler on
//! the same small inputs, to learn where ours decides differently.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// target/go/kube-scheduler, built (and vetted) from schedulers/kube-scheduler
/// once for all the tests of this file.
fn kube_scheduler() -> PathBuf {
    common::go::go_program("kube-scheduler", true)
}

fn batkube_scheduler() -> PathBuf {
    common::batkube_scheduler()
}

/// Runs `batkube run --shim seccomp --standin --strict` and returns
/// summary.json; a failed run fails the test with the end of the
/// scheduler's log.
fn batkube_run(out: &Path, platform: &Path, workload: &Path, scheduler: &str) -> serde_json::Value {
    batkube_run_with(out, platform, workload, scheduler, &[]).0
}

/// The same with more flags of `batkube run`; also returns its stderr.
fn batkube_run_with(
    out: &Path,
    platform: &Path,
    workload: &Path,
    scheduler: &str,
    extra: &[&str],
) -> (serde_json::Value, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_batkube"))
        .arg("run")
        .arg("--platform")
        .arg(platform)
        .arg("--workload")
        .arg(workload)
        .arg("--scheduler")
        .arg(scheduler)
        .args(["--shim", "seccomp", "--standin", "--strict", "--out"])
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    let log = std::fs::read_to_string(out.join("scheduler.log")).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(30).collect();
    assert!(
        o.status.success(),
        "batkube run failed ({scheduler}):\n{}\nscheduler log (end, reversed):\n{}",
        stderr.lines().rev().take(30).collect::<Vec<_>>().join("\n"),
        tail.join("\n")
    );
    let summary =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    (summary, stderr)
}

fn run(out: &Path, sched: &Path) -> serde_json::Value {
    batkube_run(
        out,
        &root().join("platforms/16-node.xml"),
        &root().join("workloads/200_delay170.json"),
        &format!(
            "{} --kubeconfig \"$KUBECONFIG\" --kube-api-content-type=application/json --leader-elect=false --secure-port=0",
            sched.display()
        ),
    )
}

#[test]
fn upstream_kube_scheduler_is_exact_under_seccomp() {
    let sched = kube_scheduler();
    let dir = tempfile::tempdir().unwrap();
    for i in 0..2 {
        let s = run(&dir.path().join(format!("run{i}")), &sched);
        assert_eq!(s["shim"], "seccomp");
        assert_eq!(s["jobs_succeeded"], 200, "{s}");
        assert_eq!(s["overcommit_count"], 0, "{s}");
        let makespan = s["makespan"].as_f64().unwrap();
        let wait = s["mean_wait"].as_f64().unwrap();
        // Real Batsim 4.2.1 gives these for the burst run (the stand-in reproduces it).
        assert!((makespan - 2210.040003).abs() < 1e-6, "makespan {makespan}");
        assert!((wait - 979.218433).abs() < 1e-6, "mean wait {wait}");
    }
}

/// `--seed` (deterministic execution by default): two runs with two CPU
/// hogs beside give byte-identical outputs on the spaced case, where
/// submissions, completions, the scheduler's timers and the API's
/// bookmarks share instants. Before bookmarks were written ahead of an
/// instant's changes, and each watch event had its own frame, what the
/// scheduler read (a bookmark's version, how events were framed) followed
/// the machine's thread timing, and so did its placements.
#[test]
fn upstream_kube_scheduler_with_a_seed_is_identical_under_load() {
    let sched = kube_scheduler();
    let dir = tempfile::tempdir().unwrap();
    let _hogs = common::Hogs::start(2);
    let mut outputs = Vec::new();
    for i in 0..2 {
        let out = dir.path().join(format!("run{i}"));
        let (s, _) = batkube_run_with(
            &out,
            &root().join("platforms/16-node.xml"),
            &root().join("workloads/spaced_200_delay170.json"),
            &format!(
                "{} --kubeconfig \"$KUBECONFIG\" --leader-elect=false --secure-port=0",
                sched.display()
            ),
            &["--seed", "1"],
        );
        assert_eq!(s["jobs_succeeded"], 200, "{s}");
        outputs.push(
            ["jobs.csv", "pods.csv", "nodes.csv", "timeline.csv"]
                .map(|f| std::fs::read(out.join(f)).unwrap()),
        );
    }
    for (k, f) in ["jobs.csv", "pods.csv", "nodes.csv", "timeline.csv"]
        .iter()
        .enumerate()
    {
        assert!(
            outputs[0][k] == outputs[1][k],
            "{f} differs between two runs with --seed 1"
        );
    }
}

/// The first `n` jobs of the burst workload (one cpu, 170 s, all at 0).
fn burst_prefix(dir: &Path, n: usize) -> PathBuf {
    let mut w: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("workloads/200_delay170.json")).unwrap(),
    )
    .unwrap();
    w["jobs"].as_array_mut().unwrap().truncate(n);
    let path = dir.join(format!("burst{n}.json"));
    std::fs::write(&path, w.to_string()).unwrap();
    path
}

/// A node of a platform: its cpu count and its `disktype` prop.
#[derive(Debug, Clone)]
struct Host {
    cpu: u32,
    disktype: String,
}

/// Hosts of a batkube-generated platform, by name (their node names).
fn hosts(platform: &Path) -> std::collections::BTreeMap<String, Host> {
    let xml = std::fs::read_to_string(platform).unwrap();
    let attr = |line: &str, name: &str| -> Option<String> {
        let at = line.find(&format!("{name}=\""))? + name.len() + 2;
        Some(line[at..].split('"').next()?.to_string())
    };
    let mut out = std::collections::BTreeMap::new();
    let mut current: Option<(String, Host)> = None;
    for line in xml.lines() {
        let line = line.trim();
        if line.starts_with("<host ") {
            let id = attr(line, "id").unwrap();
            current = Some((
                id,
                Host {
                    cpu: 0,
                    disktype: String::new(),
                },
            ));
        } else if line.starts_with("<prop ") {
            if let Some((_, h)) = current.as_mut() {
                match attr(line, "id").as_deref() {
                    Some("cpu") => h.cpu = attr(line, "value").unwrap().parse().unwrap(),
                    Some("disktype") => h.disktype = attr(line, "value").unwrap(),
                    _ => {}
                }
            }
        } else if line.starts_with("</host>") {
            if let Some((id, h)) = current.take() {
                if h.cpu > 0 {
                    out.insert(id, h);
                }
            }
        }
    }
    out
}

/// pods.csv as pod -> (node, bound).
fn placements(out: &Path) -> std::collections::BTreeMap<String, (String, String)> {
    let csv = std::fs::read_to_string(out.join("pods.csv")).unwrap();
    csv.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[1].to_string(), (f[2].to_string(), f[4].to_string()))
        })
        .collect()
}

/// klog lines at error or fatal level (`E1231 …`, `F0101 …`).
fn error_lines(out: &Path) -> Vec<String> {
    std::fs::read_to_string(out.join("scheduler.log"))
        .unwrap()
        .lines()
        .filter(|l| {
            let b = l.as_bytes();
            b.len() > 5 && (b[0] == b'E' || b[0] == b'F') && b[1..5].iter().all(u8::is_ascii_digit)
        })
        .map(str::to_string)
        .collect()
}

fn assert_leader_and_clean(out: &Path) {
    let log = std::fs::read_to_string(out.join("scheduler.log")).unwrap();
    // client-go logs this once the API accepted its create or update of
    // the lease; kube-scheduler schedules only from then on, and exits
    // ("leaderelection lost") if a renewal misses the 10 s deadline.
    assert!(
        log.contains(r#""Successfully acquired lease" lock="kube-system/kube-scheduler""#),
        "no leader elected in {}",
        out.display()
    );
    assert!(!log.contains("leaderelection lost"), "{log}");
    let errors = error_lines(out);
    assert!(
        errors.is_empty(),
        "error lines in {}:\n{}",
        out.display(),
        errors.join("\n")
    );
}

fn ssd_count(out: &Path, hosts: &std::collections::BTreeMap<String, Host>) -> usize {
    placements(out)
        .values()
        .filter(|(node, _)| hosts[node].disktype == "ssd")
        .count()
}

/// kube-scheduler as deployed: only `--kubeconfig` (so protobuf bodies,
/// leader election, the HTTPS endpoint on port 10259: the two runs are in
/// one test so that they do not share the port), then the example plugin
/// enabled by its KubeSchedulerConfiguration, whose effect (every pod on a
/// `disktype=ssd` node) must show in the placements.
#[test]
fn upstream_defaults_elect_a_leader_and_the_plugin_shows() {
    let sched = kube_scheduler();
    let plugin = common::go::go_program("kube-scheduler-with-plugin", true);
    let dir = tempfile::tempdir().unwrap();
    let platform = root().join("platforms/heterogeneous.xml");
    let hosts = hosts(&platform);
    let ssd_cpus: u32 = hosts
        .values()
        .filter(|h| h.disktype == "ssd")
        .map(|h| h.cpu)
        .sum();
    let workload = burst_prefix(dir.path(), 20);
    assert!(
        ssd_cpus >= 20,
        "the ssd nodes must hold all 20 pods at once"
    );

    // --fast-forward=false: the broker wakes the scheduler at each of its
    // timers even with nothing pending, so the lease is renewed every 2 s
    // of simulated time (fakeapi's -vv log names each request served).
    let plain = dir.path().join("default");
    let (s, log) = batkube_run_with(
        &plain,
        &platform,
        &workload,
        &format!("{} --kubeconfig \"$KUBECONFIG\"", sched.display()),
        &["--fast-forward=false", "-vv"],
    );
    assert_eq!(s["jobs_succeeded"], 20, "{s}");
    assert_eq!(s["overcommit_count"], 0, "{s}");
    assert_leader_and_clean(&plain);
    let served = |verb: &str, code: u16| {
        let needle =
            format!("served verb=\"{verb}\" resource=\"leases.coordination.k8s.io\" code={code}");
        log.lines().filter(|l| l.contains(&needle)).count()
    };
    let (created, renewed) = (served("create", 201), served("update", 200));
    println!("lease: {created} create, {renewed} updates over 170 simulated seconds");
    assert_eq!(created, 1, "the lease is created once");
    assert!(
        renewed >= 80,
        "a renewal every 2 s of simulated time: 85 over 170 s, got {renewed}"
    );

    let with_plugin = dir.path().join("plugin");
    let s = batkube_run(
        &with_plugin,
        &platform,
        &workload,
        &format!(
            "{} --config {} --master \"$(sed -n 's/^ *server: *//p' \"$KUBECONFIG\")\"",
            plugin.display(),
            root()
                .join("schedulers/example-plugin/config.yaml")
                .display()
        ),
    );
    assert_eq!(s["jobs_succeeded"], 20, "{s}");
    assert_eq!(s["overcommit_count"], 0, "{s}");
    assert_leader_and_clean(&with_plugin);

    let (plain_ssd, plugin_ssd) = (ssd_count(&plain, &hosts), ssd_count(&with_plugin, &hosts));
    println!("pods on disktype=ssd nodes: {plain_ssd}/20 default profile, {plugin_ssd}/20 with NodeLabelPreference");
    assert_eq!(
        plugin_ssd, 20,
        "NodeLabelPreference (weight 5) puts every pod on an ssd node"
    );
    // The default profile spreads by free cpu fraction, ignoring labels:
    // the 8-cpu hdd node alone takes some of the first pods.
    assert!(
        plain_ssd < 20,
        "the default profile ignores disktype ({plain_ssd}/20 on ssd)"
    );
}

/// Where batkube-scheduler claims the upstream default profile's semantics:
/// both schedulers on the same small inputs. What is identical and asserted:
/// jobs run, makespan, mean wait. What differs and is printed: which pod
/// lands where, which pods wait, and how many pods each class of node (by
/// cpu) takes, usually the same but not always (upstream picks among
/// equally scored nodes at random, and that shifts later choices: one run
/// in CI put a pod on a 2-cpu node where ours used a 4-cpu one). Pods created
/// in the same simulated instant get equal queue timestamps under the frozen
/// clock, and upstream's activeQ (priority, then timestamp) pops equals in
/// heap order; ours breaks the tie by arrival in its queue (here the order
/// of the API's list and watch events, that is pod names: w0-53..w0-9 wait).
/// With equal job lengths that changes who waits, not the mean wait.
/// Beyond these inputs, `experiments/upstream_compare.py` (numbers in
/// experiments/README.md) finds upstream v1.35 starving a few pods of the
/// spaced workload where ours does not, and KIT's mean wait varying from
/// run to run upstream (ours falls inside its range).
#[test]
fn same_decisions_as_batkube_scheduler() {
    let sched = kube_scheduler();
    let ours = batkube_scheduler();
    let dir = tempfile::tempdir().unwrap();
    let platform = root().join("platforms/heterogeneous.xml");
    let hosts = hosts(&platform);
    // 20 pods fit at once (48 cpus); 60 make a queue that drains as the
    // first wave completes.
    for n in [20, 60] {
        let workload = burst_prefix(dir.path(), n);
        let up_out = dir.path().join(format!("upstream{n}"));
        let ours_out = dir.path().join(format!("ours{n}"));
        // Defaults but for the HTTPS port, so that this test and the one
        // above may run at once.
        let up = batkube_run(
            &up_out,
            &platform,
            &workload,
            &format!(
                "{} --kubeconfig \"$KUBECONFIG\" --secure-port=0",
                sched.display()
            ),
        );
        let us = batkube_run(&ours_out, &platform, &workload, &ours.display().to_string());
        for s in [&up, &us] {
            assert_eq!(s["jobs_succeeded"], n, "{s}");
            assert_eq!(s["overcommit_count"], 0, "{s}");
        }
        let (a, b) = (placements(&up_out), placements(&ours_out));
        let mut same = 0;
        let mut diff = Vec::new();
        for (pod, (node, bound)) in &a {
            let (their_node, their_bound) = &b[pod];
            if node == their_node && bound == their_bound {
                same += 1;
            } else {
                diff.push(format!(
                    "  {pod}: upstream {node} at {bound}, ours {their_node} at {their_bound}"
                ));
            }
        }
        println!(
            "{n} jobs on heterogeneous.xml: {same}/{n} pods on the same node at the same time; makespan {} / {}, mean wait {} / {} (upstream / ours)\n{}",
            up["makespan"], us["makespan"], up["mean_wait"], us["mean_wait"], diff.join("\n")
        );
        let (ma, mb) = (
            up["makespan"].as_f64().unwrap(),
            us["makespan"].as_f64().unwrap(),
        );
        let (wa, wb) = (
            up["mean_wait"].as_f64().unwrap(),
            us["mean_wait"].as_f64().unwrap(),
        );
        assert!((ma - mb).abs() < 1e-6, "makespan: upstream {ma}, ours {mb}");
        assert!(
            (wa - wb).abs() < 1e-6,
            "mean wait: upstream {wa}, ours {wb}"
        );
        // Pods per node, grouped by node cpu and sorted within a group.
        let per_class = |p: &std::collections::BTreeMap<String, (String, String)>| {
            let mut per_node: std::collections::BTreeMap<&str, usize> =
                hosts.keys().map(|h| (h.as_str(), 0)).collect();
            for (node, _) in p.values() {
                *per_node.get_mut(node.as_str()).unwrap() += 1;
            }
            let mut classes: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
            for (node, count) in per_node {
                classes.entry(hosts[node].cpu).or_default().push(count);
            }
            for v in classes.values_mut() {
                v.sort();
            }
            classes
        };
        // Not asserted: upstream breaks ties between equally scored nodes
        // with Go's math/rand (per-thread generators `--seed` does not
        // reach), so which node class a pod lands on varies from run to
        // run (seen: one pod on a 2-cpu node instead of a 4-cpu one).
        let (pa, pb) = (per_class(&a), per_class(&b));
        println!(
            "pods per node by node cpu: upstream {pa:?}, ours {pb:?}{}",
            if pa == pb { " (same)" } else { " (differ)" }
        );
    }
}

/// pods.csv as pod -> (node, last unschedulable reason).
fn pod_rows(out: &Path) -> std::collections::BTreeMap<String, (String, String)> {
    let mut r = csv::Reader::from_path(out.join("pods.csv")).unwrap();
    let h = r.headers().unwrap().clone();
    let col = |name: &str| h.iter().position(|c| c == name).unwrap();
    let (pod, node, reason) = (col("pod"), col("node"), col("last_unschedulable_reason"));
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            (
                rec[pod].to_string(),
                (rec[node].to_string(), rec[reason].to_string()),
            )
        })
        .collect()
}

/// `kube-scheduler-explain` (schedulers/kube-scheduler-explain): upstream's
/// kube-scheduler whose in-tree plugins record what they return when
/// `BATKUBE_EXPLAIN=1`, which `batkube run --explain` sets. On a burst of
/// 40 one-cpu pods on 16 one-cpu nodes (16 bound at once, the others
/// refused until nodes free up, three waves): a line of decisions.jsonl
/// per attempt the pod did not already show (numbers from 1, increasing;
/// a failed attempt identical but for its number to the one written
/// before is not written again; a successful one rides on the binding),
/// each pod's last line on its node, the failures with NodeResourcesFit's message on
/// every node and the scheduler's own message, scores for the chosen node
/// when scoring ran. Without `--explain` the same binary is upstream's
/// kube-scheduler: no annotations (no decisions.jsonl), and the makespan
/// and mean wait of plain kube-scheduler (which node of equal score a pod
/// gets is random upstream, so jobs.csv itself is not compared).
#[test]
fn explain_variant_writes_every_attempt_in_the_simulators_layout() {
    let plain = kube_scheduler();
    let explain = common::go::go_program("kube-scheduler-explain", true);
    let dir = tempfile::tempdir().unwrap();
    let platform = root().join("platforms/16-node.xml");
    let workload = burst_prefix(dir.path(), 40);
    let cmd = |bin: &Path| {
        format!(
            "{} --kubeconfig \"$KUBECONFIG\" --leader-elect=false --secure-port=0",
            bin.display()
        )
    };

    let out = dir.path().join("explained");
    let (s, _) = batkube_run_with(&out, &platform, &workload, &cmd(&explain), &["--explain"]);
    assert_eq!(s["jobs_succeeded"], 40, "{s}");
    assert_eq!(s["overcommit_count"], 0, "{s}");
    let text = std::fs::read_to_string(out.join("decisions.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let pods = pod_rows(&out);
    let mut per_pod: std::collections::BTreeMap<&str, Vec<&serde_json::Value>> = Default::default();
    for l in &lines {
        per_pod
            .entry(l["pod"].as_str().unwrap())
            .or_default()
            .push(l);
    }
    assert_eq!(per_pod.len(), 40, "every pod explained");
    let (mut failures, mut scored, mut gaps) = (0, 0, 0);
    for (pod, attempts) in &per_pod {
        let numbers: Vec<u64> = attempts
            .iter()
            .map(|l| l["attempt"].as_u64().unwrap())
            .collect();
        // From 1, increasing; a gap is a failed attempt identical to the
        // one the pod showed, not written again.
        assert_eq!(numbers[0], 1, "{pod}: {numbers:?}");
        assert!(
            numbers.windows(2).all(|w| w[0] < w[1]),
            "{pod}: {numbers:?}"
        );
        for w in attempts.windows(2) {
            assert!(
                w[0]["filter"] != w[1]["filter"]
                    || w[0]["reason"] != w[1]["reason"]
                    || w[0]["node"] != w[1]["node"],
                "{pod}: an attempt the pod already showed, written again: {}",
                w[1]
            );
        }
        gaps += (numbers.last().unwrap() - numbers.len() as u64) as usize;
        let (node, reason) = &pods[*pod];
        let last = attempts.last().unwrap();
        assert_eq!(last["node"], serde_json::json!(node), "{pod}: {last}");
        assert_eq!(last["reason"], serde_json::Value::Null, "{pod}");
        for l in &attempts[..attempts.len() - 1] {
            failures += 1;
            assert_eq!(l["node"], serde_json::Value::Null, "{pod}: {l}");
            // The PodScheduled condition's message: the last failure's is
            // the one pods.csv keeps.
            assert!(
                l["reason"]
                    .as_str()
                    .unwrap()
                    .starts_with("0/16 nodes are available: 16 Insufficient cpu."),
                "{l}"
            );
            let filter = l["filter"].as_object().unwrap();
            assert_eq!(filter.len(), 16, "every node filtered: {l}");
            for (n, plugins) in filter {
                assert_eq!(
                    plugins["NodeResourcesFit"], "Insufficient cpu",
                    "{pod} on {n}: {l}"
                );
            }
        }
        if attempts.len() > 1 {
            assert_eq!(
                attempts[attempts.len() - 2]["reason"].as_str().unwrap(),
                reason,
                "{pod}: the scheduler's message"
            );
        }
        let score = last["score"].as_object().unwrap();
        if !score.is_empty() {
            scored += 1;
            let chosen = &score[node.as_str()];
            assert!(chosen["NodeResourcesFit"].is_string(), "{last}");
            assert!(
                last["finalscore"][node.as_str()]["NodeResourcesBalancedAllocation"].is_string(),
                "{last}"
            );
        }
    }
    println!(
        "{} attempts written: 40 bindings, {failures} failures, {scored} bindings scored (the others had one feasible node); {gaps} failures not written again",
        lines.len()
    );
    assert!(
        failures >= 24,
        "the 24 pods beyond the first wave fail first"
    );
    assert!(scored > 0);
    // Keys as Go writes them (a map's keys sorted as strings: node-0,
    // node-1, node-10, … node-2), on an attempt that filtered every node.
    // (The first line's text is not enough: which attempt comes first,
    // and which nodes it names first, varies with the scheduler's run.)
    let full = lines
        .iter()
        .find(|l| l["filter"].as_object().is_some_and(|f| f.len() == 16))
        .expect("an attempt that filtered every node");
    let keys: Vec<&String> = full["filter"].as_object().unwrap().keys().collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "{full}");
    let at = |k: &str| keys.iter().position(|x| *x == k).unwrap();
    assert!(at("node-1") < at("node-10") && at("node-10") < at("node-2"));

    // Without --explain: upstream's kube-scheduler, nothing written.
    let quiet = dir.path().join("quiet");
    let q = batkube_run(&quiet, &platform, &workload, &cmd(&explain));
    assert!(
        !quiet.join("decisions.jsonl").exists(),
        "no annotations without --explain"
    );
    let upstream = dir.path().join("upstream");
    let u = batkube_run(&upstream, &platform, &workload, &cmd(&plain));
    for r in [&q, &u] {
        assert_eq!(r["jobs_succeeded"], 40, "{r}");
        for k in ["makespan", "mean_wait"] {
            assert!(
                (r[k].as_f64().unwrap() - s[k].as_f64().unwrap()).abs() < 1e-6,
                "{k}: {} explained, {r}",
                s[k]
            );
        }
    }
}
