#!/usr/bin/env python3
"""pod-runner.py: a stand-in kubelet for the bridge-launch test control plane.

Started by scripts/k8s-test-cluster.sh (`up`) next to kwok. kwok fakes every pod's
lifecycle by writing its status; pods labelled

    bridge-launch.test/run: host

are instead really run here: the runner polls the API server for them, runs the first
container's command + args as a process on this machine (in its own session, stdin
/dev/null), writes its stdout/stderr in CRI log format to a per-pod file that kwok serves
to `kubectl logs` (through a kwok `Logs` object), and at exit patches the pod's status
(phase Succeeded/Failed, the container's terminated state with exit code and termination
message). A pod that is deleted while its process runs gets SIGTERM, then SIGKILL after
its grace period. kwok still marks these pods Running (stage pod-running) but never
finishes them (stages pod-succeeded/pod-failed exclude the label).

What is emulated and what is not: docs/executors/k8s-test-cluster.md, "The pod runner".

Usage (the script does this):
    pod-runner.py --kubeconfig STATE/kubeconfig --work-dir STATE/pod-runner \
                  [--ready-file FILE] [--interval 0.3] [--keep]

Standard library only (Python >= 3.8).
"""

from __future__ import annotations

import argparse
import base64
import datetime
import http.client
import json
import os
import re
import selectors
import shutil
import signal
import ssl
import stat
import subprocess
import sys
import time
import traceback
import urllib.parse

LABEL_KEY = "bridge-launch.test/run"
LABEL_VALUE = "host"
IMAGE_PATH_ANNOTATION = "bridge-launch.test/image-path"
DEFAULT_TERMINATION_PATH = "/dev/termination-log"
# The kubelet's limits (pkg/kubelet/container/runtime.go).
MAX_TERMINATION_MESSAGE = 4096
MAX_TERMINATION_LOG_BYTES = 2048
MAX_TERMINATION_LOG_LINES = 80
# Longer lines are split into partial (P) entries, as the CRI runtimes do.
MAX_LOG_LINE = 16 * 1024
READ_CHUNK = 64 * 1024
# After the main process exits: how long its pipes may take to reach EOF.
DRAIN_SECONDS = 1.0
# A process that ends before kwok marked its pod Running: how long the status patch
# waits for Running (so that kwok's pod-running stage cannot overwrite the result).
PENDING_WAIT_SECONDS = 5.0
# A failing status patch is retried (every poll) for this long.
REPORT_RETRY_SECONDS = 60.0
# The kubelet's minimum grace period for a container kill.
MIN_GRACE_SECONDS = 2
DEFAULT_GRACE_SECONDS = 30
SHUTDOWN_GRACE_SECONDS = 2.0
API_TIMEOUT = 10.0


def log(msg: str) -> None:
    t = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
    sys.stderr.write(f"{t}Z pod-runner: {msg}\n")
    sys.stderr.flush()


def k8s_time() -> str:
    """metav1.Time: RFC 3339, seconds, UTC."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cri_time() -> bytes:
    """RFC 3339 with nanoseconds, UTC, as in the CRI log format."""
    ns = time.time_ns()
    sec, frac = divmod(ns, 1_000_000_000)
    return (time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)) + ".%09dZ" % frac).encode()


def short(value, limit: int = 300) -> str:
    s = value if isinstance(value, str) else json.dumps(value)
    return s if len(s) <= limit else s[:limit] + "...(%d chars)" % len(s)


# ---------------------------------------------------------------------------
# Kubernetes' $(VAR) expansion (k8s.io/kubernetes third_party/forked/golang/expansion)


def expand(text: str, lookup) -> str:
    """`$$` -> `$`; `$(NAME)` -> lookup(NAME), or kept as written when lookup gives None;
    any other `$` and an unclosed `$(` stay as written."""
    out = []
    checkpoint = 0
    cursor = 0
    n = len(text)
    while cursor < n:
        if text[cursor] == "$" and cursor + 1 < n:
            out.append(text[checkpoint:cursor])
            nxt = text[cursor + 1]
            advance = 1
            if nxt == "$":
                out.append("$")
            elif nxt == "(":
                close = text.find(")", cursor + 2)
                if close >= 0:
                    name = text[cursor + 2:close]
                    value = lookup(name)
                    out.append(value if value is not None else "$(" + name + ")")
                    advance = close - cursor
                else:
                    out.append("$(")
            else:
                out.append("$" + nxt)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    return "".join(out) + text[checkpoint:]


# ---------------------------------------------------------------------------
# API client: one keep-alive HTTPS connection with the kubeconfig's client certificate.


class ApiError(Exception):
    pass


def read_kubeconfig(path: str, tls_dir: str):
    """server URL, CA file, client cert file, client key file from a kubeconfig with one
    cluster and one user (as the script writes it: data embedded, or file paths)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()

    def field(name):
        m = re.search(r"^\s*%s:\s*(\S+)\s*$" % re.escape(name), text, re.M)
        return m.group(1).strip("\"'") if m else None

    server = field("server")
    if not server:
        raise SystemExit(f"pod-runner: no server in {path}")
    os.makedirs(tls_dir, mode=0o700, exist_ok=True)
    files = {}
    for key, fname in (("certificate-authority", "ca.crt"), ("client-certificate", "client.crt"),
                       ("client-key", "client.key")):
        data = field(key + "-data")
        if data:
            target = os.path.join(tls_dir, fname)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(base64.b64decode(data))
            files[key] = target
        elif field(key):
            p = field(key)
            files[key] = p if os.path.isabs(p) else os.path.join(os.path.dirname(path), p)
        else:
            raise SystemExit(f"pod-runner: no {key} in {path}")
    return server, files["certificate-authority"], files["client-certificate"], files["client-key"]


class Api:
    def __init__(self, kubeconfig: str, tls_dir: str):
        server, ca, cert, key = read_kubeconfig(kubeconfig, tls_dir)
        u = urllib.parse.urlsplit(server)
        if u.scheme != "https":
            raise SystemExit(f"pod-runner: only an https server is supported, not {server}")
        self.host = u.hostname
        self.port = u.port or 443
        self.prefix = u.path.rstrip("/")
        self.ctx = ssl.create_default_context(cafile=ca)
        self.ctx.load_cert_chain(cert, key)
        self.conn = None

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
            self.conn = None

    def request(self, method: str, path: str, body=None, content_type="application/json"):
        """(HTTP status, decoded JSON body or None). Raises ApiError on a transport error."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json", "User-Agent": "bridge-launch-pod-runner"}
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx,
                                                        timeout=API_TIMEOUT)
            try:
                self.conn.request(method, self.prefix + path, body=data, headers=headers)
                resp = self.conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException) as e:
                # A keep-alive connection the server closed: retry once on a new one.
                self.close()
                if attempt == 0:
                    continue
                raise ApiError(f"{method} {path}: {type(e).__name__}: {e}") from None
            try:
                obj = json.loads(raw) if raw else None
            except ValueError:
                obj = None
            return resp.status, obj
        raise ApiError(f"{method} {path}: unreachable")


def api_message(status: int, obj) -> str:
    if isinstance(obj, dict) and obj.get("message"):
        return f"HTTP {status}: {obj['message']}"
    return f"HTTP {status}"


# ---------------------------------------------------------------------------
# one pod's run


class StartFailure(Exception):
    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


def pod_key(pod) -> str:
    md = pod.get("metadata") or {}
    return f"{md.get('namespace', '?')}/{md.get('name', '?')}"


class Run:
    """A pod this runner started (or failed to start). state: running -> draining
    (the process exited; reading the rest of its output) -> reporting (status patch
    pending) -> done (the pod's status is final; cleaned up once the pod is gone)."""

    def __init__(self, pod, work_dir: str):
        md = pod["metadata"]
        self.uid = md["uid"]
        self.ns = md["namespace"]
        self.name = md["name"]
        self.key = f"{self.ns}/{self.name}"
        self.pod = pod
        self.phase = (pod.get("status") or {}).get("phase", "")
        self.dir = os.path.join(work_dir, "pods", f"{self.ns}_{self.name}_{self.uid}")
        self.log_path = os.path.join(self.dir, "container.log")
        self.term_file = os.path.join(self.dir, "termination-log")
        containers = pod["spec"]["containers"]
        self.container = containers[0]
        self.cname = self.container["name"]
        self.image = self.container.get("image", "")
        self.policy = self.container.get("terminationMessagePolicy") or "File"
        self.proc = None
        self.pid = None
        self.pipes = {}  # stream name -> file object
        self.bufs = {"stdout": bytearray(), "stderr": bytearray()}
        self.logf = None
        self.started_at = None
        self.finished_at = None
        self.exit_mono = None
        self.drain_until = None
        self.kill_at = None
        self.terminating = False
        self.deleted = False  # seen with a deletionTimestamp
        self.gone = False  # no longer listed
        self.result = None  # (exit code, signal or None, reason, message)
        self.report_since = None
        self.logs_uid = None
        self.state = "running"

    def grace_seconds(self) -> int:
        """spec.terminationGracePeriodSeconds (at least 2 s, as the kubelet). Not
        metadata.deletionGracePeriodSeconds: kwok's pod-delete stage deletes with grace 0 at
        once, which overwrites what the deleting client asked for."""
        g = (self.pod.get("spec") or {}).get("terminationGracePeriodSeconds")
        if not isinstance(g, int):
            g = DEFAULT_GRACE_SECONDS
        return max(g, MIN_GRACE_SECONDS)


def proc_start_time(pid: int):
    """Field 22 of /proc/PID/stat (start time in clock ticks), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2:].split()
    return fields[19].decode() if len(fields) > 19 else None


def kill_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


class Runner:
    def __init__(self, args):
        self.args = args
        self.work_dir = os.path.abspath(args.work_dir)
        self.procs_dir = os.path.join(self.work_dir, "procs")
        os.makedirs(os.path.join(self.work_dir, "pods"), exist_ok=True)
        os.makedirs(self.procs_dir, exist_ok=True)
        self.api = Api(args.kubeconfig, os.path.join(self.work_dir, "tls"))
        self.sel = selectors.DefaultSelector()
        self.runs = {}  # pod uid -> Run
        self.skipped = {}  # pod uid -> why (malformed pods: logged once)
        self.stopping = False
        self.ready = False
        self.list_failing_since = None
        self.list_last_error_log = 0.0
        self.sh = shutil.which("sh") or "/bin/sh"
        self.mount = shutil.which("mount") or "/bin/mount"
        self.unshare = self.probe_unshare()
        # SIGCHLD and SIGTERM wake the select() through this pipe.
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        self.sel.register(self.wake_r, selectors.EVENT_READ, None)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self.on_stop_signal)
        signal.signal(signal.SIGINT, self.on_stop_signal)
        self.kill_leftovers()

    def on_stop_signal(self, signum, _frame):
        self.stopping = True

    def probe_unshare(self):
        u = shutil.which("unshare")
        if not u:
            log("unshare not found: processes run without a private mount namespace, "
                "so their termination message file is not captured (message empty)")
            return None
        try:
            r = subprocess.run([u, "--mount", "--propagation", "private", "--", "true"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError) as e:
            log(f"unshare --mount does not work ({e}): termination messages are not captured")
            return None
        if r.returncode != 0:
            log("unshare --mount does not work here (%s): termination messages are not captured"
                % r.stderr.decode(errors="replace").strip())
            return None
        return u

    # -- process records: for cleaning up after a runner that died without stopping them

    def record_proc(self, pid: int):
        st = proc_start_time(pid)
        if st is None:
            return
        try:
            with open(os.path.join(self.procs_dir, str(pid)), "w") as f:
                f.write(st + "\n")
        except OSError as e:
            log(f"cannot write the process record of pid {pid}: {e}")

    def forget_proc(self, pid: int):
        try:
            os.unlink(os.path.join(self.procs_dir, str(pid)))
        except OSError:
            pass

    def kill_leftovers(self):
        for name in os.listdir(self.procs_dir):
            path = os.path.join(self.procs_dir, name)
            try:
                with open(path) as f:
                    want = f.read().strip()
                pid = int(name)
            except (OSError, ValueError):
                want, pid = None, None
            if pid and want and proc_start_time(pid) == want and kill_group(pid, signal.SIGKILL):
                log(f"killed process group {pid} left by an earlier pod runner")
            try:
                os.unlink(path)
            except OSError:
                pass

    # -- the API

    def list_pods(self):
        q = urllib.parse.urlencode({"labelSelector": f"{LABEL_KEY}={LABEL_VALUE}"})
        try:
            status, obj = self.api.request("GET", f"/api/v1/pods?{q}")
            if status != 200 or not isinstance(obj, dict):
                raise ApiError(f"listing pods: {api_message(status, obj)}")
        except ApiError as e:
            now = time.monotonic()
            if self.list_failing_since is None:
                self.list_failing_since = now
            if now - self.list_last_error_log >= 30:
                log(f"API error (retrying every {self.args.interval}s): {e}")
                self.list_last_error_log = now
            return None
        if self.list_failing_since is not None:
            log("API reachable again after %.1fs" % (time.monotonic() - self.list_failing_since))
            self.list_failing_since = None
        return obj.get("items") or []

    def get_object(self, kind: str, ns: str, name: str, cache: dict):
        """A Secret or ConfigMap (None if not found); StartFailure on an API error."""
        key = (kind, name)
        if key in cache:
            return cache[key]
        path = f"/api/v1/namespaces/{ns}/{kind}s/{urllib.parse.quote(name, safe='')}"
        try:
            status, obj = self.api.request("GET", path)
        except ApiError as e:
            raise StartFailure("CreateContainerConfigError", str(e)) from None
        if status == 404:
            obj = None
        elif status != 200:
            raise StartFailure("CreateContainerConfigError",
                               f"reading {kind} {ns}/{name}: {api_message(status, obj)}")
        cache[key] = obj
        return obj

    def logs_object_path(self, run: Run, name: bool = True) -> str:
        p = f"/apis/kwok.x-k8s.io/v1alpha1/namespaces/{run.ns}/logs"
        return p + "/" + urllib.parse.quote(run.name, safe="") if name else p

    def create_logs_object(self, run: Run):
        """kwok's Logs object for the pod: `kubectl logs` then reads run.log_path. Owned by
        the pod, so the garbage collector removes it too."""
        spec = {"logs": [{"containers": [run.cname], "logsFile": run.log_path, "follow": True}]}
        body = {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Logs",
            "metadata": {
                "name": run.name,
                "namespace": run.ns,
                "labels": {"app.kubernetes.io/managed-by": "bridge-launch-pod-runner"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": run.name,
                                     "uid": run.uid}],
            },
            "spec": spec,
        }
        try:
            status, obj = self.api.request("POST", self.logs_object_path(run, name=False), body)
            if status == 409:
                # Left by an earlier pod of the same name (or by hand): replaced, so that the
                # earlier pod's cleanup (a delete with its uid as precondition) misses ours.
                self.api.request("DELETE", self.logs_object_path(run))
                status, obj = self.api.request("POST", self.logs_object_path(run, name=False), body)
            if status in (200, 201) and isinstance(obj, dict):
                run.logs_uid = (obj.get("metadata") or {}).get("uid")
            else:
                log(f"{run.key}: creating its kwok Logs object failed: {api_message(status, obj)}")
        except ApiError as e:
            log(f"{run.key}: creating its kwok Logs object failed: {e}")

    def delete_logs_object(self, run: Run):
        if not run.logs_uid:
            return
        body = {"apiVersion": "v1", "kind": "DeleteOptions",
                "preconditions": {"uid": run.logs_uid}}
        try:
            status, obj = self.api.request("DELETE", self.logs_object_path(run), body)
            if status not in (200, 202, 404, 409):
                log(f"{run.key}: deleting its kwok Logs object failed: {api_message(status, obj)}")
        except ApiError as e:
            log(f"{run.key}: deleting its kwok Logs object failed: {e}")

    # -- the container's configuration

    def field_ref(self, pod, path: str) -> str:
        md = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']*)'\]", path)
        if m:
            return str((md.get(m.group(1)) or {}).get(m.group(2), ""))
        if path in ("metadata.labels", "metadata.annotations"):
            d = md.get(path.split(".")[1]) or {}
            return "\n".join(f"{k}={json.dumps(str(d[k]))}" for k in sorted(d))
        simple = {
            "metadata.name": md.get("name", ""),
            "metadata.namespace": md.get("namespace", ""),
            "metadata.uid": md.get("uid", ""),
            "spec.nodeName": spec.get("nodeName", ""),
            "spec.serviceAccountName": spec.get("serviceAccountName", ""),
            # Every pod runs on this host: its IPs are loopback.
            "status.podIP": "127.0.0.1",
            "status.podIPs": "127.0.0.1",
            "status.hostIP": "127.0.0.1",
            "status.hostIPs": "127.0.0.1",
        }
        if path in simple:
            return simple[path]
        raise StartFailure("CreateContainerConfigError",
                           f"fieldRef {path!r} is not supported by the pod runner")

    def key_ref(self, run: Run, kind: str, ref: dict, cache: dict):
        """The value of a secretKeyRef/configMapKeyRef, or None (optional, missing)."""
        name = ref.get("name", "")
        key = ref.get("key", "")
        optional = bool(ref.get("optional"))
        obj = self.get_object(kind, run.ns, name, cache)
        title = "Secret" if kind == "secret" else "ConfigMap"
        if obj is None:
            if optional:
                return None
            raise StartFailure("CreateContainerConfigError", f'{kind} "{name}" not found')
        data = obj.get("data") or {}
        if kind == "secret":
            if key in data:
                return base64.b64decode(data[key]).decode("utf-8", errors="surrogateescape")
        else:
            if key in data:
                return data[key]
            binary = obj.get("binaryData") or {}
            if key in binary:
                return base64.b64decode(binary[key]).decode("utf-8", errors="surrogateescape")
        if optional:
            return None
        raise StartFailure("CreateContainerConfigError",
                           f"couldn't find key {key} in {title} {run.ns}/{name}")

    def container_env(self, run: Run):
        """The container's env as the kubelet builds it (envFrom, then env in order, each
        `value` expanded against the variables defined so far); MASTER_ADDR -> 127.0.0.1."""
        c = run.container
        env = {}
        cache = {}
        for source in c.get("envFrom") or []:
            prefix = source.get("prefix", "")
            for kind, field in (("configmap", "configMapRef"), ("secret", "secretRef")):
                ref = source.get(field)
                if ref is None:
                    continue
                obj = self.get_object(kind, run.ns, ref.get("name", ""), cache)
                if obj is None:
                    if ref.get("optional"):
                        continue
                    raise StartFailure("CreateContainerConfigError",
                                       f'{kind} "{ref.get("name", "")}" not found')
                for k, v in (obj.get("data") or {}).items():
                    if kind == "secret":
                        v = base64.b64decode(v).decode("utf-8", errors="surrogateescape")
                    env[prefix + k] = v
        if "MASTER_ADDR" in env:
            env["MASTER_ADDR"] = "127.0.0.1"
        for e in c.get("env") or []:
            name = e["name"]
            vf = e.get("valueFrom")
            if vf:
                if "fieldRef" in vf:
                    value = self.field_ref(run.pod, vf["fieldRef"].get("fieldPath", ""))
                elif "secretKeyRef" in vf:
                    value = self.key_ref(run, "secret", vf["secretKeyRef"], cache)
                elif "configMapKeyRef" in vf:
                    value = self.key_ref(run, "configmap", vf["configMapKeyRef"], cache)
                else:
                    raise StartFailure("CreateContainerConfigError",
                                       f"env {name}: valueFrom {sorted(vf)} is not supported by "
                                       "the pod runner")
                if value is None:
                    continue
            else:
                value = expand(e.get("value", ""), env.get)
            if name == "MASTER_ADDR":
                # No cluster DNS here, and every pod runs on this host.
                value = "127.0.0.1"
            env[name] = value
        return env

    def config_map_volume(self, run: Run, volume: dict, mount: dict):
        """A configMap volume: its keys written as files into the pod's directory, which
        start() bind-mounts read-only on the mount path in the pod's mount namespace (so it
        needs unshare). Returns (source dir, mount path)."""
        if not self.unshare:
            raise StartFailure("StartError", f"volume {mount['name']!r}: a configMap volume needs "
                               "unshare --mount (a private mount namespace) in the pod runner")
        ref = volume["configMap"]
        obj = self.get_object("configmap", run.ns, ref.get("name", ""), {})
        if obj is None:
            if ref.get("optional"):
                obj = {}
            else:
                raise StartFailure("CreateContainerConfigError",
                                   f'configmap "{ref.get("name", "")}" not found')
        src = os.path.join(run.dir, "volumes", mount["name"])
        os.makedirs(src, exist_ok=True)
        files = dict(obj.get("data") or {})
        for key, value in (obj.get("binaryData") or {}).items():
            files[key] = base64.b64decode(value)
        for key, value in files.items():
            if "/" in key or key in (".", ".."):
                continue
            with open(os.path.join(src, key), "wb") as f:
                f.write(value if isinstance(value, bytes) else value.encode("utf-8"))
        dst = os.path.normpath(mount.get("mountPath", ""))
        try:
            # The bind mount needs a directory there; created once on the host, empty.
            os.makedirs(dst, exist_ok=True)
        except OSError as e:
            raise StartFailure("StartError", f"volume {mount['name']!r}: {dst}: {e}") from None
        return src, dst

    def check_volumes(self, run: Run):
        """hostPath volumes must be mounted at their own path (nothing is mounted: the
        process sees the host's file system); configMap volumes are bind-mounted (returned
        as (source, mount path) pairs); other kinds are ignored."""
        spec = run.pod.get("spec") or {}
        volumes = {v.get("name"): v for v in spec.get("volumes") or []}
        ignored = []
        binds = []
        for m in run.container.get("volumeMounts") or []:
            v = volumes.get(m.get("name"))
            if v is None:
                raise StartFailure("StartError", f"volumeMount {m.get('name')!r}: no such volume")
            if v.get("configMap") is not None:
                binds.append(self.config_map_volume(run, v, m))
                continue
            hp = v.get("hostPath")
            if hp is None:
                kinds = [k for k in v if k != "name"]
                ignored.append(f"{m.get('name')}({kinds[0] if kinds else '?'})->{m.get('mountPath')}")
                continue
            if m.get("subPathExpr"):
                raise StartFailure("StartError", f"volume {m['name']!r}: subPathExpr is not "
                                   "supported by the pod runner")
            host = os.path.normpath(hp.get("path", ""))
            want = os.path.normpath(os.path.join(host, m["subPath"])) if m.get("subPath") else host
            mount_path = os.path.normpath(m.get("mountPath", ""))
            if mount_path != want:
                raise StartFailure(
                    "StartError",
                    f"volume {m['name']!r}: hostPath {want} is mounted at {m.get('mountPath')}; "
                    "the pod runner runs the container on the host without mounting anything, "
                    "so a hostPath volume must be mounted at its own path "
                    "(mountPath == hostPath.path)")
            kind = hp.get("type") or ""
            try:
                if kind == "DirectoryOrCreate":
                    os.makedirs(host, mode=0o755, exist_ok=True)
                elif kind == "FileOrCreate" and not os.path.exists(host):
                    os.makedirs(os.path.dirname(host) or "/", exist_ok=True)
                    open(host, "a").close()
            except OSError as e:
                raise StartFailure("StartError", f"volume {m['name']!r}: {e}") from None
            checks = {
                "Directory": (os.path.isdir, "a directory"),
                "DirectoryOrCreate": (os.path.isdir, "a directory"),
                "File": (os.path.isfile, "a file"),
                "FileOrCreate": (os.path.isfile, "a file"),
                "Socket": (lambda p: os.path.exists(p) and stat.S_ISSOCK(os.stat(p).st_mode), "a socket"),
                "CharDevice": (lambda p: os.path.exists(p) and stat.S_ISCHR(os.stat(p).st_mode),
                               "a character device"),
                "BlockDevice": (lambda p: os.path.exists(p) and stat.S_ISBLK(os.stat(p).st_mode),
                                "a block device"),
            }
            if kind in checks and not checks[kind][0](host):
                raise StartFailure("StartError",
                                   f"volume {m['name']!r}: hostPath type check failed: {host} is not "
                                   f"{checks[kind][1]}")
        if ignored:
            log(f"{run.key}: volumes not emulated (the process sees the host's paths): "
                + ", ".join(ignored))
        return binds

    def prepare(self, run: Run):
        """(argv, env, cwd, termination message path, bind mounts) or StartFailure."""
        pod = run.pod
        spec = pod["spec"]
        md = pod["metadata"]
        if len(spec["containers"]) > 1:
            log(f"{run.key}: warning: {len(spec['containers'])} containers; only the first, "
                f"{run.cname!r}, runs")
        if spec.get("restartPolicy", "Always") != "Never":
            log(f"{run.key}: warning: restartPolicy {spec.get('restartPolicy', 'Always')}: the pod "
                "runner never restarts a container (treated as Never)")
        command = list(run.container.get("command") or [])
        args = list(run.container.get("args") or [])
        if not command:
            raise StartFailure("StartError",
                               f"container {run.cname!r} has no command: the pod runner has no "
                               "image, so it cannot run an image's entrypoint")
        cenv = self.container_env(run)
        lookup = cenv.get
        argv = [expand(a, lookup) for a in command + args]
        binds = self.check_volumes(run)

        image_path = (md.get("annotations") or {}).get(IMAGE_PATH_ANNOTATION, "")
        own_path = os.environ.get("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        env = {
            "PATH": ":".join(p for p in (image_path, own_path) if p),
            "HOME": "/root",
            "HOSTNAME": spec.get("hostname") or run.name,
            "LANG": "C.UTF-8",
        }
        env.update(cenv)

        wd = run.container.get("workingDir")
        cwd = wd if wd else os.path.join(run.dir, "work")
        try:
            os.makedirs(cwd, exist_ok=True)
        except OSError as e:
            raise StartFailure("StartError", f"workingDir {cwd}: {e}") from None

        exe = argv[0]
        if "/" in exe:
            found = os.path.join(cwd, exe)
            found = found if os.path.isfile(found) and os.access(found, os.X_OK) else None
        else:
            found = shutil.which(exe, path=env["PATH"])
        if not found:
            raise StartFailure("StartError",
                               f'exec: "{exe}": executable file not found in $PATH'
                               if "/" not in exe else f'exec: "{exe}": no such executable')

        term_path = run.container.get("terminationMessagePath") or DEFAULT_TERMINATION_PATH
        if self.unshare:
            try:
                if os.path.isdir(term_path):
                    raise StartFailure("StartError", f"terminationMessagePath {term_path} is a directory")
                if not os.path.exists(term_path):
                    # The bind mount needs a file there; created once on the host, empty.
                    os.makedirs(os.path.dirname(term_path) or "/", exist_ok=True)
                    open(term_path, "a").close()
            except OSError as e:
                raise StartFailure("StartError", f"terminationMessagePath {term_path}: {e}") from None
        return argv, env, cwd, term_path, binds

    # -- starting

    def start(self, pod):
        run = Run(pod, self.work_dir)
        self.runs[run.uid] = run
        os.makedirs(run.dir, exist_ok=True)
        open(run.term_file, "wb").close()
        run.logf = open(run.log_path, "ab", buffering=0)
        self.create_logs_object(run)
        run.started_at = k8s_time()
        try:
            argv, env, cwd, term_path, binds = self.prepare(run)
        except StartFailure as e:
            self.fail_start(run, e.reason, e.message)
            return
        except Exception as e:  # a malformed container spec
            self.fail_start(run, "StartError", f"pod runner: {type(e).__name__}: {e}")
            return
        full = argv
        if self.unshare:
            # A private mount namespace in which the per-pod file is bind-mounted on the
            # termination message path, and each configMap volume (read-only) on its mount
            # path; unshare and sh exec in place (same pid).
            script = ('m=$1 n=$2; shift 2; while [ "$n" -gt 0 ]; do '
                      'src=$1 dst=$2 ro=$3; shift 3; n=$((n - 1)); '
                      '"$m" --bind "$src" "$dst" && '
                      '{ [ "$ro" = rw ] || "$m" -o remount,bind,ro "$dst"; } || '
                      '{ echo "pod-runner: cannot bind-mount $src on $dst" >&2; exit 128; }; '
                      'done; exec "$@"')
            mounts = [run.term_file, term_path, "rw"]
            for src, dst in binds:
                mounts += [src, dst, "ro"]
            full = ([self.unshare, "--mount", "--propagation", "private", "--", self.sh, "-c",
                     script, "pod-runner", self.mount, str(len(mounts) // 3)] + mounts + argv)
        try:
            proc = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, cwd=cwd, env=env,
                                    start_new_session=True, close_fds=True)
        except (OSError, ValueError) as e:
            self.fail_start(run, "StartError", f"starting {argv[0]}: {e}")
            return
        run.proc = proc
        run.pid = proc.pid
        run.started_at = k8s_time()
        self.record_proc(proc.pid)
        for name, f in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            os.set_blocking(f.fileno(), False)
            run.pipes[name] = f
            self.sel.register(f, selectors.EVENT_READ, (run, name))
        log(f"start {run.key} uid={run.uid} pid={run.pid} container={run.cname} cwd={cwd} "
            f"argv={short(argv)}")

    def fail_start(self, run: Run, reason: str, message: str):
        log(f"start failed {run.key} uid={run.uid}: {reason}: {message}")
        run.finished_at = k8s_time()
        run.result = (128, None, reason, message[:MAX_TERMINATION_MESSAGE])
        self.close_log(run)
        run.exit_mono = time.monotonic()
        run.state = "reporting"

    # -- output

    def write_entries(self, run: Run, name: str, final: bool):
        buf = run.bufs[name]
        out = []
        t = cri_time()
        stream = name.encode()
        while True:
            nl = buf.find(b"\n", 0, MAX_LOG_LINE + 1)
            if nl >= 0:
                out.append(b"%s %s F %s\n" % (t, stream, bytes(buf[:nl])))
                del buf[:nl + 1]
            elif len(buf) >= MAX_LOG_LINE:
                out.append(b"%s %s P %s\n" % (t, stream, bytes(buf[:MAX_LOG_LINE])))
                del buf[:MAX_LOG_LINE]
            else:
                break
        if final and buf:
            out.append(b"%s %s F %s\n" % (t, stream, bytes(buf)))
            buf.clear()
        if out and run.logf is not None:
            try:
                run.logf.write(b"".join(out))
            except OSError as e:
                log(f"{run.key}: writing its log failed: {e}")

    def on_readable(self, run: Run, name: str):
        f = run.pipes.get(name)
        if f is None:
            return
        try:
            data = os.read(f.fileno(), READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            run.bufs[name] += data
            self.write_entries(run, name, final=False)
        else:
            self.close_pipe(run, name)

    def close_pipe(self, run: Run, name: str):
        f = run.pipes.pop(name, None)
        if f is None:
            return
        try:
            self.sel.unregister(f)
        except (KeyError, ValueError):
            pass
        f.close()
        self.write_entries(run, name, final=True)

    def close_log(self, run: Run):
        for name in list(run.pipes):
            self.close_pipe(run, name)
        if run.logf is not None:
            run.logf.close()
            run.logf = None

    # -- exit

    def check_exit(self, run: Run):
        try:
            info = os.waitid(os.P_PID, run.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            info = True
        if info is None:
            return
        # The main process exited (a zombie still, so its pid and process group cannot be
        # reused): like a container's PID 1, its exit ends every process of the group.
        kill_group(run.pid, signal.SIGKILL)
        rc = run.proc.wait()
        self.forget_proc(run.pid)
        run.finished_at = k8s_time()
        run.exit_mono = time.monotonic()
        run.drain_until = run.exit_mono + DRAIN_SECONDS
        if rc < 0:
            run.result = (128 - rc, -rc, "Error", "")
        else:
            run.result = (rc, None, "Completed" if rc == 0 else "Error", "")
        run.state = "draining"
        log(f"exit {run.key} uid={run.uid} pid={run.pid} exitCode={run.result[0]}"
            + (f" signal={run.result[1]}" if run.result[1] else "")
            + (" (deleted)" if run.deleted or run.gone else ""))

    def finish_output(self, run: Run):
        self.close_log(run)
        code, sig, reason, _ = run.result
        message = self.termination_message(run, code)
        run.result = (code, sig, reason, message)
        run.state = "reporting"

    def termination_message(self, run: Run, code: int) -> str:
        data = b""
        if self.unshare:
            try:
                with open(run.term_file, "rb") as f:
                    f.seek(0, os.SEEK_END)
                    size = f.tell()
                    # As the kubelet: at most the last 4096 bytes.
                    f.seek(max(0, size - MAX_TERMINATION_MESSAGE))
                    data = f.read(MAX_TERMINATION_MESSAGE)
            except OSError as e:
                return f"Error on reading termination log {run.term_file}: {e}"
        if not data and code != 0 and run.policy == "FallbackToLogsOnError":
            data = self.log_tail(run)
        return data.decode("utf-8", errors="replace")

    def log_tail(self, run: Run) -> bytes:
        """The last 80 entries of the log, their last 2048 bytes (the kubelet's fallback)."""
        try:
            with open(run.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                start = max(0, size - 2 * 1024 * 1024)
                f.seek(start)
                raw = f.read()
        except OSError:
            return b""
        lines = raw.split(b"\n")
        if start > 0:
            lines = lines[1:]
        entries = [ln for ln in lines if ln][-MAX_TERMINATION_LOG_LINES:]
        out = []
        for ln in entries:
            parts = ln.split(b" ", 3)
            if len(parts) < 3:
                continue
            text = parts[3] if len(parts) == 4 else b""
            out.append(text + (b"\n" if parts[2] == b"F" else b""))
        return b"".join(out)[-MAX_TERMINATION_LOG_BYTES:]

    def report(self, run: Run):
        """Patches the pod's status with the container's result; True when done."""
        if run.gone or run.deleted:
            return True
        now = time.monotonic()
        if run.phase == "Pending" and now < run.exit_mono + PENDING_WAIT_SECONDS:
            return False  # kwok's pod-running stage has not run yet
        code, sig, reason, message = run.result
        term = {"exitCode": code, "reason": reason, "startedAt": run.started_at,
                "finishedAt": run.finished_at}
        if sig:
            term["signal"] = sig
        if message:
            term["message"] = message
        statuses = [{"name": run.cname, "image": run.image, "imageID": "", "ready": False,
                     "started": False, "restartCount": 0, "state": {"terminated": term}}]
        for c in run.pod["spec"]["containers"][1:]:
            statuses.append({"name": c.get("name", ""), "image": c.get("image", ""), "imageID": "",
                             "ready": False, "started": False, "restartCount": 0,
                             "state": {"terminated": {
                                 "exitCode": 0, "reason": "Completed",
                                 "message": "not run: the pod runner runs only the first container",
                                 "startedAt": run.started_at, "finishedAt": run.finished_at}}})
        t = k8s_time()
        patch = {
            "metadata": {"uid": run.uid},
            "status": {
                "phase": "Succeeded" if code == 0 else "Failed",
                "conditions": [
                    {"type": "Ready", "status": "False", "reason": "PodCompleted",
                     "lastTransitionTime": t},
                    {"type": "ContainersReady", "status": "False", "reason": "PodCompleted",
                     "lastTransitionTime": t},
                ],
                "containerStatuses": statuses,
            },
        }
        path = f"/api/v1/namespaces/{run.ns}/pods/{urllib.parse.quote(run.name, safe='')}/status"
        if run.report_since is None:
            run.report_since = now
        try:
            status, obj = self.api.request("PATCH", path, patch,
                                           "application/strategic-merge-patch+json")
        except ApiError as e:
            status, obj = None, str(e)
        if status == 200:
            log(f"status {run.key} uid={run.uid} phase={patch['status']['phase']} exitCode={code} "
                f"reason={reason}" + (f" message={short(message, 120)}" if message else ""))
            return True
        if status in (404, 409, 422):
            log(f"status {run.key}: not patched ({api_message(status, obj)}): the pod is gone "
                "or was replaced")
            return True
        err = api_message(status, obj) if status else obj
        if now - run.report_since > REPORT_RETRY_SECONDS:
            log(f"status {run.key}: giving up after {REPORT_RETRY_SECONDS:.0f}s: {err}")
            return True
        log(f"status {run.key}: patch failed, retrying: {err}")
        return False

    def cleanup(self, run: Run):
        """The pod is gone and its process ended: its Logs object and files go too."""
        self.delete_logs_object(run)
        if not self.args.keep:
            shutil.rmtree(run.dir, ignore_errors=True)
        self.runs.pop(run.uid, None)
        log(f"gone {run.key} uid={run.uid}" + ("" if self.args.keep else " (files removed)"))

    def terminate(self, run: Run, why: str):
        if run.terminating or run.state != "running":
            return
        grace = run.grace_seconds()
        run.terminating = True
        run.kill_at = time.monotonic() + grace
        # As a container runtime does: SIGTERM to the main process (the container's PID 1)
        # only, which passes it on or not; SIGKILL to all of them after the grace period.
        try:
            os.kill(run.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
        log(f"kill {run.key} uid={run.uid} pid={run.pid}: {why}: SIGTERM to the main process, "
            f"SIGKILL to its group in {grace}s")

    # -- the loop

    def poll(self):
        pods = self.list_pods()
        if pods is None:
            return
        seen = set()
        for pod in pods:
            try:
                uid = pod["metadata"]["uid"]
            except (KeyError, TypeError):
                continue
            seen.add(uid)
            try:
                self.on_pod(pod)
            except Exception as e:  # a malformed pod: log once, go on
                if uid not in self.skipped:
                    self.skipped[uid] = str(e)
                    log(f"{pod_key(pod)} uid={uid}: skipped: {type(e).__name__}: {e}")
                run = self.runs.get(uid)
                if run is not None and run.state == "running" and run.proc is None:
                    self.runs.pop(uid, None)
        for uid in list(self.skipped):
            if uid not in seen:
                del self.skipped[uid]
        for run in list(self.runs.values()):
            if run.uid in seen:
                continue
            run.gone = True
            if run.state == "running":
                self.terminate(run, "pod gone")
            elif run.state == "done":
                self.cleanup(run)
        if not self.ready:
            self.ready = True
            if self.args.ready_file:
                with open(self.args.ready_file, "w") as f:
                    f.write(f"{os.getpid()}\n")
            log(f"ready: watching pods labelled {LABEL_KEY}={LABEL_VALUE} every {self.args.interval}s"
                + ("" if self.unshare else " (no unshare: termination messages not captured)"))

    def on_pod(self, pod):
        md = pod["metadata"]
        uid = md["uid"]
        run = self.runs.get(uid)
        if run is not None:
            run.pod = pod
            run.phase = (pod.get("status") or {}).get("phase", "")
            if md.get("deletionTimestamp"):
                run.deleted = True
                if run.state == "running":
                    self.terminate(run, "pod deleted")
            return
        if uid in self.skipped:
            return
        spec = pod["spec"]
        phase = (pod.get("status") or {}).get("phase", "")
        if not spec.get("nodeName") or md.get("deletionTimestamp") or phase not in ("Pending", "Running"):
            return
        self.start(pod)

    def step(self, timeout: float):
        for key, _ in self.sel.select(timeout):
            if key.data is None:
                try:
                    while os.read(self.wake_r, 4096):
                        pass
                except (BlockingIOError, InterruptedError):
                    pass
                continue
            run, name = key.data
            self.on_readable(run, name)
        now = time.monotonic()
        for run in list(self.runs.values()):
            if run.state == "running":
                self.check_exit(run)
                if run.state == "running" and run.kill_at is not None and now >= run.kill_at:
                    kill_group(run.pid, signal.SIGKILL)
                    log(f"kill {run.key} uid={run.uid} pid={run.pid}: grace period over: SIGKILL")
                    run.kill_at = None
            if run.state == "draining" and (not run.pipes or now >= run.drain_until):
                self.finish_output(run)
            if run.state == "reporting" and not self.stopping and self.report(run):
                run.state = "done"
                if run.gone:
                    self.cleanup(run)

    def loop(self):
        next_poll = 0.0
        while not self.stopping:
            try:
                now = time.monotonic()
                if now >= next_poll:
                    self.poll()
                    next_poll = time.monotonic() + self.args.interval
                self.step(max(0.0, min(next_poll - time.monotonic(), self.args.interval)))
            except Exception:
                log("error (going on): " + traceback.format_exc().strip().replace("\n", " | "))
                time.sleep(self.args.interval)
        self.shutdown()

    def shutdown(self):
        running = [r for r in self.runs.values() if r.state == "running"]
        log(f"stopping: {len(running)} process group(s) to stop")
        for run in running:
            kill_group(run.pid, signal.SIGTERM)
            log(f"kill {run.key} uid={run.uid} pid={run.pid}: pod runner stopping: SIGTERM")
        deadline = time.monotonic() + SHUTDOWN_GRACE_SECONDS
        while any(r.state == "running" for r in running) and time.monotonic() < deadline:
            self.step(0.05)
        for run in running:
            if run.state == "running":
                kill_group(run.pid, signal.SIGKILL)
                log(f"kill {run.key} uid={run.uid} pid={run.pid}: pod runner stopping: SIGKILL")
        deadline = time.monotonic() + 2.0
        while any(r.state == "running" for r in running) and time.monotonic() < deadline:
            self.step(0.05)
        for run in self.runs.values():
            self.close_log(run)
        self.api.close()
        log("stopped")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--work-dir", required=True, help="per-pod directories, TLS files, process records")
    p.add_argument("--ready-file", help="written after the first successful list of pods")
    p.add_argument("--interval", type=float, default=0.3, help="seconds between polls")
    p.add_argument("--keep", action="store_true", help="keep a deleted pod's directory (log, work dir)")
    args = p.parse_args(argv)
    if args.ready_file:
        try:
            os.unlink(args.ready_file)
        except OSError:
            pass
    runner = Runner(args)
    log(f"started (pid {os.getpid()}, python {sys.version.split()[0]}, server "
        f"https://{runner.api.host}:{runner.api.port}, work dir {runner.work_dir})")
    runner.loop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
