// The upstream kube-scheduler (the version pinned in go.mod) with one more
// plugin in its registry: NodeLabelPreference. Enable it in a profile of a
// KubeSchedulerConfiguration (see config.yaml); a researcher's own plugin is
// registered the same way, with one more app.WithPlugin.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"batkube.dev/example-plugin/nodelabelpreference"
)

func main() {
	cmd := app.NewSchedulerCommand(
		app.WithPlugin(nodelabelpreference.Name, nodelabelpreference.New),
	)
	os.Exit(cli.Run(cmd))
}
