//! `batkube workload …` and `batkube platform …` as a user runs them: the
//! CLI tools regenerate what is shipped (SWF and Volcano conversions,
//! generation), validate against a platform and point at bad lines. (That
//! the shipped inputs are valid is `inputs/tests/shipped.rs`.)

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use batkube_inputs::workload_check;
use batsim::platform::Platform;
use batsim::standin::fcfs::Fcfs;
use batsim::standin::{Options, StandIn};
use batsim::workload::Workload;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn batkube() -> Command {
    Command::new(env!("CARGO_BIN_EXE_batkube"))
}

/// The Parallel Workloads Archive traces the shipped files came from, in
/// `../shared/reference/batkube/swf` beside the repository (CI has it).
fn swf_trace(name: &str) -> PathBuf {
    let p = common::shared().join("reference/batkube/swf").join(name);
    assert!(p.is_file(), "{} is missing", p.display());
    p
}

#[test]
fn swf_conversion_regenerates_both_shipped_nasa_workloads_byte_for_byte() {
    let swf = swf_trace("NASA-iPSC-1993-3.1-cln.swf");
    let dir = tempfile::tempdir().unwrap();
    // The commands of workloads/README.md, run from the repository.
    for (args, shipped) in [
        (
            vec![
                "--parallel",
                "fold",
                "--node-cpu",
                "16",
                "--procs-reference",
                "128",
            ],
            "NASA-iPSC-1993-3.1.json",
        ),
        (
            vec!["--node-cpu", "16", "--platform", "platforms/128-node.xml"],
            "NASA-iPSC-1993-3.1-parallel.json",
        ),
    ] {
        let out = dir.path().join(shipped);
        let run = batkube()
            .current_dir(repo())
            .args(["workload", "convert", "swf"])
            .arg(&swf)
            .args(&args)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        assert!(
            std::fs::read(&out).unwrap()
                == std::fs::read(repo().join("workloads").join(shipped)).unwrap(),
            "{shipped} differs from what `convert swf {}` makes",
            args.join(" ")
        );
    }
}

/// A machine of 8 nodes of 4 processors (SWF 2.2 header), jobs on 1, 6, 16
/// and 32 processors; job 2 uses 2048 KB per processor.
const SMP_TRACE: &str = "; Version: 2.2
; MaxNodes: 8
; MaxProcs: 32
    1     0  0  60   1  -1    -1   1  -1 -1 1 1 1 -1 1 -1 -1 -1
    2    10  0  60   6  -1  2048   6  -1 -1 1 1 1 -1 1 -1 -1 -1
    3    20  0  60  16  -1    -1  16  -1 -1 1 1 1 -1 1 -1 -1 -1
    4    30  0  60  32  -1    -1  32  -1 -1 1 1 1 -1 1 -1 -1 -1
";

/// (res, cpu, memory) per job, the requests from each job's profile.
fn pods(w: &Workload) -> Vec<(u32, f64, Option<String>)> {
    w.jobs
        .iter()
        .map(|j| {
            let p = w.profile(&j.profile).unwrap().json();
            (
                j.res,
                batkube_inputs::quantity::cpu_from_value(&p["cpu"]).unwrap(),
                p.get("memory").and_then(|m| m.as_str()).map(str::to_string),
            )
        })
        .collect()
}

#[test]
fn cli_converts_a_parallel_swf_split_by_default_or_folded() {
    let dir = tempfile::tempdir().unwrap();
    let swf = dir.path().join("smp.swf");
    std::fs::write(&swf, SMP_TRACE).unwrap();
    let convert = |extra: &[&str], out: &str| {
        let out = dir.path().join(out);
        let run = batkube()
            .args(["workload", "convert", "swf"])
            .arg(&swf)
            .args(extra)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(workload_check::check(&text, "t").is_ok());
        (
            Workload::from_file(&out, "w0").unwrap(),
            String::from_utf8_lossy(&run.stderr).to_string(),
        )
    };
    // 4 procs per node from the header: res = ceil(procs / 4), each pod
    // procs / res / 4 x 2 cpu, memory 2048 KB x its procs.
    let (split, log) = convert(&["--node-cpu", "2"], "split.json");
    assert_eq!(
        pods(&split),
        vec![
            (1, 0.5, None),
            (2, 1.5, Some("6Mi".into())),
            (4, 2.0, None),
            (8, 2.0, None),
        ]
    );
    assert!(
        log.contains("4 procs per node (the header's MaxProcs / MaxNodes)"),
        "{log}"
    );
    let (fold, _) = convert(&["--node-cpu", "2", "--parallel", "fold"], "fold.json");
    assert_eq!(
        pods(&fold),
        vec![
            (1, 0.063, None),
            (1, 0.375, Some("12Mi".into())),
            (1, 1.0, None),
            (1, 2.0, None),
        ]
    );
    let (per_proc, _) = convert(&["--procs-per-node", "1"], "one.json");
    assert_eq!(
        per_proc.jobs.iter().map(|j| j.res).collect::<Vec<_>>(),
        [1, 6, 16, 32]
    );
    // Jobs larger than the platform or --max-res are left out, each named.
    let p = dir.path().join("p.xml");
    let run = batkube()
        .args(["platform", "gen", "-n", "3", "-o"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(run.status.success());
    let (kept, log) = convert(
        &["--platform", p.to_str().unwrap(), "--max-res", "2"],
        "kept.json",
    );
    assert_eq!(
        kept.jobs.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        ["1", "2"]
    );
    assert!(
        log.contains("smp.swf:6: job 3 left out: res 4 > --max-res 2"),
        "{log}"
    );
    assert!(
        log.contains("smp.swf:7: job 4 left out: res 8 > --max-res 2"),
        "{log}"
    );
}

#[test]
fn cli_generates_res_from_a_distribution_and_validates_it_against_a_platform() {
    let dir = tempfile::tempdir().unwrap();
    let gen = |extra: &[&str]| {
        let run = batkube()
            .args([
                "workload",
                "generate",
                "-n",
                "200",
                "--arrival",
                "poisson:5",
            ])
            .args(["--duration", "exp:60", "--cpu", "choice:500m,1"])
            .args(extra)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        String::from_utf8(run.stdout).unwrap()
    };
    let weighted = ["--res", "choice:1:0.5,4:0.3,16:0.2", "--seed", "9"];
    let a = gen(&weighted);
    assert_eq!(a, gen(&weighted), "the same seed gives the same file");
    assert_ne!(
        a,
        gen(&["--res", "choice:1:0.5,4:0.3,16:0.2", "--seed", "10"])
    );
    let w = dir.path().join("w.json");
    std::fs::write(&w, &a).unwrap();
    let wl = Workload::from_file(&w, "w0").unwrap();
    let support: std::collections::BTreeSet<u32> = wl.jobs.iter().map(|j| j.res).collect();
    assert_eq!(support.into_iter().collect::<Vec<_>>(), [1, 4, 16]);
    let uniform = gen(&["--res", "uniform:2:5", "--seed", "9"]);
    std::fs::write(&w, &uniform).unwrap();
    let support: std::collections::BTreeSet<u32> = Workload::from_file(&w, "w0")
        .unwrap()
        .jobs
        .iter()
        .map(|j| j.res)
        .collect();
    assert_eq!(support.into_iter().collect::<Vec<_>>(), [2, 3, 4, 5]);
    // Without --res (or with its default) nothing changes but res itself.
    assert_eq!(gen(&["--seed", "9"]), gen(&["--res", "1", "--seed", "9"]));
    let bad = batkube()
        .args(["workload", "generate", "-n", "1", "--res", "uniform:0:2"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    // On 8 machines the 16-machine jobs are warned of, each with its line.
    std::fs::write(&w, &a).unwrap();
    let p = dir.path().join("p.xml");
    assert!(batkube()
        .args(["platform", "gen", "-n", "8", "-o"])
        .arg(&p)
        .status()
        .unwrap()
        .success());
    let run = batkube()
        .args(["workload", "validate", "--platform"])
        .arg(&p)
        .arg(&w)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "a warning, not an error: {err}");
    let v: serde_json::Value = serde_json::from_str(&a).unwrap();
    let (i, big) = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .find(|(_, j)| j["res"] == 16)
        .unwrap();
    // Line of job i: description, nb_res and "jobs" come first.
    let expected = format!(
        "line {}, column 5: warning: job {} asks for 16 machines, more than the 8 compute machines of {}",
        i + 5,
        big["id"],
        p.display()
    );
    assert!(err.contains(&expected), "{expected}\n{err}");
    let fits = batkube()
        .args(["workload", "validate", "--platform"])
        .arg(&p)
        .arg(repo().join("workloads/poisson_500.json"))
        .output()
        .unwrap();
    assert!(fits.status.success() && fits.stderr.is_empty());
}

#[test]
fn generate_without_res_still_makes_the_shipped_poisson_workload() {
    // The command of workloads/README.md, made before --res existed.
    let run = batkube()
        .args([
            "workload",
            "generate",
            "-n",
            "500",
            "--arrival",
            "poisson:20",
        ])
        .args([
            "--duration",
            "lognormal:5:1",
            "--cpu",
            "choice:250m,500m,1,2",
        ])
        .args(["--memory", "choice:256Mi,1Gi,2Gi", "--seed", "1"])
        .output()
        .unwrap();
    assert!(run.status.success());
    let shipped = std::fs::read(repo().join("workloads/poisson_500.json")).unwrap();
    assert!(
        run.stdout == shipped,
        "poisson_500.json is no longer regenerated byte for byte"
    );
}

#[test]
fn swf_conversion_regenerates_the_shipped_kit_workload() {
    let swf = swf_trace("KIT-10-80.swf");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("kit.json");
    let run = batkube()
        .args(["workload", "convert", "swf"])
        .arg(&swf)
        .args([
            "--parallel",
            "fold",
            "--node-cpu",
            "6",
            "--cpu-cap",
            "5.9",
            "--trim",
            "3600",
            "-o",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let ours = Workload::from_file(&out, "w0").unwrap();
    let shipped = Workload::from_file(&repo().join("workloads/KIT_10h_80.json"), "w0").unwrap();
    assert_eq!(ours.jobs.len(), shipped.jobs.len());
    let cpu = |w: &Workload, j: &batsim::workload::WorkloadJob| {
        let p = w.profile(&j.profile).unwrap();
        (
            p.kind.clone(),
            batkube_inputs::quantity::cpu_from_value(&p.json()["cpu"]).unwrap(),
        )
    };
    for (a, b) in ours.jobs.iter().zip(&shipped.jobs) {
        assert_eq!((&a.id, a.subtime), (&b.id, b.subtime));
        assert_eq!(cpu(&ours, a), cpu(&shipped, b), "job {}", a.id);
    }
}

#[test]
fn cli_generates_validates_and_points_at_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("g.json");
    let gen = |seed: &str| {
        let run = batkube()
            .args(["workload", "generate", "-n", "30", "--arrival", "poisson:5"])
            .args([
                "--duration",
                "exp:60",
                "--cpu",
                "choice:500m,1",
                "--memory",
                "1Gi",
                "--seed",
                seed,
            ])
            .output()
            .unwrap();
        assert!(run.status.success());
        run.stdout
    };
    assert_eq!(gen("3"), gen("3"));
    std::fs::write(&w, gen("3")).unwrap();
    let p = dir.path().join("p.xml");
    let run = batkube()
        .args([
            "platform",
            "gen",
            "-n",
            "3",
            "--cpu",
            "uniform:1:4",
            "--label",
            "zone=a,b",
            "-o",
        ])
        .arg(&p)
        .output()
        .unwrap();
    assert!(run.status.success());
    let ok = batkube()
        .args(["workload", "validate"])
        .arg(&w)
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let ok = batkube()
        .args(["platform", "validate"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    // Break job 3 (line 7: description, nb_res and "jobs" come first).
    let text = String::from_utf8(gen("3")).unwrap();
    let broken: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i == 6 {
                l.replace("\"res\":1", "\"res\":0")
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(&w, broken.join("\n")).unwrap();
    let bad = batkube()
        .args(["workload", "validate"])
        .arg(&w)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success());
    assert!(
        err.contains("line 7, column 5: error: job \"3\": \"res\""),
        "{err}"
    );
}

#[test]
fn volcano_clusters_convert_into_a_platform_and_a_workload_the_standin_runs() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = dir.path().join("nodes.csv");
    std::fs::write(
        &nodes,
        "name,cpu_allocatable,memory_allocatable,label,maxPodNum\n\
         n1,4,8Gi,\"zone=a,disk=ssd\",110\n\
         n2,8000m,16Gi,zone=b,20\n",
    )
    .unwrap();
    let pods = dir.path().join("pods.csv");
    std::fs::write(
        &pods,
        "cpu_request,memory_request,runsec,createtime,nodeSelector,priority,queueName\n\
         2,4Gi,60,100,zone=a,1,default\n\
         500m,512Mi,30,90,,5,q1\n\
         1,1Gi,10,130,,0,default\n",
    )
    .unwrap();
    let (p, w) = (dir.path().join("p.xml"), dir.path().join("w.json"));
    for (args, out) in [
        (vec!["platform", "convert", "volcano"], (&nodes, &p)),
        (vec!["workload", "convert", "volcano"], (&pods, &w)),
    ] {
        let run = batkube()
            .args(args)
            .arg(out.0)
            .arg("-o")
            .arg(out.1)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
    let (n, _, _) = batkube_inputs::platform::validate_file(&p, None).unwrap();
    assert_eq!(n, 2);
    let m = Platform::from_file(&p).unwrap().machines(None).unwrap();
    assert_eq!(m.compute[1].property("cpu"), Some("8"));
    assert_eq!(m.compute[0].property("disk"), Some("ssd"));
    assert_eq!(m.compute[1].property("pods"), Some("20"));
    let text = std::fs::read_to_string(&w).unwrap();
    assert!(workload_check::check(&text, "w.json").is_ok());
    let wl = Workload::from_file(&w, "w0").unwrap();
    assert_eq!(wl.jobs.len(), 3);
    assert_eq!(wl.jobs[1].json()["nodeSelector"]["zone"], "a");
    assert_eq!(wl.jobs[1].json()["priority"], 1);
    assert_eq!(wl.jobs[0].json()["labels"]["queue"], "q1");
    let summary = StandIn::new(
        Platform::from_file(&p).unwrap(),
        vec![wl],
        Options::default(),
    )
    .unwrap()
    .run(&mut Fcfs::new(0.0))
    .unwrap();
    assert_eq!(summary.stats.nb_jobs_success, 3);
}

#[test]
fn generate_refuses_durations_batsim_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("w.json");
    let run = batkube()
        .args(["workload", "generate", "-n", "5", "--duration", "0", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(!run.status.success());
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("job 1 got a duration of 0 s") && err.contains("strictly positive"),
        "{err}"
    );
    assert!(!out.exists(), "nothing written");
}
