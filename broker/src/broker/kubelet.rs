//! A model of the kubelet's latencies, in simulated time (off by default):
//! an image pull once per node and image (cached afterwards), a container
//! start latency, and a completion-report latency during which a finished
//! pod still holds its node. Each is a constant or an empirical
//! distribution (samples read from a file), drawn with a seeded generator
//! so that runs stay reproducible.

use std::collections::HashSet;
use std::path::Path;

/// A latency distribution in seconds.
#[derive(Debug, Clone, PartialEq)]
pub enum Latency {
    Constant(f64),
    /// Samples drawn uniformly.
    Empirical(Vec<f64>),
}

impl Latency {
    /// `"2.5"` (seconds) or a path to a file of samples (one number per
    /// line, or the first numeric field of each CSV line).
    pub fn parse(spec: &str) -> Result<Self, String> {
        if let Ok(v) = spec.trim().parse::<f64>() {
            if v.is_finite() && v >= 0.0 {
                return Ok(Latency::Constant(v));
            }
            return Err(format!(
                "latency {spec:?} must be a non-negative number of seconds"
            ));
        }
        let text = std::fs::read_to_string(Path::new(spec)).map_err(|e| {
            format!("latency {spec:?} is neither a number nor a readable file: {e}")
        })?;
        let samples: Vec<f64> = text
            .lines()
            .filter_map(|l| {
                l.split(',')
                    .find_map(|f| f.trim().parse::<f64>().ok())
                    .filter(|v| v.is_finite() && *v >= 0.0)
            })
            .collect();
        if samples.is_empty() {
            return Err(format!(
                "latency file {spec:?} holds no non-negative number"
            ));
        }
        Ok(Latency::Empirical(samples))
    }

    fn draw(&self, rng: &mut u64) -> f64 {
        match self {
            Latency::Constant(v) => *v,
            Latency::Empirical(s) => {
                // xorshift64*: deterministic, good enough for sampling.
                *rng ^= *rng >> 12;
                *rng ^= *rng << 25;
                *rng ^= *rng >> 27;
                let r = rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
                s[(r % s.len() as u64) as usize]
            }
        }
    }
}

/// The kubelet model's settings and state.
#[derive(Debug, Clone)]
pub struct KubeletModel {
    pub pull: Option<Latency>,
    pub start: Option<Latency>,
    pub report: Option<Latency>,
    pulled: HashSet<(String, String)>,
    rng: u64,
}

impl Default for KubeletModel {
    fn default() -> Self {
        Self::new(None, None, None, 1)
    }
}

impl KubeletModel {
    pub fn new(
        pull: Option<Latency>,
        start: Option<Latency>,
        report: Option<Latency>,
        seed: u64,
    ) -> Self {
        Self {
            pull,
            start,
            report,
            pulled: HashSet::new(),
            rng: seed.max(1),
        }
    }

    pub fn enabled(&self) -> bool {
        self.pull.is_some() || self.start.is_some() || self.report.is_some()
    }

    /// Time from binding to the container running on `node`.
    pub fn start_delay(&mut self, node: &str, image: &str) -> f64 {
        let mut d = 0.0;
        if let Some(p) = &self.pull {
            if self.pulled.insert((node.to_string(), image.to_string())) {
                d += p.draw(&mut self.rng);
            }
        }
        if let Some(s) = &self.start {
            d += s.draw(&mut self.rng);
        }
        d
    }

    /// Time from the job's end to the kubelet reporting it.
    pub fn report_delay(&mut self) -> f64 {
        match &self.report {
            Some(r) => r.draw(&mut self.rng),
            None => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pulls_once_per_node_and_image() {
        let mut k = KubeletModel::new(
            Some(Latency::Constant(20.0)),
            Some(Latency::Constant(0.5)),
            None,
            7,
        );
        assert_eq!(k.start_delay("n1", "busybox"), 20.5);
        assert_eq!(k.start_delay("n1", "busybox"), 0.5);
        assert_eq!(k.start_delay("n2", "busybox"), 20.5);
        assert_eq!(k.report_delay(), 0.0);
    }

    #[test]
    fn empirical_draws_are_reproducible() {
        let l = Latency::Empirical(vec![1.0, 2.0, 3.0]);
        let (mut a, mut b) = (42u64, 42u64);
        let xs: Vec<f64> = (0..20).map(|_| l.draw(&mut a)).collect();
        let ys: Vec<f64> = (0..20).map(|_| l.draw(&mut b)).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().any(|x| *x != xs[0]));
        assert!(Latency::parse("-1").is_err());
        assert_eq!(Latency::parse("0.25").unwrap(), Latency::Constant(0.25));
    }
}
