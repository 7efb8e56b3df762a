package explain

import (
	"context"
	"encoding/json"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	config "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

const defaultBinderName = "DefaultBinder"

// recorder: the process's attempt counts, score weights, and the client
// that writes failed attempts.
type recorder struct {
	mu       sync.Mutex
	attempts map[string]uint64 // pod -> attempts made
	// pod -> its last failed attempt written, but for the number: a failed
	// attempt the pod already shows is not written again.
	shown map[string]string
	// profile -> wrapper name -> weight, as the framework computes them.
	weights map[string]map[string]int64

	// profile -> its last PostFilter plugin
	lastPost map[string]string

	clientOnce sync.Once
	client     clientset.Interface
	clientErr  error
}

func newRecorder(weights map[string]map[string]int64) *recorder {
	return &recorder{attempts: map[string]uint64{}, shown: map[string]string{}, weights: weights, lastPost: map[string]string{}}
}

// cycle returns the record of the scheduling cycle that state belongs to,
// starting it (the pod's next attempt) at the cycle's first plugin call.
func (rc *recorder) cycle(state fwk.CycleState, p *v1.Pod) *record {
	if state == nil || p == nil {
		return nil
	}
	if d, err := state.Read(stateKey); err == nil {
		r, _ := d.(*record)
		return r
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	// Filters run on several nodes at once: the first one starts it.
	if d, err := state.Read(stateKey); err == nil {
		r, _ := d.(*record)
		return r
	}
	k := podKey(p)
	rc.attempts[k]++
	r := newRecord(rc.attempts[k])
	state.Write(stateKey, r)
	return r
}

// lastPostFilter: the name of the last PostFilter plugin of h's profile,
// as the framework lists them ("" when it cannot tell: each PostFilter
// wrapper then writes as if it were the last).
func (rc *recorder) lastPostFilter(h fwk.Handle) string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if n, ok := rc.lastPost[h.ProfileName()]; ok {
		return n
	}
	n := ""
	if l, ok := h.(interface{ ListPlugins() *config.Plugins }); ok {
		if pl := l.ListPlugins(); pl != nil && len(pl.PostFilter.Enabled) > 0 {
			n = pl.PostFilter.Enabled[len(pl.PostFilter.Enabled)-1].Name
		}
	}
	rc.lastPost[h.ProfileName()] = n
	return n
}

func (rc *recorder) weight(h fwk.Handle, name string) int64 {
	if w, ok := rc.weights[h.ProfileName()][name]; ok {
		return w
	}
	return 1
}

// patcher: a client of its own, not rate limited, so that writing the
// explanations takes nothing from the scheduler's request budget (its
// client waits beyond 50 requests/s, burst 100, on simulated time too).
func (rc *recorder) patcher(h fwk.Handle) (clientset.Interface, error) {
	rc.clientOnce.Do(func() {
		cfg := restclient.CopyConfig(h.KubeConfig())
		cfg.QPS = -1
		cfg.RateLimiter = nil
		cfg = restclient.AddUserAgent(cfg, "explain")
		rc.client, rc.clientErr = clientset.NewForConfig(cfg)
	})
	return rc.client, rc.clientErr
}

// failed writes a failed attempt on its pod, at the end of PostFilter
// (which runs for every attempt that PreFilter or Filter refused): one
// JSON merge patch of its annotations, the message being the one the
// scheduler is about to write in the PodScheduled condition. An attempt
// the pod already shows but for its number is not written again (as the
// scheduler does not write the same condition twice): a burst retries
// every waiting pod at each freed node, and writing each identical
// refusal doubled the wall time of a simulation.
func (rc *recorder) failed(ctx context.Context, h fwk.Handle, p *v1.Pod, r *record, statuses fwk.NodeToStatusReader, s *fwk.Status) {
	msg := fitMessage(h, p, r, statuses, s)
	anns := r.annotations("", "", msg)
	same := sameBut(anns, keyAttempt)
	k := podKey(p)
	rc.mu.Lock()
	if rc.shown[k] == same {
		rc.mu.Unlock()
		return
	}
	rc.shown[k] = same
	rc.mu.Unlock()
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": anns}})
	if err != nil {
		return
	}
	c, err := rc.patcher(h)
	if err != nil {
		klog.FromContext(ctx).Error(err, "explain: no client to write the attempt", "pod", klog.KObj(p))
		return
	}
	// The answer (the whole pod) is not decoded: nothing here reads it.
	err = c.CoreV1().RESTClient().Patch(types.MergePatchType).Namespace(p.Namespace).Resource("pods").
		Name(p.Name).Body(body).Do(ctx).Error()
	if err != nil && !apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Error(err, "explain: writing the attempt", "pod", klog.KObj(p))
	}
}

// sameBut: the annotations but one key, as one comparable string.
func sameBut(anns map[string]string, skip string) string {
	keys := make([]string, 0, len(anns))
	for k := range anns {
		if k != skip {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	b := make([]byte, 0, 4096)
	for _, k := range keys {
		b = append(b, k...)
		b = append(b, 0)
		b = append(b, anns[k]...)
		b = append(b, 0)
	}
	return string(b)
}

// fitMessage is the scheduler's FitError message for this attempt.
func fitMessage(h fwk.Handle, p *v1.Pod, r *record, statuses fwk.NodeToStatusReader, s *fwk.Status) string {
	nts, ok := statuses.(*framework.NodeToStatus)
	if !ok {
		return s.Message()
	}
	n := 0
	if l := h.SnapshotSharedLister(); l != nil {
		if all, err := l.NodeInfos().List(); err == nil {
			n = len(all)
		}
	}
	fe := framework.FitError{Pod: p, NumAllNodes: n, Diagnosis: framework.Diagnosis{NodeToStatus: nts, PostFilterMsg: s.Message()}}
	r.mu.Lock()
	if r.preFilterRejected {
		fe.Diagnosis.PreFilterMsg = nts.AbsentNodesStatus().Message()
	}
	r.mu.Unlock()
	return fe.Error()
}

// bind is DefaultBinder's request with the attempt's annotations in the
// Binding's metadata, which the API server copies onto the pod: the
// explanation of a successful attempt costs no request.
func (rc *recorder) bind(ctx context.Context, h fwk.Handle, p *v1.Pod, node string, r *record, plugin string) *fwk.Status {
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace, Name: p.Name, UID: p.UID,
			// A binding that fails writes nothing: "success" is the only
			// result the pod can show.
			Annotations: r.annotations(plugin, success, ""),
		},
		Target: v1.ObjectReference{Kind: "Node", Name: node},
	}
	var err error
	if c := h.APICacher(); c != nil {
		var onFinish <-chan error
		if onFinish, err = c.BindPod(binding); err == nil {
			err = c.WaitOnFinish(ctx, onFinish)
		}
	} else {
		klog.FromContext(ctx).V(3).Info("Attempting to bind pod to node", "pod", klog.KObj(p), "node", klog.KRef("", node))
		err = h.ClientSet().CoreV1().Pods(p.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
	}
	if err != nil {
		return fwk.AsStatus(err)
	}
	rc.mu.Lock()
	delete(rc.attempts, podKey(p))
	delete(rc.shown, podKey(p))
	rc.mu.Unlock()
	return nil
}
