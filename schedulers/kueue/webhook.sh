#!/bin/sh
# Prepares a run with Kueue's own admission webhooks (see README.md,
# "Kueue's webhooks, for real"):
#
#   schedulers/kueue/webhook.sh DIR [GO_DIR] [CONFIG]
#
# GO_DIR is where `schedulers/build-go.sh kueue-manager` wrote its outputs
# (default: target/go at the repository root); CONFIG the Kueue
# configuration to start from (default: schedulers/kueue/config.yaml; its
# integrations are kept). Writes into DIR:
#
#   config.yaml   CONFIG with Kueue's internal certificate management on,
#                 a webhook port the kernel just handed out and DIR/certs
#                 as the webhook server's certificate directory: the
#                 manager's --config;
#   webhook.yaml  for --crds: Kueue's CRDs with their conversion webhooks,
#                 the namespace kueue-system, the empty Secret
#                 kueue-webhook-server-cert Kueue's cert controller fills,
#                 the Service kueue-webhook-service and an EndpointSlice
#                 sending it to 127.0.0.1 and that port, and Kueue's two
#                 webhook configurations, without a caBundle;
#   certs/        the Secret's volume (`batkube run --mount-secret
#                 kueue-system/kueue-webhook-server-cert=DIR/certs`).
#
# That is what Kueue's manifests install on a cluster. Unlike JobSet's
# (schedulers/jobset/webhook.sh), nothing here makes a certificate: Kueue
# makes its CA and its serving certificate itself, writes them into the
# Secret, patches the caBundle of its webhook configurations and CRDs, and
# reads the certificate from the Secret's volume. One DIR per run: two runs
# side by side need two ports.
set -eu
if [ $# -lt 1 ] || [ $# -gt 3 ]; then
	echo "usage: webhook.sh DIR [GO_DIR] [CONFIG]" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../loopback-service.sh"
dir=$1
go_dir=${2:-$here/../../target/go}
config=${3:-$here/config.yaml}
hooks=$go_dir/webhooks/kueue/webhooks.yaml
crds=$go_dir/webhooks/kueue/crds.yaml
for f in "$hooks" "$crds"; do
	if [ ! -f "$f" ]; then
		echo "webhook.sh: $f is missing: run \`bash schedulers/build-go.sh ${2:+$2 }kueue-manager\` first" >&2
		exit 1
	fi
done
[ -f "$config" ] || {
	echo "webhook.sh: no Kueue configuration at $config" >&2
	exit 1
}
command -v python3 >/dev/null || {
	echo "webhook.sh: python3 is needed (to pick a free port)" >&2
	exit 1
}
service=kueue-webhook-service
namespace=kueue-system
mkdir -p "$dir/certs"
dir=$(cd "$dir" && pwd)

# A free port on the loopback, now.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# The certificates' management on, the port, the certificates' directory.
awk -v port="$port" -v certs="$dir/certs" '
	/^internalCertManagement:/ { section = "cert"; print; next }
	/^webhook:/ { section = "webhook"; print; next }
	/^[^ #]/ { section = "" }
	section == "cert" && /^  enable:/ { print "  enable: true"; cert++; next }
	section == "webhook" && /^  port:/ { print "  port: " port; p++; next }
	section == "webhook" && /^  certDir:/ { print "  certDir: " certs; d++; next }
	{ print }
	END { if (cert != 1 || p != 1 || d != 1) exit 1 }' "$config" >"$dir/config.yaml" || {
	echo "webhook.sh: $config needs internalCertManagement.enable, webhook.port and webhook.certDir lines to set" >&2
	exit 1
}

{
	cat "$crds"
	cat <<EOF2
---
apiVersion: v1
kind: Namespace
metadata:
  name: $namespace
---
apiVersion: v1
kind: Secret
metadata:
  name: kueue-webhook-server-cert
  namespace: $namespace
---
EOF2
	loopback_service "$namespace" "$service" "$port"
	cat "$hooks"
} >"$dir/webhook.yaml"
echo "webhook.sh: Kueue's webhooks on 127.0.0.1:$port -> $dir (--crds $dir/webhook.yaml --mount-secret $namespace/kueue-webhook-server-cert=$dir/certs, the manager's --config $dir/config.yaml)" >&2
