//! SimGrid platform files (XML, version 4.x), as far as the stand-in needs them.
//!
//! What is read: zones (`<zone>`/`<AS>`) and their properties, `<host>` with
//! `speed`, `core` and `<prop>`s, `<cluster>` (expanded into hosts with a
//! private link each, a backbone, loopbacks and limiters), `<link>` with its
//! `sharing_policy`, `<route>`/`<link_ctn>` with its `direction`,
//! `<zoneRoute>`/`<ASroute>` and `<config>`. From those, the stand-in gets the
//! compute hosts in Batsim's order, the master host (`role=master` property,
//! or `-m NAME`), host properties as Batsim forwards them, and the links of
//! a route as SimGrid's L07 model shares them (see [`Platform::route_links`]):
//! every message (a byte from a host to the server on the master) and
//! every parallel task's communication crosses them.

use std::collections::HashMap;
use std::path::Path;

/// Batsim's default master host name (its `-m` option).
pub const DEFAULT_MASTER: &str = "master_host";

/// A platform that cannot be used, with the reason in the user's terms.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    #[error("cannot read platform file {path}: {error}")]
    Io {
        path: String,
        /// Said in the message, not a `source()`: each cause once.
        error: std::io::Error,
    },
    #[error("platform {path} is not valid XML: {error}")]
    Xml {
        path: String,
        error: roxmltree::Error,
    },
    #[error("platform {path}: {message}")]
    Invalid { path: String, message: String },
}

/// One host of the platform.
#[derive(Debug, Clone)]
pub struct Host {
    pub name: String,
    /// Flop/s of one core (first pstate).
    pub speed: f64,
    pub cores: u32,
    /// `<prop>`s of the host, in file order.
    pub properties: Vec<(String, String)>,
    /// Properties of the enclosing zone (or cluster).
    pub zone_properties: Vec<(String, String)>,
}

impl Host {
    pub fn property(&self, key: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// SimGrid's implicit loopback link.
pub const LOOPBACK: &str = "__loopback__";

/// One link as SimGrid's solver sees it: a split-duplex link is two of
/// these, `ID_UP` and `ID_DOWN` (`NetZoneImpl::create_split_duplex_link`).
#[derive(Debug, Clone)]
struct Link {
    bandwidth: f64,
    latency: f64,
    /// `sharing_policy="FATPIPE"`: every flow gets the whole bandwidth
    /// (`Constraint::SharingPolicy::FATPIPE`); else SHARED.
    fatpipe: bool,
}

/// A link of a route as the solver sees it: name, bandwidth, FATPIPE.
pub type RouteLink = (String, f64, bool);

#[derive(Debug, Clone, Default)]
struct Zone {
    parent: Option<usize>,
    /// Route between two members (hosts, routers or child zones) of this zone.
    routes: HashMap<(String, String), Vec<String>>,
    /// Gateways (`gw_src`, `gw_dst`) of a `<zoneRoute>` between two child
    /// zones: the route goes from the source host to `gw_src` inside its
    /// zone, over the zone route's links, then from `gw_dst` to the
    /// destination (SimGrid's `NetZoneImpl::get_global_route`).
    gateways: HashMap<(String, String), (String, String)>,
    /// Cluster layout when the zone is a `<cluster>`.
    cluster: Option<ClusterLayout>,
    /// Gateway used when the zone is reached from outside (cluster router).
    gateway: Option<String>,
    name: String,
}

/// A `<cluster>` as SimGrid 3.32 builds it (`sg_platf_new_cluster_flat`:
/// a StarZone): each host's route up (limiter, its private link, or the
/// `_UP` half of it when split-duplex, the backbone) and down (the same
/// reversed, `_DOWN` half), and its loopback when the cluster has one.
#[derive(Debug, Clone, Default)]
struct ClusterLayout {
    up: HashMap<String, Vec<String>>,
    down: HashMap<String, Vec<String>>,
    loopback: HashMap<String, String>,
    backbone: Option<String>,
}

/// A parsed platform.
#[derive(Debug, Clone)]
pub struct Platform {
    /// Every host, in file order (after cluster expansion).
    pub hosts: Vec<Host>,
    links: HashMap<String, Link>,
    /// Ids of `<link sharing_policy="SPLITDUPLEX">`: `ID_UP` and `ID_DOWN`
    /// in `links`, named in routes with a direction.
    split_links: std::collections::HashSet<String>,
    zones: Vec<Zone>,
    /// Name -> the zone it is a member of (hosts and routers).
    member_zone: HashMap<String, usize>,
    /// `<config>` entries.
    pub config: Vec<(String, String)>,
}

/// The hosts Batsim works with: compute resources (ids 0..n in order) and the
/// master.
#[derive(Debug, Clone)]
pub struct Machines {
    pub compute: Vec<Host>,
    pub master: Host,
}

impl Platform {
    pub fn from_file(path: &Path) -> Result<Self, PlatformError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| PlatformError::Io {
            path: shown.clone(),
            error,
        })?;
        Self::parse(&text, &shown)
    }

    /// Parses platform XML; `origin` names the input in messages.
    pub fn parse(text: &str, origin: &str) -> Result<Self, PlatformError> {
        // SimGrid files carry a DOCTYPE; roxmltree refuses DTDs unless allowed.
        let opts = roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        };
        let doc = roxmltree::Document::parse_with_options(text, opts).map_err(|error| {
            PlatformError::Xml {
                path: origin.to_string(),
                error,
            }
        })?;
        let root = doc.root_element();
        let invalid = |message: String| PlatformError::Invalid {
            path: origin.to_string(),
            message,
        };
        if root.tag_name().name() != "platform" {
            return Err(invalid(format!(
                "the root element is <{}>, expected <platform>",
                root.tag_name().name()
            )));
        }
        let mut p = Platform {
            hosts: Vec::new(),
            links: HashMap::new(),
            split_links: Default::default(),
            zones: Vec::new(),
            member_zone: HashMap::new(),
            config: Vec::new(),
        };
        p.zones.push(Zone {
            name: "(platform)".into(),
            ..Default::default()
        });
        p.walk(root, 0, &invalid)?;
        if p.hosts.is_empty() {
            return Err(invalid("it declares no host".into()));
        }
        let mut seen = HashMap::new();
        for h in &p.hosts {
            if seen.insert(h.name.clone(), ()).is_some() {
                return Err(invalid(format!("host {:?} is declared twice", h.name)));
            }
        }
        Ok(p)
    }

    fn walk(
        &mut self,
        node: roxmltree::Node,
        zone: usize,
        invalid: &dyn Fn(String) -> PlatformError,
    ) -> Result<(), PlatformError> {
        for child in node.children().filter(|n| n.is_element()) {
            // Only computed for messages: it scans the text from the start.
            let line = LineOf(child);
            let attr = |name: &str| child.attribute(name);
            let need = |name: &str| {
                attr(name).ok_or_else(|| {
                    invalid(format!(
                        "line {line}: <{}> lacks the {name:?} attribute",
                        child.tag_name().name()
                    ))
                })
            };
            match child.tag_name().name() {
                "config" => {
                    for prop in child.children().filter(|n| n.has_tag_name("prop")) {
                        let key = prop.attribute("id").unwrap_or_default().to_string();
                        let value = prop.attribute("value").unwrap_or_default().to_string();
                        if key.starts_with("smpi/") {
                            // What SimGrid 3.32 under Batsim answers: SMPI options
                            // are only declared when SMPI runs.
                            return Err(invalid(format!(
                                "line {line}: Bad config key: {key} (SimGrid 3.32 under Batsim \
                                 rejects smpi/* options: remove the <config> entry)"
                            )));
                        }
                        self.config.push((key, value));
                    }
                }
                "zone" | "AS" => {
                    let id = need("id")?.to_string();
                    let z = self.zones.len();
                    self.zones.push(Zone {
                        parent: Some(zone),
                        name: id.clone(),
                        ..Default::default()
                    });
                    self.member_zone.insert(id, zone);
                    self.walk(child, z, invalid)?;
                }
                "host" => {
                    let name = need("id")?.to_string();
                    let speed = parse_speed(need("speed")?)
                        .map_err(|e| invalid(format!("line {line}: host {name:?}: speed: {e}")))?;
                    let cores = attr("core")
                        .map(|c| c.trim().parse::<u32>())
                        .transpose()
                        .map_err(|_| {
                            invalid(format!(
                                "line {line}: host {name:?}: core is not an integer"
                            ))
                        })?
                        .unwrap_or(1);
                    let properties = props_of(child);
                    self.member_zone.insert(name.clone(), zone);
                    self.hosts.push(Host {
                        name,
                        speed,
                        cores,
                        properties,
                        zone_properties: Vec::new(),
                    });
                }
                "router" => {
                    self.member_zone.insert(need("id")?.to_string(), zone);
                }
                "link" | "backbone" => {
                    let id = need("id")?.to_string();
                    let bandwidth = parse_bandwidth(need("bandwidth")?).map_err(|e| {
                        invalid(format!("line {line}: link {id:?}: bandwidth: {e}"))
                    })?;
                    let latency = match attr("latency") {
                        Some(l) => parse_time(l).map_err(|e| {
                            invalid(format!("line {line}: link {id:?}: latency: {e}"))
                        })?,
                        None => 0.0,
                    };
                    // `<link sharing_policy>` (`sg_platf_new_link`): SHARED
                    // (the default), FATPIPE, or SPLITDUPLEX (FULLDUPLEX, its
                    // deprecated name): two links `ID_UP` and `ID_DOWN`
                    // (`NetZoneImpl::create_split_duplex_link`). A
                    // `<backbone>` is SHARED (`ETag_surfxml_backbone`).
                    let policy = if child.has_tag_name("backbone") {
                        "SHARED"
                    } else {
                        attr("sharing_policy").unwrap_or("SHARED")
                    };
                    let link = Link {
                        bandwidth,
                        latency,
                        fatpipe: policy == "FATPIPE",
                    };
                    if child.has_tag_name("backbone") {
                        self.zones[zone]
                            .cluster
                            .get_or_insert_with(ClusterLayout::default)
                            .backbone = Some(id.clone());
                    }
                    if matches!(policy, "SPLITDUPLEX" | "FULLDUPLEX") {
                        self.links.insert(format!("{id}_UP"), link.clone());
                        self.links.insert(format!("{id}_DOWN"), link);
                        self.split_links.insert(id);
                    } else {
                        self.links.insert(id, link);
                    }
                }
                "route" | "zoneRoute" | "ASroute" | "bypassRoute" => {
                    let (src, dst) = (need("src")?.to_string(), need("dst")?.to_string());
                    // Each `<link_ctn>` as the link the solver sees, there
                    // and back: a split-duplex link needs a direction, its
                    // `_UP` half one way and its `_DOWN` half the other
                    // (`STag_surfxml_link___ctn`, `NetZoneImpl::get_link_list_impl`).
                    let mut links: Vec<String> = Vec::new();
                    let mut back: Vec<String> = Vec::new();
                    for ctn in child.children().filter(|n| n.has_tag_name("link_ctn")) {
                        let Some(id) = ctn.attribute("id") else {
                            continue;
                        };
                        let direction = ctn.attribute("direction").unwrap_or("NONE");
                        let split = self.split_links.contains(id);
                        let (there, back_again) = match (direction, split) {
                            ("UP", true) => (format!("{id}_UP"), format!("{id}_DOWN")),
                            ("DOWN", true) => (format!("{id}_DOWN"), format!("{id}_UP")),
                            (_, true) => {
                                return Err(invalid(format!(
                                    "line {line}: link {id:?} is SPLITDUPLEX: its <link_ctn> \
                                     needs direction=\"UP\" or \"DOWN\" (SimGrid: Link not \
                                     found: {id})"
                                )))
                            }
                            ("UP" | "DOWN", false) => {
                                return Err(invalid(format!(
                                    "line {line}: <link_ctn id={id:?}> has a direction but the \
                                     link is not SPLITDUPLEX (SimGrid: Link not found: {id})"
                                )))
                            }
                            _ => (id.to_string(), id.to_string()),
                        };
                        links.push(there);
                        back.push(back_again);
                    }
                    let symmetrical = attr("symmetrical")
                        .map(|s| !s.eq_ignore_ascii_case("no"))
                        .unwrap_or(true);
                    let gateways = match (attr("gw_src"), attr("gw_dst")) {
                        (Some(gs), Some(gd)) => Some((gs.to_string(), gd.to_string())),
                        _ => None,
                    };
                    if symmetrical {
                        back.reverse();
                        self.zones[zone]
                            .routes
                            .entry((dst.clone(), src.clone()))
                            .or_insert(back);
                        if let Some((gs, gd)) = &gateways {
                            self.zones[zone]
                                .gateways
                                .entry((dst.clone(), src.clone()))
                                .or_insert((gd.clone(), gs.clone()));
                        }
                    }
                    if let Some(g) = gateways {
                        self.zones[zone]
                            .gateways
                            .insert((src.clone(), dst.clone()), g);
                    }
                    self.zones[zone].routes.insert((src, dst), links);
                }
                "cluster" => self.cluster(child, zone, line, invalid)?,
                // Inputs the stand-in has no use for (traces, disks, storage,
                // actors, trace connections, …) are accepted and ignored.
                _ => {}
            }
        }
        Ok(())
    }

    fn cluster(
        &mut self,
        node: roxmltree::Node,
        parent: usize,
        line: LineOf,
        invalid: &dyn Fn(String) -> PlatformError,
    ) -> Result<(), PlatformError> {
        let need = |name: &str| {
            node.attribute(name)
                .ok_or_else(|| invalid(format!("line {line}: <cluster> lacks {name:?}")))
        };
        let id = need("id")?.to_string();
        let prefix = node.attribute("prefix").unwrap_or_default();
        let suffix = node.attribute("suffix").unwrap_or_default();
        let radical = need("radical")?;
        let speed = parse_speed(need("speed")?)
            .map_err(|e| invalid(format!("line {line}: cluster {id:?}: {e}")))?;
        let cores = node
            .attribute("core")
            .and_then(|c| c.trim().parse().ok())
            .unwrap_or(1);
        let bw = parse_bandwidth(need("bw")?)
            .map_err(|e| invalid(format!("line {line}: cluster {id:?}: {e}")))?;
        let lat = parse_time(need("lat")?)
            .map_err(|e| invalid(format!("line {line}: cluster {id:?}: {e}")))?;
        let zone_props = props_of(node);
        let z = self.zones.len();
        let mut layout = ClusterLayout::default();
        let bad = |e: String| invalid(format!("line {line}: cluster {id:?}: {e}"));
        let optional = |name: &str, parse: fn(&str) -> Result<f64, String>| {
            node.attribute(name)
                .map(parse)
                .transpose()
                .map(|v| v.unwrap_or(0.0))
        };
        // The cluster's links (`sg_platf_new_cluster_flat`): a backbone when
        // `bb_bw` or `bb_lat` is positive (`bb_sharing_policy`, SHARED by
        // default, or FATPIPE); per host a FATPIPE loopback when
        // `loopback_bw` or `loopback_lat` is positive, a SHARED limiter
        // when `limiter_link` is, and its private link: split-duplex
        // (`sharing_policy` SPLITDUPLEX, the DTD's default, or FULLDUPLEX),
        // else one SHARED link whatever the policy says (SimGrid creates
        // it without setting one).
        let (bb_bw, bb_lat) = (
            optional("bb_bw", parse_bandwidth).map_err(bad)?,
            optional("bb_lat", parse_time).map_err(bad)?,
        );
        let (lo_bw, lo_lat) = (
            optional("loopback_bw", parse_bandwidth).map_err(bad)?,
            optional("loopback_lat", parse_time).map_err(bad)?,
        );
        let limiter = optional("limiter_link", parse_bandwidth).map_err(bad)?;
        let split = matches!(
            node.attribute("sharing_policy").unwrap_or("SPLITDUPLEX"),
            "SPLITDUPLEX" | "FULLDUPLEX"
        );
        if bb_bw > 0.0 || bb_lat > 0.0 {
            let bb_id = format!("{id}_backbone");
            self.links.insert(
                bb_id.clone(),
                Link {
                    bandwidth: bb_bw,
                    latency: bb_lat,
                    fatpipe: node.attribute("bb_sharing_policy") == Some("FATPIPE"),
                },
            );
            layout.backbone = Some(bb_id);
        }
        let router = node
            .attribute("router_id")
            .map(str::to_string)
            .unwrap_or_else(|| format!("{prefix}{id}_router{suffix}"));
        self.member_zone.insert(router.clone(), z);
        let link = |bandwidth: f64, latency: f64, fatpipe: bool| Link {
            bandwidth,
            latency,
            fatpipe,
        };
        for number in expand_radical(radical)
            .map_err(|e| invalid(format!("line {line}: cluster {id:?}: {e}")))?
        {
            let name = format!("{prefix}{number}{suffix}");
            let link_id = format!("{id}_link_{number}");
            if lo_bw > 0.0 || lo_lat > 0.0 {
                let lo = format!("{link_id}_loopback");
                self.links.insert(lo.clone(), link(lo_bw, lo_lat, true));
                layout.loopback.insert(name.clone(), lo);
            }
            let mut up = Vec::new();
            let mut down = Vec::new();
            if limiter > 0.0 {
                let l = format!("{link_id}_limiter");
                self.links.insert(l.clone(), link(limiter, 0.0, false));
                up.push(l.clone());
                down.push(l);
            }
            if split {
                let (u, d) = (format!("{link_id}_UP"), format!("{link_id}_DOWN"));
                self.links.insert(u.clone(), link(bw, lat, false));
                self.links.insert(d.clone(), link(bw, lat, false));
                up.push(u);
                down.push(d);
            } else {
                self.links.insert(link_id.clone(), link(bw, lat, false));
                up.push(link_id.clone());
                down.push(link_id);
            }
            if let Some(bb) = &layout.backbone {
                up.push(bb.clone());
                down.push(bb.clone());
            }
            // Down is the way up reversed (`StarZone::add_route`, symmetrical).
            down.reverse();
            layout.up.insert(name.clone(), up);
            layout.down.insert(name.clone(), down);
            self.member_zone.insert(name.clone(), z);
            self.hosts.push(Host {
                name,
                speed,
                cores,
                properties: Vec::new(),
                zone_properties: zone_props.clone(),
            });
        }
        self.member_zone.insert(id.clone(), parent);
        self.zones.push(Zone {
            parent: Some(parent),
            routes: HashMap::new(),
            gateways: HashMap::new(),
            cluster: Some(layout),
            gateway: Some(router),
            name: id,
        });
        Ok(())
    }

    /// Splits hosts into Batsim's compute resources and master host, by
    /// Batsim 4.2's rules (`src/machines.cpp`, `src/permissions.cpp`):
    ///
    /// - hosts are taken in SimGrid's order, which is by name, byte by byte
    ///   (`node-10` before `node-2`; Batsim's numeric sort works on a copy
    ///   and changes nothing), and compute resources are numbered in it;
    /// - a host's role is its `role` property; the host named by `-m`
    ///   (`master_host` by default) gets `master` added to it
    ///   (`"master,master"` when it already has `role=master`, which Batsim
    ///   refuses);
    /// - a role is `""` or `compute_node` (a compute resource), `storage`,
    ///   or `master`; anything else aborts; exactly one master.
    pub fn machines(&self, master_name: Option<&str>) -> Result<Machines, String> {
        let master_name = master_name.unwrap_or(DEFAULT_MASTER);
        let mut hosts: Vec<&Host> = self.hosts.iter().collect();
        hosts.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        let mut compute = Vec::new();
        let mut master: Option<&Host> = None;
        for h in hosts {
            // A <cluster>'s props are kept as its hosts' zone properties;
            // its role applies to its hosts (not checked against Batsim).
            let mut role = h
                .property("role")
                .or_else(|| {
                    h.zone_properties
                        .iter()
                        .find(|(k, _)| k == "role")
                        .map(|(_, v)| v.as_str())
                })
                .unwrap_or("")
                .to_string();
            if h.name == master_name {
                role = if role.is_empty() {
                    "master".into()
                } else {
                    format!("{role},master")
                };
            }
            match role.as_str() {
                "" | "compute_node" => {
                    if h.speed <= 0.0 {
                        return Err(format!(
                            "host '{}' is a compute node but has an invalid (non-positive) \
                             computing speed (Batsim aborts)",
                            h.name
                        ));
                    }
                    compute.push(h.clone());
                }
                "storage" => {}
                "master" => {
                    if let Some(m) = master {
                        return Err(format!(
                            "there are two master hosts, {:?} and {:?} (Batsim aborts); the \
                             master is the host with role=master or the one named by -m \
                             (default {DEFAULT_MASTER})",
                            m.name, h.name
                        ));
                    }
                    master = Some(h);
                }
                other => {
                    return Err(format!(
                        "host {:?}: Cannot create any role from string description '{other}' \
                         existing roles are: compute_node, master, storage (Batsim aborts{})",
                        h.name,
                        if h.name == master_name {
                            format!(
                                "; the host named by -m, default {DEFAULT_MASTER}, gets the \
                                 master role added to its role property"
                            )
                        } else {
                            String::new()
                        }
                    ))
                }
            }
        }
        let Some(master) = master else {
            return Err(format!(
                "Cannot find the \"master\" role in the platform file: give one host \
                 <prop id=\"role\" value=\"master\"/>, or name it with -m (default \
                 {DEFAULT_MASTER})"
            ));
        };
        if compute.is_empty() {
            return Err("the platform has no compute host besides the master".into());
        }
        Ok(Machines {
            compute,
            master: master.clone(),
        })
    }

    /// Links of the route from `src` to `dst` (host names); `None` when the
    /// platform declares no route between them.
    fn route(&self, src: &str, dst: &str) -> Option<Vec<String>> {
        if src == dst {
            return Some(self.self_route(src));
        }
        let zs = *self.member_zone.get(src)?;
        let zd = *self.member_zone.get(dst)?;
        if zs == zd {
            return self.local_route(zs, src, dst);
        }
        // Climb to the common ancestor and join through zone gateways.
        let chain = |mut z: usize| {
            let mut v = vec![z];
            while let Some(p) = self.zones[z].parent {
                v.push(p);
                z = p;
            }
            v
        };
        let (cs, cd) = (chain(zs), chain(zd));
        let common = *cs.iter().find(|z| cd.contains(z))?;
        let child_of = |c: &[usize]| -> Option<usize> {
            let i = c.iter().position(|&z| z == common)?;
            if i == 0 {
                None
            } else {
                Some(c[i - 1])
            }
        };
        let mut links = Vec::new();
        let up_s = child_of(&cs);
        let up_d = child_of(&cd);
        let name_of = |up: Option<usize>, host: &str| {
            up.map(|z| self.zones[z].name.clone())
                .unwrap_or(host.into())
        };
        let (name_s, name_d) = (name_of(up_s, src), name_of(up_d, dst));
        // A zone route with gateways: src to gw_src, the route, gw_dst to dst.
        if let Some((gs, gd)) = self.zones[common]
            .gateways
            .get(&(name_s.clone(), name_d.clone()))
        {
            if (gs != src || gd != dst) && (gs != dst || gd != src) {
                // No way to a gateway that is the end itself
                // (`NetZoneImpl::get_global_route`).
                if gs != src {
                    links.extend(self.route(src, gs)?);
                }
                links.extend(self.local_route(common, &name_s, &name_d)?);
                if gd != dst {
                    links.extend(self.route(gd, dst)?);
                }
                return Some(links);
            }
        }
        if let Some(z) = up_s {
            links.extend(self.to_gateway(z, src)?);
        }
        links.extend(self.local_route(common, &name_s, &name_d)?);
        if let Some(z) = up_d {
            let gw = self.zones[z].gateway.clone()?;
            links.extend(self.local_route(z, &gw, dst)?);
        }
        Some(links)
    }

    /// A host to itself. In a `<cluster>` (a StarZone in SimGrid 3.32,
    /// `sg_platf_new_cluster_flat`) its loopback if the cluster has one,
    /// else up and down again, each link counted once
    /// (`StarZone::get_local_route` skips links already in the route): a
    /// split-duplex private link (the default) is two links, up and down,
    /// so its latency counts twice. Elsewhere a declared route from the
    /// host to itself, or else SimGrid's loopback (`FullZone::do_seal`,
    /// see [`Platform::route_links`]).
    fn self_route(&self, host: &str) -> Vec<String> {
        let Some(&z) = self.member_zone.get(host) else {
            return Vec::new();
        };
        let zone = &self.zones[z];
        if zone.cluster.is_some() {
            return self.local_route(z, host, host).unwrap_or_default();
        }
        zone.routes
            .get(&(host.to_string(), host.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    fn to_gateway(&self, zone: usize, host: &str) -> Option<Vec<String>> {
        let gw = self.zones[zone].gateway.clone()?;
        self.local_route(zone, host, &gw)
    }

    /// A route inside one zone. In a `<cluster>`: the source's links up,
    /// then the destination's links down, a link met twice counted once
    /// (`StarZone::get_local_route`); a router has none.
    fn local_route(&self, zone: usize, src: &str, dst: &str) -> Option<Vec<String>> {
        let z = &self.zones[zone];
        if let Some(c) = &z.cluster {
            if src == dst {
                if let Some(l) = c.loopback.get(src) {
                    return Some(vec![l.clone()]);
                }
            }
            let mut v: Vec<String> = Vec::new();
            let up = c.up.get(src).into_iter().flatten();
            let down = c.down.get(dst).into_iter().flatten();
            for l in up.chain(down) {
                if !v.contains(l) {
                    v.push(l.clone());
                }
            }
            // An old-style cluster zone (`<backbone>` only, no layout).
            if c.up.is_empty() {
                v.extend(c.backbone.clone());
            }
            return Some(v);
        }
        z.routes.get(&(src.to_string(), dst.to_string())).cloned()
    }

    /// Time a `bytes`-byte message takes from `src` to `dst` under SimGrid's
    /// ptask_L07 model (Batsim's host model): the sum of the route's link
    /// latencies plus size over the narrowest link's bandwidth. Zero when the
    /// platform has no route between them (SimGrid then uses an empty route).
    /// Latency and narrowest bandwidth of the route from `src` to `dst`
    /// (a host's route to itself with no link is SimGrid's loopback:
    /// `network/loopback-bw` 10 GBps, latency 0, added by the zones'
    /// `do_seal`).
    pub fn message_route(&self, src: &str, dst: &str) -> (f64, f64) {
        let (latency, links) = self.route_links(src, dst);
        let bw = links.iter().map(|l| l.1).fold(f64::INFINITY, f64::min);
        (latency, bw)
    }

    /// The route's latency and its links as SimGrid's solver sees them
    /// (name, bandwidth, FATPIPE), in route order, latencies summed in that
    /// order (`add_link_latency`): a host's route to itself with no link
    /// is the one `__loopback__` link (a FATPIPE shared by every host,
    /// `NetworkL07Model::NetworkL07Model`, added by `FullZone::do_seal`);
    /// between two hosts without a declared route it is empty, no link and
    /// no latency (`FullZone::get_local_route`); a split-duplex link's
    /// halves are two links (`ID_UP`, `ID_DOWN`).
    pub fn route_links(&self, src: &str, dst: &str) -> (f64, Vec<RouteLink>) {
        let route = self.route(src, dst).unwrap_or_default();
        let mut latency = 0.0;
        let mut out: Vec<RouteLink> = Vec::new();
        for id in &route {
            if let Some(l) = self.links.get(id) {
                latency += l.latency;
                out.push((id.clone(), l.bandwidth, l.fatpipe));
            }
        }
        if out.is_empty() && src == dst {
            out.push((
                LOOPBACK.to_string(),
                crate::standin::kernel::LOOPBACK_BW,
                true,
            ));
        }
        (latency, out)
    }

    pub fn message_time(&self, src: &str, dst: &str, bytes: f64) -> f64 {
        let Some(route) = self.route(src, dst) else {
            return 0.0;
        };
        let mut latency = 0.0;
        let mut bw = f64::INFINITY;
        for id in &route {
            if let Some(l) = self.links.get(id) {
                latency += l.latency;
                bw = bw.min(l.bandwidth);
            }
        }
        if bw.is_finite() && bw > 0.0 {
            latency + bytes / bw
        } else {
            latency
        }
    }
}

/// The line of an element, computed lazily (only error messages need it).
#[derive(Clone, Copy)]
struct LineOf<'a, 'i>(roxmltree::Node<'a, 'i>);

impl std::fmt::Display for LineOf<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pos = self.0.document().text_pos_at(self.0.range().start);
        write!(f, "{}", pos.row)
    }
}

fn props_of(node: roxmltree::Node) -> Vec<(String, String)> {
    node.children()
        .filter(|n| n.has_tag_name("prop"))
        .map(|n| {
            (
                n.attribute("id").unwrap_or_default().to_string(),
                n.attribute("value").unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn expand_radical(radical: &str) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for part in radical.split(',') {
        let part = part.trim();
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u64, u64) = (
                    a.trim()
                        .parse()
                        .map_err(|_| format!("bad radical {radical:?}"))?,
                    b.trim()
                        .parse()
                        .map_err(|_| format!("bad radical {radical:?}"))?,
                );
                if b < a || b - a > 1_000_000 {
                    return Err(format!("bad radical {radical:?}"));
                }
                out.extend(a..=b);
            }
            None => out.push(
                part.parse()
                    .map_err(|_| format!("bad radical {radical:?}"))?,
            ),
        }
    }
    Ok(out)
}

fn split_unit(text: &str) -> Result<(f64, &str), String> {
    let t = text.trim();
    let end = t
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_digit()
                || c == '.'
                || c == '-'
                || c == '+'
                || ((c == 'e' || c == 'E')
                    && t[i + 1..]
                        .chars()
                        .next()
                        .is_some_and(|n| n.is_ascii_digit() || n == '-' || n == '+')))
        })
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    let value: f64 = t[..end]
        .parse()
        .map_err(|_| format!("{text:?} is not a number with a unit"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("{text:?} is not a non-negative finite number"));
    }
    Ok((value, &t[end..]))
}

fn prefix_factor(prefix: &str) -> Option<f64> {
    Some(match prefix {
        "" => 1.0,
        "k" | "K" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Z" => 1e21,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        _ => return None,
    })
}

/// `"1Gf"`, `"16.673E9f"`, `"100Mf"`, `"2.5Gflops"` -> flop/s. Several
/// comma-separated pstates: the first is used.
pub fn parse_speed(text: &str) -> Result<f64, String> {
    let first = text.split(',').next().unwrap_or(text);
    let (v, unit) = split_unit(first)?;
    let prefix = unit
        .strip_suffix("flops")
        .or_else(|| unit.strip_suffix('f'))
        .unwrap_or(unit);
    prefix_factor(prefix)
        .map(|f| v * f)
        .ok_or_else(|| format!("unknown speed unit in {text:?} (use f, kf, Mf, Gf, …)"))
}

/// `"1.25GBps"`, `"125MBps"`, `"10000MiBps"`, `"1.25E8Bps"`, `"1Gbps"` -> bytes/s.
pub fn parse_bandwidth(text: &str) -> Result<f64, String> {
    let (v, unit) = split_unit(text)?;
    let (prefix, per_byte) = if let Some(p) = unit.strip_suffix("Bps") {
        (p, 1.0)
    } else if let Some(p) = unit.strip_suffix("bps") {
        (p, 0.125)
    } else if unit.is_empty() {
        ("", 1.0)
    } else {
        return Err(format!(
            "unknown bandwidth unit in {text:?} (use Bps, MBps, Gbps, …)"
        ));
    };
    prefix_factor(prefix)
        .map(|f| v * f * per_byte)
        .ok_or_else(|| format!("unknown bandwidth unit in {text:?}"))
}

/// `"50us"`, `"1.0E-4s"`, `"500us"`, `"1ms"` -> seconds.
pub fn parse_time(text: &str) -> Result<f64, String> {
    let (v, unit) = split_unit(text)?;
    let factor = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" => 1e-6,
        "ns" => 1e-9,
        "ps" => 1e-12,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        "w" => 604800.0,
        _ => return Err(format!("unknown time unit in {text:?} (use s, ms, us, ns)")),
    };
    Ok(v * factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_speed("1Gf").unwrap(), 1e9);
        assert_eq!(parse_speed("16.673E9f").unwrap(), 16.673e9);
        assert_eq!(parse_speed("100Mf").unwrap(), 1e8);
        assert_eq!(parse_bandwidth("1.25GBps").unwrap(), 1.25e9);
        assert_eq!(parse_bandwidth("1.25E8Bps").unwrap(), 1.25e8);
        assert_eq!(parse_bandwidth("10000MiBps").unwrap(), 10000.0 * 1048576.0);
        assert!((parse_time("50us").unwrap() - 50e-6).abs() < 1e-15);
        assert_eq!(parse_time("1.0E-4s").unwrap(), 1e-4);
        assert!(parse_time("3 parsecs").is_err());
    }

    const SAMPLE: &str = r#"<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1"><zone id="AS0" routing="Full">
 <host id="master_host" speed="100Mf"/>
 <host id="node0" speed="1Gf" core="4"><prop id="cpu" value="4"/></host>
 <host id="node1" speed="1Gf" core="4"><prop id="cpu" value="8"/></host>
 <link id="lm" bandwidth="1.25GBps" latency="50us"/>
 <link id="l0" bandwidth="1.25GBps" latency="50us"/>
 <link id="l1" bandwidth="1.25GBps" latency="50us"/>
 <route src="master_host" dst="node0"><link_ctn id="lm"/><link_ctn id="l0"/></route>
 <route src="master_host" dst="node1"><link_ctn id="lm"/><link_ctn id="l1"/></route>
 <route src="node0" dst="node1"><link_ctn id="l0"/><link_ctn id="l1"/></route>
</zone></platform>"#;

    #[test]
    fn hosts_master_and_latency() {
        let p = Platform::parse(SAMPLE, "sample").unwrap();
        let m = p.machines(None).unwrap();
        assert_eq!(m.master.name, "master_host");
        assert_eq!(m.compute.len(), 2);
        assert_eq!(m.compute[1].property("cpu"), Some("8"));
        let t = p.message_time("node1", "master_host", 1.0);
        assert!((t - 1e-4).abs() < 1e-8, "{t}");
    }

    #[test]
    fn clusters_and_zone_routes() {
        let xml = r#"<platform version="4.1"><zone id="AS0" routing="Full">
 <cluster id="c1" prefix="a" suffix="" radical="0-15" speed="1Gf" bw="125MBps" lat="50us" bb_bw="2.25GBps" bb_lat="500us"/>
 <cluster id="c2" prefix="master_host" suffix="" radical="0-0" speed="1Gf" bw="125MBps" lat="50us" bb_bw="2.25GBps" bb_lat="500us"><prop id="role" value="master"/></cluster>
 <link id="backbone" bandwidth="1.25GBps" latency="500us"/>
 <zoneRoute src="c1" dst="c2" gw_src="ac1_router" gw_dst="master_hostc2_router"><link_ctn id="backbone"/></zoneRoute>
</zone></platform>"#;
        let p = Platform::parse(xml, "c").unwrap();
        let m = p.machines(None).unwrap();
        assert_eq!(m.master.name, "master_host0");
        assert_eq!(m.compute.len(), 16);
        let t = p.message_time("a3", "master_host0", 0.0);
        assert!((t - 1.6e-3).abs() < 1e-9, "{t}");
    }

    #[test]
    fn sharing_policies_and_directions() {
        let xml = r#"<platform version="4.1"><zone id="AS0" routing="Full">
 <host id="a" speed="1Gf"/><host id="b" speed="1Gf"/>
 <link id="sd" bandwidth="1MBps" latency="1ms" sharing_policy="SPLITDUPLEX"/>
 <link id="fp" bandwidth="2MBps" latency="2ms" sharing_policy="FATPIPE"/>
 <route src="a" dst="b"><link_ctn id="sd" direction="UP"/><link_ctn id="fp"/></route>
</zone></platform>"#;
        let p = Platform::parse(xml, "p").unwrap();
        let names = |src, dst| -> Vec<(String, bool)> {
            p.route_links(src, dst)
                .1
                .into_iter()
                .map(|(n, _, f)| (n, f))
                .collect()
        };
        assert_eq!(
            names("a", "b"),
            [("sd_UP".to_string(), false), ("fp".to_string(), true)]
        );
        // The way back: reversed, the other half.
        assert_eq!(
            names("b", "a"),
            [("fp".to_string(), true), ("sd_DOWN".to_string(), false)]
        );
        // A split-duplex link needs a direction.
        let bad = xml.replace(r#"id="sd" direction="UP""#, r#"id="sd""#);
        assert!(Platform::parse(&bad, "p").is_err());
    }

    #[test]
    fn a_cluster_goes_up_and_down_its_private_links() {
        let xml = r#"<platform version="4.1"><zone id="AS0" routing="Full">
 <cluster id="c" prefix="n" suffix="" radical="0-1" speed="1Gf" bw="1MBps" lat="1ms" bb_bw="1GBps" bb_lat="0" bb_sharing_policy="FATPIPE"/>
 <cluster id="s" prefix="m" suffix="" radical="0-0" speed="1Gf" bw="1MBps" lat="1ms" sharing_policy="SHARED"/>
</zone></platform>"#;
        let p = Platform::parse(xml, "c").unwrap();
        let (lat, links) = p.route_links("n0", "n1");
        let names: Vec<&str> = links.iter().map(|l| l.0.as_str()).collect();
        assert_eq!(names, ["c_link_0_UP", "c_backbone", "c_link_1_DOWN"]);
        assert!(links[1].2, "the backbone is a FATPIPE");
        assert!((lat - 2e-3).abs() < 1e-15);
        // To itself: up and down again, the backbone once.
        let names: Vec<String> = p
            .route_links("n0", "n0")
            .1
            .into_iter()
            .map(|l| l.0)
            .collect();
        assert_eq!(names, ["c_link_0_UP", "c_backbone", "c_link_0_DOWN"]);
        // A SHARED private link is one link, met once.
        let names: Vec<String> = p
            .route_links("m0", "m0")
            .1
            .into_iter()
            .map(|l| l.0)
            .collect();
        assert_eq!(names, ["s_link_0"]);
    }

    #[test]
    fn clear_errors() {
        assert!(Platform::parse("<platform", "x").is_err());
        assert!(Platform::parse("<foo/>", "x").is_err());
        let e = Platform::parse(
            r#"<platform><config><prop id="smpi/or" value="1"/></config><host id="h" speed="1f"/></platform>"#,
            "x",
        )
        .unwrap_err();
        assert!(e.to_string().contains("smpi/or"), "{e}");
        let e = Platform::parse(r#"<platform><host id="h" speed="fast"/></platform>"#, "x")
            .unwrap_err();
        assert!(e.to_string().contains("speed"), "{e}");
    }

    fn hosts(body: &str) -> Platform {
        Platform::parse(
            &format!(
                r#"<?xml version='1.0'?><platform version="4.1"><zone id="z" routing="Full">{body}</zone></platform>"#
            ),
            "t",
        )
        .unwrap()
    }

    #[test]
    fn batsim_host_order_is_by_name_byte_by_byte() {
        let p = hosts(
            r#"<host id="master_host" speed="1f"/><host id="node-2" speed="1f"/>
               <host id="node-10" speed="1f"/><host id="node-1" speed="1f"/>"#,
        );
        let m = p.machines(None).unwrap();
        let names: Vec<&str> = m.compute.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["node-1", "node-10", "node-2"]);
    }

    #[test]
    fn batsim_roles_and_refusals() {
        // role=master on the host -m names (default master_host): Batsim
        // builds the role "master,master" and refuses it.
        let p = hosts(
            r#"<host id="master_host" speed="1f"><prop id="role" value="master"/></host>
               <host id="a" speed="1f"/>"#,
        );
        let e = p.machines(None).unwrap_err();
        assert!(e.contains("'master,master'"), "{e}");
        // Another name for the master is fine.
        let p = hosts(
            r#"<host id="m" speed="1f"><prop id="role" value="master"/></host>
               <host id="a" speed="1f"/><host id="s" speed="1f"><prop id="role" value="storage"/></host>"#,
        );
        let m = p.machines(None).unwrap();
        assert_eq!(m.master.name, "m");
        assert_eq!(m.compute.len(), 1);
        // Two masters, no master, an unknown role.
        let p = hosts(
            r#"<host id="m" speed="1f"><prop id="role" value="master"/></host>
               <host id="master_host" speed="1f"/><host id="a" speed="1f"/>"#,
        );
        assert!(p.machines(None).unwrap_err().contains("two master hosts"));
        let p = hosts(r#"<host id="a" speed="1f"/>"#);
        assert!(p
            .machines(None)
            .unwrap_err()
            .contains("Cannot find the \"master\" role"));
        let p = hosts(
            r#"<host id="m" speed="1f"><prop id="role" value="master"/></host>
               <host id="a" speed="1f"><prop id="role" value="worker"/></host>"#,
        );
        assert!(p.machines(None).unwrap_err().contains("'worker'"));
        // -m names another host: it becomes the master.
        let p = hosts(r#"<host id="x" speed="1f"/><host id="a" speed="1f"/>"#);
        assert_eq!(p.machines(Some("x")).unwrap().master.name, "x");
    }
}
