//! A multi-threaded Rust program whose output is decided by how its
//! threads interleave and by its random state, for the deterministic
//! mode's tests (`tests/deterministic.rs`): std threads racing for a
//! mutex with yields and sleeps, a tokio multi-thread runtime whose
//! tasks race through a channel (its workers steal each other's tasks),
//! and a `HashMap`'s iteration order (std's `RandomState`, seeded from the
//! OS's randomness).
//!
//! Run directly, it prints a different story most times; under
//! `simrun --deterministic --seed N`, one per seed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn threads() -> String {
    let log = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                for i in 0..6 {
                    log.lock().unwrap().push(format!("{t}.{i}"));
                    if (t + i) % 3 == 0 {
                        std::thread::sleep(Duration::from_millis(1 + t as u64));
                    } else {
                        std::thread::yield_now();
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let log = log.lock().unwrap();
    log.join(" ")
}

fn tasks() -> String {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for t in 0..8u64 {
            let tx = tx.clone();
            tokio::spawn(async move {
                for i in 0..3u64 {
                    tx.send(format!("{t}/{i}")).unwrap();
                    if (t + i) % 2 == 0 {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    } else {
                        tokio::task::yield_now().await;
                    }
                }
            });
        }
        drop(tx);
        let mut got = Vec::new();
        while let Some(s) = rx.recv().await {
            got.push(s);
        }
        got.join(" ")
    })
}

fn map_order() -> String {
    let m: HashMap<u32, u32> = (0..12).map(|i| (i, i * i)).collect();
    m.keys()
        .map(|k| k.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn main() {
    println!("threads: {}", threads());
    println!("tasks: {}", tasks());
    println!("map: {}", map_order());
}
