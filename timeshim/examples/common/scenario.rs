//! The program the shim tests run as a child process: a multi-threaded tokio
//! program that sleeps, ticks, times out, sleeps in a blocking thread, makes
//! an HTTP request, computes, then idles. It prints one line per step; every
//! time it prints comes from the clocks the shim simulates.

use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn sys_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn chrono_ns() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
}

async fn http_get(addr: &str) -> std::io::Result<String> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        .await?;
    let mut body = String::new();
    s.read_to_string(&mut body).await?;
    Ok(body)
}

pub fn run() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let t0 = Instant::now();
        say(format!(
            "start sys_ns={} chrono_ns={}",
            sys_ns(),
            chrono_ns()
        ));

        tokio::time::sleep(Duration::from_secs(3600)).await;
        say(format!(
            "slept elapsed_ns={} sys_ns={} chrono_ns={}",
            t0.elapsed().as_nanos(),
            sys_ns(),
            chrono_ns()
        ));

        let mut interval = tokio::time::interval(Duration::from_secs(60));
        for i in 0..3 {
            interval.tick().await;
            say(format!("tick i={i} elapsed_ns={}", t0.elapsed().as_nanos()));
        }

        let t1 = Instant::now();
        let r = tokio::time::timeout(Duration::from_secs(10), std::future::pending::<()>()).await;
        say(format!(
            "timeout fired={} after_ns={}",
            r.is_err(),
            t1.elapsed().as_nanos()
        ));

        let t2 = Instant::now();
        tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_secs(30)))
            .await
            .expect("blocking task");
        say(format!("thread_slept after_ns={}", t2.elapsed().as_nanos()));

        if let Ok(addr) = std::env::var("SCENARIO_HTTP_ADDR") {
            say("http_start".to_string());
            let t3 = Instant::now();
            let r = tokio::time::timeout(Duration::from_secs(5), http_get(&addr)).await;
            let ok = matches!(&r, Ok(Ok(body)) if body.ends_with("ok"));
            say(format!(
                "http ok={ok} timed_out={} after_ns={}",
                r.is_err(),
                t3.elapsed().as_nanos()
            ));
        }

        // Say so from inside the loop: the test moves time once it reads the line.
        let until = Instant::now() + Duration::from_secs(1);
        let mut spins: u64 = 0;
        while Instant::now() < until {
            spins = spins.wrapping_add(1);
            if spins == 1000 {
                say("computing".to_string());
            }
            std::hint::spin_loop();
        }
        say(format!("computed spins_nonzero={}", spins > 0));

        say(format!("idle sys_ns={}", sys_ns()));
        tokio::time::sleep(Duration::from_secs(86_400)).await;
        say("done".to_string());
    });
}
