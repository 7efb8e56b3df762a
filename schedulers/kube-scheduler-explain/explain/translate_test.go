package explain

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	config "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

func TestProfilesNameTheWrappersAndKeepTheWeights(t *testing.T) {
	inTree := map[string]bool{"NodeResourcesFit": true, "ImageLocality": true, "PrioritySort": true}
	in := []config.KubeSchedulerProfile{{
		SchedulerName: "default-scheduler",
		Plugins: &config.Plugins{
			QueueSort:  config.PluginSet{Enabled: []config.Plugin{{Name: "PrioritySort"}}},
			Score:      config.PluginSet{Enabled: []config.Plugin{{Name: "ImageLocality", Weight: 3}}, Disabled: []config.Plugin{{Name: "*"}}},
			MultiPoint: config.PluginSet{Enabled: []config.Plugin{{Name: "NodeResourcesFit"}, {Name: "ImageLocality", Weight: 1}, {Name: "Mine", Weight: 2}}},
		},
		PluginConfig: []config.PluginConfig{{Name: "NodeResourcesFit", Args: &runtime.Unknown{}}, {Name: "Mine"}},
	}}
	out, weights := translate(in, inTree)
	p := out[0].Plugins
	if got := p.QueueSort.Enabled[0].Name; got != "PrioritySortWrapped" {
		t.Errorf("queue sort: %s", got)
	}
	if got := p.Score.Disabled[0].Name; got != "*" {
		t.Errorf("disabled *: %s", got)
	}
	if got := []string{p.MultiPoint.Enabled[0].Name, p.MultiPoint.Enabled[2].Name}; got[0] != "NodeResourcesFitWrapped" || got[1] != "Mine" {
		t.Errorf("multipoint: %v", got)
	}
	if out[0].PluginConfig[0].Name != "NodeResourcesFitWrapped" || out[0].PluginConfig[1].Name != "Mine" {
		t.Errorf("plugin config: %v", out[0].PluginConfig)
	}
	// Score's weight first, MultiPoint's otherwise, 0 meaning 1.
	w := weights["default-scheduler"]
	if w["ImageLocalityWrapped"] != 3 || w["NodeResourcesFitWrapped"] != 1 || w["Mine"] != 2 {
		t.Errorf("weights: %v", w)
	}
	// The input is not changed.
	if in[0].Plugins.QueueSort.Enabled[0].Name != "PrioritySort" || in[0].PluginConfig[0].Name != "NodeResourcesFit" {
		t.Errorf("input changed: %+v", in[0])
	}
}

func TestRecordAnnotationsInTheSimulatorsLayout(t *testing.T) {
	r := newRecord(2)
	r.filterResult.set("node-10", "NodeResourcesFit", "Insufficient cpu")
	r.filterResult.set("node-2", "NodeResourcesFit", passed)
	r.filterResult.set("node-1", "NodeUnschedulable", passed)
	r.score("node-2", "ImageLocality", 7, 3)
	r.score("node-2", "NodeResourcesFit", 40, 1)
	r.selected = "node-2"
	a := r.annotations("DefaultBinder", success, "")
	want := map[string]string{
		keyFilter:       `{"node-1":{"NodeUnschedulable":"passed"},"node-10":{"NodeResourcesFit":"Insufficient cpu"},"node-2":{"NodeResourcesFit":"passed"}}`,
		keyScore:        `{"node-2":{"ImageLocality":"7","NodeResourcesFit":"40"}}`,
		keyFinalScore:   `{"node-2":{"ImageLocality":"21","NodeResourcesFit":"40"}}`,
		keyBind:         `{"DefaultBinder":"success"}`,
		keySelectedNode: "node-2",
		keyAttempt:      "2",
		keyMessage:      "",
		keyPostFilter:   `{}`,
		keyPermit:       `{}`,
	}
	for k, v := range want {
		if a[k] != v {
			t.Errorf("%s = %s, want %s", k, a[k], v)
		}
	}
	if len(a) != 15 {
		t.Errorf("%d annotations", len(a))
	}
}
