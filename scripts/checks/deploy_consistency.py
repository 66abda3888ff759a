#!/usr/bin/env python3
"""Checks that the deployment files agree with weft's configuration and with its drain.

    scripts/checks/deploy_consistency.py [DEPLOY_DIR]     (default: deploy)

Reads DEPLOY_DIR/weft.toml, DEPLOY_DIR/k8s/{configmap,deployment,service}.yaml,
DEPLOY_DIR/Dockerfile and DEPLOY_DIR/systemd/{weft.socket,weft.service,weft.toml}, and the
`docker build` lines of the documents beside DEPLOY_DIR (README.md, docs/*.md) where there are
any. Needs Python 3.11 (tomllib) and PyYAML. Exit 0: consistent; 1: each problem printed; 2:
cannot check (no PyYAML).

Across the files: the image the Deployment runs is the tag the Dockerfile and the documents
build; weft.socket's ListenStream is claimed by a [[listen]] of systemd/weft.toml (the same
address, or `name` equal to FileDescriptorName), or weft would find the port taken by its own
socket; weft.service reads the configuration where systemd/weft.toml says to install it, and
waits longer than its shutdown_grace.

What stopping a pod does, and so what is checked: Kubernetes removes the pod's endpoint and runs
preStop at the same time, then sends SIGTERM. weft stops accepting at once on SIGTERM (its
listeners close, /healthz answers 503 on connections already open) and finishes open requests
within timeouts.shutdown_grace. So:
  - the preStop pause must cover the time a load balancer takes to stop sending: at least one
    readiness period times its failureThreshold (a balancer that follows the probes, as HAProxy
    does in `weft-bench experiment cluster`, needs that long) and at least MIN_PRESTOP seconds
    for the endpoint's removal to reach every node;
  - terminationGracePeriodSeconds must exceed preStop plus shutdown_grace, or SIGKILL cuts the
    drain;
  - the probes must ask the health path on the port weft listens on; liveness must be slower
    to act than readiness (an overloaded pod leaves the Service before it is restarted);
  - rolling updates never go below the replica count (maxUnavailable 0), as weft's own
    rolling upgrade keeps every instance serving.
"""
import glob
import os
import re
import sys
import tomllib

try:
    import yaml
except ImportError:
    print("deploy_consistency: CANNOT CHECK: PyYAML is missing (pip install pyyaml)", file=sys.stderr)
    sys.exit(2)

# Seconds for an endpoint's removal to reach kube-proxy and ingress controllers on every node
# (the Kubernetes documentation's reason for a preStop pause; 5 s is the common choice).
MIN_PRESTOP = 5.0


def secs(d):
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    for u in ("ms", "s", "m", "h"):
        if str(d).endswith(u):
            return float(str(d)[: -len(u)]) * units[u]
    return float(d)


def probe_window(p, default_period=10, default_threshold=3):
    """Seconds from a failure to the probe acting on it: periodSeconds x failureThreshold."""
    return p.get("periodSeconds", default_period) * p.get("failureThreshold", default_threshold)


def check(base):
    conf = tomllib.load(open(f"{base}/weft.toml", "rb"))
    docs = {f: yaml.safe_load(open(f"{base}/k8s/{f}.yaml")) for f in ("configmap", "deployment", "service")}
    problems = []
    if tomllib.loads(docs["configmap"]["data"]["weft.toml"]) != conf:
        problems.append("k8s/configmap.yaml's weft.toml differs from weft.toml")
    health = conf.get("health", {}).get("path", "")
    if not health:
        problems.append("weft.toml sets no [health] path")
    listens = conf.get("listen", [])
    port = None
    if len(listens) == 1 and ":" in listens[0].get("addr", ""):
        port = int(listens[0]["addr"].rsplit(":", 1)[1])
    else:
        problems.append("weft.toml should have one [[listen]] with an address and port")

    spec = docs["deployment"]["spec"]["template"]["spec"]
    c = spec["containers"][0]
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    if port is not None and port not in ports.values():
        problems.append(f"no containerPort is weft's listening port {port}")
    for name in ("readinessProbe", "livenessProbe"):
        probe = c.get(name)
        if not probe:
            problems.append(f"no {name}")
            continue
        get = probe.get("httpGet", {})
        if get.get("path") != health:
            problems.append(f"{name} does not ask {health!r}")
        pport = get.get("port")
        pport = ports.get(pport, pport)
        if port is not None and pport != port:
            problems.append(f"{name} asks port {get.get('port')!r}, weft listens on {port}")
        if probe.get("timeoutSeconds", 1) > probe.get("periodSeconds", 10):
            problems.append(f"{name}: timeoutSeconds above periodSeconds")
    ready = c.get("readinessProbe", {})
    live = c.get("livenessProbe", {})
    if ready and live and not probe_window(live) > probe_window(ready, default_threshold=3):
        problems.append(
            f"livenessProbe acts within {probe_window(live)} s, not later than readinessProbe "
            f"({probe_window(ready)} s): a busy pod would be restarted before it leaves the Service"
        )

    grace = secs(conf.get("timeouts", {}).get("shutdown_grace", "10s"))
    cmd = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
    pre = float(cmd[1]) if len(cmd) == 2 and cmd[0] == "sleep" else 0.0
    need = max(MIN_PRESTOP, probe_window(ready) if ready else 0)
    if pre < need:
        problems.append(
            f"preStop pauses {pre} s, less than the {need} s a balancer may take to stop sending "
            f"(readiness periodSeconds x failureThreshold, at least {MIN_PRESTOP} s): weft stops "
            "accepting on SIGTERM, so requests sent meanwhile would be refused"
        )
    term = spec.get("terminationGracePeriodSeconds", 30)
    if not term > pre + grace:
        problems.append(
            f"terminationGracePeriodSeconds {term} is not above preStop {pre}s + shutdown_grace {grace}s"
        )
    strategy = docs["deployment"]["spec"].get("strategy", {})
    if strategy.get("type", "RollingUpdate") == "RollingUpdate":
        if strategy.get("rollingUpdate", {}).get("maxUnavailable", "25%") not in (0, "0", "0%"):
            problems.append("rollingUpdate.maxUnavailable is not 0: a rollout would drop below the replicas")

    svc_ports = docs["service"]["spec"].get("ports", [])
    for p in svc_ports:
        t = p.get("targetPort")
        if t not in ports and t not in ports.values():
            problems.append(f"the Service's targetPort {t!r} is no container port")
    sel = docs["service"]["spec"].get("selector", {})
    labels = docs["deployment"]["spec"]["template"]["metadata"].get("labels", {})
    if not sel or any(labels.get(k) != v for k, v in sel.items()):
        problems.append("the Service's selector does not match the pod template's labels")

    ann = docs["deployment"]["spec"]["template"]["metadata"].get("annotations", {})
    if ann.get("prometheus.io/scrape") != "true" or ann.get("prometheus.io/path") != "/_weft/metrics":
        problems.append("the pod template lacks the Prometheus scrape annotations")
    if not conf.get("status", {}).get("enabled"):
        problems.append("weft.toml does not enable /_weft/metrics ([status] enabled)")

    # The HEALTHCHECK instruction with its continuation lines.
    hc, lines = "", open(f"{base}/Dockerfile").read().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("HEALTHCHECK"):
            j = i
            while lines[j].endswith("\\") and j + 1 < len(lines):
                j += 1
            hc = "\n".join(lines[i : j + 1])
            break
    if not hc:
        problems.append("the Dockerfile has no HEALTHCHECK")
    else:
        if health and health not in hc:
            problems.append(f"the Dockerfile's HEALTHCHECK does not ask {health!r}")
        if port is not None and not re.search(rf"\b{port}\b", hc):
            problems.append(f"the Dockerfile's HEALTHCHECK does not ask port {port}")
    problems += check_image(base, docs["deployment"])
    problems += check_systemd(base)
    return problems


def check_image(base, deployment):
    """The image the Deployment runs is the one the Dockerfile and the documents build."""
    problems = []
    image = deployment["spec"]["template"]["spec"]["containers"][0].get("image", "")
    built = []
    for path in [f"{base}/Dockerfile", f"{base}/../README.md"] + sorted(glob.glob(f"{base}/../docs/*.md")):
        if not os.path.exists(path):
            continue
        for m in re.finditer(r"docker build\b[^\n`]*?-t\s+(\S+)", open(path).read()):
            built.append((os.path.relpath(path, base), m.group(1).rstrip("`")))
    if not built:
        problems.append("no `docker build ... -t IMAGE` line in the Dockerfile or the documents")
    for where, tag in built:
        if tag != image:
            problems.append(f"{where} builds the image {tag!r}, the Deployment runs {image!r}")
    return problems


def unit(path):
    """The `Key=value` lines of a systemd unit (the last of each key)."""
    out = {}
    for line in open(path).read().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")) and "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def check_systemd(base):
    problems = []
    sock_path, svc_path, conf_path = (f"{base}/systemd/{f}" for f in ("weft.socket", "weft.service", "weft.toml"))
    if not os.path.exists(sock_path):
        return problems
    if not os.path.exists(conf_path):
        return ["systemd/weft.socket has no systemd/weft.toml to go with it"]
    sock, svc = unit(sock_path), unit(svc_path)
    conf = tomllib.load(open(conf_path, "rb"))
    listen = sock.get("ListenStream", "")
    name = sock.get("FileDescriptorName", "unknown")
    claimed = [l for l in conf.get("listen", []) if l.get("addr") == listen or l.get("name") == name]
    if not claimed:
        problems.append(
            f"systemd/weft.socket hands over {listen} (FileDescriptorName={name}) but no [[listen]] of "
            "systemd/weft.toml has that addr or name: weft would find the port taken by its own socket"
        )
    exec_start = svc.get("ExecStart", "")
    m = re.search(r"--config\s+(\S+)", exec_start)
    header = open(conf_path).read().splitlines()[0] if open(conf_path).read() else ""
    if not m or m.group(1) not in header:
        problems.append(
            f"weft.service reads {m.group(1) if m else 'no --config'}, but systemd/weft.toml says to install it "
            f"elsewhere ({header!r})"
        )
    grace = secs(conf.get("timeouts", {}).get("shutdown_grace", "10s"))
    stop = secs(svc.get("TimeoutStopSec", "90s"))
    if not stop > grace:
        problems.append(f"weft.service's TimeoutStopSec {stop} s is not above shutdown_grace {grace} s")
    return problems


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else "deploy"
    problems = check(base)
    for p in problems:
        print("deploy_check:", p, file=sys.stderr)
    print("ok" if not problems else f"{len(problems)} problem(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
