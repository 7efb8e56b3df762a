//! The inputs the project ships are valid: every platform in `platforms/`
//! and every workload in `workloads/` passes `batkube platform validate` /
//! `batkube workload validate` and is accepted by the built-in stand-in; a
//! short stand-in run completes; the CLI tools regenerate what is shipped.

use std::path::{Path, PathBuf};
use std::process::Command;

use batkube::tools::workload_check;
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

fn files(dir: &str, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

fn batkube() -> Command {
    Command::new(env!("CARGO_BIN_EXE_batkube"))
}

#[test]
fn every_shipped_platform_is_valid_for_batsim_and_the_standin() {
    let platforms = files("platforms", "xml");
    assert!(platforms.len() >= 5, "{platforms:?}");
    for p in &platforms {
        let (n, master, warnings) = batkube::tools::platform::validate_file(p, None)
            .unwrap_or_else(|e| panic!("{}: {e:#}", p.display()));
        assert!(n >= 1 && master == "master", "{}", p.display());
        assert!(warnings.is_empty(), "{}: {warnings:?}", p.display());
        let m = Platform::from_file(p).unwrap().machines(None).unwrap();
        for h in &m.compute {
            assert!(
                h.property("cpu").is_some() && h.property("memory").is_some(),
                "{}",
                h.name
            );
        }
    }
}

#[test]
fn every_shipped_workload_is_valid_for_batsim_and_the_standin() {
    let workloads = files("workloads", "json");
    assert!(workloads.len() >= 4, "{workloads:?}");
    for w in &workloads {
        let text = std::fs::read_to_string(w).unwrap();
        let shown = w.display().to_string();
        let findings =
            workload_check::check(&text, &shown).unwrap_or_else(|e| panic!("{shown}: {e:?}"));
        assert!(findings.iter().all(|f| !f.error), "{shown}: {findings:?}");
        let wl = Workload::from_file(w, "w0").unwrap();
        assert!(
            wl.jobs.iter().all(|j| j.res == 1),
            "{shown}: every job is one pod"
        );
    }
    let nasa =
        Workload::from_file(&repo().join("workloads/NASA-iPSC-1993-3.1.json"), "w0").unwrap();
    assert_eq!(nasa.jobs.len(), 18239);
}

#[test]
fn burst_on_the_16_node_platform_runs_to_completion_on_the_standin() {
    let dir = tempfile::tempdir().unwrap();
    let platform = Platform::from_file(&repo().join("platforms/16-node.xml")).unwrap();
    let workload = Workload::from_file(&repo().join("workloads/200_delay170.json"), "w0").unwrap();
    let opts = Options {
        export_prefix: Some(dir.path().join("out_")),
        ..Default::default()
    };
    let summary = StandIn::new(platform, vec![workload], opts)
        .unwrap()
        .run(&mut Fcfs::new(0.0))
        .unwrap();
    let s = &summary.stats;
    assert_eq!(s.nb_jobs_success, 200);
    // 13 waves of 170 s on 16 machines; each wave starts when the server
    // has received the previous one's 16 completion reports, one after the
    // other, 0.0002 s each (2 x 1e-4 latency + one byte at 1.25e8 B/s).
    assert!((s.makespan - 2210.038403).abs() < 1e-6, "{}", s.makespan);
    assert!((s.mean_waiting_time() - 979.2).abs() < 0.05);
    let jobs = std::fs::read_to_string(dir.path().join("out_jobs.csv")).unwrap();
    assert_eq!(jobs.lines().count(), 201);
}

#[test]
fn swf_conversion_regenerates_the_shipped_kit_workload() {
    let swf = Path::new("/work/shared/reference/batkube/swf/KIT-10-80.swf");
    let swf = std::env::var_os("BATKUBE_KIT_SWF")
        .map(PathBuf::from)
        .unwrap_or_else(|| swf.to_path_buf());
    if !swf.exists() {
        eprintln!("skipped: {} is not on this machine", swf.display());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("kit.json");
    let run = batkube()
        .args(["workload", "convert", "swf"])
        .arg(&swf)
        .args([
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
            batkube::tools::quantity::cpu_from_value(&p.json()["cpu"]).unwrap(),
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
    let (n, _, _) = batkube::tools::platform::validate_file(&p, None).unwrap();
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
