#!/usr/bin/env bash
# testssl.sh against an HTTPS server, its findings summarised.
#
#   scripts/conformance/testssl.sh HOST:PORT [OUT_DIR]      (default OUT_DIR: results/quick/testssl-HOST-PORT)
#
# Runs testssl.sh (Debian package `testssl.sh`, command `testssl`; or `testssl.sh` on the
# PATH) with JSON output, then writes OUT_DIR/summary.md: the findings counted by severity,
# the protocols and key exchange offered, and every finding rated LOW or worse, those about
# the certificate apart (a self-signed test certificate is expected to fail its trust). The raw
# output stays beside it (testssl.json, testssl.log). Extra testssl options go in TESTSSL_ARGS
# (e.g. TESTSSL_ARGS=--fast). TESTSSL_JSON=FILE summarises an earlier run's JSON instead of
# running testssl again.
#
# Start the server first, e.g.
#   weft serve --https 127.0.0.1:8443 --tls-cert cert.pem --tls-key key.pem &
#   scripts/conformance/testssl.sh 127.0.0.1:8443
# Exit status: 0 when testssl ran (whatever it found; read the summary), 1 when it could not.
set -euo pipefail

target=${1:?usage: scripts/conformance/testssl.sh HOST:PORT [OUT_DIR]}
case $target in
    *:*) ;;
    *) echo "scripts/conformance/testssl.sh: $target: expected HOST:PORT" >&2; exit 1 ;;
esac
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${2:-$root/results/quick/testssl-${target//[:\/]/-}}
testssl=$(command -v testssl || command -v testssl.sh || true)
mkdir -p "$out"
if [ -n "${TESTSSL_JSON:-}" ]; then
    [ "$TESTSSL_JSON" -ef "$out/testssl.json" ] || cp "$TESTSSL_JSON" "$out/testssl.json"
    testssl="${testssl:-testssl} (earlier run: $TESTSSL_JSON)"
else
    if [ -z "$testssl" ]; then
        echo "scripts/conformance/testssl.sh: testssl.sh is not installed (apt-get install -y testssl.sh)" >&2
        exit 1
    fi
    rm -f "$out/testssl.json" "$out/testssl.log"
    echo "# $testssl against $target -> $out (a few minutes)" >&2
    # testssl's exit status counts what it found; the summary says what, so only a run that
    # left no JSON is a failure here.
    # shellcheck disable=SC2086 # TESTSSL_ARGS is a list of options.
    "$testssl" --quiet --color 0 --warnings batch ${TESTSSL_ARGS:-} \
        --jsonfile "$out/testssl.json" --logfile "$out/testssl.log" "$target" >/dev/null 2>&1 || true
fi
if [ ! -s "$out/testssl.json" ]; then
    echo "scripts/conformance/testssl.sh: testssl wrote no findings; see $out/testssl.log" >&2
    exit 1
fi
python3 - "$out/testssl.json" "$target" "$testssl" >"$out/summary.md" <<'EOF'
import json, sys
from collections import Counter

path, target, tool = sys.argv[1:4]
findings = json.load(open(path))
# testssl writes a flat list; older versions wrap it in {"scanResult": ...}.
if isinstance(findings, dict):
    findings = [f for r in findings.get("scanResult", []) for k, v in r.items()
                if isinstance(v, list) for f in v]
ORDER = ["CRITICAL", "HIGH", "MEDIUM", "LOW", "WARN", "INFO", "OK"]
RANK = {s: i for i, s in enumerate(ORDER)}
by = Counter(f.get("severity", "?") for f in findings)
protocols = ["SSLv2", "SSLv3", "TLS1", "TLS1_1", "TLS1_2", "TLS1_3"]
# Findings about the certificate itself: a self-signed test certificate fails some by design
# (trust, revocation, a short validity), so they are listed apart.
cert = lambda f: f.get("id", "").startswith("cert") or f.get("id") in ("OCSP_stapling", "DNS_CAArecord")
trust = lambda f: f.get("id", "").startswith(("cert_chain_of_trust", "cert_trust"))
bad = [f for f in findings if RANK.get(f.get("severity"), 9) <= RANK["LOW"]]
print(f"# testssl.sh: {target}\n")
print(f"`{tool}`, {len(findings)} findings: " +
      ", ".join(f"{s} {by[s]}" for s in ORDER if by[s]) + ".\n")
print("## Protocols\n")
for f in findings:
    if f.get("id") in protocols:
        print(f"- {f['id']}: {f.get('finding', '')} ({f.get('severity')})")
for key in ("cipher_order", "FS", "FS_ECDHE_curves", "cert_keySize", "cert_signatureAlgorithm",
            "ALPN", "sessionresumption_ticket", "sessionresumption_ID"):
    for f in findings:
        if f.get("id") == key:
            print(f"- {key}: {f.get('finding', '')} ({f.get('severity')})")
print("\n## Rated LOW or worse, the certificate apart\n")
rest = [f for f in bad if not cert(f)]
if not rest:
    print("None.")
for f in sorted(rest, key=lambda f: RANK.get(f.get("severity"), 9)):
    print(f"- **{f.get('severity')}** `{f.get('id')}`: {f.get('finding', '')}")
print("\n## The certificate: its trust, and what is rated LOW or worse\n")
print("(A self-signed test certificate fails some of these by design; a deployment's must "
      "not.)\n")
tr = [f for f in findings if trust(f) or (cert(f) and f in bad)]
if not tr:
    print("No finding.")
for f in tr:
    print(f"- {f.get('severity')} `{f.get('id')}`: {f.get('finding', '')}")
EOF
echo "# wrote $out/summary.md" >&2
cat "$out/summary.md"
