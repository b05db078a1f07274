//! Ctrl-C under `mpirun`: a terminal sends SIGINT to mpirun's process group; OpenMPI's mpirun
//! then sends SIGCONT to every rank (each rank runs in a process group of its own), SIGTERM
//! `odls_base_sigkill_timeout` seconds later and SIGKILL as long again after that; every rank
//! stops on the SIGTERM with status 130, one message, no output and no temporary file left,
//! provided that second wait is long enough (as the README says).

use crate::util::{generated, gmcl_bin};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Waits at most `limit` for `child`; kills its process group and fails the test past that.
fn wait_within(child: &mut Child, limit: Duration, what: &str) {
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > limit {
            // SAFETY: kill(2) on the process group this test made for mpirun.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            let _ = child.wait();
            panic!("{what} within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

#[test]
fn ctrl_c_under_mpirun_stops_every_rank_with_130_and_no_output() {
    let dir = tempfile::tempdir().unwrap();
    // Large enough that the clustering is still running when the SIGTERM comes, seconds after
    // the first iteration: one thread a rank whatever the host's cores, the CPU engine even
    // where a GPU would finish first, and a low inflation that keeps the later iterations as
    // heavy as the second.
    let g = generated(
        dir.path().join("g.el"),
        &["-s", "15", "-e", "16", "--undirected", "--seed", "1"],
    );
    let out = dir.path().join("clusters.txt");
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    // Each rank's status and stderr land in files of their own; the shell ignores the signals
    // so that it outlives gmcl and records its status.
    let script = "trap '' INT TERM; r=$OMPI_COMM_WORLD_RANK; \
                  \"$0\" --threads 1 cluster \"$1\" -I 1.2 --engine cpu -o \"$2\" 2>\"$3/err.$r\"; echo $? >\"$3/status.$r\"";
    // Apart from `dir`, which must hold nothing new afterwards.
    let session = tempfile::tempdir().unwrap();
    let mut child = super::launcher(session.path())
        .args([
            "--oversubscribe",
            // The grace mpirun gives the ranks before SIGKILL: a rank stops at its next
            // interrupt check, which on a busy 2-core machine can come more than 4 s later
            // (a batch of the expansion), and a rank killed writes no status at all.
            "--mca",
            "odls_base_sigkill_timeout",
            "30",
            "-n",
            "2",
        ])
        .args(["sh", "-c", script])
        .args([
            gmcl_bin().as_os_str(),
            g.as_os_str(),
            out.as_os_str(),
            logs.as_os_str(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // mpirun leads a group of its own, as a shell's foreground job does.
        .process_group(0)
        .spawn()
        .expect("mpirun runs (the mpi feature needs OpenMPI's mpirun on the PATH)");
    // The signal comes once rank 0 has finished its first iteration.
    let start = Instant::now();
    while !read(&logs.join("err.0")).contains("iteration") {
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the run ended before the signal: {}",
            read(&logs.join("err.0"))
        );
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no iteration in 300 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill(2) on the process group this test made for mpirun.
    let rc = unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGINT) };
    assert_eq!(rc, 0, "kill failed");
    wait_within(&mut child, Duration::from_secs(120), "mpirun did not stop");
    for rank in 0..2 {
        assert_eq!(
            read(&logs.join(format!("status.{rank}"))).trim(),
            "130",
            "rank {rank}: {}",
            read(&logs.join(format!("err.{rank}")))
        );
    }
    assert!(read(&logs.join("err.0")).contains("gmcl: interrupted"));
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "g.el" && n != "logs")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
