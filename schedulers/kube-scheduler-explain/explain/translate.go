package explain

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	config "k8s.io/kubernetes/pkg/scheduler/apis/config"
	frameworkplugins "k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// translate returns the profiles with every in-tree plugin renamed to its
// wrapper (at every extension point, enabled or disabled, and in the
// plugins' arguments), and each profile's score weights by wrapper name
// (a score plugin's weight is its entry's under Score, else under
// MultiPoint, 0 meaning 1: what the framework computes).
func translate(profiles []config.KubeSchedulerProfile, inTree map[string]bool) ([]config.KubeSchedulerProfile, map[string]map[string]int64) {
	out := make([]config.KubeSchedulerProfile, len(profiles))
	weights := map[string]map[string]int64{}
	rename := func(n string) string {
		if inTree[n] {
			return n + Suffix
		}
		return n
	}
	for i := range profiles {
		p := profiles[i].DeepCopy()
		w := map[string]int64{}
		if p.Plugins != nil {
			pl := p.Plugins
			for _, set := range []*config.PluginSet{&pl.PreEnqueue, &pl.QueueSort, &pl.PreFilter, &pl.Filter,
				&pl.PostFilter, &pl.PreScore, &pl.Score, &pl.Reserve, &pl.Permit, &pl.PreBind, &pl.Bind,
				&pl.PostBind, &pl.MultiPoint} {
				for j := range set.Enabled {
					set.Enabled[j].Name = rename(set.Enabled[j].Name)
				}
				for j := range set.Disabled {
					set.Disabled[j].Name = rename(set.Disabled[j].Name)
				}
			}
			for _, e := range append(append([]config.Plugin{}, pl.Score.Enabled...), pl.MultiPoint.Enabled...) {
				if _, ok := w[e.Name]; ok {
					continue
				}
				w[e.Name] = int64(e.Weight)
				if e.Weight == 0 {
					w[e.Name] = 1
				}
			}
		}
		for j := range p.PluginConfig {
			p.PluginConfig[j].Name = rename(p.PluginConfig[j].Name)
		}
		weights[p.SchedulerName] = w
		out[i] = *p
	}
	return out, weights
}

// registry: a wrapper for each in-tree plugin, under its wrapper name,
// building the in-tree plugin with the same arguments and handle.
func registry(rec *recorder) (frameworkruntime.Registry, map[string]bool) {
	inTree := frameworkplugins.NewInTreeRegistry()
	names := map[string]bool{}
	out := frameworkruntime.Registry{}
	for name, factory := range inTree {
		name, factory := name, factory
		names[name] = true
		out[name+Suffix] = func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			p, err := factory(ctx, args, h)
			if err != nil {
				return nil, err
			}
			return wrap(&wrapped{name: name + Suffix, plugin: name, orig: p, h: h, rec: rec})
		}
	}
	return out, names
}
