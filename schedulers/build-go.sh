#!/usr/bin/env bash
# Builds the Go schedulers from their modules (see schedulers/README.md):
#   kube-scheduler               the upstream kube-scheduler (schedulers/kube-scheduler)
#   kube-scheduler-with-plugin   the same plus NodeLabelPreference (schedulers/example-plugin)
#   kube-scheduler-explain       the same, recording each plugin's results on the pods
#                                when BATKUBE_EXPLAIN=1 (schedulers/kube-scheduler-explain)
#   kube-scheduler-coscheduling  scheduler-plugins' kube-scheduler with Coscheduling
#                                (schedulers/coscheduling); also copies its CRDs
#                                (PodGroup, ElasticQuota) from the module cache
#                                into OUT_DIR/crds/coscheduling/
#   vc-scheduler                 Volcano's scheduler, unmodified (schedulers/volcano:
#                                volcano.sh/volcano/cmd/scheduler); also copies
#                                Volcano's CRDs into OUT_DIR/crds/volcano/
#   vc-controller-manager        Volcano's controller manager, unmodified
#                                (volcano.sh/volcano/cmd/controller-manager); same CRDs
#   vc-webhook-manager           Volcano's admission webhook server, unmodified
#                                (volcano.sh/volcano/cmd/webhook-manager); same CRDs,
#                                and its webhook configurations (from the module's
#                                installer manifest) into OUT_DIR/webhooks/volcano/
#   kube-controller-manager      the upstream kube-controller-manager
#                                (schedulers/kube-controller-manager)
#   kueue-manager                Kueue's controller manager (sigs.k8s.io/kueue/cmd/kueue,
#                                schedulers/kueue); also copies Kueue's CRDs from the
#                                module cache into OUT_DIR/crds/kueue/, and writes, as
#                                `kubectl kustomize` renders the module's config/default,
#                                its webhook configurations and its CRDs with their
#                                conversion webhooks into OUT_DIR/webhooks/kueue/
#   jobset-manager               JobSet's controller manager (sigs.k8s.io/jobset, its root
#                                main package, schedulers/jobset); also copies JobSet's CRD
#                                into OUT_DIR/crds/jobset/ and its webhook configurations
#                                (rendered by `kubectl kustomize` from the module's
#                                config/default) into OUT_DIR/webhooks/jobset/
#   yunikorn-scheduler           Apache YuniKorn's scheduler, unmodified (schedulers/yunikorn:
#                                github.com/apache/yunikorn-k8shim/pkg/cmd/shim, the k8shim
#                                with yunikorn-core); YuniKorn has no CRDs
#   kube-apiserver               the real API server, unmodified (apiserver/:
#                                k8s.io/kubernetes/cmd/kube-apiserver), for fakeapi's
#                                differential harness; only when named
#   etcd                         its store (apiserver/: go.etcd.io/etcd/server/v3);
#                                only when named
#   apidiff-informer             a client-go program doing what informers do, which
#                                fakeapi's differential harness records against
#                                kube-apiserver (fakeapi/tests/differential/clients/
#                                informer); only when named
#   crds-volcano, crds-kueue,    only the CRDs the programs above copy (no build: the
#   crds-coscheduling            module is downloaded, its CRDs copied), for fakeapi's
#                                differential cases of those controllers; only when named
#   e2e.test                     Kubernetes' own end-to-end suite, unmodified
#                                (`go test -c k8s.io/kubernetes/test/e2e`, from
#                                fakeapi/conformance), which
#                                fakeapi/conformance/run.sh runs; only when named
#   e2e-apimachinery.test        the same suite's API-machinery tests alone, with its
#                                own setup (fakeapi/conformance/apimachinery), a
#                                fraction of its build: run.sh --ci; only when named
#
# Usage: schedulers/build-go.sh [--check] [OUT_DIR] [PROGRAM...]
#   PROGRAM   one of the names above (default: all of them but those built
#             only when named)
#   OUT_DIR   where the binaries go (default: target/go at the repository root)
#   --check   also run `go vet` and `go test` in the modules built (not for
#             Volcano's, which holds no Go code of ours)
#
# Static binaries (CGO_ENABLED=0), stripped unless DBG=1 (as Kubernetes'
# own build), version stamped from go.mod. Modules come from the module
# proxy into the module cache; GOMODCACHE, GOCACHE, GOFLAGS and GOPROXY
# from the environment are respected. Nothing is rebuilt when nothing
# changed (go's build cache): running it again takes seconds. Runs that
# share an OUT_DIR take turns (a lock on OUT_DIR/.build-go.lock), so that
# two test processes never compile the same module at once.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")

# program -> module directory (under schedulers/)
declare -A module=(
	[kube-scheduler]=kube-scheduler
	[kube-scheduler-with-plugin]=example-plugin
	[kube-scheduler-explain]=kube-scheduler-explain
	[kube-scheduler-coscheduling]=coscheduling
	[kube-controller-manager]=kube-controller-manager
	[vc-scheduler]=volcano
	[vc-controller-manager]=volcano
	[vc-webhook-manager]=volcano
	[kueue-manager]=kueue
	[jobset-manager]=jobset
	[kube-apiserver]=../apiserver
	[etcd]=../apiserver
	[apidiff-informer]=../fakeapi/tests/differential/clients/informer
	[e2e.test]=../fakeapi/conformance
	[e2e-apimachinery.test]=../fakeapi/conformance
	[yunikorn-scheduler]=yunikorn
	[crds-volcano]=volcano
	[crds-kueue]=kueue
	[crds-coscheduling]=coscheduling
)
# program -> the package built, when it is not the module's own main package
# (Volcano's programs are built from the published module as they are).
declare -A package=(
	[vc-scheduler]=volcano.sh/volcano/cmd/scheduler
	[vc-controller-manager]=volcano.sh/volcano/cmd/controller-manager
	[vc-webhook-manager]=volcano.sh/volcano/cmd/webhook-manager
	[kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
	[etcd]=go.etcd.io/etcd/server/v3
)
all=(kube-scheduler kube-scheduler-with-plugin kube-scheduler-explain kube-scheduler-coscheduling kube-controller-manager vc-scheduler vc-controller-manager vc-webhook-manager kueue-manager jobset-manager yunikorn-scheduler)
# Built only when named: the real API server and its store are not schedulers.
more=(kube-apiserver etcd apidiff-informer e2e.test e2e-apimachinery.test crds-volcano crds-kueue crds-coscheduling)

check=0
out=""
wanted=()
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
	*)
		if [[ -n "${module[$arg]+x}" ]]; then
			wanted+=("$arg")
		elif [[ $arg == kube-* || $arg == vc-* || $arg == kueue* || $arg == jobset* || $arg == yunikorn* || $arg == etcd* || $arg == apidiff* || $arg == e2e* || $arg == crds* ]]; then
			# A misspelt program, not a directory to create.
			echo "build-go.sh: unknown program $arg (${all[*]} ${more[*]})" >&2
			exit 2
		elif [[ -z "$out" ]]; then
			out=$arg
		else
			echo "build-go.sh: $arg is not a program (${all[*]} ${more[*]}) and OUT_DIR is already $out" >&2
			exit 2
		fi
		;;
	esac
done
if [[ ${#wanted[@]} == 0 ]]; then
	wanted=("${all[@]}")
fi
out=${out:-$root/target/go}
mkdir -p "$out"
out=$(cd "$out" && pwd)

command -v go >/dev/null || {
	echo "build-go.sh: go not found (Go 1.25 or newer is needed)" >&2
	exit 1
}
export CGO_ENABLED=0

# One build at a time per OUT_DIR: a second run waits, then finds
# everything up to date in go's build cache. The lock goes with the
# process (fd 9), however it ends.
if command -v flock >/dev/null; then
	exec 9>"$out/.build-go.lock"
	if ! flock -n 9; then
		echo "build-go.sh: waiting for another build into $out" >&2
		flock 9
	fi
fi

# The version a module resolves for a path (its replacement's if replaced).
modversion() {
	go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' "$1"
}

# Copies the CRDs scheduler-plugins publishes in its module (the generated
# config/crd/bases/) into $out/crds/coscheduling/, for `batkube run --crds`.
coscheduling_crds() {
	local dir dest
	dir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/scheduler-plugins)
	dest="$out/crds/coscheduling"
	mkdir -p "$dest"
	for crd in scheduling.x-k8s.io_podgroups.yaml scheduling.x-k8s.io_elasticquotas.yaml; do
		if [[ ! -f "$dir/config/crd/bases/$crd" ]]; then
			echo "build-go.sh: $crd is not in $dir/config/crd/bases (has the module's layout changed?)" >&2
			exit 1
		fi
		# install(1) replaces the module cache's read-only mode.
		install -m 0644 "$dir/config/crd/bases/$crd" "$dest/$crd"
	done
	echo "build-go.sh: CRDs (sigs.k8s.io/scheduler-plugins $(modversion sigs.k8s.io/scheduler-plugins)) -> $dest" >&2
}

# Copies Volcano's CRDs (the generated apiextensions.k8s.io/v1 ones of
# config/crd/volcano/bases/ and config/crd/jobflow/bases/) from the module
# cache into $out/crds/volcano/: Queue and PodGroup (scheduling.volcano.sh),
# Job (batch.volcano.sh), Command (bus.volcano.sh), Numatopology
# (nodeinfo.volcano.sh), JobFlow and JobTemplate (flow.volcano.sh). Each is
# listed and watched by vc-scheduler or by a controller of
# vc-controller-manager's default set, which wait for their caches to sync.
volcano_crds() {
	local mod dest
	mod=$(go list -m -f '{{.Dir}}' volcano.sh/volcano)
	dest="$out/crds/volcano"
	mkdir -p "$dest"
	for crd in volcano/bases/scheduling.volcano.sh_queues.yaml volcano/bases/scheduling.volcano.sh_podgroups.yaml \
		volcano/bases/batch.volcano.sh_jobs.yaml volcano/bases/bus.volcano.sh_commands.yaml \
		volcano/bases/nodeinfo.volcano.sh_numatopologies.yaml \
		jobflow/bases/flow.volcano.sh_jobflows.yaml jobflow/bases/flow.volcano.sh_jobtemplates.yaml; do
		if [[ ! -f "$mod/config/crd/$crd" ]]; then
			echo "build-go.sh: $crd is not in $mod/config/crd (has the module's layout changed?)" >&2
			exit 1
		fi
		install -m 0644 "$mod/config/crd/$crd" "$dest/${crd##*/}"
	done
	echo "build-go.sh: CRDs (volcano.sh/volcano $(modversion volcano.sh/volcano)) -> $dest" >&2
}

# Copies Volcano's admission webhook configurations (the Mutating- and
# ValidatingWebhookConfigurations of the rendered installer manifest,
# installer/volcano-development.yaml, which point at the Service
# volcano-system/volcano-admission-service) into
# $out/webhooks/volcano/webhooks.yaml: vc-webhook-manager only fills in their
# caBundle, it expects them installed.
volcano_webhooks() {
	local mod src dest
	mod=$(go list -m -f '{{.Dir}}' volcano.sh/volcano)
	src="$mod/installer/volcano-development.yaml"
	dest="$out/webhooks/volcano"
	if [[ ! -f "$src" ]]; then
		echo "build-go.sh: $src is missing (has the module's layout changed?)" >&2
		exit 1
	fi
	mkdir -p "$dest"
	awk 'function flush() { if (doc ~ /\nkind: (Mutating|Validating)WebhookConfiguration\n/) { printf "---%s", doc; n++ } doc = "\n" }
		BEGIN { doc = "\n" }
		/^---/ { flush(); next }
		{ doc = doc $0 "\n" }
		END { flush(); if (n == 0) exit 1 }' "$src" >"$dest/webhooks.yaml" || {
		echo "build-go.sh: no webhook configurations in $src (has the module's layout changed?)" >&2
		exit 1
	}
	echo "build-go.sh: webhook configurations (volcano.sh/volcano $(modversion volcano.sh/volcano)) -> $dest" >&2
}

# Copies Kueue's CRDs (the generated config/components/crd/bases/, without
# the kustomize patches that add conversion webhooks: batkube serves every
# version with the `None` conversion) into $out/crds/kueue/.
kueue_crds() {
	local dir dest n=0
	dir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)/config/components/crd/bases
	dest="$out/crds/kueue"
	if ! compgen -G "$dir/kueue.x-k8s.io_*.yaml" >/dev/null; then
		echo "build-go.sh: no kueue.x-k8s.io_*.yaml in $dir (has the module's layout changed?)" >&2
		exit 1
	fi
	rm -rf "$dest"
	mkdir -p "$dest"
	for crd in "$dir"/kueue.x-k8s.io_*.yaml; do
		install -m 0644 "$crd" "$dest/"
		n=$((n + 1))
	done
	echo "build-go.sh: $n CRDs (sigs.k8s.io/kueue $(modversion sigs.k8s.io/kueue)) -> $dest" >&2
}

# Kueue's admission webhook configurations (the Mutating- and
# ValidatingWebhookConfiguration of config/default as `kubectl kustomize`
# renders it: names prefixed `kueue-`, the Service
# kueue-system/kueue-webhook-service, no caBundle: Kueue's own cert
# controller patches it in) into $out/webhooks/kueue/webhooks.yaml, and its
# CRDs as config/default renders them (five of them with the conversion
# webhook whose caBundle that controller also patches, and waits for) into
# $out/webhooks/kueue/crds.yaml: what schedulers/kueue/webhook.sh prepares
# a run with Kueue's webhook server from.
kueue_webhooks() {
	local mod dest rendered
	mod=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
	command -v kubectl >/dev/null || {
		echo "build-go.sh: kubectl is needed to render Kueue's webhook configurations (kubectl kustomize $mod/config/default)" >&2
		exit 1
	}
	dest="$out/webhooks/kueue"
	mkdir -p "$dest"
	rendered=$(mktemp "${TMPDIR:-/tmp}/kueue-default.XXXXXX")
	if ! kubectl kustomize "$mod/config/default" >"$rendered" 2>/dev/null; then
		rm -f "$rendered"
		echo "build-go.sh: kubectl kustomize $mod/config/default failed" >&2
		exit 1
	fi
	# $1: the kinds kept (an awk regular expression), $2: how many.
	pick() {
		awk -v kinds="$1" -v want="$2" '
			function flush() { if (doc ~ ("\nkind: (" kinds ")\n")) { printf "---%s", doc; n++ } doc = "\n" }
			BEGIN { doc = "\n" }
			/^---/ { flush(); next }
			{ doc = doc $0 "\n" }
			END { flush(); if (n != want) exit 1 }' "$rendered"
	}
	pick 'MutatingWebhookConfiguration|ValidatingWebhookConfiguration' 2 >"$dest/webhooks.yaml" &&
		pick CustomResourceDefinition "$(find "$out/crds/kueue" -name '*.yaml' | wc -l)" >"$dest/crds.yaml" || {
		rm -f "$rendered"
		echo "build-go.sh: kubectl kustomize $mod/config/default gave other webhook configurations or CRDs than expected (has the module's layout changed?)" >&2
		exit 1
	}
	rm -f "$rendered"
	echo "build-go.sh: webhook configurations and CRDs with conversion webhooks (sigs.k8s.io/kueue $(modversion sigs.k8s.io/kueue)) -> $dest" >&2
}

# Kueue's controller manager: its own main package, built from the module
# cache (go.mod's `tool` line), stamped as Kueue's Makefile stamps it.
build_kueue() {
	local kver ldflags
	kver=$(modversion sigs.k8s.io/kueue)
	ldflags="-X sigs.k8s.io/kueue/pkg/version.GitVersion=$kver"
	ldflags+=" -X sigs.k8s.io/kueue/pkg/version.GitCommit=module-$kver"
	if [[ "${DBG:-0}" != 1 ]]; then
		ldflags+=" -s -w"
	fi
	echo "build-go.sh: kueue-manager (sigs.k8s.io/kueue $kver) -> $out/kueue-manager" >&2
	go build -trimpath -buildvcs=false -ldflags="$ldflags" -o "$out/kueue-manager" sigs.k8s.io/kueue/cmd/kueue
	kueue_crds
	kueue_webhooks
	if [[ $check == 1 ]]; then
		# Only the module's own packages: Kueue's tests are upstream's.
		go vet -trimpath sigs.k8s.io/kueue/cmd/kueue
	fi
}

# JobSet's CRD (the generated config/components/crd/bases/, without the
# kustomize patch that adds a conversion webhook: JobSet serves one version)
# into $out/crds/jobset/, and its webhook configurations into
# $out/webhooks/jobset/webhooks.yaml: the Mutating- and
# ValidatingWebhookConfiguration of config/default as `kubectl kustomize`
# renders it (names prefixed `jobset-`, the pod webhooks' objectSelector,
# the Service jobset-system/jobset-webhook-service), without a caBundle:
# schedulers/jobset/webhook.sh adds one for a run.
jobset_manifests() {
	local mod dest crd
	mod=$(go list -m -f '{{.Dir}}' sigs.k8s.io/jobset)
	crd=$mod/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml
	if [[ ! -f $crd ]]; then
		echo "build-go.sh: $crd is missing (has the module's layout changed?)" >&2
		exit 1
	fi
	dest="$out/crds/jobset"
	mkdir -p "$dest"
	install -m 0644 "$crd" "$dest/"
	echo "build-go.sh: CRD (sigs.k8s.io/jobset $(modversion sigs.k8s.io/jobset)) -> $dest" >&2
	command -v kubectl >/dev/null || {
		echo "build-go.sh: kubectl is needed to render JobSet's webhook configurations (kubectl kustomize $mod/config/default)" >&2
		exit 1
	}
	dest="$out/webhooks/jobset"
	mkdir -p "$dest"
	kubectl kustomize "$mod/config/default" 2>/dev/null | awk '
		function flush() { if (doc ~ /\nkind: (Mutating|Validating)WebhookConfiguration\n/) { printf "---%s", doc; n++ } doc = "\n" }
		BEGIN { doc = "\n" }
		/^---/ { flush(); next }
		{ doc = doc $0 "\n" }
		END { flush(); if (n != 2) exit 1 }' >"$dest/webhooks.yaml" || {
		echo "build-go.sh: kubectl kustomize $mod/config/default gave no two webhook configurations (has the module's layout changed?)" >&2
		exit 1
	}
	echo "build-go.sh: webhook configurations (sigs.k8s.io/jobset $(modversion sigs.k8s.io/jobset)) -> $dest" >&2
}

# JobSet's controller manager: the module's root main package, built from
# the module cache (go.mod's `tool` line), stamped as JobSet's Makefile
# stamps it (the release, and the commit the module proxy recorded).
build_jobset() {
	local jver jsha ldflags
	jver=$(modversion sigs.k8s.io/jobset)
	jsha=$(go mod download -json "sigs.k8s.io/jobset@$jver" | sed -n 's/^.*"Hash": *"\([0-9a-f]*\)".*$/\1/p' | head -n1)
	ldflags="-X sigs.k8s.io/jobset/pkg/version.GitVersion=$jver"
	ldflags+=" -X sigs.k8s.io/jobset/pkg/version.GitCommit=${jsha:-module-$jver}"
	if [[ "${DBG:-0}" != 1 ]]; then
		ldflags+=" -s -w"
	fi
	echo "build-go.sh: jobset-manager (sigs.k8s.io/jobset $jver) -> $out/jobset-manager" >&2
	go build -trimpath -buildvcs=false -ldflags="$ldflags" -o "$out/jobset-manager" sigs.k8s.io/jobset
	jobset_manifests
	if [[ $check == 1 ]]; then
		echo "build-go.sh: jobset-manager: nothing of ours to vet or test" >&2
	fi
}

# etcd, stamped as etcd's own build stamps it (the commit the module proxy
# recorded for the server module).
build_etcd() {
	local ever esha ldflags
	ever=$(modversion go.etcd.io/etcd/server/v3)
	esha=$(go mod download -json "go.etcd.io/etcd/server/v3@$ever" | sed -n 's/^.*"Hash": *"\([0-9a-f]*\)".*$/\1/p' | head -n1)
	ldflags="-X go.etcd.io/etcd/api/v3/version.GitSHA=${esha:-module-$ever}"
	if [[ "${DBG:-0}" != 1 ]]; then
		ldflags+=" -s -w"
	fi
	echo "build-go.sh: etcd (go.etcd.io/etcd/server/v3 $ever) -> $out/etcd" >&2
	go build -trimpath -buildvcs=false -ldflags="$ldflags" -o "$out/etcd" go.etcd.io/etcd/server/v3
	if [[ $check == 1 ]]; then
		echo "build-go.sh: etcd: nothing of ours to vet or test" >&2
	fi
}

# The differential harness's client-go program: ours, a module of its own
# (client-go, no k8s.io/kubernetes to stamp a version from).
build_informer() {
	local ldflags=""
	if [[ "${DBG:-0}" != 1 ]]; then
		ldflags="-s -w"
	fi
	echo "build-go.sh: apidiff-informer (k8s.io/client-go $(modversion k8s.io/client-go)) -> $out/apidiff-informer" >&2
	go build -trimpath -buildvcs=false -ldflags="$ldflags" -o "$out/apidiff-informer" .
	if [[ $check == 1 ]]; then
		go vet -trimpath ./...
	fi
}

# The -X flags that stamp a Kubernetes program with the release the
# current module pins (`--version`, the User-Agent; unstamped, upstream
# code says v0.0.0-master).
kube_ldflags() {
	local kver minor
	kver=$(modversion k8s.io/kubernetes)
	minor=${kver#v1.}
	minor=${minor%%.*}
	echo "-X k8s.io/component-base/version.gitVersion=$kver" \
		"-X k8s.io/component-base/version.gitMajor=1" \
		"-X k8s.io/component-base/version.gitMinor=$minor" \
		"-X k8s.io/component-base/version.gitTreeState=clean"
}

# Kubernetes' e2e suite: the test binary of k8s.io/kubernetes/test/e2e as
# Kubernetes' own build makes it (`go test -c`, stamped with the release as
# its programs are), from the module cache; fakeapi/conformance/go.mod
# holds the release and, in deps_test.go, the packages its tests import.
build_e2e() {
	local kver ldflags name=$1 pkg
	kver=$(modversion k8s.io/kubernetes)
	ldflags=$(kube_ldflags)
	if [[ "${DBG:-0}" != 1 ]]; then
		ldflags+=" -s -w"
	fi
	# The whole suite, or its API-machinery tests alone (our package
	# fakeapi/conformance/apimachinery: the suite's own setup, none of its
	# other areas).
	pkg=k8s.io/kubernetes/test/e2e
	[[ $name == e2e-apimachinery.test ]] && pkg=./apimachinery
	echo "build-go.sh: $name (k8s.io/kubernetes $kver) -> $out/$name" >&2
	go test -c -trimpath -buildvcs=false -ldflags="$ldflags" -o "$out/$name" "$pkg"
	if [[ $check == 1 ]]; then
		echo "build-go.sh: $name: nothing of ours to vet or test" >&2
	fi
}

# YuniKorn's scheduler: the k8shim's main package (its Makefile's
# `scheduler` target builds ./pkg/cmd/shim as yunikorn-scheduler), built
# from the module cache (go.mod's `tool` line), with the Makefile's flags
# (`-tags netgo`) and stamps: the release, and the commits of the core and
# the scheduler interface the proxy recorded for the versions go.mod pins.
build_yunikorn() {
	local shim=github.com/apache/yunikorn-k8shim core=github.com/apache/yunikorn-core
	local si=github.com/apache/yunikorn-scheduler-interface conf ver ldflags
	conf=$shim/pkg/conf
	ver=$(modversion $shim)
	ldflags="-X $conf.buildVersion=${ver#v} -X $conf.isPluginVersion=false"
	ldflags+=" -X $conf.goVersion=$(go env GOVERSION | sed 's/^go//') -X $conf.arch=$(go env GOARCH)"
	ldflags+=" -X $conf.shimSHA=$(commit_of $shim "$ver")"
	ldflags+=" -X $conf.coreSHA=$(commit_of $core "$(modversion $core)")"
	# (`go list -m` cannot tell the scheduler interface's version: it asks
	# the proxy for the record it refuses; go.mod has it.)
	ldflags+=" -X $conf.siSHA=$(commit_of $si "$(sed -n "s|^[[:space:]]*$si \(v[^ ]*\).*|\1|p" go.mod)")"
	if [[ "${DBG:-0}" != 1 ]]; then
		ldflags+=" -s -w"
	fi
	echo "build-go.sh: yunikorn-scheduler ($shim $ver, $core $(modversion $core)) -> $out/yunikorn-scheduler" >&2
	go build -trimpath -buildvcs=false -tags netgo -ldflags="$ldflags" -o "$out/yunikorn-scheduler" $shim/pkg/cmd/shim
	if [[ $check == 1 ]]; then
		echo "build-go.sh: yunikorn-scheduler: nothing of ours to vet or test" >&2
	fi
}

# The commit (12 hex digits, as YuniKorn's Makefile stamps) the module proxy
# recorded for a module version, or "unknown" (the proxy serves
# yunikorn-scheduler-interface v1.8.0-0's code but not its record).
commit_of() {
	local sha
	sha=$(go mod download -json "$1@$2" 2>/dev/null | sed -n 's/^.*"Hash": *"\([0-9a-f]*\)".*$/\1/p' | head -n1)
	if [[ -n $sha ]]; then echo "${sha:0:12}"; else echo unknown; fi
}

for bin in "${wanted[@]}"; do
	cd "$here/${module[$bin]}"
	if [[ $bin == kueue-manager ]]; then
		build_kueue
		continue
	fi
	if [[ $bin == jobset-manager ]]; then
		build_jobset
		continue
	fi
	if [[ $bin == etcd ]]; then
		build_etcd
		continue
	fi
	if [[ $bin == yunikorn-scheduler ]]; then
		build_yunikorn
		continue
	fi
	if [[ $bin == apidiff-informer ]]; then
		build_informer
		continue
	fi
	if [[ $bin == e2e.test || $bin == e2e-apimachinery.test ]]; then
		build_e2e "$bin"
		continue
	fi
	if [[ $bin == crds-* ]]; then
		# The module alone (not its dependencies), then its CRDs.
		case $bin in
		crds-volcano) go mod download volcano.sh/volcano && volcano_crds ;;
		crds-kueue) go mod download sigs.k8s.io/kueue && kueue_crds ;;
		crds-coscheduling) go mod download sigs.k8s.io/scheduler-plugins && coscheduling_crds ;;
		esac
		continue
	fi
	kver=$(modversion k8s.io/kubernetes)
	ldflags=$(kube_ldflags)
	if [[ $bin == vc-* ]]; then
		# Volcano stamps its own version package (as its Makefile does),
		# from the module's version and the commit the proxy recorded.
		vver=$(modversion volcano.sh/volcano)
		vsha=$(go mod download -json "volcano.sh/volcano@$vver" | sed -n 's/^.*"Hash": *"\([0-9a-f]*\)".*$/\1/p' | head -n1)
		ldflags+=" -X volcano.sh/volcano/pkg/version.Version=$vver"
		ldflags+=" -X volcano.sh/volcano/pkg/version.GitSHA=${vsha:-unknown}"
	fi
	if [[ "${DBG:-0}" != 1 ]]; then
		ldflags+=" -s -w"
	fi
	echo "build-go.sh: $bin (k8s.io/kubernetes $kver) -> $out/$bin" >&2
	go build -trimpath -buildvcs=false -ldflags="$ldflags" -o "$out/$bin" "${package[$bin]:-.}"
	if [[ $bin == kube-scheduler-coscheduling ]]; then
		coscheduling_crds
	fi
	if [[ $bin == vc-* ]]; then
		volcano_crds
	fi
	if [[ $bin == vc-webhook-manager ]]; then
		volcano_webhooks
	fi
	if [[ $check == 1 && -n "${package[$bin]+x}" ]]; then
		# Built from the published module as it is: no Go code of ours here.
		echo "build-go.sh: $bin: nothing of ours to vet or test" >&2
	elif [[ $check == 1 ]]; then
		# The build's flags, so that the build cache is shared.
		go vet -trimpath ./...
		go test -trimpath ./...
	fi
done
