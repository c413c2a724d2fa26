#!/usr/bin/env bash
# Smoke test of the test control plane (scripts/k8s-test-cluster.sh): a JobSet of 2 pods
# x 8 GPUs is accepted under strict field validation, scheduled onto the fake nodes and
# Completed; one with a pod failed by kwok ends Failed after its restart; kubectl logs
# works (default log file and a per-pod kwok Logs object); an unknown field is rejected;
# Kueue admits a 16-GPU JobSet from LocalQueue gpu-queue, holds a second one (suspended,
# insufficient quota) until the first is deleted, then admits and completes it; the pod
# runner really runs pods labelled bridge-launch.test/run=host: a Job whose pods exit 3
# fails (exit code, termination message, logs), one whose pods exit 0 completes (env,
# $(VAR) expansion, secret, MASTER_ADDR, hostPath, PATH from the image-path annotation),
# and deleting a Job of sleeping pods stops their processes.
#
# Usage: tests/k8s-control-plane/smoke/run.sh   (brings the cluster up if it is down;
#        leaves it up). KUBECTL=/usr/bin/kubectl runs it with another kubectl.
#        K8S_TEST_KUEUE=0 (a cluster without Kueue) skips the Kueue part,
#        K8S_TEST_POD_RUNNER=0 (a cluster without the pod runner) the pod runner part.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "${here}/../../.." && pwd)
cluster="${root}/scripts/k8s-test-cluster.sh"

KUBECONFIG=$("${cluster}" up | tail -n 1)
export KUBECONFIG
eval "$("${cluster}" env)"
KUBECTL=${KUBECTL:-kubectl}
state_dir=$(dirname "${KUBECONFIG}")

say() { printf 'smoke: %s\n' "$*" >&2; }
fail() { say "FAIL: $*"; exit 1; }
k() { "${KUBECTL}" "$@"; }

# poll SECONDS CMD...: runs CMD until it succeeds; fails after SECONDS.
poll() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.3
  done
}

# Kueue helpers. A JobSet's Workload is found by the label kueue.x-k8s.io/job-uid (the
# JobSet's uid); it is also owned (controller ownerReference) by the JobSet.
workload_of() {
  local uid
  uid=$(k get jobset "$1" -o jsonpath='{.metadata.uid}') || return 1
  k get workloads.kueue.x-k8s.io -l "kueue.x-k8s.io/job-uid=${uid}" -o jsonpath='{.items[*].metadata.name}'
}
has_workload() { [[ -n "$(workload_of "$1")" ]]; }
# wl_cond WORKLOAD TYPE FIELD: a field (status, reason, message) of a Workload condition.
wl_cond() { k get workloads.kueue.x-k8s.io "$1" -o jsonpath="{.status.conditions[?(@.type==\"$2\")].$3}"; }
wl_is() { [[ "$(wl_cond "$1" "$2" status)" == "$3" ]]; }
running_pods() {
  [[ $(k get pods -l "jobset.sigs.k8s.io/jobset-name=$1" --field-selector=status.phase=Running -o name | wc -l) -eq $2 ]]
}
quota_free() {
  [[ "$(k get clusterqueues.kueue.x-k8s.io gpu-cluster-queue -o jsonpath='{.status.reservingWorkloads}')" == 0 ]]
}

kueue_smoke() {
  local t1=${SECONDS} wl1 wl2 msg
  k apply --server-side --validate=strict -f "${here}/jobset-kueue-first.yaml" >&2
  poll 60 has_workload smoke-kueue-first || fail "no Kueue Workload for smoke-kueue-first"
  wl1=$(workload_of smoke-kueue-first)
  poll 60 wl_is "${wl1}" Admitted True ||
    { k get workloads.kueue.x-k8s.io -o yaml >&2; fail "smoke-kueue-first was not admitted"; }
  k wait --for=jsonpath='{.spec.suspend}'=false --timeout=60s jobset/smoke-kueue-first >&2 ||
    fail "smoke-kueue-first stayed suspended after admission"
  poll 60 running_pods smoke-kueue-first 2 ||
    { k get pods -o wide >&2; fail "the 2 pods of smoke-kueue-first are not Running"; }
  say "ok: smoke-kueue-first admitted by Kueue (Workload ${wl1}: $(wl_cond "${wl1}" Admitted message)), 2 pods Running after $((SECONDS - t1))s"

  k apply --server-side --validate=strict -f "${here}/jobset-kueue-second.yaml" >&2
  poll 60 has_workload smoke-kueue-second || fail "no Kueue Workload for smoke-kueue-second"
  wl2=$(workload_of smoke-kueue-second)
  poll 60 wl_is "${wl2}" QuotaReserved False ||
    { k get workloads.kueue.x-k8s.io -o yaml >&2; fail "smoke-kueue-second: no QuotaReserved=False condition"; }
  msg=$(wl_cond "${wl2}" QuotaReserved message)
  [[ ${msg} == *"insufficient unused quota for nvidia.com/gpu"* ]] ||
    fail "smoke-kueue-second: unexpected QuotaReserved message: ${msg}"
  [[ "$(k get jobset smoke-kueue-second -o jsonpath='{.spec.suspend}')" == true ]] ||
    fail "smoke-kueue-second is not suspended while waiting for quota"
  [[ -z "$(k get pods -l jobset.sigs.k8s.io/jobset-name=smoke-kueue-second -o name)" ]] ||
    fail "smoke-kueue-second has pods while waiting for quota"
  say "ok: smoke-kueue-second held by Kueue: suspended, Workload ${wl2} QuotaReserved=False reason $(wl_cond "${wl2}" QuotaReserved reason): ${msg}"

  k delete jobset smoke-kueue-first --wait=true >/dev/null
  poll 60 wl_is "${wl2}" Admitted True ||
    { k get workloads.kueue.x-k8s.io -o yaml >&2; fail "smoke-kueue-second was not admitted after smoke-kueue-first was deleted"; }
  k wait --for=condition=Completed --timeout=120s jobset/smoke-kueue-second >&2 ||
    { k get jobset,jobs,pods,workloads.kueue.x-k8s.io -o wide >&2; fail "smoke-kueue-second did not complete"; }
  poll 60 wl_is "${wl2}" Finished True || fail "Workload ${wl2} not Finished after its JobSet completed"
  poll 60 quota_free || fail "ClusterQueue gpu-cluster-queue still reserves quota after every workload finished"
  say "ok: smoke-kueue-second admitted after smoke-kueue-first was deleted, Completed, quota freed ($((SECONDS - t1))s)"
}

# The pod runner. Pods are found by their Job; a process by the runner's log line
# "start <namespace>/<pod> uid=... pid=<pid> ...".
runner_dir=/tmp/k8s-test-cluster-smoke-runner
runner_log="${state_dir}/logs/pod-runner.log"
job_pods() { k get pods -l "job-name=$1" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'; }
pod_field() { k get pod "$1" -o jsonpath="{$2}"; }
runner_pid() { sed -n "s/.* start default\/$1 uid=[^ ]* pid=\([0-9]*\) .*/\1/p" "${runner_log}" | tail -n 1; }
runner_started() { local p; for p in "$@"; do [[ -n "$(runner_pid "${p}")" ]] || return 1; done; }
pid_alive() { [[ -e /proc/$1 ]] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
pids_gone() { local p; for p in "$@"; do if pid_alive "${p}"; then return 1; fi; done; }
no_runner_logs_objects() {
  [[ -z "$(k get logs.kwok.x-k8s.io -A -l app.kubernetes.io/managed-by=bridge-launch-pod-runner -o name)" ]]
}
delete_smoke_jobs() {
  k delete jobs.batch,secrets -l app.kubernetes.io/managed-by=k8s-test-cluster-smoke \
    --ignore-not-found --cascade=foreground --wait=true >/dev/null
}

runner_smoke() {
  local t1=${SECONDS} pods p idx out msg code reason pids=() t2
  delete_smoke_jobs

  # Exit 3: Failed pods with the exit code, the termination message and both streams' logs.
  k apply --server-side --validate=strict -f "${here}/runner-job-fails.yaml" >&2
  k wait --for=condition=Failed --timeout=60s job/smoke-runner-fail >&2 ||
    { k get pods -o wide >&2; tail -n 20 "${runner_log}" >&2; fail "smoke-runner-fail did not fail"; }
  mapfile -t pods < <(job_pods smoke-runner-fail)
  [[ ${#pods[@]} -eq 2 ]] || fail "smoke-runner-fail: expected 2 pods, got ${#pods[*]}"
  for p in "${pods[@]}"; do
    idx=$(pod_field "${p}" ".metadata.annotations.batch\.kubernetes\.io/job-completion-index")
    [[ $(pod_field "${p}" .status.phase) == Failed ]] || fail "${p}: phase $(pod_field "${p}" .status.phase), not Failed"
    code=$(pod_field "${p}" .status.containerStatuses[0].state.terminated.exitCode)
    reason=$(pod_field "${p}" .status.containerStatuses[0].state.terminated.reason)
    msg=$(pod_field "${p}" .status.containerStatuses[0].state.terminated.message)
    [[ ${code} == 3 && ${reason} == Error ]] || fail "${p}: exit code ${code}, reason ${reason}; expected 3, Error"
    [[ ${msg} == "custom message" ]] || fail "${p}: termination message '${msg}', expected 'custom message'"
    out=$(k logs "${p}") || fail "kubectl logs ${p} failed"
    [[ ${out} == *"hi from ${p} ${idx}"* && ${out} == *bye* ]] || fail "kubectl logs ${p}: ${out}"
  done
  say "ok: smoke-runner-fail Failed ($(k get job smoke-runner-fail -o jsonpath='{.status.conditions[?(@.type=="Failed")].reason}')) after $((SECONDS - t1))s; pods ran here: exit code 3, message '${msg}', logs: $(tr '\n' '|' <<<"${out}")"

  # Exit 0: a Complete Job; what the runner gave the process.
  t2=${SECONDS}
  rm -rf "${runner_dir}"
  mkdir -p "${runner_dir}/bin"
  printf '#!/bin/sh\necho "tool found along the image path"\n' >"${runner_dir}/bin/smoke-runner-tool"
  chmod +x "${runner_dir}/bin/smoke-runner-tool"
  k apply --server-side --validate=strict -f "${here}/runner-job-succeeds.yaml" >&2
  k wait --for=condition=Complete --timeout=60s job/smoke-runner-ok >&2 ||
    { k get pods -o wide >&2; tail -n 20 "${runner_log}" >&2; fail "smoke-runner-ok did not complete"; }
  mapfile -t pods < <(job_pods smoke-runner-ok)
  [[ ${#pods[@]} -eq 2 ]] || fail "smoke-runner-ok: expected 2 pods, got ${#pods[*]}"
  for p in "${pods[@]}"; do
    idx=$(pod_field "${p}" ".metadata.annotations.batch\.kubernetes\.io/job-completion-index")
    [[ $(pod_field "${p}" .status.phase) == Succeeded ]] || fail "${p}: phase $(pod_field "${p}" .status.phase), not Succeeded"
    out=$(k logs "${p}") || fail "kubectl logs ${p} failed"
    for want in 'message=hello world $(GREETING) $(UNDEFINED)' 'token=s3cret maybe=unset' \
      "master=127.0.0.1 podip=127.0.0.1 hostname=smoke-runner-ok-${idx}" 'args=hello $(GREETING)' \
      "pwd=${runner_dir}" 'tool found along the image path'; do
      grep -qxF -- "${want}" <<<"${out}" || fail "kubectl logs ${p}: no line '${want}' in: ${out}"
    done
    [[ -f ${runner_dir}/done-${idx} ]] || fail "${p} did not write ${runner_dir}/done-${idx} (hostPath volume)"
  done
  say "ok: smoke-runner-ok Complete after $((SECONDS - t2))s; env, \$(VAR) expansion, secret, MASTER_ADDR, podIP, workingDir, hostPath, image PATH as expected"

  # Deletion: SIGTERM (pod 0 dies of it), SIGKILL after the 3 s grace period (pod 1 ignores it).
  t2=${SECONDS}
  k apply --server-side --validate=strict -f "${here}/runner-job-sleeps.yaml" >&2
  poll 60 eval '[[ $(job_pods smoke-runner-sleep | wc -l) -eq 2 ]]' || fail "smoke-runner-sleep has no 2 pods"
  mapfile -t pods < <(job_pods smoke-runner-sleep)
  poll 60 runner_started "${pods[@]}" || { tail -n 20 "${runner_log}" >&2; fail "the pod runner did not start ${pods[*]}"; }
  for p in "${pods[@]}"; do pids+=("$(runner_pid "${p}")"); done
  pids_gone "${pids[0]}" && fail "process ${pids[0]} of ${pods[0]} is not running"
  pids_gone "${pids[1]}" && fail "process ${pids[1]} of ${pods[1]} is not running"
  [[ $(pod_field "${pods[0]}" .status.phase) == Running ]] || fail "${pods[0]} is not Running"
  poll 10 eval '[[ $(k logs "${pods[0]}") == sleeping ]]' || fail "kubectl logs ${pods[0]}: $(k logs "${pods[0]}" 2>&1)"
  out=$(timeout 2 "${KUBECTL}" logs -f "${pods[0]}" 2>&1) || true
  [[ ${out} == sleeping ]] || fail "kubectl logs -f ${pods[0]}: ${out}"
  t2=${SECONDS}
  k delete job smoke-runner-sleep --wait=false >&2
  poll 10 pids_gone "${pids[@]}" ||
    { ps -o pid,pgid,etime,args -p "$(IFS=,; echo "${pids[*]}")" >&2 || true; fail "processes ${pids[*]} still run 10 s after their pods were deleted"; }
  grep -q "kill default/${pods[1]} .*grace period over: SIGKILL" "${runner_log}" ||
    fail "no SIGKILL after the grace period for ${pods[1]} in ${runner_log}"
  say "ok: smoke-runner-sleep deleted, processes ${pids[*]} gone within $((SECONDS - t2))s (SIGTERM; SIGKILL after the 3 s grace period)"

  delete_smoke_jobs
  poll 30 no_runner_logs_objects || fail "the pod runner's kwok Logs objects remain after their pods were deleted"
  say "ok: pod runner part passed in $((SECONDS - t1))s"
}

say "kubectl: $(command -v "${KUBECTL}") ($(k version --client -o json | sed -n 's/.*"gitVersion": "\([^"]*\)".*/\1/p' | head -n 1))"
say "server:  $(k version -o json 2>/dev/null | sed -n 's/.*"gitVersion": "\([^"]*\)".*/\1/p' | tail -n 1)"

k delete jobsets.jobset.x-k8s.io -l app.kubernetes.io/managed-by=k8s-test-cluster-smoke \
  --ignore-not-found --cascade=foreground --wait=true >/dev/null

# Strict server-side validation rejects an unknown field.
if out=$(sed 's/^  failurePolicy:/  bogusField: 1\n  failurePolicy:/' "${here}/jobset-succeeds.yaml" |
  k apply --server-side --validate=strict --dry-run=server -f - 2>&1); then
  fail "an unknown field was accepted: ${out}"
fi
grep -q 'bogusField' <<<"${out}" || fail "unexpected error for an unknown field: ${out}"
say "ok: unknown field rejected by server-side apply: ${out##*: }"
# The same through a plain create with strict validation (fieldValidation=Strict).
if out=$(sed 's/^  failurePolicy:/  bogusField: 1\n  failurePolicy:/' "${here}/jobset-succeeds.yaml" |
  k create --validate=strict --dry-run=server -f - 2>&1); then
  fail "an unknown field was accepted: ${out}"
fi
grep -q 'unknown field "spec.bogusField"' <<<"${out}" || fail "unexpected error for an unknown field: ${out}"
say "ok: unknown field rejected by create --validate=strict: ${out##*: }"

t0=${SECONDS}
k apply --server-side --validate=strict -f "${here}/jobset-succeeds.yaml" >&2

k wait --for=condition=Completed --timeout=120s jobset/smoke-ok >&2 ||
  { k get jobset,jobs,pods -o wide >&2; fail "smoke-ok did not complete"; }
say "ok: smoke-ok Completed after $((SECONDS - t0))s"
k get pods -l jobset.sigs.k8s.io/jobset-name=smoke-ok \
  -o custom-columns=POD:.metadata.name,NODE:.spec.nodeName,PHASE:.status.phase,GPUS:.spec.containers[0].resources.limits.nvidia\\.com/gpu,HOSTNAME:.spec.hostname,SUBDOMAIN:.spec.subdomain >&2
nodes=$(k get pods -l jobset.sigs.k8s.io/jobset-name=smoke-ok -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u | wc -l)
[[ ${nodes} -eq 2 ]] || fail "the 2 pods of 8 GPUs each should run on 2 different nodes, got ${nodes}"

k apply --server-side --validate=strict -f "${here}/jobset-fails.yaml" >&2
k wait --for=condition=Failed --timeout=120s jobset/smoke-fail >&2 ||
  { k get jobset,jobs,pods -o wide >&2; fail "smoke-fail did not fail"; }
say "ok: smoke-fail Failed after $((SECONDS - t0))s: $(k get jobset smoke-fail -o jsonpath='{.status.conditions[?(@.type=="Failed")].message}') (restarts: $(k get jobset smoke-fail -o jsonpath='{.status.restarts}'))"
k get pods -l jobset.sigs.k8s.io/jobset-name=smoke-fail \
  -o custom-columns=POD:.metadata.name,RANK:.metadata.annotations.batch\\.kubernetes\\.io/job-completion-index,ATTEMPT:.metadata.labels.jobset\\.sigs\\.k8s\\.io/restart-attempt,PHASE:.status.phase,EXIT:.status.containerStatuses[0].state.terminated.exitCode >&2 || true

# Logs: the default file for every pod, or a per-pod file through a kwok Logs object.
pod0=$(k get pods -l jobset.sigs.k8s.io/jobset-name=smoke-ok,batch.kubernetes.io/job-completion-index=0 -o jsonpath='{.items[0].metadata.name}')
out=$(k logs "${pod0}") || fail "kubectl logs ${pod0} failed"
say "ok: kubectl logs ${pod0}: ${out}"
printf '%s stdout F rank 0 says hello\n%s stderr F rank 0 warns\n' \
  "$(date -u +%Y-%m-%dT%H:%M:%S.000000000Z)" "$(date -u +%Y-%m-%dT%H:%M:%S.000000000Z)" >"${state_dir}/pod-logs/smoke-rank0.log"
k apply -f - >&2 <<EOF
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Logs
metadata:
  name: ${pod0}
  namespace: default
spec:
  logs:
  - containers: [trainer]
    logsFile: ${state_dir}/pod-logs/smoke-rank0.log
EOF
for _ in $(seq 1 50); do
  out=$(k logs "${pod0}" 2>&1) || true
  [[ ${out} == *"rank 0 says hello"* ]] && break
  sleep 0.2
done
[[ ${out} == *"rank 0 says hello"* ]] || fail "per-pod log not served: ${out}"
say "ok: kubectl logs ${pod0} with a Logs object: $(tr '\n' '|' <<<"${out}")"
k delete logs.kwok.x-k8s.io "${pod0}" >/dev/null

if [[ ${K8S_TEST_KUEUE:-1} == 1 ]]; then
  kueue_smoke
else
  say "skipped: Kueue (K8S_TEST_KUEUE=0)"
fi

if [[ ${K8S_TEST_POD_RUNNER:-1} == 1 ]]; then
  runner_smoke
else
  say "skipped: the pod runner (K8S_TEST_POD_RUNNER=0)"
fi

k delete jobsets.jobset.x-k8s.io -l app.kubernetes.io/managed-by=k8s-test-cluster-smoke --cascade=foreground --wait=true >/dev/null
say "PASS ($((SECONDS - t0))s)"
