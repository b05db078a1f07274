//! R-MAT generation: generate, and generate + write a `.el` file, at scale 18 with 16 edges per
//! vertex (4.2M edges), with duplicates allowed, without, and undirected without.
//!
//! `GMCL_BENCH_S20=1 cargo bench --bench generate` instead times scale 20 (16.8M edges), three
//! runs per variant, and prints edges per second of generate + write (the CLI's path);
//! `GMCL_BENCH_SCALE` and `GMCL_BENCH_EF` change the scale and the edge factor there;
//! `GMCL_BENCH_ONLY=no-duplicates` (or another variant's name) runs just that variant.

use criterion::{criterion_group, Criterion, Throughput};
use gmcl::generate::{generate, write_edges, RmatParams};
use std::time::{Duration, Instant};

fn variants(scale: u32, edge_factor: u64) -> Vec<(&'static str, RmatParams)> {
    let m = edge_factor << scale;
    let mut out = Vec::new();
    out.push(("plain", RmatParams::new(scale, m)));
    let mut p = RmatParams::new(scale, m);
    p.no_duplicates = true;
    out.push(("no-duplicates", p.clone()));
    p.undirected = true;
    out.push(("undirected-no-duplicates", p));
    out
}

fn bench_generate(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let scale = 18;
    let mut g = c.benchmark_group("generate_s18_ef16");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(16 << scale));
    for (name, p) in variants(scale, 16) {
        g.bench_function(format!("{name}/generate"), |b| {
            b.iter(|| generate(&p).unwrap())
        });
        let path = dir.path().join(format!("{name}.el"));
        g.bench_function(format!("{name}/generate+write_el"), |b| {
            b.iter(|| {
                let el = generate(&p).unwrap();
                write_edges(&path, &el, &|_| {}).unwrap();
            })
        });
    }
    g.finish();
}

/// CPU seconds this process has used (user + system), from /proc (0 elsewhere); with other
/// work on the machine it says more than wall time about the work done.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let rest = stat.rsplit_once(')').map_or("", |x| x.1);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    ticks / 100.0
}

/// Scale 20, edge factor 16 (or `GMCL_BENCH_SCALE`, `GMCL_BENCH_EF`): three runs per variant,
/// the median reported.
fn scale20() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|x| x.parse().ok())
            .unwrap_or(d)
    };
    let (scale, ef) = (env("GMCL_BENCH_SCALE", 20) as u32, env("GMCL_BENCH_EF", 16));
    let dir = tempfile::tempdir().unwrap();
    println!(
        "scale {scale}, edge factor {ef}, {} threads, output in {}",
        rayon::current_num_threads(),
        dir.path().display()
    );
    let only = std::env::var("GMCL_BENCH_ONLY").ok();
    for (name, p) in variants(scale, ef) {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let path = dir.path().join(format!("{name}.el"));
        let mut runs = Vec::new();
        for _ in 0..3 {
            let (c0, t0) = (cpu_seconds(), Instant::now());
            let el = generate(&p).unwrap();
            let (c1, t1) = (cpu_seconds(), Instant::now());
            write_edges(&path, &el, &|_| {}).unwrap();
            let (c2, t2) = (cpu_seconds(), Instant::now());
            runs.push((t2 - t0, t1 - t0, t2 - t1, el.len(), c1 - c0, c2 - c1));
        }
        runs.sort_by_key(|a| a.0);
        let (total, gen, write, m, cgen, cwrite) = runs[1];
        let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        println!(
            "{name:>26}: {m} edges, {bytes} bytes, generate {:.3} s + write {:.3} s = {:.3} s, \
             {:.1} M edges/s (generate alone {:.1} M/s); CPU s: generate {cgen:.2}, write {cwrite:.2}",
            gen.as_secs_f64(),
            write.as_secs_f64(),
            total.as_secs_f64(),
            m as f64 / total.as_secs_f64() / 1e6,
            m as f64 / gen.as_secs_f64() / 1e6,
        );
    }
}

criterion_group!(benches, bench_generate);

fn main() {
    if std::env::var_os("GMCL_BENCH_S20").is_some() {
        scale20();
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
