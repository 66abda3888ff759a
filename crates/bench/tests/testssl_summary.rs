//! `scripts/conformance/testssl.sh` summarises testssl.sh's JSON: counts by severity, protocols,
//! and the findings rated LOW or worse with those about the certificate apart. Checked on a
//! JSON of testssl's shape (`TESTSSL_JSON`, so testssl itself is not needed); skipped with a
//! line when python3 is missing.

use std::fs;
use std::path::Path;
use std::process::Command;

#[test]
fn the_testssl_summary_sorts_findings_by_severity_and_sets_the_certificate_apart() {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: python3 is not installed");
        return;
    }
    let dir = std::env::temp_dir().join(format!("weft-bench-testssl-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let json = dir.join("in.json");
    fs::write(
        &json,
        r#"[
 {"id":"TLS1","ip":"127.0.0.1/127.0.0.1","port":"8443","severity":"OK","finding":"not offered"},
 {"id":"TLS1_3","ip":"127.0.0.1/127.0.0.1","port":"8443","severity":"OK","finding":"offered with final"},
 {"id":"cipher_order","ip":"127.0.0.1/127.0.0.1","port":"8443","severity":"HIGH","finding":"NOT a cipher order configured"},
 {"id":"LUCKY13","ip":"127.0.0.1/127.0.0.1","port":"8443","severity":"LOW","finding":"potentially vulnerable"},
 {"id":"HSTS","ip":"127.0.0.1/127.0.0.1","port":"8443","severity":"INFO","finding":"not offered"},
 {"id":"cert_chain_of_trust","ip":"127.0.0.1/127.0.0.1","port":"8443","severity":"CRITICAL","finding":"failed (self signed)."},
 {"id":"cert_revocation","ip":"127.0.0.1/127.0.0.1","port":"8443","severity":"HIGH","finding":"Neither CRL nor OCSP URI provided"}
]"#,
    )
    .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/conformance/testssl.sh");
    let out_dir = dir.join("out");
    let run = Command::new("bash")
        .arg(&script)
        .arg("127.0.0.1:8443")
        .arg(&out_dir)
        .env("TESTSSL_JSON", &json)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    let summary = fs::read_to_string(out_dir.join("summary.md")).unwrap();
    assert!(
        summary.contains("7 findings: CRITICAL 1, HIGH 2, LOW 1, INFO 1, OK 2."),
        "{summary}"
    );
    assert!(
        summary.contains("- TLS1_3: offered with final (OK)"),
        "{summary}"
    );
    let (rest, cert) = summary
        .split_once("## The certificate")
        .unwrap_or_else(|| panic!("{summary}"));
    let rated = rest.split_once("## Rated LOW or worse").unwrap().1;
    // Worst first; INFO and OK are not listed; nothing about the certificate.
    let high = rated.find("**HIGH** `cipher_order`").expect(rated);
    let low = rated.find("**LOW** `LUCKY13`").expect(rated);
    assert!(high < low, "{rated}");
    assert!(
        !rated.contains("HSTS") && !rated.contains("cert_"),
        "{rated}"
    );
    assert!(cert.contains("CRITICAL `cert_chain_of_trust`"), "{cert}");
    assert!(cert.contains("HIGH `cert_revocation`"), "{cert}");
    // Without a HOST:PORT the script refuses before doing anything.
    let bad = Command::new("bash")
        .arg(&script)
        .arg("no-port")
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("expected HOST:PORT"));
    fs::remove_dir_all(&dir).unwrap();
}
