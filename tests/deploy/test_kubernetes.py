#!/usr/bin/env python3
"""The Kubernetes manifest deploy/kubernetes/airlock.yaml, checked without a
cluster: what the DaemonSet needs of the node is there (privileged, host
PIDs, bpffs with propagation, the cgroup2 tree, /run/airlock for the control
socket the hook reaches), its ConfigMaps hold policies `airlock policy check`
accepts and a daemon configuration that points at them, and the init
container's script, run against a directory standing for the node's root,
installs a hook that runs: the airlock binary through its own loader and
libraries, answering a container state as the runtime would give it.

Usage: test_kubernetes.py MANIFEST AIRLOCK_BINARY
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import yaml


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def expect(cond, msg):
    if not cond:
        fail(msg)


def main():
    manifest, airlock = sys.argv[1], os.path.abspath(sys.argv[2])
    with open(manifest) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    by_kind = {}
    for d in docs:
        expect("apiVersion" in d and "kind" in d and "metadata" in d, f"a document without apiVersion/kind/metadata: {d}")
        by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = d
    expect("airlock-system" in by_kind.get("Namespace", {}), "no Namespace airlock-system")
    cms = by_kind.get("ConfigMap", {})
    expect({"airlock-policies", "airlock-config"} <= set(cms), f"ConfigMaps: {sorted(cms)}")
    ds = by_kind.get("DaemonSet", {}).get("airlock")
    expect(ds is not None, "no DaemonSet airlock")
    for d in docs:
        if d["kind"] != "Namespace":
            expect(d["metadata"].get("namespace") == "airlock-system", f"{d['kind']} {d['metadata']['name']} outside airlock-system")

    spec = ds["spec"]["template"]["spec"]
    expect(ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items(),
           "the selector does not match the pod's labels")
    expect(spec.get("hostPID") is True, "hostPID is not true")
    volumes = {v["name"]: v for v in spec["volumes"]}
    main = next(c for c in spec["containers"] if c["name"] == "airlock")
    expect(main["securityContext"].get("privileged") is True, "the daemon's container is not privileged")
    expect(main["command"] == ["/usr/bin/airlock"] and "daemon" in main["args"], f"the daemon's command: {main['command']} {main['args']}")
    config_path = main["args"][main["args"].index("--config") + 1]
    mounts = {m["mountPath"]: m for m in main["volumeMounts"]}

    def host_path(mount_path, container=main):
        ms = {m["mountPath"]: m for m in container["volumeMounts"]}
        expect(mount_path in ms, f"{container['name']}: nothing mounted at {mount_path}")
        v = volumes[ms[mount_path]["name"]]
        expect("hostPath" in v, f"{mount_path} is not a hostPath volume")
        return v["hostPath"]["path"]

    expect(host_path("/sys/fs/bpf") == "/sys/fs/bpf", "bpffs")
    expect(mounts["/sys/fs/bpf"].get("mountPropagation") == "Bidirectional", "pins made in the pod must be the node's")
    expect(host_path("/sys/fs/cgroup") == "/sys/fs/cgroup", "the cgroup tree")
    expect(host_path("/run/airlock") == "/run/airlock", "the control socket's directory is not the node's /run/airlock")
    expect(host_path("/var/log/airlock") == "/var/log/airlock", "the audit log's directory")
    expect(not mounts["/sys/fs/cgroup"].get("readOnly"), "the cgroup tree must be writable (freeze, kill)")

    # The configuration the daemon reads, and the policies it names.
    cfg_dir = os.path.dirname(config_path)
    expect(cfg_dir in mounts and volumes[mounts[cfg_dir]["name"]]["configMap"]["name"] == "airlock-config",
           f"{config_path} is not from the ConfigMap airlock-config")
    config = json.loads(cms["airlock-config"]["data"][os.path.basename(config_path)])
    pol_dir = config["policy_dir"]
    expect(pol_dir in mounts and volumes[mounts[pol_dir]["name"]]["configMap"]["name"] == "airlock-policies",
           f"policy_dir {pol_dir} is not the ConfigMap airlock-policies")
    expect(config["audit_log"].startswith("/var/log/airlock/"), "the audit log is not on the node")
    port = int(config["metrics"].rsplit(":", 1)[1])
    expect(any(p["containerPort"] == port for p in main.get("ports", [])), f"metrics port {port} is not declared")
    expect(main["livenessProbe"]["httpGet"]["port"] == port, "the liveness probe is not the metrics port")

    work = tempfile.mkdtemp(prefix="airlock-k8s-test.")
    try:
        pols = os.path.join(work, "policies")
        os.makedirs(pols)
        for name, text in cms["airlock-policies"]["data"].items():
            expect(name.endswith(".json"), f"policy {name}: the daemon finds NAME.json")
            with open(os.path.join(pols, name), "w") as f:
                f.write(text)
            p = json.loads(text)
            expect(p["name"] + ".json" == name, f"{name}: its name is {p['name']}")
        r = subprocess.run([airlock, "policy", "check"] + sorted(os.path.join(pols, n) for n in os.listdir(pols)),
                           capture_output=True, text=True)
        expect(r.returncode == 0, f"airlock policy check rejects the ConfigMap's policies: {r.stdout}{r.stderr}")

        # The init container's script, against a stand-in for the node's root.
        init = next(c for c in spec["initContainers"] if c["name"] == "install-hook")
        script_path = init["command"][-1]
        expect(os.path.dirname(script_path) in {m["mountPath"] for m in init["volumeMounts"]}, "the init script is not mounted")
        host_env = next(e["value"] for e in init["env"] if e["name"] == "HOST")
        expect(host_path(host_env + "/opt/airlock", init) == "/opt/airlock", "the hook's binary is not on the node")
        expect(host_path(host_env + "/etc/containers/oci/hooks.d", init) == "/etc/containers/oci/hooks.d",
               "the hook's definition is not in the node's hooks directory")
        conf = os.path.join(work, "config")
        os.makedirs(conf)
        for name, text in cms["airlock-config"]["data"].items():
            with open(os.path.join(conf, name), "w") as f:
                f.write(text)
        root = os.path.join(work, "node")
        env = dict(os.environ, HOST=root, AIRLOCK_BIN=airlock, CONFIG=conf)
        for attempt in (1, 2):  # an upgrade runs it over the last one's files
            r = subprocess.run(["/bin/sh", os.path.join(conf, os.path.basename(script_path))], env=env,
                               capture_output=True, text=True)
            expect(r.returncode == 0, f"install-hook.sh (run {attempt}): {r.stdout}{r.stderr}")
        with open(os.path.join(root, "etc/containers/oci/hooks.d/airlock.json")) as f:
            hook = json.load(f)
        expect(hook["stages"] == ["createRuntime"], f"stages {hook['stages']}")
        expect(hook["when"] == {"annotations": {"^io\\.airlock\\.policy$": ".*"}}, f"when {hook['when']}")

        # The hook as the runtime runs it (its paths under the stand-in root).
        expect(os.path.islink(os.path.join(root, "opt/airlock/current")), "/opt/airlock/current is not a link")
        expect(sorted(os.listdir(os.path.join(root, "opt/airlock"))) ==
               sorted(["current", os.readlink(os.path.join(root, "opt/airlock/current"))]),
               f"what an upgrade left in /opt/airlock: {os.listdir(os.path.join(root, 'opt/airlock'))}")
        expect("--allow-policy" in hook["hook"]["args"], "the hook lets pods choose any policy")
        allowed = [hook["hook"]["args"][i + 1] for i, a in enumerate(hook["hook"]["args"]) if a == "--allow-policy"]
        expect(set(allowed) <= {n[:-5] for n in cms["airlock-policies"]["data"]},
               f"--allow-policy names a policy the ConfigMap lacks: {allowed}")
        for name, text in cms["airlock-policies"]["data"].items():
            expect(json.loads(text).get("mode", "enforce") == "enforce",
                   f"{name}: an audit-mode policy a pod could choose lets it through")

        def on_node(p):
            return root + p if p.startswith("/opt/airlock/") else p
        argv = [on_node(hook["hook"]["path"])] + [on_node(a) for a in hook["hook"]["args"][1:]]
        expect(os.access(argv[0], os.X_OK), f"{argv[0]} is not executable")
        state = {"ociVersion": "1.0.2", "id": "0123456789ab" * 5 + "cdef", "status": "creating", "pid": os.getpid(),
                 "bundle": "/nonexistent", "annotations": {}}
        env = {"PATH": "/usr/bin:/bin", "AIRLOCK_STATE_DIR": os.path.join(work, "state")}
        r = subprocess.run(argv, input=json.dumps(state), env=env, capture_output=True, text=True)
        expect(r.returncode == 0, f"the installed hook, for a container without the annotation: {r.returncode} {r.stderr}")
        state["annotations"] = {"io.airlock.policy": "agent"}
        r = subprocess.run(argv, input=json.dumps(state), env=env, capture_output=True, text=True)
        want = f"airlock oci-hook: container {state['id']}: no airlock daemon answers at {env['AIRLOCK_STATE_DIR']}/control.sock"
        expect(r.returncode == 1 and want in r.stderr,
               f"the installed hook, annotated, no daemon: status {r.returncode}, stderr {r.stderr!r}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("kubernetes manifest: ok")


if __name__ == "__main__":
    main()
