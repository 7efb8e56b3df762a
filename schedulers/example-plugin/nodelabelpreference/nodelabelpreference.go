// Package nodelabelpreference is an example out-of-tree Score plugin for the
// upstream kube-scheduler: it prefers nodes whose label Key has one of the
// configured Values, earlier values more than later ones.
//
// Score gives a node len(Values)-i when its label Key equals Values[i] and 0
// when the label is absent or has another value. NormalizeScore then scales
// the scores of one scheduling cycle to [0, MaxNodeScore] (100), so that the
// best feasible node gets 100 whatever the number of values; the profile's
// weight for the plugin says how much that counts against the default
// plugins (NodeResourcesFit, TaintToleration, ...).
package nodelabelpreference

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// Name is the plugin's name in the registry and in the
// KubeSchedulerConfiguration (profiles[].plugins and pluginConfig).
const Name = "NodeLabelPreference"

// Args are the plugin's arguments, decoded from the `args` of its
// pluginConfig entry:
//
//	pluginConfig:
//	- name: NodeLabelPreference
//	  args:
//	    key: disktype
//	    values: [ssd]
type Args struct {
	// Key is the node label to look at, e.g. "disktype" or
	// "topology.kubernetes.io/zone".
	Key string `json:"key"`
	// Values are the preferred values of Key, most preferred first.
	Values []string `json:"values"`
}

// Validate checks Args the way the API server checks label selectors.
func (a *Args) Validate() error {
	if errs := validation.IsQualifiedName(a.Key); len(errs) > 0 {
		return fmt.Errorf("key %q: %s", a.Key, strings.Join(errs, "; "))
	}
	if len(a.Values) == 0 {
		return fmt.Errorf("values: at least one value is needed")
	}
	seen := make(map[string]bool, len(a.Values))
	for _, v := range a.Values {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("value %q: %s", v, strings.Join(errs, "; "))
		}
		if seen[v] {
			return fmt.Errorf("value %q: listed twice", v)
		}
		seen[v] = true
	}
	return nil
}

// NodeLabelPreference is the plugin. It keeps no state between calls.
type NodeLabelPreference struct {
	key  string
	rank map[string]int64 // value -> raw score, len(Values) for Values[0]
}

var (
	_ fwk.ScorePlugin     = &NodeLabelPreference{}
	_ fwk.ScoreExtensions = &NodeLabelPreference{}
	_ fwk.SignPlugin      = &NodeLabelPreference{}
)

// New is the plugin factory given to app.WithPlugin. obj is the `args` of the
// plugin's pluginConfig entry, as a *runtime.Unknown holding JSON (the
// scheduler converts the YAML file), or nil without one.
func New(_ context.Context, obj runtime.Object, _ fwk.Handle) (fwk.Plugin, error) {
	var args Args
	if err := frameworkruntime.DecodeInto(obj, &args); err != nil {
		return nil, fmt.Errorf("%s: decoding args: %w", Name, err)
	}
	return NewFromArgs(args)
}

// NewFromArgs builds the plugin from already decoded arguments.
func NewFromArgs(args Args) (*NodeLabelPreference, error) {
	if err := args.Validate(); err != nil {
		return nil, fmt.Errorf("%s: invalid args: %w", Name, err)
	}
	rank := make(map[string]int64, len(args.Values))
	for i, v := range args.Values {
		rank[v] = int64(len(args.Values) - i)
	}
	return &NodeLabelPreference{key: args.Key, rank: rank}, nil
}

// Name implements fwk.Plugin.
func (pl *NodeLabelPreference) Name() string { return Name }

// Score implements fwk.ScorePlugin: the raw rank of the node's label value.
func (pl *NodeLabelPreference) Score(_ context.Context, _ fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	node := nodeInfo.Node()
	if node == nil {
		return 0, fwk.NewStatus(fwk.Error, "node not found")
	}
	v, ok := node.Labels[pl.key]
	if !ok {
		return 0, nil
	}
	return pl.rank[v], nil
}

// SignPod implements fwk.SignPlugin (KEP-5598, opportunistic batching, on by
// default since 1.35): it names what of the pod the plugin's result depends
// on, so that pods with equal signatures can reuse a scheduling result.
// Score reads only the node, so there is nothing to add. A plugin that does
// not implement SignPlugin turns batching off for its whole profile (the
// scheduler logs "Disabling signatures for profile"), which would make the
// comparison with the default profile unfair; a plugin that reads the pod
// returns the fields it reads (see the keys in k8s.io/kube-scheduler/framework
// signers.go), or fwk.Unschedulable to opt a pod out.
func (pl *NodeLabelPreference) SignPod(_ context.Context, _ *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return nil, nil
}

// ScoreExtensions implements fwk.ScorePlugin.
func (pl *NodeLabelPreference) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore implements fwk.ScoreExtensions: scales the cycle's scores
// so that the highest becomes fwk.MaxNodeScore; all zero stays all zero.
func (pl *NodeLabelPreference) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	var highest int64
	for _, s := range scores {
		highest = max(highest, s.Score)
	}
	if highest == 0 {
		return nil
	}
	for i := range scores {
		scores[i].Score = scores[i].Score * fwk.MaxNodeScore / highest
	}
	return nil
}
