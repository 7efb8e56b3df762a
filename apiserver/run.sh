#!/usr/bin/env bash
# Runs a real kube-apiserver over a real etcd on loopback, for tests that
# compare fakeapi with it (see apiserver/README.md).
#
# Usage: apiserver/run.sh [--bin DIR] STATE_DIR
#   STATE_DIR  created if missing; etcd's data, the certificates, the token,
#              both programs' logs and, once the API server is ready,
#              STATE_DIR/kubeconfig.yaml (written last: its presence means ready)
#   --bin DIR  where kube-apiserver and etcd are (default: target/go at the
#              repository root, where `schedulers/build-go.sh kube-apiserver etcd`
#              puts them)
#
# etcd keeps its data in STATE_DIR/etcd (no fsync: a test's store), the API
# server listens on 127.0.0.1 only, on free ports, with its own serving
# certificate (STATE_DIR/pki/ca.crt signs it), a bearer token for a member
# of system:masters (RBAC authorization), and the admission plugins that are
# on by default, no others. Runs in the foreground until SIGINT or SIGTERM,
# then stops both programs; exits non-zero, naming the log to read, if
# either dies or the API server is not ready within 60 seconds. Needs
# openssl (keys and certificates).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
bin=$root/target/go
state=""
while [[ $# -gt 0 ]]; do
	case "$1" in
	--bin)
		[[ $# -ge 2 ]] || { echo "run.sh: --bin needs a directory" >&2; exit 2; }
		bin=$2
		shift 2
		;;
	-h | --help)
		awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
		exit 0
		;;
	-*)
		echo "run.sh: unknown option $1" >&2
		exit 2
		;;
	*)
		[[ -z "$state" ]] || { echo "run.sh: one STATE_DIR only ($state, then $1)" >&2; exit 2; }
		state=$1
		shift
		;;
	esac
done
[[ -n "$state" ]] || { echo "usage: apiserver/run.sh [--bin DIR] STATE_DIR" >&2; exit 2; }
for prog in kube-apiserver etcd; do
	if [[ ! -x "$bin/$prog" ]]; then
		echo "run.sh: $bin/$prog not found: build it with \`bash schedulers/build-go.sh kube-apiserver etcd\`" >&2
		exit 1
	fi
done
command -v openssl >/dev/null || { echo "run.sh: openssl not found (it makes the keys and certificates)" >&2; exit 1; }
mkdir -p "$state"
state=$(cd "$state" && pwd)
rm -f "$state/kubeconfig.yaml"

# A free port on loopback: one that nothing answers on, from a range the
# kernel does not hand out to outgoing connections.
used=()
free_port() {
	local p
	while true; do
		p=$((20000 + RANDOM % 12000))
		[[ " ${used[*]} " == *" $p "* ]] && continue
		if ! (echo >"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			used+=("$p")
			echo "$p"
			return
		fi
	done
}

# Keys and certificates: a CA, the serving certificate (127.0.0.1 and
# localhost), the service-account signing key.
pki=$state/pki
mkdir -p "$pki"
if [[ ! -f "$pki/apiserver.crt" ]]; then
	openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=batkube-test-ca" \
		-keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
		-keyout "$pki/apiserver.key" -out "$pki/apiserver.csr" 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default\n' >"$pki/san.ext"
	openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
		-days 3650 -extfile "$pki/san.ext" -out "$pki/apiserver.crt" 2>/dev/null
	openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$pki/sa.key" 2>/dev/null
	openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
fi
token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
printf '%s,admin,admin,"system:masters"\n' "$token" >"$state/tokens.csv"

etcd_port=$(free_port)
peer_port=$(free_port)
api_port=$(free_port)

pids=()
# The API server first (pids are etcd's, then its), then etcd: an API
# server whose etcd went first can hang in its shutdown, retrying it.
stop() {
	trap - INT TERM EXIT
	local i pid
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		pid=${pids[i]}
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
}
trap 'stop; exit 0' INT TERM
trap stop EXIT

"$bin/etcd" --name default --data-dir "$state/etcd" \
	--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
	--listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
	--initial-cluster "default=http://127.0.0.1:$peer_port" --unsafe-no-fsync \
	--log-level warn >"$state/etcd.log" 2>&1 &
pids+=($!)

"$bin/kube-apiserver" \
	--etcd-servers "http://127.0.0.1:$etcd_port" \
	--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
	--tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
	--client-ca-file "$pki/ca.crt" \
	--token-auth-file "$state/tokens.csv" --authorization-mode RBAC \
	--service-account-issuer https://kubernetes.default.svc \
	--service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
	--service-cluster-ip-range 10.96.0.0/16 \
	--profiling=false \
	>"$state/kube-apiserver.log" 2>&1 &
pids+=($!)

# Ready: /readyz answers ok (etcd reachable, every post-start hook done,
# RBAC's bootstrap roles written).
for _ in $(seq 1 600); do
	for i in 0 1; do
		if ! kill -0 "${pids[$i]}" 2>/dev/null; then
			log=$([[ $i == 0 ]] && echo etcd.log || echo kube-apiserver.log)
			echo "run.sh: ${log%.log} exited; the end of $state/$log:" >&2
			tail -n 20 "$state/$log" >&2
			exit 1
		fi
	done
	if [[ $(openssl s_client -quiet -connect "127.0.0.1:$api_port" -verify_return_error -CAfile "$pki/ca.crt" \
		2>/dev/null <<<$'GET /readyz HTTP/1.0\r\nAuthorization: Bearer '"$token"$'\r\n\r\n' | tail -n 1) == ok ]]; then
		cat >"$state/kubeconfig.yaml.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kube-apiserver
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority: $pki/ca.crt
users:
- name: admin
  user:
    token: $token
contexts:
- name: kube-apiserver
  context:
    cluster: kube-apiserver
    user: admin
current-context: kube-apiserver
EOF
		mv "$state/kubeconfig.yaml.tmp" "$state/kubeconfig.yaml"
		echo "run.sh: ready: https://127.0.0.1:$api_port, KUBECONFIG=$state/kubeconfig.yaml" >&2
		# Until a signal, or until either program dies.
		wait -n "${pids[@]}" || true
		echo "run.sh: a program exited; see $state/etcd.log and $state/kube-apiserver.log" >&2
		exit 1
	fi
	sleep 0.1
done
echo "run.sh: kube-apiserver not ready after 60 s; the end of $state/kube-apiserver.log:" >&2
tail -n 20 "$state/kube-apiserver.log" >&2
exit 1
