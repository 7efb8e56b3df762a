#!/bin/sh
# Runs Kueue's controller manager, unmodified, with the certificates it
# insists on (see README.md, "Certificates"):
#
#   schedulers/kueue/run.sh KUEUE_MANAGER [ARG...]
#   e.g. --controller 'schedulers/kueue/run.sh target/go/kueue-manager --config schedulers/kueue/config.yaml --kubeconfig "$KUEUE_KUBECONFIG"'
#
# With internal certificate management off (config.yaml), Kueue's main
# reads a serving certificate from the fixed path /etc/kueue/metrics/certs
# (even with the metrics server off) and its webhook server one from
# webhook.certDir (/etc/kueue/webhook/certs in config.yaml); without them it
# exits. Nothing ever connects to either server, so any certificate will
# do: this makes a self-signed one and gives the program a private /etc
# (a tmpfs in a user and mount namespace of its own, which needs no
# privilege where unprivileged user namespaces are allowed) holding only
# the two certificates: the machine's /etc is left alone. If /etc/kueue
# already exists (certificates installed by hand), the program runs as it
# is. Every step execs the next: under batkube's seccomp shim the program
# is still the process the shim started (unshare and sh are wrappers).
set -eu
if [ $# -lt 1 ]; then
	echo "usage: run.sh KUEUE_MANAGER [ARG...]" >&2
	exit 2
fi
if [ -e /etc/kueue ]; then
	exec "$@"
fi
command -v openssl >/dev/null || {
	echo "run.sh: openssl is needed to make Kueue's certificates (or install them under /etc/kueue)" >&2
	exit 1
}
command -v unshare >/dev/null || {
	echo "run.sh: unshare (util-linux) is needed for a private /etc (or install certificates under /etc/kueue)" >&2
	exit 1
}
certs=$(mktemp -d "${TMPDIR:-/tmp}/kueue-certs.XXXXXX")
# The webhook server's port (config.yaml's webhook.port) is taken by
# whichever Kueue starts first: each run gets a copy of its --config, in
# its private /etc, with a port the kernel just handed out, so that
# simulations side by side (a sweep, tests) do not clash.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
total=$#
at=0
n=0
for a in "$@"; do
	n=$((n + 1))
	if [ "$a" = --config ] && [ $n -lt $total ]; then
		at=$((n + 1))
	fi
done
i=0
for b in "$@"; do
	i=$((i + 1))
	if [ $i -eq $at ]; then
		sed "s/^  port: [0-9][0-9]*\$/  port: $port/" "$b" >"$certs/config.yaml"
		set -- "$@" /etc/kueue/config.yaml
	else
		set -- "$@" "$b"
	fi
done
shift "$total"
if ! openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
	-days 36500 -subj /CN=kueue-webhook-service.kueue-system.svc \
	-keyout "$certs/tls.key" -out "$certs/tls.crt" 2>"$certs/openssl.err"; then
	cat "$certs/openssl.err" >&2
	rm -rf "$certs"
	exit 1
fi
# $0 of the inner shell is the certificates' directory, then the command.
exec unshare --user --map-root-user --mount sh -c '
	set -e
	mount -t tmpfs -o mode=0755,size=1m kueue-etc /etc
	mkdir -p /etc/kueue/metrics/certs /etc/kueue/webhook/certs
	cp "$0/tls.crt" "$0/tls.key" /etc/kueue/metrics/certs/
	cp "$0/tls.crt" "$0/tls.key" /etc/kueue/webhook/certs/
	if [ -f "$0/config.yaml" ]; then cp "$0/config.yaml" /etc/kueue/; fi
	rm -rf "$0"
	exec "$@"' "$certs" "$@"
