#!/usr/bin/env bash
# Runs Kubernetes' own API-machinery e2e tests ([sig-api-machinery] of the
# upstream e2e.test, k8s.io/kubernetes at the version of go.mod here) against
# `batkube serve`, or against a real kube-apiserver for comparison, and
# writes a summary of every test run (see fakeapi/conformance/README.md).
#
# Usage: fakeapi/conformance/run.sh [OPTIONS]
#   --server S     batkube (default): `batkube serve`, nothing else (no
#                  Batsim, so no nodes); kube-apiserver: the real one over
#                  etcd (apiserver/run.sh) with the upstream
#                  kube-controller-manager beside it, no nodes either
#   --out DIR      where everything goes (default: target/conformance/S);
#                  emptied first
#   --procs N      tests run in N processes of e2e.test at once (default
#                  8: most of their time is spent waiting), each its share
#                  of them; the [Serial] ones alone at the end
#   --focus RE     only the tests of the selection whose names match RE
#                  after "[sig-api-machinery]" (default: all of them)
#   --batkube BIN  the batkube binary (default: `cargo build --release -p
#                  batkube`, then target/release/batkube)
#   --no-build     use target/go/e2e.test (and kube-apiserver, etcd,
#                  kube-controller-manager) as they are
#   --e2e PROG     the suite's binary: e2e.test (default: the whole suite)
#                  or e2e-apimachinery.test (its API-machinery tests alone,
#                  the same tests and setup, a fraction of the build)
#   --bin DIR      where the Go programs are (default: target/go)
#   --ci           CI's subset (the fast tests, ci.txt), with
#                  e2e-apimachinery.test, 4 processes, and an exit status
#                  of 1 unless every test's outcome is expected.tsv's
#   --controllers L  with --server batkube: the upstream
#                  kube-controller-manager runs beside `batkube serve` with
#                  the controllers L (a comma-separated list, kube-controller-
#                  manager's names), as the reference runs it beside
#                  kube-apiserver; `workloads` names the ones that make
#                  dependents (replication, replica sets, deployments, jobs,
#                  cron jobs). Default: workloads and the PersistentVolume
#                  binder, the controllers of a real control plane that
#                  fakeapi does not run itself (it has its own garbage
#                  collector, namespace and service-account controllers);
#                  `none`: batkube serve alone
#
# The selection: every test named [sig-api-machinery], less those that need
# a running container (a pod that reaches Running: no kubelet here) or a
# webhook or aggregated API server in a pod (SKIP below).
#
# Writes OUT/shard-*.json and OUT/shard-*.log (each process's Ginkgo JSON
# report and output), OUT/summary.tsv (one line a test: outcome, seconds,
# name, the first line of its failure) and OUT/summary.md (the same as a
# table, failures first, each with its reason from reasons.tsv), the
# server's logs beside them. Exits 0 when the suite
# ran, whatever its tests' outcomes; non-zero when it could not run.
# Needs Go (builds), cargo, python3, kubectl (some tests run it), openssl
# (kube-apiserver's certificates).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
server=batkube
out=""
procs=8
focus=""
batkube=""
build=1
controllers=workloads,persistentvolume-binder-controller
controllers_given=0
e2e=e2e.test
bin=""
only=""
strict=""

# Tests left out: they need a container running in a pod (no kubelet runs
# here): a webhook server (AdmissionWebhook, CustomResourceConversionWebhook,
# CustomResourceFieldSelectors' conversion webhook), the sample aggregated
# API server (Aggregator, CBOR's sample-apiserver, OpenAPIV3's aggregated
# server), or a pod that must reach Running.
SKIP='AdmissionWebhook|CustomResourceConversionWebhook|CustomResourceFieldSelectors'
SKIP+='|\[sig-api-machinery\] Aggregator |sample-apiserver|OpenAPI V3 for Aggregated APIServer'
SKIP+='|all pods are removed when a namespace is deleted|namespace deletion should delete pod first'
SKIP+='|set the deletionTimestamp and deletionGracePeriodSeconds of the pod'

while [[ $# -gt 0 ]]; do
	case "$1" in
	--ci)
		e2e=e2e-apimachinery.test
		only=$here/ci.txt
		strict=--strict
		procs=4
		shift
		;;
	--server | --out | --procs | --focus | --batkube | --controllers | --e2e | --bin)
		[[ $# -ge 2 ]] || {
			echo "run.sh: $1 needs a value" >&2
			exit 2
		}
		case "$1" in
		--server) server=$2 ;;
		--out) out=$2 ;;
		--procs) procs=$2 ;;
		--focus) focus=$2 ;;
		--e2e) e2e=$2 ;;
		--bin) bin=$2 ;;
		--batkube) batkube=$2 ;;
		--controllers)
			controllers=$2
			controllers_given=1
			;;
		esac
		shift 2
		;;
	--no-build)
		build=0
		shift
		;;
	-h | --help)
		awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
		exit 0
		;;
	*)
		echo "run.sh: unknown argument $1 (see --help)" >&2
		exit 2
		;;
	esac
done
case "$e2e" in
e2e.test | e2e-apimachinery.test) ;;
*)
	echo "run.sh: --e2e is e2e.test or e2e-apimachinery.test, not $e2e" >&2
	exit 2
	;;
esac
case "$server" in
batkube | kube-apiserver) ;;
*)
	echo "run.sh: --server is batkube or kube-apiserver, not $server" >&2
	exit 2
	;;
esac
if [[ $controllers_given == 1 && $server != batkube ]]; then
	echo "run.sh: --controllers is for --server batkube (kube-apiserver runs every controller)" >&2
	exit 2
fi
[[ $controllers == none || $server != batkube ]] && controllers=""
if [[ -n $controllers ]]; then
	# The controllers that make the dependents the garbage-collector tests
	# delete or orphan: fakeapi has its own garbage collector, namespace
	# and service-account controllers, and none of these.
	# `workloads` may stand among other names.
	controllers=,$controllers,
	controllers=${controllers//,workloads,/,replicationcontroller-controller,replicaset-controller,deployment-controller,job-controller,cronjob-controller,}
	controllers=${controllers#,}
	controllers=${controllers%,}
	[[ $controllers =~ ^[a-z-]+(,[a-z-]+)*$ ]] || {
		echo "run.sh: --controllers wants kube-controller-manager's controller names separated by commas, not $controllers" >&2
		exit 2
	}
fi
[[ $procs =~ ^[1-9][0-9]*$ ]] || {
	echo "run.sh: --procs wants a positive number, not $procs" >&2
	exit 2
}
for tool in python3 kubectl; do
	command -v $tool >/dev/null || {
		echo "run.sh: $tool not found (the summary needs python3; some tests run kubectl)" >&2
		exit 1
	}
done
out=${out:-$root/target/conformance/$server}
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
bin=${bin:-$root/target/go}
mkdir -p "$bin"
bin=$(cd "$bin" && pwd)

if [[ $build == 1 ]]; then
	progs=("$e2e")
	[[ $server == kube-apiserver ]] && progs+=(kube-apiserver etcd kube-controller-manager)
	[[ -n $controllers ]] && progs+=(kube-controller-manager)
	bash "$root/schedulers/build-go.sh" "$bin" "${progs[@]}"
	if [[ $server == batkube && -z $batkube ]]; then
		(cd "$root" && cargo build --release -p batkube)
	fi
fi
batkube=${batkube:-$root/target/release/batkube}
[[ -x $bin/$e2e ]] || {
	echo "run.sh: $bin/$e2e not found: build it with \`bash schedulers/build-go.sh $e2e\`" >&2
	exit 1
}

pids=()
stop() {
	local i
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill -TERM "${pids[i]}" 2>/dev/null || true
		wait "${pids[i]}" 2>/dev/null || true
	done
}
trap stop EXIT

# A free port on loopback (as apiserver/run.sh picks them).
free_port() {
	local p
	while true; do
		p=$((20000 + RANDOM % 12000))
		if ! (echo >"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
}

# Waits up to 60 s for FILE to exist while PID lives.
wait_for() {
	local file=$1 pid=$2 log=$3
	for _ in $(seq 1 600); do
		[[ -f $file ]] && return 0
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "run.sh: the server exited; the end of $log:" >&2
			tail -n 20 "$log" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "run.sh: $file not written within 60 s; see $log" >&2
	exit 1
}

case "$server" in
batkube)
	[[ -x $batkube ]] || {
		echo "run.sh: $batkube not found (cargo build --release -p batkube, or --batkube BIN)" >&2
		exit 1
	}
	mkdir -p "$out/serve"
	"$batkube" serve --api "127.0.0.1:$(free_port)" --socket-endpoint "tcp://127.0.0.1:$(free_port)" \
		--out "$out/serve" >"$out/serve.log" 2>&1 &
	pids+=($!)
	wait_for "$out/serve/kubeconfig.yaml" "${pids[0]}" "$out/serve.log"
	kubeconfig=$out/serve/kubeconfig.yaml
	if [[ -n $controllers ]]; then
		[[ -x $bin/kube-controller-manager ]] || {
			echo "run.sh: $bin/kube-controller-manager not found: build it with \`bash schedulers/build-go.sh kube-controller-manager\`" >&2
			exit 1
		}
		# JSON, as every client of batkube serve in the suite (see below).
		"$bin/kube-controller-manager" --kubeconfig "$kubeconfig" --leader-elect=false --secure-port=0 \
			--kube-api-content-type=application/json --controllers "$controllers" \
			>"$out/kube-controller-manager.log" 2>&1 &
		pids+=($!)
	fi
	;;
kube-apiserver)
	bash "$root/apiserver/run.sh" --bin "$bin" "$out/apiserver" >"$out/apiserver.log" 2>&1 &
	pids+=($!)
	wait_for "$out/apiserver/kubeconfig.yaml" "${pids[0]}" "$out/apiserver.log"
	kubeconfig=$out/apiserver/kubeconfig.yaml
	# Every controller of a cluster without nodes: garbage collector,
	# namespaces, quotas, replication, deployments, jobs, ...; service
	# accounts' tokens from the API server's signing key.
	"$bin/kube-controller-manager" --kubeconfig "$kubeconfig" --leader-elect=false --secure-port=0 \
		--service-account-private-key-file "$out/apiserver/pki/sa.key" \
		--root-ca-file "$out/apiserver/pki/ca.crt" \
		--use-service-account-credentials=false \
		>"$out/kube-controller-manager.log" 2>&1 &
	pids+=($!)
	;;
esac

# The run: the upstream suite, unmodified. No nodes: the suite is told not
# to wait for any (--allowed-not-ready-nodes=-1, --num-nodes=0), nor for a
# `default` ServiceAccount in its namespaces before each test (made by
# kube-controller-manager's service-account controller on the reference,
# by fakeapi's own on batkube serve; every recorded run had the flag). Its
# clients send JSON (client-go's default; the suite's
# own default is protobuf, which fakeapi reads only for the kinds
# schedulers and controllers write: see fakeapi/README.md).
suite=(--kubeconfig "$kubeconfig" --provider skeleton
	--allowed-not-ready-nodes=-1 --num-nodes=0 --e2e-verify-service-account=false
	--kube-api-content-type application/json --dump-logs-on-failure=false
	--ginkgo.no-color --ginkgo.timeout 3h --ginkgo.poll-progress-after 5m)
sel='\[sig-api-machinery\]'
[[ -n $focus ]] && sel+=".*($focus)"

# The tests selected, then spread over $procs processes of e2e.test of our
# own, each with its share named exactly (its own JSON report and log), the
# [Serial] ones in one more process after them. (Not `ginkgo -p`: a
# process of it that dies takes every result with it, its report never
# written.) A process that dies leaves its tests without a result, listed
# as such in the summary with its log.
"$bin/$e2e" "${suite[@]}" --ginkgo.dry-run --ginkgo.focus "$sel" --ginkgo.skip "$SKIP" \
	--ginkgo.json-report "$out/selected.json" >"$out/selected.log" 2>&1 || {
	echo "run.sh: listing the tests failed; see $out/selected.log" >&2
	exit 1
}
python3 "$here/summary.py" --shard "$out/selected.json" "$out" "$procs" ${only:+--only "$only"}
echo "run.sh: running $(wc -l <"$out/selected.txt") [sig-api-machinery] tests against $server" \
	"in $procs processes, then the [Serial] ones; logs in $out/shard-*.log" >&2
start=$SECONDS
shards=()
for f in "$out"/shard-*.focus; do
	[[ $f == *serial.focus ]] && continue
	shards+=("$f")
done
run_shard() {
	local f=$1 name
	name=$(basename "$f" .focus)
	"$bin/$e2e" "${suite[@]}" --ginkgo.focus "$(cat "$f")" \
		--ginkgo.json-report "$out/$name.json" >"$out/$name.log" 2>&1 || true
}
shard_pids=()
for f in "${shards[@]}"; do
	run_shard "$f" &
	shard_pids+=($!)
done
wait "${shard_pids[@]}" 2>/dev/null || true
if [[ -f $out/shard-serial.focus ]]; then
	run_shard "$out/shard-serial.focus"
fi
echo "run.sh: the suite took $((SECONDS - start)) s" >&2
python3 "$here/summary.py" "$out" $strict
