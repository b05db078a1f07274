//! SIGKILL at any moment of a write: the file at the output path is the previous one or the
//! whole new one, never a part. What can remain is a temporary `.NAME.*.tmp` beside it (nothing
//! runs after SIGKILL to remove it; see docs/hardening.md).
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const OLD: &str = "0 1\n1 2\n";

fn generate(out: &Path) -> Child {
    crate::util::cmd()
        .args([
            "generate", "-s", "19", "-e", "16", "--seed", "5", "-q", "-o",
        ])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the gmcl binary starts")
}

fn temporaries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".g.el.")
        })
        .collect()
}

fn temp_size(dir: &Path) -> Option<u64> {
    temporaries(dir)
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .max()
}

/// When to kill: after a delay, or once the temporary file holds this many bytes.
#[derive(Debug, Clone, Copy)]
enum Moment {
    After(Duration),
    Written(u64),
}

#[test]
fn sigkill_never_leaves_a_partial_file_under_the_final_name() {
    let dir = tempfile::tempdir().unwrap();
    // The whole new file, made once (the generator is deterministic).
    let reference = dir.path().join("reference.el");
    assert!(generate(&reference).wait().unwrap().success());
    let whole = std::fs::read(&reference).unwrap();
    let len = whole.len() as u64;
    assert!(len > 10 << 20, "the output should take a while to write");

    let work = dir.path().join("w");
    std::fs::create_dir(&work).unwrap();
    let out = work.join("g.el");
    let moments = [
        Moment::After(Duration::ZERO),
        Moment::After(Duration::from_millis(100)),
        Moment::Written(1),
        Moment::Written(len / 4),
        Moment::Written(len / 2),
        Moment::Written(len * 9 / 10),
        Moment::Written(len),
    ];
    let mut killed_while_writing = 0;
    for moment in moments {
        std::fs::write(&out, OLD).unwrap();
        let mut child = generate(&out);
        match moment {
            Moment::After(d) => std::thread::sleep(d),
            Moment::Written(bytes) => {
                let start = Instant::now();
                while !matches!(temp_size(&work), Some(s) if s >= bytes)
                    && child.try_wait().unwrap().is_none()
                {
                    assert!(start.elapsed() < Duration::from_secs(120), "{moment:?}");
                    std::thread::sleep(Duration::from_micros(500));
                }
            }
        }
        let writing = temp_size(&work).is_some();
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        let finished = status.success();
        if writing && !finished {
            killed_while_writing += 1;
        }
        let now = std::fs::read(&out).unwrap();
        if finished {
            assert!(
                now == whole,
                "{moment:?}: a finished run left a different file"
            );
        } else {
            assert!(
                now == OLD.as_bytes() || now == whole,
                "{moment:?}: {} bytes under the final name, neither the old file nor the new",
                now.len()
            );
        }
        // Only the final name and, after SIGKILL, temporary files of our naming.
        for e in std::fs::read_dir(&work).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            assert!(
                name == "g.el" || (name.starts_with(".g.el.") && name.ends_with(".tmp")),
                "{moment:?}: unexpected {name}"
            );
        }
        for t in temporaries(&work) {
            std::fs::remove_file(t).unwrap();
        }
    }
    assert!(
        killed_while_writing >= 3,
        "only {killed_while_writing} kills landed during a write"
    );
}
