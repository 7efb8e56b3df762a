// The upstream kube-controller-manager, built from the published
// k8s.io/kubernetes module at the version pinned in go.mod (the same as
// schedulers/kube-scheduler, so that the two share Go's build cache). No code
// of ours beyond this file, which is upstream's
// cmd/kube-controller-manager/controller-manager.go.
package main

import (
	"os"
	_ "time/tzdata" // for CronJob Time Zone support

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json, as upstream
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go's metrics, as upstream
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric, as upstream
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
