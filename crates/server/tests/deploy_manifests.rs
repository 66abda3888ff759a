//! The deployment files agree with weft's configuration and its drain
//! (`scripts/checks/deploy_consistency.py`, also run by `scripts/checks/deploy_check.sh` in
//! CI), and the check catches each way they can drift apart: a copy of `deploy/` is broken one
//! way at a time and must be refused with the reason. Needs python3 (3.11, tomllib) with
//! PyYAML; without them the test says so and passes without running.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python_ready() -> bool {
    Command::new("python3")
        .args(["-c", "import yaml, tomllib"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs the check on `dir`: (exit code, stdout + stderr).
fn check(dir: &Path) -> (i32, String) {
    let out = Command::new("python3")
        .arg(repo().join("scripts/checks/deploy_consistency.py"))
        .arg(dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn copy_deploy(to: &Path) {
    let from = repo().join("deploy");
    fs::create_dir_all(to.join("k8s")).unwrap();
    for f in ["weft.toml", "Dockerfile"] {
        fs::copy(from.join(f), to.join(f)).unwrap();
    }
    for f in ["configmap.yaml", "deployment.yaml", "service.yaml"] {
        fs::copy(from.join("k8s").join(f), to.join("k8s").join(f)).unwrap();
    }
    fs::create_dir_all(to.join("systemd")).unwrap();
    for f in ["weft.socket", "weft.service", "weft.toml"] {
        fs::copy(from.join("systemd").join(f), to.join("systemd").join(f)).unwrap();
    }
}

/// Replaces `from` by `to` in `dir/file`, which must contain it (so that no case passes
/// because its edit missed).
fn edit(dir: &Path, file: &str, from: &str, to: &str) {
    let p = dir.join(file);
    let text = fs::read_to_string(&p).unwrap();
    assert!(text.contains(from), "{file} has no {from:?}");
    fs::write(&p, text.replacen(from, to, 1)).unwrap();
}

/// (file, text, its replacement).
type Edit = (&'static str, &'static str, &'static str);

#[test]
fn the_manifests_agree_with_weft_and_its_drain_and_the_check_catches_drift() {
    if !python_ready() {
        eprintln!("skipped: python3 with tomllib and PyYAML is needed");
        return;
    }
    let (code, out) = check(&repo().join("deploy"));
    assert_eq!(code, 0, "{out}");

    let cases: &[(&str, &[Edit], &str)] = &[
        (
            "a preStop pause shorter than the readiness window",
            &[(
                "k8s/deployment.yaml",
                "command: [\"sleep\", \"5\"]",
                "command: [\"sleep\", \"1\"]",
            )],
            "preStop pauses 1.0 s",
        ),
        (
            "a grace period SIGKILL would cut the drain with",
            &[(
                "k8s/deployment.yaml",
                "terminationGracePeriodSeconds: 30",
                "terminationGracePeriodSeconds: 12",
            )],
            "terminationGracePeriodSeconds 12 is not above",
        ),
        (
            "a longer shutdown_grace in both copies of weft.toml",
            &[
                (
                    "weft.toml",
                    "shutdown_grace = \"10s\"",
                    "shutdown_grace = \"40s\"",
                ),
                (
                    "k8s/configmap.yaml",
                    "shutdown_grace = \"10s\"",
                    "shutdown_grace = \"40s\"",
                ),
            ],
            "shutdown_grace 40.0s",
        ),
        (
            "a probe on another path",
            &[("k8s/deployment.yaml", "path: /healthz", "path: /health")],
            "readinessProbe does not ask '/healthz'",
        ),
        (
            "weft on another port than the container's",
            &[
                ("weft.toml", "0.0.0.0:8080", "0.0.0.0:9090"),
                ("k8s/configmap.yaml", "0.0.0.0:8080", "0.0.0.0:9090"),
            ],
            "no containerPort is weft's listening port 9090",
        ),
        (
            "a liveness probe quicker than readiness",
            &[(
                "k8s/deployment.yaml",
                "periodSeconds: 10\n            failureThreshold: 3",
                "periodSeconds: 1\n            failureThreshold: 1",
            )],
            "livenessProbe acts within 1 s",
        ),
        (
            "a rollout that may drop below the replicas",
            &[(
                "k8s/deployment.yaml",
                "maxUnavailable: 0",
                "maxUnavailable: 1",
            )],
            "maxUnavailable is not 0",
        ),
        (
            "a socket that no listener claims",
            &[
                (
                    "systemd/weft.socket",
                    "ListenStream=127.0.0.1:8080",
                    "ListenStream=0.0.0.0:8080",
                ),
                (
                    "systemd/weft.socket",
                    "FileDescriptorName=http",
                    "FileDescriptorName=web",
                ),
            ],
            "no [[listen]] of systemd/weft.toml has that addr or name",
        ),
        (
            "an image the Dockerfile does not build",
            &[(
                "k8s/deployment.yaml",
                "image: weft:0.1.0",
                "image: weft:latest",
            )],
            "builds the image 'weft:0.1.0', the Deployment runs 'weft:latest'",
        ),
        (
            "a stop timeout shorter than the drain",
            &[(
                "systemd/weft.service",
                "TimeoutStopSec=45s",
                "TimeoutStopSec=20s",
            )],
            "TimeoutStopSec 20.0 s is not above shutdown_grace 30.0 s",
        ),
        (
            "a ConfigMap that differs from weft.toml",
            &[("k8s/configmap.yaml", "path = \"/healthz\"", "path = \"/h\"")],
            "differs from weft.toml",
        ),
    ];
    let base = std::env::temp_dir().join(format!("weft-deploy-check-{}", std::process::id()));
    for (what, edits, reason) in cases {
        let dir = base.join(what.replace(' ', "-"));
        copy_deploy(&dir);
        for (file, from, to) in *edits {
            edit(&dir, file, from, to);
        }
        let (code, out) = check(&dir);
        assert_eq!(code, 1, "{what}: not refused:\n{out}");
        assert!(out.contains(reason), "{what}: expected {reason:?}:\n{out}");
    }
    fs::remove_dir_all(&base).unwrap();
}
