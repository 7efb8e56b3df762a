#!/usr/bin/env python3
"""A control-plane program for the tests of `batkube run --controller`: a
walltime enforcer. Every PERIOD seconds (its own timer: time.sleep, on
simulated time under the shim) it lists the pods and deletes those that
have run for LIMIT seconds or more, as a batch system's walltime does.

    walltime.py LIMIT PERIOD [EXIT_AFTER]

With EXIT_AFTER it exits (status 3) that many seconds after it started: a
controller that crashes. Talks to the API named by $KUBECONFIG with the
standard library only (urllib), like any client.
"""
import datetime
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request


def server():
    text = open(os.environ["KUBECONFIG"]).read()
    return re.search(r"server:\s*(\S+)", text).group(1)


def main():
    limit, period = float(sys.argv[1]), float(sys.argv[2])
    exit_after = float(sys.argv[3]) if len(sys.argv) > 3 else None
    api = server()
    started = time.time()
    while True:
        now = time.time()
        if exit_after is not None and now - started >= exit_after:
            print(f"walltime: exiting at {now:.3f} as asked", flush=True)
            sys.exit(3)
        with urllib.request.urlopen(f"{api}/api/v1/pods") as r:
            pods = json.load(r)["items"]
        for p in pods:
            st = p.get("status", {})
            if st.get("phase") != "Running" or "startTime" not in st:
                continue
            start = datetime.datetime.fromisoformat(st["startTime"].replace("Z", "+00:00")).timestamp()
            if now - start >= limit:
                ns, name = p["metadata"]["namespace"], p["metadata"]["name"]
                req = urllib.request.Request(f"{api}/api/v1/namespaces/{ns}/pods/{name}", method="DELETE")
                try:
                    urllib.request.urlopen(req).read()
                except urllib.error.HTTPError as e:
                    if e.code != 404:
                        raise
                    # Another controller deleted it in the same instant: as a
                    # real controller does, take NotFound as done.
                    print(f"walltime: {now:.3f} {name} already gone", flush=True)
                    continue
                print(f"walltime: {now:.3f} deleted {name} (running since {start:.3f})", flush=True)
        time.sleep(period)


if __name__ == "__main__":
    main()
