#!/usr/bin/env bash
# kubectl doing a user's normal work, recorded by fakeapi's differential
# harness (tests/differential/record.rs) through its proxy against a real
# kube-apiserver. KUBECONFIG (the proxy, NS as the context's namespace) and
# KUBECTL_CACHE (a fresh discovery cache) come from the harness.
set -euo pipefail
k() { kubectl --cache-dir "$KUBECTL_CACHE" "$@"; }

k apply -f - <<YAML
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, labels: {app: demo}}
data: {mode: fast}
---
apiVersion: v1
kind: Pod
metadata: {name: worker, labels: {app: demo}}
spec:
  containers:
  - {name: main, image: busybox, resources: {requests: {cpu: 100m}}}
YAML
k get pods
k get configmap settings -o yaml
k get pods,configmaps -l app=demo -o name
# A second apply of a changed manifest: a strategic merge patch of the
# difference with the last applied configuration.
k apply -f - <<YAML
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, labels: {app: demo}}
data: {mode: slow, extra: "1"}
YAML
k patch configmap settings --type merge -p '{"data":{"patched":"yes"}}'
k patch pod worker -p '{"metadata":{"labels":{"tier":"batch"}}}'
k patch configmap settings --type json -p '[{"op":"remove","path":"/data/extra"}]'
k label configmap settings team=research
k annotate pod worker note=recorded
# Server-side apply, as a second manager would.
k apply --server-side --field-manager recorder -f - <<YAML
apiVersion: v1
kind: ConfigMap
metadata: {name: owned}
data: {k: v}
YAML
k create configmap plain --from-literal=a=1
k wait --for=jsonpath='{.data.a}'=1 configmap/plain --timeout=30s
# Wait for a change made while it waits: kubectl lists, then watches.
k wait --for=jsonpath='{.data.a}'=2 configmap/plain --timeout=60s &
waiter=$!
sleep 2
k patch configmap plain --type merge -p '{"data":{"a":"2"}}'
wait "$waiter"
# Deletion held by a finalizer, waited for while it is removed.
k create configmap held --from-literal=x=1
k patch configmap held --type merge -p '{"metadata":{"finalizers":["example.com/hold"]}}'
k delete configmap held --wait=false
k get configmap held -o jsonpath='{.metadata.deletionTimestamp}'; echo
k wait --for=delete configmap/held --timeout=60s &
waiter=$!
sleep 2
k patch configmap held --type merge -p '{"metadata":{"finalizers":null}}'
wait "$waiter"
# Events, as a controller would have written them, then read back.
k create -f - <<YAML
apiVersion: v1
kind: Event
metadata: {name: worker.recorded}
involvedObject: {kind: Pod, name: worker, namespace: $NS, apiVersion: v1}
reason: Recorded
message: written by the recording
type: Normal
source: {component: recorder}
YAML
k events
k events --for pod/worker -o json
k get events --field-selector reason=Recorded -o name
k delete pod worker --wait=false
k delete configmap -l app=demo
k get all
k get configmap nothing-here || true
