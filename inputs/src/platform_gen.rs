//! Writing SimGrid platforms that Batsim 4.2 on SimGrid 3.32 accepts, and
//! the broker's extra rules for them (`batkube platform validate`).
//!
//! Layout written: one `Full` zone; a master host (`role=master`, not a
//! node); compute hosts with `cpu`, `memory`, optional `pods` and label
//! props; an UP and a DOWN link per host; a route from every compute host to
//! the master and back (Batsim sends each job's completion from the job's
//! host to the master, and SimGrid aborts on a missing route). Compute hosts
//! do not route to each other: pods are single-host delay jobs.

use std::fmt::Write as _;

use super::quantity;
use super::workload_gen::{column, parse_label_map, Dist, SplitMix64};

/// One compute host.
#[derive(Debug, Clone, PartialEq)]
pub struct HostSpec {
    pub name: String,
    /// Cores (millicore precision).
    pub cpu: f64,
    /// Bytes.
    pub memory: f64,
    pub pods: Option<u32>,
    pub labels: Vec<(String, String)>,
}

/// Network and speed of generated hosts (graphene's, as in 2020).
#[derive(Debug, Clone)]
pub struct Network {
    pub speed: String,
    pub bandwidth: String,
    pub latency: String,
}

impl Default for Network {
    fn default() -> Self {
        Network {
            speed: "16.673Gf".into(),
            bandwidth: "1.25E8Bps".into(),
            latency: "1.0E-4s".into(),
        }
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The platform XML for `hosts` plus a master named `master`.
pub fn platform_xml(description: &str, hosts: &[HostSpec], net: &Network) -> String {
    let mut s = String::new();
    s.push_str("<?xml version='1.0'?>\n");
    s.push_str("<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n");
    s.push_str("<platform version=\"4.1\">\n");
    let _ = writeln!(s, "<!-- {} -->", description.replace("--", "- -"));
    s.push_str("<zone id=\"batkube\" routing=\"Full\">\n");
    let link = |s: &mut String, host: &str| {
        for dir in ["UP", "DOWN"] {
            let _ = writeln!(
                s,
                "  <link id=\"{}_{dir}\" bandwidth=\"{}\" latency=\"{}\"/>",
                xml_escape(host),
                net.bandwidth,
                net.latency
            );
        }
    };
    let _ = writeln!(
        s,
        "  <host id=\"master\" speed=\"{}\" core=\"1\">\n    <prop id=\"role\" value=\"master\"/>\n  </host>",
        net.speed
    );
    link(&mut s, "master");
    for h in hosts {
        let name = xml_escape(&h.name);
        let cores = (h.cpu.ceil() as u64).max(1);
        let _ = writeln!(
            s,
            "  <host id=\"{name}\" speed=\"{}\" core=\"{cores}\">",
            net.speed
        );
        let _ = writeln!(
            s,
            "    <prop id=\"cpu\" value=\"{}\"/>",
            quantity::format_cpu(h.cpu)
        );
        let _ = writeln!(
            s,
            "    <prop id=\"memory\" value=\"{}\"/>",
            quantity::format_memory(h.memory)
        );
        if let Some(p) = h.pods {
            let _ = writeln!(s, "    <prop id=\"pods\" value=\"{p}\"/>");
        }
        for (k, v) in &h.labels {
            let _ = writeln!(
                s,
                "    <prop id=\"{}\" value=\"{}\"/>",
                xml_escape(k),
                xml_escape(v)
            );
        }
        s.push_str("  </host>\n");
        link(&mut s, &h.name);
    }
    for h in hosts {
        let n = xml_escape(&h.name);
        let _ = writeln!(
            s,
            "  <route src=\"{n}\" dst=\"master\" symmetrical=\"NO\"><link_ctn id=\"{n}_UP\"/><link_ctn id=\"master_DOWN\"/></route>"
        );
        let _ = writeln!(
            s,
            "  <route src=\"master\" dst=\"{n}\" symmetrical=\"NO\"><link_ctn id=\"master_UP\"/><link_ctn id=\"{n}_DOWN\"/></route>"
        );
    }
    s.push_str("</zone>\n</platform>\n");
    s
}

/// Options of `batkube platform gen`.
#[derive(Debug, Clone)]
pub struct GenSpec {
    pub hosts: usize,
    pub prefix: String,
    pub cpu: Dist,
    pub memory: Dist,
    pub pods: Option<u32>,
    /// `key=v1,v2,…`: values assigned round-robin.
    pub labels: Vec<(String, Vec<String>)>,
    pub seed: u64,
}

pub fn generate_hosts(spec: &GenSpec) -> Vec<HostSpec> {
    let mut cpus = SplitMix64::new(spec.seed);
    let mut mems = SplitMix64::new(spec.seed ^ 0x3E3E_3E3E);
    (0..spec.hosts)
        .map(|i| HostSpec {
            name: format!("{}{i}", spec.prefix),
            cpu: ((spec.cpu.sample(&mut cpus) * 1000.0).round() / 1000.0).max(0.001),
            memory: spec.memory.sample(&mut mems).round().max(1.0),
            pods: spec.pods,
            labels: spec
                .labels
                .iter()
                .map(|(k, vs)| (k.clone(), vs[i % vs.len()].clone()))
                .collect(),
        })
        .collect()
}

/// Hosts from a Volcano-simulator nodes.csv (cpu_allocatable,
/// memory_allocatable, label, maxPodNum; optionally name).
pub fn hosts_from_volcano(text: &str) -> Result<Vec<HostSpec>, String> {
    let mut rdr = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .flexible(true)
        .from_reader(text.as_bytes());
    let headers = rdr
        .headers()
        .map_err(|e| format!("nodes.csv: {e}"))?
        .clone();
    let need = |names: &[&str]| {
        column(&headers, names).ok_or_else(|| format!("nodes.csv has no {} column", names[0]))
    };
    let c_cpu = need(&["cpu_allocatable", "cpu"])?;
    let c_mem = need(&["memory_allocatable", "memory"])?;
    let c_label = column(&headers, &["label", "labels"]);
    let c_pods = column(&headers, &["maxPodNum", "pods", "max_pods"]);
    let c_name = column(&headers, &["name", "nodeName", "node_name"]);
    let mut hosts = Vec::new();
    let mut names = std::collections::HashSet::new();
    for (i, rec) in rdr.records().enumerate() {
        let line = i + 2;
        let at = |e: String| format!("nodes.csv line {line}: {e}");
        let rec = rec.map_err(|e| at(e.to_string()))?;
        let field = |c: usize| rec.get(c).unwrap_or("");
        let cpu = quantity::parse_cpu(field(c_cpu)).map_err(at)?;
        let memory = quantity::parse_memory(field(c_mem)).map_err(at)?;
        if cpu <= 0.0 || memory <= 0.0 {
            return Err(at("a node needs positive cpu and memory".into()));
        }
        let pods = match c_pods.map(field).filter(|p| !p.is_empty()) {
            None => None,
            Some(p) => Some(
                p.parse::<u32>()
                    .map_err(|_| at(format!("maxPodNum {p:?} is not a positive integer")))?,
            ),
        };
        let labels = match c_label {
            None => Vec::new(),
            Some(c) => parse_label_map(field(c))
                .map_err(at)?
                .into_iter()
                .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_string()))
                .collect(),
        };
        let name = c_name
            .map(|c| field(c).to_string())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("node-{i}"));
        if name == "master" || !names.insert(name.clone()) {
            return Err(at(format!(
                "node name {name:?} is used twice (or is \"master\")"
            )));
        }
        hosts.push(HostSpec {
            name,
            cpu,
            memory,
            pods,
            labels,
        });
    }
    if hosts.is_empty() {
        return Err("nodes.csv has no node".into());
    }
    Ok(hosts)
}

/// One problem found by [`lint`].
#[derive(Debug, Clone, PartialEq)]
pub struct Lint {
    pub error: bool,
    pub message: String,
}

/// The rules SimGrid 3.32 / Batsim 4.2 enforce that the stand-in's reader
/// does not, and the broker's: no smpi config keys, `<zone>` not `<AS>`,
/// capacity props on compute hosts, and a route from every compute host to
/// the master within the master's `Full` zone.
pub fn lint(text: &str, compute: &[String], master: &str) -> Vec<Lint> {
    let mut out = Vec::new();
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let Ok(doc) = roxmltree::Document::parse_with_options(text, opts) else {
        return out;
    };
    let error = |out: &mut Vec<Lint>, message: String| {
        out.push(Lint {
            error: true,
            message,
        })
    };
    let warn = |out: &mut Vec<Lint>, message: String| {
        out.push(Lint {
            error: false,
            message,
        })
    };
    let line = |n: roxmltree::Node| doc.text_pos_at(n.range().start).row;
    for n in doc.descendants().filter(|n| n.is_element()) {
        match n.tag_name().name() {
            "config" => {
                for p in n.children().filter(|c| c.has_tag_name("prop")) {
                    let id = p.attribute("id").unwrap_or("");
                    if id.starts_with("smpi/") {
                        error(
                            &mut out,
                            format!(
                                "line {}: <config> key {id:?}: SimGrid 3.32 refuses smpi keys in a \
                                 Batsim platform (Bad config key); drop the <config> block",
                                line(p)
                            ),
                        );
                    }
                }
            }
            "AS" | "ASroute" => error(
                &mut out,
                format!(
                    "line {}: <{}> is not in SimGrid's 4.1 DTD: write <zone> / <zoneRoute>",
                    line(n),
                    n.tag_name().name()
                ),
            ),
            _ => {}
        }
    }
    let hosts: Vec<roxmltree::Node> = doc
        .descendants()
        .filter(|n| n.has_tag_name("host"))
        .collect();
    let prop = |h: &roxmltree::Node, k: &str| {
        h.children()
            .find(|c| c.has_tag_name("prop") && c.attribute("id") == Some(k))
            .and_then(|c| c.attribute("value").map(str::to_string))
    };
    for h in hosts.iter().filter(|h| {
        compute
            .iter()
            .any(|c| Some(c.as_str()) == h.attribute("id"))
    }) {
        let name = h.attribute("id").unwrap_or("");
        match prop(h, "cpu").or_else(|| prop(h, "core")) {
            None => error(
                &mut out,
                format!("line {}: host {name:?} has no cpu (or core) prop: the broker cannot size its node", line(*h)),
            ),
            Some(v) => {
                if let Err(e) = quantity::parse_cpu(&v) {
                    error(&mut out, format!("line {}: host {name:?}: {e}", line(*h)));
                }
            }
        }
        match prop(h, "memory") {
            None => warn(
                &mut out,
                format!("line {}: host {name:?} has no memory prop", line(*h)),
            ),
            Some(v) => {
                if let Err(e) = quantity::parse_memory(&v) {
                    error(&mut out, format!("line {}: host {name:?}: {e}", line(*h)));
                }
            }
        }
    }
    // Routes: only checked when the master and the host share a Full zone
    // (routes elsewhere come from clusters or zone routes).
    if let Some(m) = hosts.iter().find(|h| h.attribute("id") == Some(master)) {
        if let Some(zone) = m
            .parent()
            .filter(|z| z.attribute("routing") == Some("Full"))
        {
            let routes: Vec<(String, String, bool)> = zone
                .children()
                .filter(|c| c.has_tag_name("route"))
                .map(|r| {
                    (
                        r.attribute("src").unwrap_or("").to_string(),
                        r.attribute("dst").unwrap_or("").to_string(),
                        !matches!(r.attribute("symmetrical"), Some("NO") | Some("no")),
                    )
                })
                .collect();
            let mut missing = Vec::new();
            for h in zone.children().filter(|c| c.has_tag_name("host")) {
                let name = h.attribute("id").unwrap_or("");
                if !compute.iter().any(|c| c == name) {
                    continue;
                }
                let ok = routes.iter().any(|(s, d, sym)| {
                    (s == name && d == master) || (*sym && s == master && d == name)
                });
                if !ok {
                    missing.push(format!("{name:?} (line {})", line(h)));
                }
            }
            if !missing.is_empty() {
                error(
                    &mut out,
                    format!(
                        "{} compute hosts have no route to the master {master:?}: {}{} — SimGrid \
                         aborts when Batsim sends a job's completion from such a host",
                        missing.len(),
                        missing
                            .iter()
                            .take(3)
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", "),
                        if missing.len() > 3 { ", …" } else { "" }
                    ),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use batsim::platform::Platform;

    #[test]
    fn generated_platforms_read_back_with_master_routes_and_props() {
        let hosts = generate_hosts(&GenSpec {
            hosts: 4,
            prefix: "node-".into(),
            cpu: Dist::Choice(vec![1.0, 2.5]),
            memory: Dist::Const(4294967296.0),
            pods: Some(110),
            labels: vec![("zone".into(), vec!["a".into(), "b".into()])],
            seed: 3,
        });
        let xml = platform_xml("test", &hosts, &Network::default());
        let p = Platform::parse(&xml, "gen").unwrap();
        let m = p.machines(None).unwrap();
        assert_eq!(m.master.name, "master");
        assert_eq!(m.compute.len(), 4);
        assert_eq!(m.compute[1].property("zone"), Some("b"));
        assert_eq!(m.compute[0].property("memory"), Some("4Gi"));
        assert!(p.message_time("node-2", "master", 1.0) > 0.0);
        let names: Vec<String> = m.compute.iter().map(|h| h.name.clone()).collect();
        assert!(lint(&xml, &names, "master").is_empty());
    }

    #[test]
    fn lint_finds_smpi_keys_missing_routes_and_props() {
        let xml = r#"<?xml version='1.0'?>
<platform version="4.1">
<config><prop id="smpi/or" value="1"/></config>
<zone id="z" routing="Full">
<host id="m" speed="1f"><prop id="role" value="master"/></host>
<host id="a" speed="1f"><prop id="core" value="1"/><prop id="memory" value="4Gi"/></host>
<host id="b" speed="1f"/>
<link id="l" bandwidth="1Bps" latency="0s"/>
<route src="m" dst="a"><link_ctn id="l"/></route>
</zone></platform>"#;
        let l = lint(xml, &["a".into(), "b".into()], "m");
        assert!(l
            .iter()
            .any(|l| l.error && l.message.contains("smpi/or") && l.message.contains("line 3")));
        assert!(l.iter().any(|l| l.error
            && l.message.contains("\"b\" (line 7)")
            && l.message.contains("route")));
        assert!(!l.iter().any(|l| l.message.contains("\"a\" (line")));
        assert!(l.iter().any(|l| l.error && l.message.contains("no cpu")));
    }

    #[test]
    fn volcano_nodes_become_hosts() {
        let csv = "cpu_allocatable,memory_allocatable,label,maxPodNum\n4,8Gi,\"zone=a,gpu=no\",110\n8000m,16Gi,,\n";
        let h = hosts_from_volcano(csv).unwrap();
        assert_eq!(h.len(), 2);
        assert_eq!(h[1].cpu, 8.0);
        assert_eq!(h[0].labels.len(), 2);
        assert_eq!(h[0].pods, Some(110));
        assert!(
            hosts_from_volcano("cpu_allocatable,memory_allocatable\n0,1\n")
                .unwrap_err()
                .contains("line 2")
        );
    }
}
