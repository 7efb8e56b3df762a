//! The pod garbage collector of kube-controller-manager, as a simulation
//! needs it: terminated pods (phase Succeeded or Failed) beyond a threshold
//! are deleted, oldest first, so the API (and every scheduler's cache) holds
//! what is alive plus a bounded tail of finished pods, not every pod ever
//! created. A run's record of a finished pod is the broker's (pods.csv), not
//! the API object.
//!
//! Upstream (`pkg/controller/podgc`, `--terminated-pod-gc-threshold`,
//! default 12,500, `<= 0` disables it) deletes `terminated - threshold`
//! pods ordered by eviction first, then creationTimestamp (a whole second,
//! as the API serializes it), then name. The same order here; where
//! upstream looks every 20 s, this collector looks at every instant at which
//! a pod terminated, so the API never holds more than the threshold (and a
//! run's outcome cannot depend on where the 20 s ticks fall).

use std::collections::BTreeSet;

/// Upstream's default `--terminated-pod-gc-threshold`.
pub const DEFAULT_THRESHOLD: usize = 12_500;

/// Terminated pods in the order the collector deletes them.
#[derive(Debug, Default)]
pub struct PodGc {
    /// 0: never collect.
    threshold: usize,
    /// (not evicted, creation second, name): evicted pods sort first.
    terminated: BTreeSet<(bool, i64, String)>,
    collected: u64,
}

impl PodGc {
    pub fn new(threshold: usize) -> Self {
        PodGc {
            threshold,
            ..Default::default()
        }
    }

    /// A pod reached Succeeded or Failed. `created` is its creation time in
    /// (simulated) Unix seconds.
    pub fn terminated(&mut self, name: &str, created_unix: f64, evicted: bool) {
        if self.threshold == 0 {
            return;
        }
        self.terminated
            .insert((!evicted, created_unix.floor() as i64, name.to_string()));
    }

    /// A terminated pod went away by other means (a client deleted it).
    pub fn forget(&mut self, name: &str, created_unix: f64, evicted: bool) {
        self.terminated
            .remove(&(!evicted, created_unix.floor() as i64, name.to_string()));
    }

    /// The pods to delete now, oldest first, leaving `threshold`.
    pub fn collect(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        while self.threshold > 0 && self.terminated.len() > self.threshold {
            let (_, _, name) = self.terminated.pop_first().expect("non-empty");
            out.push(name);
        }
        self.collected += out.len() as u64;
        out
    }

    /// Pods deleted so far.
    pub fn collected(&self) -> u64 {
        self.collected
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_first_then_name_evicted_before_all() {
        let mut gc = PodGc::new(2);
        gc.terminated("w0-9", 10.7, false);
        gc.terminated("w0-10", 10.2, false); // same second: by name, "w0-10" < "w0-9"
        gc.terminated("w0-1", 5.0, false);
        gc.terminated("w0-50", 99.0, true);
        assert_eq!(gc.collect(), vec!["w0-50", "w0-1"]);
        assert_eq!(gc.collect(), Vec::<String>::new());
        gc.terminated("w0-11", 11.0, false);
        assert_eq!(gc.collect(), vec!["w0-10"]);
        assert_eq!(gc.collected(), 3);
    }

    #[test]
    fn zero_disables() {
        let mut gc = PodGc::new(0);
        for i in 0..10 {
            gc.terminated(&format!("p{i}"), i as f64, false);
        }
        assert!(gc.collect().is_empty());
    }
}
