#!/usr/bin/env python3
"""A control-plane program for the tests of `batkube run --submit-as job`:
a job controller whose steps are written down, to put the broker's
bookkeeping of attempts through one exact sequence (the one Kueue and the
real job controller made in queue_compare's tenants case, where a Job was
readmitted and evicted again in the same instant):

1. it makes the pod of the Job's first attempt (index 0), which runs;
2. at 10 s it deletes that pod (an eviction: the attempt is killed);
3. at 20 s it makes a pod (the broker registers the next attempt with
   Batsim) and deletes it in the same instant, before Batsim has submitted
   that attempt;
4. at 30 s it makes another pod, which the attempt must take and run;
5. once that pod has succeeded, it writes the Job Complete, as the real
   controller does, and waits.

    attempts.py JOB

Talks to the API named by $KUBECONFIG with the standard library only
(urllib). Each step is logged on stdout with the simulated time.
"""
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request

NS = "default"


def server():
    text = open(os.environ["KUBECONFIG"]).read()
    return re.search(r"server:\s*(\S+)", text).group(1)


API = server()


def call(method, path, body=None, content_type="application/json"):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{API}{path}", data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", content_type)
    with urllib.request.urlopen(req) as r:
        return json.load(r)


def get(path):
    try:
        return call("GET", path)
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise


def log(what):
    print(f"attempts: {time.time():.3f} {what}", flush=True)


def sleep_until(start, t):
    left = start + t - time.time()
    if left > 0:
        time.sleep(left)


def make_pod(job, k):
    """A pod of `job` for index 0, as the job controller makes it: from
    its template, owned by it, named after it."""
    meta = job["metadata"]
    tmpl = job["spec"]["template"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{meta['name']}-{k}",
            "labels": dict(tmpl.get("metadata", {}).get("labels", {}),
                           **{"batch.kubernetes.io/job-name": meta["name"]}),
            "annotations": dict(tmpl.get("metadata", {}).get("annotations", {}),
                                **{"batch.kubernetes.io/job-completion-index": "0"}),
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
                                 "uid": meta["uid"], "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "spec": tmpl["spec"],
    }
    call("POST", f"/api/v1/namespaces/{NS}/pods", pod)
    log(f"made pod {pod['metadata']['name']}")
    return pod["metadata"]["name"]


def delete_pod(name):
    call("DELETE", f"/api/v1/namespaces/{NS}/pods/{name}")
    log(f"deleted pod {name}")


def main():
    name = sys.argv[1]
    while (job := get(f"/apis/batch/v1/namespaces/{NS}/jobs/{name}")) is None:
        time.sleep(0.1)
    start = time.time()
    first = make_pod(job, "a")
    sleep_until(start, 10)
    delete_pod(first)
    sleep_until(start, 20)
    delete_pod(make_pod(job, "b"))
    sleep_until(start, 30)
    last = make_pod(job, "c")
    while True:
        pod = get(f"/api/v1/namespaces/{NS}/pods/{last}")
        if pod is not None and pod.get("status", {}).get("phase") == "Succeeded":
            break
        time.sleep(1)
    log(f"pod {last} succeeded")
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    call("PATCH", f"/apis/batch/v1/namespaces/{NS}/jobs/{name}/status",
         {"status": {"succeeded": 1, "conditions": [
             {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now},
             {"type": "Complete", "status": "True", "lastTransitionTime": now}]}},
         content_type="application/merge-patch+json")
    log(f"job {name} complete")
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
