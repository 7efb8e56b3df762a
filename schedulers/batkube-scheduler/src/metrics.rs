//! Prometheus metrics in the text format, named as upstream's:
//! `scheduler_schedule_attempts_total{result}`,
//! `scheduler_pod_scheduling_duration_seconds` (e2e, from first seen to
//! bound) and `scheduler_pending_pods{queue}`.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Upstream buckets: exponential from 10 ms, factor 2, 20 buckets.
const BUCKETS: usize = 20;

fn bucket_bound(i: usize) -> f64 {
    0.01 * 2f64.powi(i as i32)
}

#[derive(Debug, Clone, Copy)]
pub enum AttemptResult {
    Scheduled,
    Unschedulable,
    Error,
}

#[derive(Debug, Default)]
pub struct Metrics {
    scheduled: AtomicU64,
    unschedulable: AtomicU64,
    error: AtomicU64,
    e2e_buckets: [AtomicU64; BUCKETS],
    e2e_count: AtomicU64,
    e2e_sum_micros: AtomicU64,
    pending_active: AtomicI64,
    pending_backoff: AtomicI64,
    pending_unschedulable: AtomicI64,
}

impl Metrics {
    pub fn new() -> Arc<Metrics> {
        Arc::new(Metrics::default())
    }

    pub fn attempt(&self, r: AttemptResult) {
        match r {
            AttemptResult::Scheduled => &self.scheduled,
            AttemptResult::Unschedulable => &self.unschedulable,
            AttemptResult::Error => &self.error,
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    pub fn attempts(&self, r: AttemptResult) -> u64 {
        match r {
            AttemptResult::Scheduled => &self.scheduled,
            AttemptResult::Unschedulable => &self.unschedulable,
            AttemptResult::Error => &self.error,
        }
        .load(Ordering::Relaxed)
    }

    pub fn observe_e2e(&self, d: Duration) {
        let s = d.as_secs_f64();
        for (i, b) in self.e2e_buckets.iter().enumerate() {
            if s <= bucket_bound(i) {
                b.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.e2e_count.fetch_add(1, Ordering::Relaxed);
        self.e2e_sum_micros
            .fetch_add(d.as_micros() as u64, Ordering::Relaxed);
    }

    pub fn set_pending(&self, active: usize, backoff: usize, unschedulable: usize) {
        self.pending_active.store(active as i64, Ordering::Relaxed);
        self.pending_backoff
            .store(backoff as i64, Ordering::Relaxed);
        self.pending_unschedulable
            .store(unschedulable as i64, Ordering::Relaxed);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "# HELP scheduler_schedule_attempts_total Number of attempts to schedule pods, by the result.");
        let _ = writeln!(o, "# TYPE scheduler_schedule_attempts_total counter");
        for (label, v) in [
            ("scheduled", &self.scheduled),
            ("unschedulable", &self.unschedulable),
            ("error", &self.error),
        ] {
            let _ = writeln!(
                o,
                "scheduler_schedule_attempts_total{{result=\"{label}\"}} {}",
                v.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(o, "# HELP scheduler_pod_scheduling_duration_seconds E2e latency for a pod being scheduled, from entering the queue to bound.");
        let _ = writeln!(
            o,
            "# TYPE scheduler_pod_scheduling_duration_seconds histogram"
        );
        for (i, b) in self.e2e_buckets.iter().enumerate() {
            let _ = writeln!(
                o,
                "scheduler_pod_scheduling_duration_seconds_bucket{{le=\"{}\"}} {}",
                bucket_bound(i),
                b.load(Ordering::Relaxed)
            );
        }
        let count = self.e2e_count.load(Ordering::Relaxed);
        let _ = writeln!(
            o,
            "scheduler_pod_scheduling_duration_seconds_bucket{{le=\"+Inf\"}} {count}"
        );
        let _ = writeln!(
            o,
            "scheduler_pod_scheduling_duration_seconds_sum {}",
            self.e2e_sum_micros.load(Ordering::Relaxed) as f64 / 1e6
        );
        let _ = writeln!(o, "scheduler_pod_scheduling_duration_seconds_count {count}");
        let _ = writeln!(
            o,
            "# HELP scheduler_pending_pods Number of pending pods, by the queue type."
        );
        let _ = writeln!(o, "# TYPE scheduler_pending_pods gauge");
        for (label, v) in [
            ("active", &self.pending_active),
            ("backoff", &self.pending_backoff),
            ("unschedulable", &self.pending_unschedulable),
        ] {
            let _ = writeln!(
                o,
                "scheduler_pending_pods{{queue=\"{label}\"}} {}",
                v.load(Ordering::Relaxed)
            );
        }
        o
    }
}

/// Serves `GET /metrics` (any path, in fact) on `addr`; returns the bound address.
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                continue;
            };
            let metrics = metrics.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut read = 0;
                // Read the request head; the body (if any) is ignored.
                while read < buf.len() {
                    match sock.read(&mut buf[read..]).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => read += n,
                    }
                    if buf[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
                let body = metrics.render();
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
                    body.len(),
                    body
                );
                let _ = sock.write_all(resp.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    Ok(local)
}
