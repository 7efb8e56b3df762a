#!/usr/bin/env bash
# Builds the Go schedulers from their modules (see schedulers/README.md):
#   kube-scheduler              the upstream kube-scheduler (schedulers/kube-scheduler)
#   kube-scheduler-with-plugin  the same plus NodeLabelPreference (schedulers/example-plugin)
#
# Usage: schedulers/build-go.sh [--check] [OUT_DIR]
#   OUT_DIR   where the binaries go (default: target/go at the repository root)
#   --check   also run `go vet` and `go test` in both modules
#
# Static binaries (CGO_ENABLED=0), stripped unless DBG=1 (as Kubernetes'
# own build), version stamped from go.mod. Modules come from the module
# proxy into the module cache; GOMODCACHE, GOCACHE, GOFLAGS and GOPROXY
# from the environment are respected. Nothing is rebuilt when nothing
# changed (go's build cache): running it again takes seconds.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
check=0
out=""
for arg in "$@"; do
	case "$arg" in
	--check) check=1 ;;
	-h | --help)
		awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
		exit 0
		;;
	-*)
		echo "build-go.sh: unknown option $arg" >&2
		exit 2
		;;
	*) out=$arg ;;
	esac
done
out=${out:-$root/target/go}
mkdir -p "$out"
out=$(cd "$out" && pwd)

command -v go >/dev/null || {
	echo "build-go.sh: go not found (Go 1.25 or newer is needed)" >&2
	exit 1
}
export CGO_ENABLED=0

# module directory -> binary name
builds=(
	"kube-scheduler kube-scheduler"
	"example-plugin kube-scheduler-with-plugin"
)

for b in "${builds[@]}"; do
	read -r dir bin <<<"$b"
	cd "$here/$dir"
	# The Kubernetes version this module pins, for `--version` and the
	# User-Agent (unstamped, upstream code says v0.0.0-master).
	kver=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
	minor=${kver#v1.}
	minor=${minor%%.*}
	ldflags="-X k8s.io/component-base/version.gitVersion=$kver"
	ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
	ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor"
	ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
	if [[ "${DBG:-0}" != 1 ]]; then
		ldflags+=" -s -w"
	fi
	echo "build-go.sh: $bin (k8s.io/kubernetes $kver) -> $out/$bin" >&2
	go build -trimpath -buildvcs=false -ldflags="$ldflags" -o "$out/$bin" .
	if [[ $check == 1 ]]; then
		# The build's flags, so that the build cache is shared.
		go vet -trimpath ./...
		go test -trimpath ./...
	fi
done
