// The upstream kube-scheduler (the version pinned in go.mod). With
// BATKUBE_EXPLAIN=1 in its environment (`batkube run --explain` sets it),
// its in-tree plugins are wrapped to record what each returns, and every
// scheduling attempt is written on its pod in the annotations of the
// kube-scheduler-simulator (package explain, README.md); without it, this
// is upstream's main, nothing wrapped.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json, as upstream
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"batkube.dev/kube-scheduler-explain/explain"
)

func main() {
	if os.Getenv("BATKUBE_EXPLAIN") == "1" {
		os.Exit(cli.Run(explain.NewCommand()))
	}
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
