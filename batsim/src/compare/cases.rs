//! Generated cases for the differential harness: a platform, a workload,
//! Batsim's options and a scripted scheduler, all from one seed.
//!
//! The generator aims at what distinguishes one Batsim model from another
//! rather than at realism: simultaneous submissions and completions
//! (durations and subtimes drawn from small sets), routes of different
//! lengths and shared links (messages to the master that contend),
//! heterogeneous speeds and core counts, parallel jobs (`res` > 1) with
//! `delay` and `parallel_homogeneous` profiles, walltimes that kill,
//! compute sharing on and off, a master of its own or one of the compute
//! nodes' kind (named by `-m`).

use std::fmt::Write as _;

use super::random::Rng;

/// The shape of a generated platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// Full routing, one up and one down link per host, explicit routes
    /// (as `batkube platform gen` writes them).
    Flat,
    /// A SimGrid `<cluster>` with a backbone.
    Cluster,
    /// Full routing with explicit routes through shared switch links.
    Routed,
    /// Full routing, one shared link per host, symmetrical routes.
    Star,
}

impl Topology {
    pub fn as_str(self) -> &'static str {
        match self {
            Topology::Flat => "flat",
            Topology::Cluster => "cluster",
            Topology::Routed => "routed",
            Topology::Star => "star",
        }
    }
}

/// The scripted decision process of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheduler {
    /// [`crate::standin::fcfs::Fcfs`] without decision time.
    Fcfs,
    /// [`super::random::RandomScheduler`] with this seed.
    Random(u64),
}

impl Scheduler {
    /// `fcfs` or `random:SEED`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.split_once(':') {
            None if text == "fcfs" => Ok(Scheduler::Fcfs),
            None if text == "random" => Ok(Scheduler::Random(0)),
            Some(("random", seed)) => seed
                .parse()
                .map(Scheduler::Random)
                .map_err(|_| format!("random:SEED needs an integer seed, not {seed:?}")),
            _ => Err(format!(
                "unknown scripted scheduler {text:?} (known: fcfs, random:SEED)"
            )),
        }
    }

    pub fn name(self) -> String {
        match self {
            Scheduler::Fcfs => "fcfs".into(),
            Scheduler::Random(s) => format!("random:{s}"),
        }
    }

    pub fn make(self) -> Box<dyn crate::standin::DecisionProcess> {
        match self {
            Scheduler::Fcfs => Box::new(crate::standin::fcfs::Fcfs::new(0.0)),
            Scheduler::Random(s) => Box::new(super::random::RandomScheduler::new(s)),
        }
    }
}

/// One generated case.
#[derive(Debug, Clone)]
pub struct Case {
    pub seed: u64,
    pub topology: Topology,
    /// SimGrid platform XML.
    pub platform: String,
    /// Batsim JSON workload.
    pub workload: String,
    /// `--enable-compute-sharing`
    pub compute_sharing: bool,
    /// `-m`, when the master is not `master_host`.
    pub master: Option<String>,
    pub scheduler: Scheduler,
    /// What the case exercises, for the summary.
    pub notes: Vec<String>,
}

impl Case {
    /// A short description of the case.
    pub fn describe(&self) -> String {
        format!(
            "seed {} {} sched={} sharing={} master={} [{}]",
            self.seed,
            self.topology.as_str(),
            self.scheduler.name(),
            self.compute_sharing,
            self.master.as_deref().unwrap_or("master_host"),
            self.notes.join(", ")
        )
    }

    /// The case of `seed`.
    pub fn generate(seed: u64) -> Case {
        let mut rng = Rng::new(seed.wrapping_mul(0xA24B_AED4_963E_E407) ^ 0xCA5E);
        let topology = *rng.pick(&[
            Topology::Flat,
            Topology::Cluster,
            Topology::Routed,
            Topology::Star,
        ]);
        let mut notes = Vec::new();
        let n = 1 + rng.below(12) as usize;
        let zero_latency = rng.chance(0.2);
        let heterogeneous = topology != Topology::Cluster && rng.chance(0.5);
        // The master: its own host, or one of the nodes' kind named by -m.
        let master_inside = rng.chance(0.35);
        let latency = |rng: &mut Rng| -> f64 {
            if zero_latency {
                0.0
            } else {
                *rng.pick(&[1e-6, 1e-5, 5e-5, 1e-4, 1e-4, 2.5e-4, 1e-3])
            }
        };
        let bandwidth =
            |rng: &mut Rng| -> f64 { *rng.pick(&[1.25e8, 1.25e8, 1.25e9, 1e7, 3.2e6, 1e10]) };
        let speed = |rng: &mut Rng| -> f64 {
            if heterogeneous {
                *rng.pick(&[1e9, 16.673e9, 2e9, 5e8, 1e10])
            } else {
                16.673e9
            }
        };
        let cores = |rng: &mut Rng| -> u32 {
            if heterogeneous {
                *rng.pick(&[1, 1, 2, 4, 8])
            } else {
                1
            }
        };
        // Names sort byte by byte in SimGrid: node-10 before node-2.
        let names: Vec<String> = (0..n).map(|i| format!("node-{i}")).collect();
        let mut master = None;
        let mut xml = String::from(
            "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n<platform version=\"4.1\">\n",
        );
        match topology {
            Topology::Cluster => {
                let (bw, lat) = (bandwidth(&mut rng), latency(&mut rng));
                let (bb_bw, bb_lat) = (bandwidth(&mut rng), latency(&mut rng));
                let c = if rng.chance(0.3) {
                    1 + rng.below(8) as u32
                } else {
                    1
                };
                let total = if master_inside { n + 1 } else { n };
                let fatpipe = rng.chance(0.3);
                // SimGrid's default private links are split-duplex.
                let shared = rng.chance(0.3);
                writeln!(xml, "<zone id=\"AS0\" routing=\"Full\">").ok();
                writeln!(
                    xml,
                    "  <cluster id=\"c\" prefix=\"node-\" suffix=\"\" radical=\"0-{}\" speed=\"16.673Gf\" core=\"{c}\" bw=\"{}Bps\" lat=\"{}s\" bb_bw=\"{}Bps\" bb_lat=\"{}s\"{}{}/>",
                    total - 1,
                    bw,
                    lat,
                    bb_bw,
                    bb_lat,
                    if fatpipe { " bb_sharing_policy=\"FATPIPE\"" } else { "" },
                    if shared { " sharing_policy=\"SHARED\"" } else { "" }
                )
                .ok();
                if fatpipe {
                    notes.push("fatpipe backbone".into());
                }
                if shared {
                    notes.push("shared private links".into());
                }
                if master_inside {
                    master = Some(format!("node-{}", rng.below(total as u64)));
                } else {
                    // The master in a zone of its own, joined to the
                    // cluster's router by a link of its own.
                    let l = latency(&mut rng);
                    writeln!(
                        xml,
                        "  <zone id=\"zm\" routing=\"Full\">\n    <host id=\"master_host\" speed=\"16.673Gf\"/>\n  </zone>"
                    )
                    .ok();
                    writeln!(
                        xml,
                        "  <link id=\"uplink\" bandwidth=\"{}Bps\" latency=\"{l}s\"/>",
                        bandwidth(&mut rng)
                    )
                    .ok();
                    writeln!(
                        xml,
                        "  <zoneRoute src=\"c\" dst=\"zm\" gw_src=\"node-c_router\" gw_dst=\"master_host\"><link_ctn id=\"uplink\"/></zoneRoute>"
                    )
                    .ok();
                }
                xml.push_str("</zone>\n");
            }
            Topology::Flat | Topology::Routed | Topology::Star => {
                writeln!(xml, "<zone id=\"AS0\" routing=\"Full\">").ok();
                let mut hosts: Vec<String> = names.clone();
                let master_name = if master_inside {
                    hosts.push(format!("node-{n}"));
                    let m = hosts[rng.below(hosts.len() as u64) as usize].clone();
                    master = Some(m.clone());
                    m
                } else {
                    "master_host".to_string()
                };
                if !master_inside {
                    hosts.insert(0, master_name.clone());
                }
                for h in &hosts {
                    let is_master = *h == master_name;
                    let (s, c) = if is_master && !master_inside {
                        (16.673e9, 1)
                    } else {
                        (speed(&mut rng), cores(&mut rng))
                    };
                    writeln!(xml, "  <host id=\"{h}\" speed=\"{s}f\" core=\"{c}\">").ok();
                    if !is_master || master_inside {
                        writeln!(xml, "    <prop id=\"cpu\" value=\"{c}\"/>").ok();
                    }
                    xml.push_str("  </host>\n");
                }
                let link = |xml: &mut String, id: &str, rng: &mut Rng| {
                    let (bw, lat) = (bandwidth(rng), latency(rng));
                    writeln!(
                        xml,
                        "  <link id=\"{id}\" bandwidth=\"{bw}Bps\" latency=\"{lat}s\"/>"
                    )
                    .ok();
                };
                let absent = rng.chance(0.2);
                match topology {
                    Topology::Flat => {
                        for h in &hosts {
                            link(&mut xml, &format!("{h}_UP"), &mut rng);
                            link(&mut xml, &format!("{h}_DOWN"), &mut rng);
                        }
                        for a in &hosts {
                            for b in &hosts {
                                if a == b {
                                    continue;
                                }
                                let to_master = *a == master_name || *b == master_name;
                                if !to_master && absent {
                                    continue;
                                }
                                writeln!(xml, "  <route src=\"{a}\" dst=\"{b}\" symmetrical=\"NO\"><link_ctn id=\"{a}_UP\"/><link_ctn id=\"{b}_DOWN\"/></route>").ok();
                            }
                        }
                        if absent {
                            notes.push("no routes between nodes".into());
                        }
                    }
                    Topology::Star => {
                        for h in &hosts {
                            link(&mut xml, &format!("{h}_L"), &mut rng);
                        }
                        for (i, a) in hosts.iter().enumerate() {
                            for b in &hosts[i + 1..] {
                                writeln!(xml, "  <route src=\"{a}\" dst=\"{b}\"><link_ctn id=\"{a}_L\"/><link_ctn id=\"{b}_L\"/></route>").ok();
                            }
                        }
                    }
                    Topology::Routed => {
                        let switches = 1 + rng.below(3) as usize;
                        for h in &hosts {
                            link(&mut xml, &format!("{h}_L"), &mut rng);
                        }
                        for s in 0..switches {
                            link(&mut xml, &format!("sw{s}"), &mut rng);
                        }
                        for (i, a) in hosts.iter().enumerate() {
                            for b in &hosts[i + 1..] {
                                let mut ctn = format!("<link_ctn id=\"{a}_L\"/>");
                                for s in 0..switches {
                                    if rng.chance(0.5) {
                                        write!(ctn, "<link_ctn id=\"sw{s}\"/>").ok();
                                    }
                                }
                                write!(ctn, "<link_ctn id=\"{b}_L\"/>").ok();
                                writeln!(xml, "  <route src=\"{a}\" dst=\"{b}\">{ctn}</route>")
                                    .ok();
                            }
                        }
                        notes.push(format!("{switches} shared switch link(s)"));
                    }
                    Topology::Cluster => unreachable!(),
                }
                xml.push_str("</zone>\n");
            }
        }
        xml.push_str("</platform>\n");
        if master_inside {
            notes.push("master among the nodes".into());
        }
        if zero_latency {
            notes.push("zero latency".into());
        }
        if heterogeneous {
            notes.push("heterogeneous".into());
        }

        // The workload.
        let compute_sharing = rng.chance(0.4);
        let scheduler = if rng.chance(0.5) {
            Scheduler::Fcfs
        } else {
            Scheduler::Random(rng.next_u64() % 1_000_000)
        };
        let njobs = 1 + rng.below(40) as usize;
        let parallel = rng.chance(0.35);
        let big = rng.chance(0.6);
        let mut profiles = Vec::new();
        let delays = [1.0, 2.0, 5.0, 10.0, 3.3, 7.25, 0.5, 170.0];
        let nprof = 1 + rng.below(4) as usize;
        for p in 0..nprof {
            let d = if rng.chance(0.7) {
                *rng.pick(&delays)
            } else {
                (1 + rng.below(20_000)) as f64 / 1000.0
            };
            profiles.push((
                format!("d{p}"),
                format!("{{\"type\": \"delay\", \"delay\": {d}}}"),
                d,
            ));
        }
        if parallel {
            let np = 1 + rng.below(3) as usize;
            for p in 0..np {
                let cpu = *rng.pick(&[1e9, 1e10, 5e10, 16.673e9, 0.0]);
                let com = *rng.pick(&[0.0, 0.0, 1e6, 1e7, 1e8]);
                profiles.push((
                    format!("ph{p}"),
                    format!(
                        "{{\"type\": \"parallel_homogeneous\", \"cpu\": {cpu}, \"com\": {com}}}"
                    ),
                    -1.0,
                ));
            }
            notes.push("parallel_homogeneous".into());
        }
        let subtimes = [0.0, 0.0, 1.0, 2.0, 5.0, 5.0, 10.0, 12.5, 30.0];
        let mut jobs = String::new();
        let mut max_res = 1;
        let mut kills = false;
        for j in 0..njobs {
            let (pname, _, d) = rng.pick(&profiles).clone();
            let subtime = if rng.chance(0.75) {
                *rng.pick(&subtimes)
            } else {
                (rng.below(40_000_000) as f64) / 1e6
            };
            let res = if big && rng.chance(0.5) {
                let r = 2 + rng.below(4) as u32;
                // Now and then one larger than the platform.
                if rng.chance(0.1) {
                    (n as u32) + 1
                } else {
                    r.min(n as u32)
                }
            } else {
                1
            };
            max_res = max_res.max(res);
            let walltime = match rng.below(4) {
                0 => None,
                1 if d > 0.0 => {
                    kills = true;
                    Some((d * 0.5).max(0.1))
                }
                1 => {
                    kills = true;
                    Some(*rng.pick(&[0.5, 1.0, 3.0]))
                }
                _ => Some(1000.0),
            };
            if !jobs.is_empty() {
                jobs.push_str(",\n");
            }
            write!(
                jobs,
                "    {{\"id\": \"{}\", \"subtime\": {subtime}, \"res\": {res}, \"profile\": \"{pname}\"",
                j + 1
            )
            .ok();
            if let Some(w) = walltime {
                write!(jobs, ", \"walltime\": {w}").ok();
            }
            jobs.push('}');
        }
        if max_res > 1 {
            notes.push(format!("res up to {max_res}"));
        }
        if kills {
            notes.push("walltimes that kill".into());
        }
        let mut prof_text = String::new();
        for (name, body, _) in &profiles {
            if !prof_text.is_empty() {
                prof_text.push_str(",\n");
            }
            write!(prof_text, "    \"{name}\": {body}").ok();
        }
        let workload = format!(
            "{{\n  \"nb_res\": {n},\n  \"jobs\": [\n{jobs}\n  ],\n  \"profiles\": {{\n{prof_text}\n  }}\n}}\n"
        );
        Case {
            seed,
            topology,
            platform: xml,
            workload,
            compute_sharing,
            master,
            scheduler,
            notes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::Platform;
    use crate::workload::Workload;

    #[test]
    fn generated_cases_are_valid_inputs_and_reproducible() {
        for seed in 0..200 {
            let c = Case::generate(seed);
            let p = Platform::parse(&c.platform, "gen").unwrap_or_else(|e| panic!("{seed}: {e}"));
            p.machines(c.master.as_deref())
                .unwrap_or_else(|e| panic!("{seed}: {e}\n{}", c.platform));
            Workload::parse(&c.workload, "w0", "gen.json")
                .unwrap_or_else(|e| panic!("{seed}: {e}\n{}", c.workload));
            let again = Case::generate(seed);
            assert_eq!(c.platform, again.platform);
            assert_eq!(c.workload, again.workload);
        }
    }
}
