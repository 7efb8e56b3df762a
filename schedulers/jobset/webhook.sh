#!/bin/sh
# Prepares JobSet's admission webhooks for one `batkube run` (see
# schedulers/README.md, "JobSet"):
#
#   schedulers/jobset/webhook.sh DIR [GO_DIR]
#
# GO_DIR is where `schedulers/build-go.sh jobset-manager` wrote its outputs
# (default: target/go at the repository root). Writes into DIR:
#
#   tls.crt, tls.key   the webhook server's certificate, for
#                      jobset-webhook-service.jobset-system.svc, signed by
#   ca.crt             a CA made here (its key is not kept);
#   config.yaml        schedulers/jobset/config.yaml with a port the kernel
#                      just handed out and DIR as the certificates' directory:
#                      the manager's --config;
#   webhook.yaml       for --crds: the namespace jobset-system, the Service
#                      jobset-webhook-service and an EndpointSlice sending it
#                      to 127.0.0.1 and that port, and JobSet's two webhook
#                      configurations (GO_DIR/webhooks/jobset/webhooks.yaml)
#                      with the CA as their caBundle.
#
# This is what cert-manager and the cluster's Service do for JobSet on a real
# cluster. The API then calls JobSet's defaulting and validating webhooks on
# every JobSet, and its pod webhooks on their pods, from the first instant:
# batkube starts the simulation once the manager is quiescent, by then
# listening. One DIR per run: two runs side by side need two ports.
set -eu
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: webhook.sh DIR [GO_DIR]" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../loopback-service.sh"
dir=$1
go_dir=${2:-$here/../../target/go}
hooks=$go_dir/webhooks/jobset/webhooks.yaml
if [ ! -f "$hooks" ]; then
	echo "webhook.sh: $hooks is missing: run \`bash schedulers/build-go.sh ${2:+$2 }jobset-manager\` first" >&2
	exit 1
fi
for tool in openssl python3 base64; do
	command -v $tool >/dev/null || {
		echo "webhook.sh: $tool is needed" >&2
		exit 1
	}
done
service=jobset-webhook-service
namespace=jobset-system
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# A CA, and the serving certificate it signs (the name the API verifies:
# the Service's DNS name).
work=$(mktemp -d "${TMPDIR:-/tmp}/jobset-webhook.XXXXXX")
trap 'rm -rf "$work"' EXIT
if ! {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 36500 \
		-subj "/CN=jobset webhook CA" -addext basicConstraints=critical,CA:TRUE \
		-addext keyUsage=critical,keyCertSign,cRLSign \
		-keyout "$work/ca.key" -out "$dir/ca.crt" &&
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
			-subj "/CN=$service.$namespace.svc" -keyout "$dir/tls.key" -out "$work/tls.csr" &&
		printf 'subjectAltName=DNS:%s.%s.svc,DNS:%s.%s.svc.cluster.local\nextendedKeyUsage=serverAuth\n' \
			"$service" "$namespace" "$service" "$namespace" >"$work/ext" &&
		openssl x509 -req -in "$work/tls.csr" -CA "$dir/ca.crt" -CAkey "$work/ca.key" \
			-CAserial "$work/ca.srl" -CAcreateserial -days 36500 -extfile "$work/ext" -out "$dir/tls.crt"
} 2>"$work/openssl.err"; then
	cat "$work/openssl.err" >&2
	exit 1
fi
ca=$(base64 -w0 <"$dir/ca.crt")

# A free port on the loopback, now.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

sed -e "s|^  port: [0-9][0-9]*\$|  port: $port|" -e "s|^  certDir: .*\$|  certDir: $dir|" \
	"$here/config.yaml" >"$dir/config.yaml"
grep -q "^  port: $port\$" "$dir/config.yaml" && grep -q "^  certDir: $dir\$" "$dir/config.yaml" || {
	echo "webhook.sh: $here/config.yaml has no webhook port or certDir line to set" >&2
	exit 1
}

{
	cat <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: $namespace
---
EOF
	loopback_service "$namespace" "$service" "$port"
	# Each clientConfig gets the CA, indented as its other fields.
	awk -v ca="$ca" '
		{ print }
		/^ *clientConfig:$/ { match($0, /^ */); printf "%*scaBundle: %s\n", RLENGTH + 2, "", ca; n++ }
		END { if (n == 0) exit 1 }' "$hooks"
} >"$dir/webhook.yaml" || {
	echo "webhook.sh: no clientConfig in $hooks" >&2
	exit 1
}
echo "webhook.sh: JobSet's webhooks on 127.0.0.1:$port -> $dir (--crds $dir/webhook.yaml, the manager's --config $dir/config.yaml)" >&2
