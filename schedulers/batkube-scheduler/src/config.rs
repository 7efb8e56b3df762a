//! `KubeSchedulerConfiguration` (kubescheduler.config.k8s.io/v1), the subset
//! a batch workload exercises, merged with the upstream default profile the
//! way upstream merges plugin sets. Unknown fields and plugins are errors.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Deserialize;

pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid scheduler configuration: {0}")]
    Yaml(#[from] serde_yaml::Error),
    #[error("invalid scheduler configuration: {0}")]
    Invalid(String),
}

fn invalid<T>(msg: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError::Invalid(msg.into()))
}

// ---- the file format ------------------------------------------------------

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeSchedulerConfiguration {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub parallelism: Option<i32>,
    #[serde(default)]
    pub leader_election: Option<LeaderElection>,
    #[serde(default)]
    pub client_connection: Option<ClientConnection>,
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<i32>,
    #[serde(default)]
    pub pod_initial_backoff_seconds: Option<i64>,
    #[serde(default)]
    pub pod_max_backoff_seconds: Option<i64>,
    #[serde(default)]
    pub enable_profiling: Option<bool>,
    #[serde(default)]
    pub enable_contention_profiling: Option<bool>,
    #[serde(default)]
    pub profiles: Vec<ProfileFile>,
}

#[derive(Debug, Deserialize, Default, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaderElection {
    #[serde(default)]
    pub leader_elect: Option<bool>,
    #[serde(default)]
    pub lease_duration: Option<String>,
    #[serde(default)]
    pub renew_deadline: Option<String>,
    #[serde(default)]
    pub retry_period: Option<String>,
    #[serde(default)]
    pub resource_lock: Option<String>,
    #[serde(default)]
    pub resource_name: Option<String>,
    #[serde(default)]
    pub resource_namespace: Option<String>,
}

#[derive(Debug, Deserialize, Default, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientConnection {
    #[serde(default)]
    pub kubeconfig: Option<String>,
    #[serde(default)]
    pub accept_content_types: Option<String>,
    #[serde(default)]
    pub content_type: Option<String>,
    #[serde(default)]
    pub qps: Option<f64>,
    #[serde(default)]
    pub burst: Option<i64>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProfileFile {
    #[serde(default)]
    pub scheduler_name: Option<String>,
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<i32>,
    #[serde(default)]
    pub plugins: Option<PluginsFile>,
    #[serde(default)]
    pub plugin_config: Vec<PluginConfigFile>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginsFile {
    #[serde(default)]
    pub pre_enqueue: Option<PluginSet>,
    #[serde(default)]
    pub queue_sort: Option<PluginSet>,
    #[serde(default)]
    pub pre_filter: Option<PluginSet>,
    #[serde(default)]
    pub filter: Option<PluginSet>,
    #[serde(default)]
    pub post_filter: Option<PluginSet>,
    #[serde(default)]
    pub pre_score: Option<PluginSet>,
    #[serde(default)]
    pub score: Option<PluginSet>,
    #[serde(default)]
    pub reserve: Option<PluginSet>,
    #[serde(default)]
    pub permit: Option<PluginSet>,
    #[serde(default)]
    pub pre_bind: Option<PluginSet>,
    #[serde(default)]
    pub bind: Option<PluginSet>,
    #[serde(default)]
    pub post_bind: Option<PluginSet>,
    #[serde(default)]
    pub multi_point: Option<PluginSet>,
}

#[derive(Debug, Deserialize, Default, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginSet {
    #[serde(default)]
    pub enabled: Vec<PluginRef>,
    #[serde(default)]
    pub disabled: Vec<PluginRef>,
}

#[derive(Debug, Deserialize, Default, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginRef {
    pub name: String,
    #[serde(default)]
    pub weight: Option<i32>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginConfigFile {
    pub name: String,
    #[serde(default)]
    pub args: Option<serde_yaml::Value>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NodeResourcesFitArgsFile {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    ignored_resources: Vec<String>,
    #[serde(default)]
    ignored_resource_groups: Vec<String>,
    #[serde(default)]
    scoring_strategy: Option<ScoringStrategyFile>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ScoringStrategyFile {
    #[serde(default, rename = "type")]
    type_: Option<String>,
    #[serde(default)]
    resources: Option<Vec<ResourceSpecFile>>,
    #[serde(default)]
    requested_to_capacity_ratio: Option<RequestedToCapacityRatioFile>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ResourceSpecFile {
    name: String,
    #[serde(default)]
    weight: Option<i64>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RequestedToCapacityRatioFile {
    #[serde(default)]
    shape: Vec<ShapePointFile>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ShapePointFile {
    utilization: i64,
    score: i64,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BalancedAllocationArgsFile {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    resources: Option<Vec<ResourceSpecFile>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DefaultPreemptionArgsFile {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    min_candidate_nodes_percentage: Option<i32>,
    #[serde(default)]
    min_candidate_nodes_absolute: Option<i32>,
}

// ---- the merged, validated configuration ----------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FilterPlugin {
    NodeUnschedulable,
    NodeName,
    TaintToleration,
    NodeAffinity,
    NodeResourcesFit,
    InterPodAffinity,
}

impl FilterPlugin {
    pub fn name(self) -> &'static str {
        match self {
            FilterPlugin::NodeUnschedulable => "NodeUnschedulable",
            FilterPlugin::NodeName => "NodeName",
            FilterPlugin::TaintToleration => "TaintToleration",
            FilterPlugin::NodeAffinity => "NodeAffinity",
            FilterPlugin::NodeResourcesFit => "NodeResourcesFit",
            FilterPlugin::InterPodAffinity => "InterPodAffinity",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScorePlugin {
    NodeResourcesFit,
    NodeResourcesBalancedAllocation,
    TaintToleration,
    NodeAffinity,
}

impl ScorePlugin {
    pub fn name(self) -> &'static str {
        match self {
            ScorePlugin::NodeResourcesFit => "NodeResourcesFit",
            ScorePlugin::NodeResourcesBalancedAllocation => "NodeResourcesBalancedAllocation",
            ScorePlugin::TaintToleration => "TaintToleration",
            ScorePlugin::NodeAffinity => "NodeAffinity",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceWeight {
    pub name: String,
    pub weight: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShapePoint {
    pub utilization: i64,
    /// Already scaled to 0..100 (the file gives 0..10).
    pub score: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScoringStrategy {
    LeastAllocated,
    MostAllocated,
    RequestedToCapacityRatio(Vec<ShapePoint>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FitArgs {
    pub strategy: ScoringStrategy,
    pub resources: Vec<ResourceWeight>,
    pub ignored_resources: BTreeSet<String>,
    pub ignored_resource_groups: BTreeSet<String>,
}

fn cpu_memory() -> Vec<ResourceWeight> {
    vec![
        ResourceWeight {
            name: "cpu".into(),
            weight: 1,
        },
        ResourceWeight {
            name: "memory".into(),
            weight: 1,
        },
    ]
}

impl Default for FitArgs {
    fn default() -> Self {
        FitArgs {
            strategy: ScoringStrategy::LeastAllocated,
            resources: cpu_memory(),
            ignored_resources: BTreeSet::new(),
            ignored_resource_groups: BTreeSet::new(),
        }
    }
}

/// One scheduling profile, with its effective plugins.
#[derive(Debug, Clone)]
pub struct Profile {
    pub scheduler_name: String,
    pub filters: Vec<FilterPlugin>,
    pub scores: Vec<(ScorePlugin, i64)>,
    pub preemption: bool,
    pub fit: FitArgs,
    pub balanced_resources: Vec<ResourceWeight>,
    pub percentage_of_nodes_to_score: Option<i32>,
}

impl Profile {
    pub fn with_strategy(mut self, strategy: ScoringStrategy) -> Profile {
        self.fit.strategy = strategy;
        self
    }
}

#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    pub profiles: Vec<Profile>,
    pub percentage_of_nodes_to_score: i32,
    pub pod_initial_backoff: Duration,
    pub pod_max_backoff: Duration,
    pub leader_elect: bool,
    pub kubeconfig: Option<String>,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            profiles: vec![default_profile(DEFAULT_SCHEDULER_NAME)],
            percentage_of_nodes_to_score: 0,
            pod_initial_backoff: Duration::from_secs(1),
            pod_max_backoff: Duration::from_secs(10),
            leader_elect: false,
            kubeconfig: None,
        }
    }
}

/// The upstream default profile, restricted to what this scheduler implements.
pub fn default_profile(name: &str) -> Profile {
    build_profile(&ProfileFile {
        scheduler_name: Some(name.to_string()),
        ..ProfileFile::default()
    })
    .expect("the default profile is valid")
}

/// Upstream plugins this scheduler implements, in upstream's multiPoint
/// order, with their default score weight (0: not a score plugin).
const IMPLEMENTED: &[(&str, i64)] = &[
    ("PrioritySort", 0),
    ("NodeUnschedulable", 0),
    ("NodeName", 0),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodeResourcesFit", 1),
    // Filter only (required terms); its score (preferred terms) is not
    // implemented, so it has no score weight here.
    ("InterPodAffinity", 0),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("DefaultBinder", 0),
];

/// Upstream in-tree plugins that exist but are not implemented here: they may
/// be disabled, not enabled.
const NOT_IMPLEMENTED: &[&str] = &[
    "SchedulingGates",
    "NodePorts",
    "VolumeRestrictions",
    "EBSLimits",
    "GCEPDLimits",
    "NodeVolumeLimits",
    "AzureDiskLimits",
    "CinderLimits",
    "VolumeBinding",
    "VolumeZone",
    "PodTopologySpread",
    "ImageLocality",
    "SelectorSpread",
    "DynamicResources",
];

fn check_known(name: &str, enabling: bool) -> Result<(), ConfigError> {
    if name == "*" && !enabling {
        return Ok(());
    }
    if IMPLEMENTED.iter().any(|(n, _)| *n == name) {
        return Ok(());
    }
    if NOT_IMPLEMENTED.contains(&name) {
        if enabling {
            return invalid(format!(
                "plugin {name:?} is an upstream plugin that batkube-scheduler does not implement; \
                 remove it from `enabled` (implemented: {})",
                implemented_names()
            ));
        }
        return Ok(());
    }
    invalid(format!(
        "unknown plugin {name:?} (implemented: {})",
        implemented_names()
    ))
}

fn implemented_names() -> String {
    IMPLEMENTED
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

fn default_weight(name: &str) -> i64 {
    IMPLEMENTED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, w)| *w)
        .unwrap_or(1)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Point {
    Filter,
    Score,
    PostFilter,
    QueueSort,
    Bind,
}

fn implements(name: &str, point: Point) -> bool {
    match point {
        Point::Filter => matches!(
            name,
            "NodeUnschedulable"
                | "NodeName"
                | "TaintToleration"
                | "NodeAffinity"
                | "NodeResourcesFit"
                | "InterPodAffinity"
        ),
        Point::Score => matches!(
            name,
            "TaintToleration"
                | "NodeAffinity"
                | "NodeResourcesFit"
                | "NodeResourcesBalancedAllocation"
        ),
        Point::PostFilter => name == "DefaultPreemption",
        Point::QueueSort => name == "PrioritySort",
        Point::Bind => name == "DefaultBinder",
    }
}

/// Upstream `mergePluginSet`: defaults minus disabled (`*` for all), custom
/// enabled ones replacing defaults in place, the others appended.
fn merge_set(
    defaults: &[(String, i64)],
    custom: Option<&PluginSet>,
) -> Result<Vec<(String, i64)>, ConfigError> {
    let Some(custom) = custom else {
        return Ok(defaults.to_vec());
    };
    for p in &custom.disabled {
        check_known(&p.name, false)?;
    }
    for p in &custom.enabled {
        check_known(&p.name, true)?;
        if let Some(w) = p.weight {
            if !(0..=100).contains(&w) {
                return invalid(format!(
                    "plugin {:?}: weight {w} is out of range 0..100",
                    p.name
                ));
            }
        }
    }
    let disabled: BTreeSet<&str> = custom.disabled.iter().map(|p| p.name.as_str()).collect();
    let weight_of = |p: &PluginRef| match p.weight {
        Some(w) if w > 0 => w as i64,
        _ => default_weight(&p.name),
    };
    let mut out = Vec::new();
    let mut used = BTreeSet::new();
    if !disabled.contains("*") {
        for (name, w) in defaults {
            if disabled.contains(name.as_str()) {
                continue;
            }
            if let Some(c) = custom.enabled.iter().find(|p| &p.name == name) {
                out.push((name.clone(), weight_of(c)));
                used.insert(name.clone());
            } else {
                out.push((name.clone(), *w));
            }
        }
    }
    for p in &custom.enabled {
        if used.contains(&p.name) || out.iter().any(|(n, _)| n == &p.name) {
            continue;
        }
        out.push((p.name.clone(), weight_of(p)));
    }
    Ok(out)
}

/// Upstream `expandMultiPointPlugins` for one extension point: plugins
/// explicitly configured at the point win; multiPoint ones fill in unless
/// disabled there.
fn expand(
    multi: &[(String, i64)],
    point: Point,
    set: Option<&PluginSet>,
) -> Result<Vec<(String, i64)>, ConfigError> {
    let specific = merge_set(&[], set)?;
    for (name, _) in &specific {
        if !implements(name, point) {
            return invalid(format!(
                "plugin {name:?} cannot be enabled at this extension point ({point:?})"
            ));
        }
    }
    let disabled: BTreeSet<&str> = set
        .map(|s| s.disabled.iter().map(|p| p.name.as_str()).collect())
        .unwrap_or_default();
    let mut out = Vec::new();
    for (name, w) in multi {
        if !implements(name, point) || disabled.contains("*") || disabled.contains(name.as_str()) {
            continue;
        }
        match specific.iter().find(|(n, _)| n == name) {
            Some(s) => out.push(s.clone()),
            None => out.push((name.clone(), *w)),
        }
    }
    for s in specific {
        if !out.iter().any(|(n, _)| *n == s.0) {
            out.push(s);
        }
    }
    Ok(out)
}

fn resource_weights(
    list: Option<Vec<ResourceSpecFile>>,
    plugin: &str,
) -> Result<Vec<ResourceWeight>, ConfigError> {
    let Some(list) = list else {
        return Ok(cpu_memory());
    };
    let mut out = Vec::new();
    for r in list {
        let weight = r.weight.unwrap_or(1);
        if !(1..=100).contains(&weight) {
            return invalid(format!(
                "{plugin}: resource {:?} weight {weight} is out of range 1..100",
                r.name
            ));
        }
        out.push(ResourceWeight {
            name: r.name,
            weight,
        });
    }
    Ok(out)
}

fn parse_args<T: serde::de::DeserializeOwned + Default>(
    name: &str,
    args: &Option<serde_yaml::Value>,
) -> Result<T, ConfigError> {
    match args {
        None => Ok(T::default()),
        Some(v) => serde_yaml::from_value(v.clone())
            .map_err(|e| ConfigError::Invalid(format!("pluginConfig {name}: {e}"))),
    }
}

fn build_profile(file: &ProfileFile) -> Result<Profile, ConfigError> {
    let scheduler_name = file
        .scheduler_name
        .clone()
        .unwrap_or_else(|| DEFAULT_SCHEDULER_NAME.to_string());
    let defaults: Vec<(String, i64)> = IMPLEMENTED
        .iter()
        .map(|(n, w)| (n.to_string(), *w))
        .collect();
    let plugins = file.plugins.as_ref();
    if let Some(p) = plugins {
        for (point, set) in [
            ("preEnqueue", &p.pre_enqueue),
            ("preFilter", &p.pre_filter),
            ("preScore", &p.pre_score),
            ("reserve", &p.reserve),
            ("permit", &p.permit),
            ("preBind", &p.pre_bind),
            ("postBind", &p.post_bind),
        ] {
            if let Some(set) = set {
                if let Some(e) = set.enabled.first() {
                    check_known(&e.name, true)?;
                    return invalid(format!(
                        "profile {scheduler_name:?}: enabling {:?} at {point} is not supported; \
                         configure filter, score, postFilter, queueSort, bind or multiPoint",
                        e.name
                    ));
                }
                for d in &set.disabled {
                    check_known(&d.name, false)?;
                }
            }
        }
    }
    let multi = merge_set(&defaults, plugins.and_then(|p| p.multi_point.as_ref()))?;
    let filters = expand(
        &multi,
        Point::Filter,
        plugins.and_then(|p| p.filter.as_ref()),
    )?;
    let scores = expand(&multi, Point::Score, plugins.and_then(|p| p.score.as_ref()))?;
    let post = expand(
        &multi,
        Point::PostFilter,
        plugins.and_then(|p| p.post_filter.as_ref()),
    )?;
    let sort = expand(
        &multi,
        Point::QueueSort,
        plugins.and_then(|p| p.queue_sort.as_ref()),
    )?;
    let bind = expand(&multi, Point::Bind, plugins.and_then(|p| p.bind.as_ref()))?;
    if sort.is_empty() {
        return invalid(format!(
            "profile {scheduler_name:?}: a queueSort plugin is required (PrioritySort)"
        ));
    }
    if bind.is_empty() {
        return invalid(format!(
            "profile {scheduler_name:?}: a bind plugin is required (DefaultBinder)"
        ));
    }
    let filters = filters
        .iter()
        .map(|(n, _)| match n.as_str() {
            "NodeUnschedulable" => FilterPlugin::NodeUnschedulable,
            "NodeName" => FilterPlugin::NodeName,
            "TaintToleration" => FilterPlugin::TaintToleration,
            "NodeAffinity" => FilterPlugin::NodeAffinity,
            "InterPodAffinity" => FilterPlugin::InterPodAffinity,
            _ => FilterPlugin::NodeResourcesFit,
        })
        .collect();
    let scores = scores
        .iter()
        .map(|(n, w)| {
            let p = match n.as_str() {
                "TaintToleration" => ScorePlugin::TaintToleration,
                "NodeAffinity" => ScorePlugin::NodeAffinity,
                "NodeResourcesFit" => ScorePlugin::NodeResourcesFit,
                _ => ScorePlugin::NodeResourcesBalancedAllocation,
            };
            (p, *w)
        })
        .collect();

    let mut fit = FitArgs::default();
    let mut balanced_resources = cpu_memory();
    let mut seen = BTreeSet::new();
    for pc in &file.plugin_config {
        if !seen.insert(pc.name.clone()) {
            return invalid(format!(
                "profile {scheduler_name:?}: pluginConfig {:?} is given twice",
                pc.name
            ));
        }
        match pc.name.as_str() {
            "NodeResourcesFit" => {
                let a: NodeResourcesFitArgsFile = parse_args(&pc.name, &pc.args)?;
                let _ = (a.api_version, a.kind);
                fit.ignored_resources = a.ignored_resources.into_iter().collect();
                fit.ignored_resource_groups = a.ignored_resource_groups.into_iter().collect();
                if let Some(s) = a.scoring_strategy {
                    fit.resources = resource_weights(s.resources, "NodeResourcesFit")?;
                    fit.strategy = match s.type_.as_deref().unwrap_or("LeastAllocated") {
                        "LeastAllocated" => ScoringStrategy::LeastAllocated,
                        "MostAllocated" => ScoringStrategy::MostAllocated,
                        "RequestedToCapacityRatio" => {
                            let shape = s
                                .requested_to_capacity_ratio
                                .map(|r| r.shape)
                                .unwrap_or_default();
                            ScoringStrategy::RequestedToCapacityRatio(validate_shape(shape)?)
                        }
                        other => {
                            return invalid(format!(
                                "NodeResourcesFit: unknown scoringStrategy.type {other:?} \
                                 (LeastAllocated, MostAllocated or RequestedToCapacityRatio)"
                            ))
                        }
                    };
                }
            }
            "NodeResourcesBalancedAllocation" => {
                let a: BalancedAllocationArgsFile = parse_args(&pc.name, &pc.args)?;
                let _ = (a.api_version, a.kind);
                balanced_resources =
                    resource_weights(a.resources, "NodeResourcesBalancedAllocation")?;
            }
            "DefaultPreemption" => {
                let a: DefaultPreemptionArgsFile = parse_args(&pc.name, &pc.args)?;
                let _ = (
                    a.api_version,
                    a.kind,
                    a.min_candidate_nodes_percentage,
                    a.min_candidate_nodes_absolute,
                );
            }
            other => {
                check_known(other, false)?;
                if pc.args.is_some() && !IMPLEMENTED.iter().any(|(n, _)| *n == other) {
                    return invalid(format!(
                        "pluginConfig {other:?}: batkube-scheduler does not implement this plugin"
                    ));
                }
                if pc.args.as_ref().is_some_and(|a| !a.is_null()) {
                    return invalid(format!("pluginConfig {other:?}: this plugin takes no args"));
                }
            }
        }
    }
    if let Some(p) = file.percentage_of_nodes_to_score {
        check_percentage(p)?;
    }
    Ok(Profile {
        scheduler_name,
        filters,
        scores,
        preemption: !post.is_empty(),
        fit,
        balanced_resources,
        percentage_of_nodes_to_score: file.percentage_of_nodes_to_score,
    })
}

fn validate_shape(shape: Vec<ShapePointFile>) -> Result<Vec<ShapePoint>, ConfigError> {
    if shape.is_empty() {
        return invalid(
            "RequestedToCapacityRatio: requestedToCapacityRatio.shape must not be empty",
        );
    }
    let mut out: Vec<ShapePoint> = Vec::new();
    for p in shape {
        if !(0..=100).contains(&p.utilization) {
            return invalid(format!(
                "RequestedToCapacityRatio: utilization {} is out of range 0..100",
                p.utilization
            ));
        }
        if !(0..=10).contains(&p.score) {
            return invalid(format!(
                "RequestedToCapacityRatio: score {} is out of range 0..10",
                p.score
            ));
        }
        if let Some(last) = out.last() {
            if p.utilization <= last.utilization {
                return invalid("RequestedToCapacityRatio: shape utilization values must be strictly increasing");
            }
        }
        out.push(ShapePoint {
            utilization: p.utilization,
            score: p.score * 10,
        });
    }
    Ok(out)
}

fn check_percentage(p: i32) -> Result<(), ConfigError> {
    if !(0..=100).contains(&p) {
        return invalid(format!(
            "percentageOfNodesToScore {p} is out of range 0..100"
        ));
    }
    Ok(())
}

fn parse_go_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| c.is_ascii_alphabetic())?);
    let v: f64 = num.parse().ok()?;
    let secs = match unit {
        "ms" => v / 1000.0,
        "s" => v,
        "m" => v * 60.0,
        "h" => v * 3600.0,
        _ => return None,
    };
    Some(Duration::from_secs_f64(secs))
}

impl SchedulerConfig {
    /// Parses and validates a `KubeSchedulerConfiguration` YAML document.
    pub fn from_yaml(text: &str) -> Result<SchedulerConfig, ConfigError> {
        let file: KubeSchedulerConfiguration = serde_yaml::from_str(text)?;
        if file.api_version != "kubescheduler.config.k8s.io/v1" {
            return invalid(format!(
                "apiVersion {:?} is not supported; use kubescheduler.config.k8s.io/v1",
                file.api_version
            ));
        }
        if file.kind != "KubeSchedulerConfiguration" {
            return invalid(format!(
                "kind {:?} is not supported; use KubeSchedulerConfiguration",
                file.kind
            ));
        }
        let mut cfg = SchedulerConfig::default();
        if let Some(p) = file.percentage_of_nodes_to_score {
            check_percentage(p)?;
            cfg.percentage_of_nodes_to_score = p;
        }
        if let Some(s) = file.pod_initial_backoff_seconds {
            if s <= 0 {
                return invalid("podInitialBackoffSeconds must be greater than 0");
            }
            cfg.pod_initial_backoff = Duration::from_secs(s as u64);
        }
        if let Some(s) = file.pod_max_backoff_seconds {
            if s <= 0 {
                return invalid("podMaxBackoffSeconds must be greater than 0");
            }
            cfg.pod_max_backoff = Duration::from_secs(s as u64);
        }
        if cfg.pod_max_backoff < cfg.pod_initial_backoff {
            return invalid("podMaxBackoffSeconds must be at least podInitialBackoffSeconds");
        }
        if let Some(le) = &file.leader_election {
            cfg.leader_elect = le.leader_elect.unwrap_or(true);
            for d in [&le.lease_duration, &le.renew_deadline, &le.retry_period]
                .into_iter()
                .flatten()
            {
                if parse_go_duration(d).is_none() {
                    return invalid(format!("leaderElection: invalid duration {d:?} (e.g. 15s)"));
                }
            }
        }
        cfg.kubeconfig = file
            .client_connection
            .as_ref()
            .and_then(|c| c.kubeconfig.clone())
            .filter(|k| !k.is_empty());
        if !file.profiles.is_empty() {
            let mut names = BTreeSet::new();
            cfg.profiles = Vec::new();
            for p in &file.profiles {
                let profile = build_profile(p)?;
                if !names.insert(profile.scheduler_name.clone()) {
                    return invalid(format!(
                        "schedulerName {:?} is used by two profiles",
                        profile.scheduler_name
                    ));
                }
                cfg.profiles.push(profile);
            }
        }
        Ok(cfg)
    }

    pub fn profile(&self, scheduler_name: &str) -> Option<&Profile> {
        self.profiles
            .iter()
            .find(|p| p.scheduler_name == scheduler_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_profile_matches_upstream_defaults() {
        let p = default_profile("default-scheduler");
        assert_eq!(
            p.filters,
            vec![
                FilterPlugin::NodeUnschedulable,
                FilterPlugin::NodeName,
                FilterPlugin::TaintToleration,
                FilterPlugin::NodeAffinity,
                FilterPlugin::NodeResourcesFit,
                FilterPlugin::InterPodAffinity
            ]
        );
        assert_eq!(
            p.scores,
            vec![
                (ScorePlugin::TaintToleration, 3),
                (ScorePlugin::NodeAffinity, 2),
                (ScorePlugin::NodeResourcesFit, 1),
                (ScorePlugin::NodeResourcesBalancedAllocation, 1)
            ]
        );
        assert!(p.preemption);
        assert_eq!(p.fit.strategy, ScoringStrategy::LeastAllocated);
    }

    #[test]
    fn parses_profiles_strategies_and_backoff() {
        let cfg = SchedulerConfig::from_yaml(
            r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 50
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 20
leaderElection:
  leaderElect: false
profiles:
- schedulerName: packer
  plugins:
    score:
      disabled:
      - name: NodeResourcesBalancedAllocation
      enabled:
      - name: NodeResourcesFit
        weight: 5
    postFilter:
      disabled:
      - name: "*"
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - name: cpu
          weight: 2
- schedulerName: ratio
  plugins:
    multiPoint:
      disabled:
      - name: PodTopologySpread
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: RequestedToCapacityRatio
        requestedToCapacityRatio:
          shape:
          - utilization: 0
            score: 10
          - utilization: 100
            score: 0
"#,
        )
        .unwrap();
        assert_eq!(cfg.percentage_of_nodes_to_score, 50);
        assert_eq!(cfg.pod_initial_backoff, Duration::from_secs(2));
        assert_eq!(cfg.pod_max_backoff, Duration::from_secs(20));
        let packer = cfg.profile("packer").unwrap();
        assert_eq!(packer.fit.strategy, ScoringStrategy::MostAllocated);
        assert_eq!(
            packer.fit.resources,
            vec![ResourceWeight {
                name: "cpu".into(),
                weight: 2
            }]
        );
        assert!(!packer.preemption);
        assert_eq!(
            packer.scores,
            vec![
                (ScorePlugin::TaintToleration, 3),
                (ScorePlugin::NodeAffinity, 2),
                (ScorePlugin::NodeResourcesFit, 5)
            ]
        );
        let ratio = cfg.profile("ratio").unwrap();
        assert_eq!(
            ratio.fit.strategy,
            ScoringStrategy::RequestedToCapacityRatio(vec![
                ShapePoint {
                    utilization: 0,
                    score: 100
                },
                ShapePoint {
                    utilization: 100,
                    score: 0
                }
            ])
        );
    }

    #[test]
    fn unknown_fields_and_plugins_are_clear_errors() {
        let err = SchedulerConfig::from_yaml(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofilez: []\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("unknown field `profilez`"), "{err}");

        let err = SchedulerConfig::from_yaml(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n    score:\n      enabled:\n      - name: NodeResourcesFitt\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("unknown plugin \"NodeResourcesFitt\""),
            "{err}"
        );

        let err = SchedulerConfig::from_yaml(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n    score:\n      enabled:\n      - name: ImageLocality\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("does not implement"), "{err}");

        let err = SchedulerConfig::from_yaml(
            "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("kubescheduler.config.k8s.io/v1"), "{err}");

        let err = SchedulerConfig::from_yaml(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: Packed\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("unknown scoringStrategy.type"), "{err}");
    }
}
