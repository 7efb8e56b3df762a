// The kube-scheduler of kubernetes-sigs/scheduler-plugins (the release
// pinned in go.mod) with the plugins that work from the scheduling.x-k8s.io
// CRDs in its registry: Coscheduling (gangs of pods, PodGroup) and
// CapacityScheduling (ElasticQuota). Registering a plugin only makes it
// available; a profile of a KubeSchedulerConfiguration enables it (see
// config.yaml). No code of ours beyond this file.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json, as upstream
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"sigs.k8s.io/scheduler-plugins/pkg/capacityscheduling"
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling"

	// Registers the plugins' argument types (CoschedulingArgs, ...) with
	// the scheduler's config scheme: without it, a pluginConfig entry for
	// Coscheduling in the config file does not decode.
	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"
)

func main() {
	cmd := app.NewSchedulerCommand(
		app.WithPlugin(coscheduling.Name, coscheduling.New),
		app.WithPlugin(capacityscheduling.Name, capacityscheduling.New),
	)
	os.Exit(cli.Run(cmd))
}
