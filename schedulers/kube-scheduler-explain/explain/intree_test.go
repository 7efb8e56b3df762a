package explain

import (
	"sort"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"
	frameworkplugins "k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/gangscheduling"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/imagelocality"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodedeclaredfeatures"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodename"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeports"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeunschedulable"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/schedulinggates"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/volumebinding"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/volumerestrictions"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/volumezone"
)

// The types the in-tree registry's factories return, by registry name.
var inTreeTypes = map[string]fwk.Plugin{
	dynamicresources.Name:                (*dynamicresources.DynamicResources)(nil),
	imagelocality.Name:                   (*imagelocality.ImageLocality)(nil),
	tainttoleration.Name:                 (*tainttoleration.TaintToleration)(nil),
	nodename.Name:                        (*nodename.NodeName)(nil),
	nodeports.Name:                       (*nodeports.NodePorts)(nil),
	nodeaffinity.Name:                    (*nodeaffinity.NodeAffinity)(nil),
	nodedeclaredfeatures.Name:            (*nodedeclaredfeatures.NodeDeclaredFeatures)(nil),
	podtopologyspread.Name:               (*podtopologyspread.PodTopologySpread)(nil),
	nodeunschedulable.Name:               (*nodeunschedulable.NodeUnschedulable)(nil),
	noderesources.Name:                   (*noderesources.Fit)(nil),
	noderesources.BalancedAllocationName: (*noderesources.BalancedAllocation)(nil),
	volumebinding.Name:                   (*volumebinding.VolumeBinding)(nil),
	volumerestrictions.Name:              (*volumerestrictions.VolumeRestrictions)(nil),
	volumezone.Name:                      (*volumezone.VolumeZone)(nil),
	nodevolumelimits.CSIName:             (*nodevolumelimits.CSILimits)(nil),
	interpodaffinity.Name:                (*interpodaffinity.InterPodAffinity)(nil),
	queuesort.Name:                       (*queuesort.PrioritySort)(nil),
	defaultbinder.Name:                   (*defaultbinder.DefaultBinder)(nil),
	defaultpreemption.Name:               (*defaultpreemption.DefaultPreemption)(nil),
	schedulinggates.Name:                 (*schedulinggates.SchedulingGates)(nil),
	gangscheduling.Name:                  (*gangscheduling.GangScheduling)(nil),
}

func TestEveryInTreePluginHasAWrapperOfItsInterfaces(t *testing.T) {
	reg := frameworkplugins.NewInTreeRegistry()
	names := make([]string, 0, len(reg))
	for n := range reg {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p, ok := inTreeTypes[n]
		if !ok {
			t.Errorf("in-tree plugin %s is not listed in inTreeTypes", n)
			continue
		}
		c := capsOf(p)
		mk, ok := combos[c]
		if !ok {
			t.Errorf("%s: no wrapper type for %v (%d)", n, c, c)
			continue
		}
		w := mk(&wrapped{name: n + Suffix, plugin: n})
		if got := capsOf(w); got != c {
			t.Errorf("%s: wrapper implements %v, the plugin %v", n, got, c)
		}
	}
	if len(inTreeTypes) != len(reg) {
		t.Errorf("inTreeTypes lists %d plugins, the registry has %d", len(inTreeTypes), len(reg))
	}
}
