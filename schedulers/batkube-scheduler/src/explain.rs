//! `--explain`: why each pod went where it went, written on the pod in the
//! layout of the kube-scheduler-simulator (kubernetes-sigs), so that its
//! tools (its web view reads `filter-result`, `score-result` and
//! `finalscore-result`) and ours read the same annotations.
//!
//! The layout, as the simulator writes it after each scheduling attempt:
//! every value is a JSON document in a string; maps are written with their
//! keys sorted (Go's `json.Marshal`); scores are decimal strings.
//!
//! - `filter-result`: node -> plugin -> `"passed"` or the plugin's message
//!   (reasons joined by `", "`). Filters stop at a node's first failure, as
//!   upstream runs them, so later plugins are absent for that node; nodes
//!   never looked at (`percentageOfNodesToScore`) are absent.
//! - `score-result`: node -> plugin -> raw score; `finalscore-result`: node
//!   -> plugin -> normalized score times the plugin's weight (raw times
//!   weight for a plugin without normalization). Both `{}` when scoring did
//!   not run (one feasible node, or none).
//! - `postfilter-result`: node -> plugin -> `"preemption victim"` for the
//!   node preemption chose, `{}` for the other nodes filters refused; `{}`
//!   when preemption did not run.
//! - `prefilter-result-status`: plugin -> message, only when a PreFilter
//!   refused the pod (InterPodAffinity's unreadable terms).
//! - `selected-node`: the node, `""` when the attempt failed.
//! - `bind-result`: `{"DefaultBinder":"success"}` on a binding (it is
//!   written by the binding itself, so a failed binding leaves nothing).
//! - the phases this scheduler does not have (`prefilter-result`,
//!   `prescore-result`, `reserve-result`, `permit-result`,
//!   `permit-result-timeout`, `prebind-result`): `{}`.
//! - `result-history`: a JSON array of every attempt's map of the keys
//!   above, oldest first; the simulator drops the oldest entries until the
//!   array fits the API's annotation limit (256 KiB). Here the limit is the
//!   scheduler's `--explain-history-bytes`, and the default is 0: no
//!   history. Every attempt is on the pod when it is made, and the broker
//!   keeps each one in decisions.jsonl, so the history only repeats them;
//!   and it made pods large enough (tens of KiB each, every attempt again)
//!   to change a simulation: an instant's pod updates then reach the
//!   scheduler in several reads, and it decided on part of them (the burst
//!   bound 9 of 16 pods at one instant and 7 ten seconds later, differently
//!   from run to run). `--explain-history-bytes 262144` is the simulator's
//!   bound.
//!
//! Two keys of ours, as the simulator's custom results (they enter the
//! history entries too): `batkube.io/scheduling-attempt` (the attempt's
//! number for this pod, from 1: each attempt changes the pod, even one
//! identical to the last) and `batkube.io/scheduling-message` (the
//! failure's message, as in the `PodScheduled` condition; `""` on success).

use std::collections::{BTreeMap, HashMap};

/// The simulator's annotation keys.
pub const PREFILTER_STATUS: &str = "kube-scheduler-simulator.sigs.k8s.io/prefilter-result-status";
pub const PREFILTER_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/prefilter-result";
pub const FILTER_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/filter-result";
pub const POSTFILTER_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/postfilter-result";
pub const PRESCORE_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/prescore-result";
pub const SCORE_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/score-result";
pub const FINALSCORE_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/finalscore-result";
pub const RESERVE_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/reserve-result";
pub const PERMIT_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/permit-result";
pub const PERMIT_TIMEOUT_RESULT: &str =
    "kube-scheduler-simulator.sigs.k8s.io/permit-result-timeout";
pub const PREBIND_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/prebind-result";
pub const BIND_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/bind-result";
pub const SELECTED_NODE: &str = "kube-scheduler-simulator.sigs.k8s.io/selected-node";
pub const RESULT_HISTORY: &str = "kube-scheduler-simulator.sigs.k8s.io/result-history";
/// Ours: the attempt's number for this pod (from 1).
pub const ATTEMPT: &str = "batkube.io/scheduling-attempt";
/// Ours: why the attempt failed (absent on success).
pub const MESSAGE: &str = "batkube.io/scheduling-message";

/// The simulator's words.
pub const PASSED: &str = "passed";
pub const SUCCESS: &str = "success";
pub const PREEMPTION_VICTIM: &str = "preemption victim";

/// The API's limit on a pod's annotations (`TotalAnnotationSizeLimitB`),
/// which the simulator applies to `result-history`.
pub const SIMULATOR_HISTORY_BYTES: usize = 256 * 1024;

/// How decisions are explained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExplainConfig {
    /// `result-history` is cut (oldest entries first) to this many bytes; 0: not written.
    pub history_bytes: usize,
}

impl Default for ExplainConfig {
    fn default() -> Self {
        // No history by default (see the module doc).
        ExplainConfig { history_bytes: 0 }
    }
}

/// One node's filter verdict: passed every filter, or refused by one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Passed,
    /// The index in [`Attempt::filters`] of the refusing plugin, and its message.
    Failed(usize, String),
}

/// What one scheduling attempt of one pod saw, kept compact while the
/// cycle runs and expanded into the annotations once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attempt {
    /// The profile's filter plugins, in order.
    pub filters: Vec<&'static str>,
    /// Per node looked at, in the order looked at.
    pub verdicts: Vec<(String, Verdict)>,
    /// Score plugins that ran: (name, raw per feasible node, final per feasible node).
    pub scores: Vec<(&'static str, Vec<i64>, Vec<i64>)>,
    /// The feasible nodes, in the order of `scores`' vectors.
    pub scored: Vec<String>,
    /// PreFilter refusals: (plugin, message).
    pub prefilter: Vec<(&'static str, String)>,
    /// Preemption ran: the refused nodes and the node chosen, if any.
    pub postfilter: Option<(Vec<String>, Option<String>)>,
    pub selected: Option<String>,
    pub message: Option<String>,
}

/// For each byte, what [`push_str`] writes: 0 for the byte itself, else
/// the escape's kind (`b'u'`: `\u00XX`, else a backslash and that letter),
/// as Go's encoder escapes. Every byte that needs one is ASCII, so the runs
/// between escapes are whole characters.
const ESCAPES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = b'u';
        b += 1;
    }
    t[b'\n' as usize] = b'n';
    t[b'\r' as usize] = b'r';
    t[b'\t' as usize] = b't';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    // Go's encoder escapes these for HTML; the simulator's values have them so.
    t[b'<' as usize] = b'u';
    t[b'>' as usize] = b'u';
    t[b'&' as usize] = b'u';
    t
};

/// Appends `s` as a JSON string, escaped as Go's encoder does. The runs
/// without escapes are copied whole: a character at a time, this was a
/// fifth of an explained run's scheduler instructions.
fn push_str(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(s.len() + 2);
    out.push('"');
    let mut run = 0;
    for (i, &b) in s.as_bytes().iter().enumerate() {
        let e = ESCAPES[b as usize];
        if e == 0 {
            continue;
        }
        out.push_str(&s[run..i]);
        run = i + 1;
        if e == b'u' {
            out.push_str("\\u00");
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 0xf) as usize] as char);
        } else {
            out.push('\\');
            out.push(e as char);
        }
    }
    out.push_str(&s[run..]);
    out.push('"');
}

/// `"key":` for each of `names`, and their order sorted as Go sorts map
/// keys (bytes): written once per attempt, not once per node.
fn sorted_keys(names: &[&str]) -> (Vec<usize>, Vec<String>) {
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by(|&a, &b| names[a].cmp(names[b]));
    let keys = names
        .iter()
        .map(|n| {
            let mut k = String::with_capacity(n.len() + 3);
            push_str(&mut k, n);
            k.push(':');
            k
        })
        .collect();
    (order, keys)
}

/// Appends `v` in decimal, quoted (the simulator's scores are strings).
fn push_quoted_int(out: &mut String, v: i64) {
    let mut digits = [0u8; 20];
    let mut n = v.unsigned_abs();
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.push('"');
    if v < 0 {
        out.push('-');
    }
    // Only ASCII digits were written.
    out.push_str(std::str::from_utf8(&digits[i..]).unwrap_or_default());
    out.push('"');
}

/// `{"k":"v",...}` of sorted pairs.
fn flat_map<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut sorted: Vec<(&str, &str)> = pairs.into_iter().collect();
    sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut out = String::from("{");
    for (k, (key, v)) in sorted.into_iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        push_str(&mut out, key);
        out.push(':');
        push_str(&mut out, v);
    }
    out.push('}');
    out
}

impl Attempt {
    pub fn new(filters: Vec<&'static str>) -> Attempt {
        Attempt {
            filters,
            ..Attempt::default()
        }
    }

    /// `filter-result`.
    pub fn filter_json(&self) -> String {
        // A node looked at twice (a nominated node first, then in the
        // scan) keeps its last verdict, as the simulator's map does.
        let mut order: Vec<usize> = (0..self.verdicts.len()).collect();
        order.sort_by(|&a, &b| self.verdicts[a].0.cmp(&self.verdicts[b].0));
        let order: Vec<usize> = (0..order.len())
            .filter(|&k| {
                k + 1 == order.len() || self.verdicts[order[k]].0 != self.verdicts[order[k + 1]].0
            })
            .map(|k| order[k])
            .collect();
        // A node's plugins are those up to its refusal, in name order: the
        // profile's names sorted once, and each node's map written once per
        // verdict (nodes refused for the same reason share it).
        let (plugins, keys) = sorted_keys(&self.filters);
        let verdicts = |upto: usize, failed: Option<(usize, &str)>| {
            let mut m = String::with_capacity(keys.iter().map(|k| k.len() + 12).sum::<usize>() + 2);
            m.push('{');
            for &p in plugins.iter().filter(|&&p| p < upto) {
                if m.len() > 1 {
                    m.push(',');
                }
                m.push_str(&keys[p]);
                match failed {
                    Some((f, msg)) if f == p => push_str(&mut m, msg),
                    _ => push_str(&mut m, PASSED),
                }
            }
            m.push('}');
            m
        };
        let passed = verdicts(self.filters.len(), None);
        let mut refused: HashMap<(usize, &str), String> = HashMap::new();
        let mut out = String::with_capacity(2 + order.len() * (passed.len() + 24));
        out.push('{');
        for (k, &i) in order.iter().enumerate() {
            let (node, verdict) = &self.verdicts[i];
            if k > 0 {
                out.push(',');
            }
            push_str(&mut out, node);
            out.push(':');
            match verdict {
                Verdict::Passed => out.push_str(&passed),
                Verdict::Failed(p, msg) => out.push_str(
                    refused
                        .entry((*p, msg.as_str()))
                        .or_insert_with(|| verdicts(*p + 1, Some((*p, msg)))),
                ),
            }
        }
        out.push('}');
        out
    }

    /// `score-result` (`final_ == false`) or `finalscore-result`.
    pub fn score_json(&self, final_: bool) -> String {
        let mut order: Vec<usize> = (0..self.scored.len()).collect();
        order.sort_unstable_by(|&a, &b| self.scored[a].cmp(&self.scored[b]));
        let names: Vec<&str> = self.scores.iter().map(|s| s.0).collect();
        let (plugins, keys) = sorted_keys(&names);
        let per_node: usize = keys.iter().map(|k| k.len() + 8).sum();
        let mut out = String::with_capacity(2 + self.scored.len() * (per_node + 24));
        out.push('{');
        for (k, &n) in order.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            push_str(&mut out, &self.scored[n]);
            out.push_str(":{");
            for (j, &p) in plugins.iter().enumerate() {
                let (_, raw, fin) = &self.scores[p];
                if j > 0 {
                    out.push(',');
                }
                out.push_str(&keys[p]);
                push_quoted_int(&mut out, if final_ { fin[n] } else { raw[n] });
            }
            out.push('}');
        }
        out.push('}');
        out
    }

    /// `postfilter-result`.
    pub fn postfilter_json(&self) -> String {
        let Some((nodes, chosen)) = &self.postfilter else {
            return "{}".into();
        };
        let mut nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
        nodes.sort_unstable();
        nodes.dedup();
        let mut out = String::from("{");
        for (k, n) in nodes.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            push_str(&mut out, n);
            out.push(':');
            if chosen.as_deref() == Some(*n) {
                out.push_str(&flat_map([("DefaultPreemption", PREEMPTION_VICTIM)]));
            } else {
                out.push_str("{}");
            }
        }
        out.push('}');
        out
    }

    /// Every annotation of this attempt but `result-history`, keys sorted.
    pub fn annotations(&self, attempt: u64) -> BTreeMap<String, String> {
        let mut a = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            a.insert(k.to_string(), v);
        };
        put(
            PREFILTER_STATUS,
            flat_map(self.prefilter.iter().map(|(p, m)| (*p, m.as_str()))),
        );
        put(PREFILTER_RESULT, "{}".into());
        put(FILTER_RESULT, self.filter_json());
        put(POSTFILTER_RESULT, self.postfilter_json());
        put(PRESCORE_RESULT, "{}".into());
        put(SCORE_RESULT, self.score_json(false));
        put(FINALSCORE_RESULT, self.score_json(true));
        put(RESERVE_RESULT, "{}".into());
        put(PERMIT_RESULT, "{}".into());
        put(PERMIT_TIMEOUT_RESULT, "{}".into());
        put(PREBIND_RESULT, "{}".into());
        put(
            BIND_RESULT,
            if self.selected.is_some() {
                flat_map([("DefaultBinder", SUCCESS)])
            } else {
                "{}".into()
            },
        );
        put(SELECTED_NODE, self.selected.clone().unwrap_or_default());
        put(ATTEMPT, attempt.to_string());
        // Empty on success: a binding adds annotations, it cannot remove
        // the last failure's.
        put(MESSAGE, self.message.clone().unwrap_or_default());
        a
    }
}

/// Whether an annotation is an explanation (the simulator's keys, ours).
pub fn is_explanation(key: &str) -> bool {
    key.starts_with("kube-scheduler-simulator.sigs.k8s.io/") || key == ATTEMPT || key == MESSAGE
}

/// Whether two pods' annotations are the same but for explanations.
pub fn same_but_explanations(
    a: Option<&BTreeMap<String, String>>,
    b: Option<&BTreeMap<String, String>>,
) -> bool {
    if a == b {
        return true;
    }
    fn rest(m: Option<&BTreeMap<String, String>>) -> impl Iterator<Item = (&String, &String)> {
        m.into_iter().flatten().filter(|(k, _)| !is_explanation(k))
    }
    rest(a).eq(rest(b))
}

/// `result-history` after `entry`: `previous` (the pod's current value, if
/// any) with `entry` appended, the oldest entries dropped until the JSON
/// fits `limit` bytes, as the simulator does. `None` when nothing is to be
/// written: no history kept (`limit` 0), or `entry` alone is over the limit
/// (the simulator then leaves the history as it was). An unreadable
/// `previous` is started afresh.
pub fn next_history(
    previous: Option<&str>,
    entry: &BTreeMap<String, String>,
    limit: usize,
) -> Option<String> {
    if limit == 0 {
        return None;
    }
    let mut entries: Vec<String> = previous
        .and_then(|p| {
            serde_json::from_str::<Vec<serde_json::Map<String, serde_json::Value>>>(p).ok()
        })
        .unwrap_or_default()
        .into_iter()
        .map(|m| serde_json::Value::Object(m).to_string())
        .collect();
    let mut last = String::from("{");
    for (k, (key, v)) in entry.iter().enumerate() {
        if k > 0 {
            last.push(',');
        }
        push_str(&mut last, key);
        last.push(':');
        push_str(&mut last, v);
    }
    last.push('}');
    entries.push(last);
    // "[" + entries joined by "," + "]"
    let mut total: usize = entries.iter().map(String::len).sum::<usize>() + entries.len() + 1;
    let mut first = 0;
    while total > limit && first < entries.len() {
        total -= entries[first].len() + 1;
        first += 1;
    }
    if first == entries.len() {
        return None;
    }
    let mut out = String::with_capacity(total);
    out.push('[');
    for (k, e) in entries[first..].iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        out.push_str(e);
    }
    out.push(']');
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn attempt() -> Attempt {
        let mut a = Attempt::new(vec![
            "NodeUnschedulable",
            "NodeResourcesFit",
            "TaintToleration",
        ]);
        a.verdicts = vec![
            ("node-2".into(), Verdict::Passed),
            (
                "node-10".into(),
                Verdict::Failed(1, "Insufficient cpu, Insufficient memory".into()),
            ),
            ("node-1".into(), Verdict::Passed),
        ];
        a.scored = vec!["node-2".into(), "node-1".into()];
        a.scores = vec![
            ("TaintToleration", vec![1, 0], vec![0, 300]),
            ("NodeResourcesFit", vec![73, 50], vec![73, 50]),
        ];
        a
    }

    fn parse(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn filter_results_name_each_plugin_up_to_the_first_failure() {
        let a = attempt();
        let f = a.filter_json();
        assert_eq!(
            parse(&f),
            json!({
                "node-1": {"NodeResourcesFit": "passed", "NodeUnschedulable": "passed", "TaintToleration": "passed"},
                "node-10": {"NodeResourcesFit": "Insufficient cpu, Insufficient memory", "NodeUnschedulable": "passed"},
                "node-2": {"NodeResourcesFit": "passed", "NodeUnschedulable": "passed", "TaintToleration": "passed"},
            })
        );
        // Keys sorted as Go's encoder writes them (byte order: node-10 before node-2).
        let i1 = f.find("\"node-1\"").unwrap();
        let i10 = f.find("\"node-10\"").unwrap();
        let i2 = f.find("\"node-2\"").unwrap();
        assert!(i1 < i10 && i10 < i2, "{f}");
        assert!(f.find("NodeResourcesFit").unwrap() < f.find("NodeUnschedulable").unwrap());
    }

    #[test]
    fn scores_are_strings_raw_and_weighted() {
        let a = attempt();
        assert_eq!(
            parse(&a.score_json(false)),
            json!({"node-1": {"NodeResourcesFit": "50", "TaintToleration": "0"},
                   "node-2": {"NodeResourcesFit": "73", "TaintToleration": "1"}})
        );
        assert_eq!(
            parse(&a.score_json(true)),
            json!({"node-1": {"NodeResourcesFit": "50", "TaintToleration": "300"},
                   "node-2": {"NodeResourcesFit": "73", "TaintToleration": "0"}})
        );
    }

    #[test]
    fn every_key_of_the_simulator_is_written() {
        let mut a = attempt();
        a.selected = Some("node-1".into());
        let m = a.annotations(3);
        for k in [
            PREFILTER_STATUS,
            PREFILTER_RESULT,
            FILTER_RESULT,
            POSTFILTER_RESULT,
            PRESCORE_RESULT,
            SCORE_RESULT,
            FINALSCORE_RESULT,
            RESERVE_RESULT,
            PERMIT_RESULT,
            PERMIT_TIMEOUT_RESULT,
            PREBIND_RESULT,
            BIND_RESULT,
            SELECTED_NODE,
            ATTEMPT,
        ] {
            assert!(m.contains_key(k), "{k} missing");
        }
        assert_eq!(m[SELECTED_NODE], "node-1");
        assert_eq!(m[BIND_RESULT], r#"{"DefaultBinder":"success"}"#);
        assert_eq!(m[ATTEMPT], "3");
        assert_eq!(m[MESSAGE], "");
        let mut failed = attempt();
        failed.message = Some("0/3 nodes are available: 3 Insufficient cpu.".into());
        failed.postfilter = Some((
            vec!["node-10".into(), "node-2".into()],
            Some("node-2".into()),
        ));
        let m = failed.annotations(1);
        assert_eq!(m[SELECTED_NODE], "");
        assert_eq!(m[BIND_RESULT], "{}");
        assert_eq!(
            parse(&m[POSTFILTER_RESULT]),
            json!({"node-10": {}, "node-2": {"DefaultPreemption": "preemption victim"}})
        );
        assert_eq!(m[MESSAGE], "0/3 nodes are available: 3 Insufficient cpu.");
    }

    #[test]
    fn explanations_are_no_change_of_the_pod() {
        let m = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let plain = m(&[("a", "1")]);
        let explained = m(&[
            ("a", "1"),
            (FILTER_RESULT, "{}"),
            (ATTEMPT, "2"),
            (MESSAGE, ""),
        ]);
        assert!(same_but_explanations(Some(&plain), Some(&explained)));
        assert!(same_but_explanations(
            None,
            Some(&m(&[(SELECTED_NODE, "n")]))
        ));
        assert!(!same_but_explanations(
            Some(&plain),
            Some(&m(&[("a", "2")]))
        ));
        assert!(!same_but_explanations(None, Some(&plain)));
    }

    #[test]
    fn strings_are_escaped_as_json_and_as_go_does_for_html() {
        let mut out = String::new();
        push_str(&mut out, "a\"b\\c\n<&>\u{1}");
        assert_eq!(out, r#""a\"b\\c\n\u003c\u0026\u003e\u0001""#);
        assert_eq!(parse(&out), json!("a\"b\\c\n<&>\u{1}"));
    }

    #[test]
    fn history_appends_and_drops_the_oldest_to_fit() {
        let e = |n: u64| {
            let mut a = attempt();
            a.message = Some(format!("attempt {n}"));
            a.annotations(n)
        };
        let h1 = next_history(None, &e(1), SIMULATOR_HISTORY_BYTES).unwrap();
        let h2 = next_history(Some(&h1), &e(2), SIMULATOR_HISTORY_BYTES).unwrap();
        let v = parse(&h2);
        assert_eq!(v.as_array().unwrap().len(), 2);
        assert_eq!(v[0][ATTEMPT], "1");
        assert_eq!(v[1][ATTEMPT], "2");
        assert_eq!(v[1][FILTER_RESULT], json!(e(2)[FILTER_RESULT]));
        // A limit that holds two entries keeps the two newest.
        let one = h1.len() - 2;
        let limit = 2 * one + 3 + 4;
        let h3 = next_history(Some(&h2), &e(3), limit).unwrap();
        let v = parse(&h3);
        assert!(h3.len() <= limit);
        assert_eq!(v.as_array().unwrap().len(), 2, "{h3}");
        assert_eq!(v[0][ATTEMPT], "2");
        assert_eq!(v[1][ATTEMPT], "3");
        // No history kept, or an entry alone over the limit: nothing written.
        assert_eq!(next_history(Some(&h2), &e(3), 0), None);
        assert_eq!(next_history(Some(&h2), &e(3), 10), None);
        // An unreadable history starts afresh.
        let v = parse(&next_history(Some("not json"), &e(4), SIMULATOR_HISTORY_BYTES).unwrap());
        assert_eq!(v.as_array().unwrap().len(), 1);
    }
    #[test]
    fn every_control_character_is_escaped_as_go_does() {
        for c in (0u8..0x20).map(char::from) {
            let mut out = String::new();
            push_str(&mut out, &format!("a{c}b"));
            let want = match c {
                '\n' => "\\n".to_string(),
                '\r' => "\\r".to_string(),
                '\t' => "\\t".to_string(),
                c => format!("\\u{:04x}", c as u32),
            };
            assert_eq!(out, format!("\"a{want}b\""));
            assert_eq!(parse(&out), json!(format!("a{c}b")));
        }
        let mut out = String::new();
        push_str(&mut out, "é€\u{7f}");
        assert_eq!(out, "\"é€\u{7f}\"");
    }

    #[test]
    fn scores_of_any_sign_are_decimal_strings() {
        for v in [0, 7, -7, 100, i64::MAX, i64::MIN] {
            let mut out = String::new();
            push_quoted_int(&mut out, v);
            assert_eq!(out, format!("\"{v}\""));
        }
    }

    #[test]
    fn nodes_refused_alike_or_differently_each_get_their_own_plugins() {
        let mut a = attempt();
        a.verdicts.push((
            "node-3".into(),
            Verdict::Failed(1, "Insufficient cpu, Insufficient memory".into()),
        ));
        a.verdicts.push((
            "node-4".into(),
            Verdict::Failed(0, "node(s) were unschedulable".into()),
        ));
        a.verdicts.push((
            "node-5".into(),
            Verdict::Failed(1, "Insufficient cpu".into()),
        ));
        // A node looked at again keeps its last verdict.
        a.verdicts
            .push(("node-2".into(), Verdict::Failed(2, "taint".into())));
        assert_eq!(
            parse(&a.filter_json()),
            json!({
                "node-1": {"NodeResourcesFit": "passed", "NodeUnschedulable": "passed", "TaintToleration": "passed"},
                "node-10": {"NodeResourcesFit": "Insufficient cpu, Insufficient memory", "NodeUnschedulable": "passed"},
                "node-2": {"NodeResourcesFit": "passed", "NodeUnschedulable": "passed", "TaintToleration": "taint"},
                "node-3": {"NodeResourcesFit": "Insufficient cpu, Insufficient memory", "NodeUnschedulable": "passed"},
                "node-4": {"NodeUnschedulable": "node(s) were unschedulable"},
                "node-5": {"NodeResourcesFit": "Insufficient cpu", "NodeUnschedulable": "passed"},
            })
        );
    }
}
