//! The library's long loops return `Error::Interrupted` once an interrupt is requested, and
//! outputs are then not committed. One test in its own binary: the flag is process-wide.

use gmcl::generate::{self, RmatParams};
use gmcl::io::{self, Format};
use gmcl::mcl::{self, MclParams};
use gmcl::spgemm::{self, EngineKind, SpgemmOptions};
use gmcl::tricount::{self, SimpleGraph};
use gmcl::{interrupt, BuildOptions, Csr, Error};

fn interrupted<T: std::fmt::Debug>(r: gmcl::Result<T>) -> bool {
    matches!(r, Err(Error::Interrupted))
}

#[test]
fn every_long_loop_stops_on_an_interrupt() {
    let mut p = RmatParams::new(10, 8 << 10);
    p.undirected = true;
    let el = generate::generate(&p).unwrap();
    let a = Csr::<f64>::from_edges(&el, &BuildOptions::default()).unwrap();
    let g = SimpleGraph::from_edges(el.clone()).unwrap();
    let (graph, _) = mcl::graph_from_edges::<f32>(&el).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g.el");
    std::fs::write(&out, "old").unwrap();

    let text: String = (0..200_000).map(|i| format!("{i} {}\n", i + 1)).collect();
    let labels: String = (0..200_000).map(|i| format!("a{i} b{i}\n")).collect();

    interrupt::request();
    assert!(interrupt::requested());
    // Parsing checks the flag per chunk (and `.abc`'s labelling as it goes).
    for (bytes, format) in [
        (&text, Format::El),
        (&text, Format::Snap),
        (&labels, Format::Abc),
    ] {
        let p = std::path::Path::new("g");
        assert!(interrupted(io::parse_bytes(bytes.as_bytes(), format, p)));
        assert!(interrupted(io::parse_bytes_in_chunks(
            bytes.as_bytes(),
            format,
            p,
            1 << 20
        )));
    }
    assert!(interrupted(generate::generate(&p)));
    assert!(interrupted(Csr::<f64>::from_edges(
        &el,
        &BuildOptions::default()
    )));
    assert!(interrupted(spgemm::multiply(
        EngineKind::Cpu,
        &a,
        &a,
        &SpgemmOptions::default()
    )));
    assert!(interrupted(tricount::count(
        &g,
        &tricount::Options {
            engine: EngineKind::Cpu,
            method: tricount::Method::Merge,
            relabel: tricount::Relabel::Auto,
            form: tricount::Form::Auto,
            per_vertex: false,
            ..Default::default()
        }
    )));
    let params = MclParams {
        engine: EngineKind::Cpu,
        ..Default::default()
    };
    assert!(interrupted(mcl::cluster(&graph, &params, &mut |_| {})));
    assert!(interrupted(generate::write_edges(&out, &el, &|_| {})));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "old");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    // A `.npz` archive, streamed (few threads) and written in place by every thread.
    let npz = dir.path().join("a.npz");
    for threads in [1, 4] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        assert!(interrupted(
            pool.install(|| gmcl::output::write_matrix(&npz, &a))
        ));
        assert!(!npz.exists());
    }
    let mut o = gmcl::output::AtomicOutput::create(&out).unwrap();
    o.write_all(b"new").unwrap();
    assert!(interrupted(o.commit()));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "old");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

    // Cleared, the same calls succeed.
    interrupt::clear();
    assert!(generate::generate(&p).is_ok());
    assert!(spgemm::multiply(EngineKind::Cpu, &a, &a, &SpgemmOptions::default()).is_ok());
    generate::write_edges(&out, &el, &|_| {}).unwrap();
    assert_ne!(std::fs::read_to_string(&out).unwrap(), "old");
    assert_eq!(Error::Interrupted.exit_code(), 130);
    assert_eq!(Error::Interrupted.to_string(), "interrupted");
}
