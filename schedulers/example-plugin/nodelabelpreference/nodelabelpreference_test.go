package nodelabelpreference

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

func nodeInfo(name string, labels map[string]string) fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
	return ni
}

// The args as the scheduler hands them over: the pluginConfig entry's
// `args`, converted from YAML to JSON, in a runtime.Unknown.
func rawArgs(json string) runtime.Object {
	return &runtime.Unknown{Raw: []byte(json), ContentType: runtime.ContentTypeJSON}
}

func newPlugin(t *testing.T, json string) *NodeLabelPreference {
	t.Helper()
	p, err := New(context.Background(), rawArgs(json), nil)
	if err != nil {
		t.Fatalf("New(%s): %v", json, err)
	}
	return p.(*NodeLabelPreference)
}

func TestScoreAndNormalize(t *testing.T) {
	ctx := context.Background()
	state := framework.NewCycleState()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job-1"}}
	pl := newPlugin(t, `{"key":"topology.kubernetes.io/zone","values":["zone-a","zone-b","zone-c"]}`)
	if pl.Name() != "NodeLabelPreference" {
		t.Fatalf("Name() = %q", pl.Name())
	}

	nodes := []struct {
		name   string
		labels map[string]string
		raw    int64 // Score
		norm   int64 // after NormalizeScore
	}{
		{"node-a", map[string]string{"topology.kubernetes.io/zone": "zone-a"}, 3, 100},
		{"node-b", map[string]string{"topology.kubernetes.io/zone": "zone-b"}, 2, 66},
		{"node-c", map[string]string{"topology.kubernetes.io/zone": "zone-c"}, 1, 33},
		{"node-d", map[string]string{"topology.kubernetes.io/zone": "zone-d"}, 0, 0},
		{"node-x", map[string]string{"disktype": "zone-a"}, 0, 0},
		{"node-none", nil, 0, 0},
	}
	var scores fwk.NodeScoreList
	for _, n := range nodes {
		s, status := pl.Score(ctx, state, pod, nodeInfo(n.name, n.labels))
		if !status.IsSuccess() {
			t.Fatalf("Score(%s): %v", n.name, status.AsError())
		}
		if s != n.raw {
			t.Errorf("Score(%s) = %d, want %d", n.name, s, n.raw)
		}
		scores = append(scores, fwk.NodeScore{Name: n.name, Score: s})
	}
	if status := pl.ScoreExtensions().NormalizeScore(ctx, state, pod, scores); !status.IsSuccess() {
		t.Fatalf("NormalizeScore: %v", status.AsError())
	}
	for i, n := range nodes {
		if scores[i].Name != n.name || scores[i].Score != n.norm {
			t.Errorf("normalized %s = %d, want %d", scores[i].Name, scores[i].Score, n.norm)
		}
		if scores[i].Score < fwk.MinNodeScore || scores[i].Score > fwk.MaxNodeScore {
			t.Errorf("normalized %s = %d, out of [%d, %d]", n.name, scores[i].Score, fwk.MinNodeScore, fwk.MaxNodeScore)
		}
	}
}

func TestNormalizeBestFeasibleGetsMax(t *testing.T) {
	// Only less preferred nodes are feasible: the best of them gets 100.
	pl := newPlugin(t, `{"key":"disktype","values":["nvme","ssd"]}`)
	scores := fwk.NodeScoreList{{Name: "n1", Score: 1}, {Name: "n2", Score: 0}}
	pl.NormalizeScore(context.Background(), nil, nil, scores)
	if scores[0].Score != fwk.MaxNodeScore || scores[1].Score != 0 {
		t.Errorf("got %v, want [100 0]", scores)
	}
}

func TestNormalizeAllZero(t *testing.T) {
	pl := newPlugin(t, `{"key":"disktype","values":["ssd"]}`)
	scores := fwk.NodeScoreList{{Name: "n1"}, {Name: "n2"}}
	if status := pl.NormalizeScore(context.Background(), nil, nil, scores); !status.IsSuccess() {
		t.Fatal(status.AsError())
	}
	for _, s := range scores {
		if s.Score != 0 {
			t.Errorf("%s = %d, want 0", s.Name, s.Score)
		}
	}
	if status := pl.NormalizeScore(context.Background(), nil, nil, nil); !status.IsSuccess() {
		t.Fatal(status.AsError())
	}
}

func TestScoreWithoutNode(t *testing.T) {
	pl := newPlugin(t, `{"key":"disktype","values":["ssd"]}`)
	if _, status := pl.Score(context.Background(), nil, nil, framework.NewNodeInfo()); status.IsSuccess() {
		t.Error("Score on a NodeInfo without a node succeeded")
	}
}

func TestSignPod(t *testing.T) {
	pl := newPlugin(t, `{"key":"disktype","values":["ssd"]}`)
	fragments, status := pl.SignPod(context.Background(), &v1.Pod{})
	if !status.IsSuccess() || len(fragments) != 0 {
		t.Errorf("SignPod = %v, %v; want no fragments, success", fragments, status)
	}
}

func TestYAMLArgs(t *testing.T) {
	obj := &runtime.Unknown{Raw: []byte("key: disktype\nvalues:\n- ssd\n"), ContentType: runtime.ContentTypeYAML}
	p, err := New(context.Background(), obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.(*NodeLabelPreference).rank["ssd"]; got != 1 {
		t.Errorf("rank[ssd] = %d, want 1", got)
	}
}

func TestInvalidArgs(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{``, "key"}, // no pluginConfig entry: nil args
		{`{"values":["ssd"]}`, "key"},
		{`{"key":"disktype"}`, "at least one value"},
		{`{"key":"disk type","values":["ssd"]}`, "key"},
		{`{"key":"disktype","values":["s s d"]}`, "value"},
		{`{"key":"disktype","values":["ssd","ssd"]}`, "twice"},
		{`{"key":`, "decoding"},
	} {
		var obj runtime.Object
		if tc.args != "" {
			obj = rawArgs(tc.args)
		}
		_, err := New(context.Background(), obj, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%s): error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}
