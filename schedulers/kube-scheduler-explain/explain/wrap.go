package explain

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Suffix makes a wrapper's name: the framework refuses a second plugin of
// an in-tree name (its registry starts with the in-tree plugins), and a
// score plugin's weight is looked up by the name it answers, so each
// wrapper answers "<in-tree name>Wrapped" (the simulator's suffix) and the
// profiles name the wrappers instead (see translate.go). The recorded
// results keep the in-tree names.
const Suffix = "Wrapped"

// caps is the set of framework interfaces a plugin implements. A wrapper
// implements exactly the set of the plugin it wraps: the framework places
// a plugin at the extension points whose interface it implements (a
// MultiPoint entry), asks every PreFilter/Filter/Reserve/Permit/PreEnqueue
// plugin for its events (EnqueueExtensions, else it is requeued by every
// event), and turns opportunistic batching off for a profile with one
// PreFilter/Filter/PreScore/Score plugin that cannot sign pods.
type caps uint32

const (
	capPreEnqueue caps = 1 << iota
	capQueueSort
	capPreFilter
	capFilter
	capPostFilter
	capPreScore
	capScore
	capReserve
	capPermit
	capPreBind
	capBind
	capPostBind
	capEnqueue
	capSign
)

var capNames = []string{"PreEnqueue", "QueueSort", "PreFilter", "Filter", "PostFilter", "PreScore",
	"Score", "Reserve", "Permit", "PreBind", "Bind", "PostBind", "EnqueueExtensions", "Sign"}

func (c caps) String() string {
	s := ""
	for i, n := range capNames {
		if c&(1<<i) != 0 {
			if s != "" {
				s += "+"
			}
			s += n
		}
	}
	return s
}

func capsOf(p any) caps {
	var c caps
	has := func(ok bool, bit caps) {
		if ok {
			c |= bit
		}
	}
	_, ok := p.(fwk.PreEnqueuePlugin)
	has(ok, capPreEnqueue)
	_, ok = p.(fwk.QueueSortPlugin)
	has(ok, capQueueSort)
	_, ok = p.(fwk.PreFilterPlugin)
	has(ok, capPreFilter)
	_, ok = p.(fwk.FilterPlugin)
	has(ok, capFilter)
	_, ok = p.(fwk.PostFilterPlugin)
	has(ok, capPostFilter)
	_, ok = p.(fwk.PreScorePlugin)
	has(ok, capPreScore)
	_, ok = p.(fwk.ScorePlugin)
	has(ok, capScore)
	_, ok = p.(fwk.ReservePlugin)
	has(ok, capReserve)
	_, ok = p.(fwk.PermitPlugin)
	has(ok, capPermit)
	_, ok = p.(fwk.PreBindPlugin)
	has(ok, capPreBind)
	_, ok = p.(fwk.BindPlugin)
	has(ok, capBind)
	_, ok = p.(fwk.PostBindPlugin)
	has(ok, capPostBind)
	_, ok = p.(fwk.EnqueueExtensions)
	has(ok, capEnqueue)
	_, ok = p.(fwk.SignPlugin)
	has(ok, capSign)
	return c
}

// wrapped is what every wrapper holds: the plugin, its in-tree name, and
// where to record.
type wrapped struct {
	name   string // the wrapper's (the profile's) name
	plugin string // the in-tree name, as recorded
	orig   fwk.Plugin
	h      fwk.Handle
	rec    *recorder
}

func (w *wrapped) Name() string { return w.name }

// One type per interface; a wrapper type embeds those of its plugin.

type preEnqueueM struct{ w *wrapped }

func (m preEnqueueM) PreEnqueue(ctx context.Context, p *v1.Pod) *fwk.Status {
	return m.w.orig.(fwk.PreEnqueuePlugin).PreEnqueue(ctx, p)
}

type queueSortM struct{ w *wrapped }

func (m queueSortM) Less(a, b fwk.QueuedPodInfo) bool {
	return m.w.orig.(fwk.QueueSortPlugin).Less(a, b)
}

type enqueueM struct{ w *wrapped }

func (m enqueueM) EventsToRegister(ctx context.Context) ([]fwk.ClusterEventWithHint, error) {
	return m.w.orig.(fwk.EnqueueExtensions).EventsToRegister(ctx)
}

type signM struct{ w *wrapped }

func (m signM) SignPod(ctx context.Context, p *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return m.w.orig.(fwk.SignPlugin).SignPod(ctx, p)
}

type preFilterM struct{ w *wrapped }

func (m preFilterM) PreFilter(ctx context.Context, state fwk.CycleState, p *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	res, s := m.w.orig.(fwk.PreFilterPlugin).PreFilter(ctx, state, p, nodes)
	if r := m.w.rec.cycle(state, p); r != nil {
		r.preFilter(m.w.plugin, res, s)
	}
	return res, s
}

func (m preFilterM) PreFilterExtensions() fwk.PreFilterExtensions {
	return m.w.orig.(fwk.PreFilterPlugin).PreFilterExtensions()
}

type filterM struct{ w *wrapped }

func (m filterM) Filter(ctx context.Context, state fwk.CycleState, p *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	s := m.w.orig.(fwk.FilterPlugin).Filter(ctx, state, p, ni)
	if r := m.w.rec.cycle(state, p); r != nil {
		r.filter(ni.Node().Name, m.w.plugin, s)
	}
	return s
}

type postFilterM struct{ w *wrapped }

// PostFilter: the attempt failed (PostFilter runs when PreFilter or Filter
// refused the pod). It is written on the pod once the framework's
// PostFilter phase ends: at a plugin that ends it (success, unresolvable,
// error) or at the profile's last PostFilter plugin, with the message the
// framework builds from the plugins' reasons.
func (m postFilterM) PostFilter(ctx context.Context, state fwk.CycleState, p *v1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	r := m.w.rec.cycle(state, p)
	if r != nil {
		// Preemption's dry runs call the filters again: not this attempt's.
		r.enterPostFilter()
	}
	res, s := m.w.orig.(fwk.PostFilterPlugin).PostFilter(ctx, state, p, statuses)
	if r != nil {
		r.postFilter(m.w.plugin, res, s, statuses)
		last := m.w.rec.lastPostFilter(m.w.h)
		if final, done := r.postFilterStatus(s, last == "" || last == m.w.name); done {
			m.w.rec.failed(ctx, m.w.h, p, r, statuses, final)
		}
	}
	return res, s
}

type preScoreM struct{ w *wrapped }

func (m preScoreM) PreScore(ctx context.Context, state fwk.CycleState, p *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	s := m.w.orig.(fwk.PreScorePlugin).PreScore(ctx, state, p, nodes)
	if r := m.w.rec.cycle(state, p); r != nil {
		r.status(&r.preScoreStatus, m.w.plugin, s)
	}
	return s
}

type scoreM struct{ w *wrapped }

func (m scoreM) Score(ctx context.Context, state fwk.CycleState, p *v1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	v, s := m.w.orig.(fwk.ScorePlugin).Score(ctx, state, p, ni)
	if r := m.w.rec.cycle(state, p); r != nil && s.IsSuccess() {
		r.score(ni.Node().Name, m.w.plugin, v, m.w.rec.weight(m.w.h, m.w.name))
	}
	return v, s
}

func (m scoreM) ScoreExtensions() fwk.ScoreExtensions {
	if m.w.orig.(fwk.ScorePlugin).ScoreExtensions() == nil {
		return nil
	}
	return normalizer{m.w}
}

type normalizer struct{ w *wrapped }

func (n normalizer) NormalizeScore(ctx context.Context, state fwk.CycleState, p *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	s := n.w.orig.(fwk.ScorePlugin).ScoreExtensions().NormalizeScore(ctx, state, p, scores)
	if r := n.w.rec.cycle(state, p); r != nil && s.IsSuccess() {
		r.normalized(n.w.plugin, scores, n.w.rec.weight(n.w.h, n.w.name))
	}
	return s
}

type reserveM struct{ w *wrapped }

func (m reserveM) Reserve(ctx context.Context, state fwk.CycleState, p *v1.Pod, node string) *fwk.Status {
	s := m.w.orig.(fwk.ReservePlugin).Reserve(ctx, state, p, node)
	if r := m.w.rec.cycle(state, p); r != nil {
		r.status(&r.reserveStatus, m.w.plugin, s)
		r.selectNode(node)
	}
	return s
}

func (m reserveM) Unreserve(ctx context.Context, state fwk.CycleState, p *v1.Pod, node string) {
	m.w.orig.(fwk.ReservePlugin).Unreserve(ctx, state, p, node)
}

type permitM struct{ w *wrapped }

func (m permitM) Permit(ctx context.Context, state fwk.CycleState, p *v1.Pod, node string) (*fwk.Status, time.Duration) {
	s, d := m.w.orig.(fwk.PermitPlugin).Permit(ctx, state, p, node)
	if r := m.w.rec.cycle(state, p); r != nil {
		r.permit(m.w.plugin, s, d)
	}
	return s, d
}

type preBindM struct{ w *wrapped }

func (m preBindM) PreBindPreFlight(ctx context.Context, state fwk.CycleState, p *v1.Pod, node string) *fwk.Status {
	return m.w.orig.(fwk.PreBindPlugin).PreBindPreFlight(ctx, state, p, node)
}

func (m preBindM) PreBind(ctx context.Context, state fwk.CycleState, p *v1.Pod, node string) *fwk.Status {
	s := m.w.orig.(fwk.PreBindPlugin).PreBind(ctx, state, p, node)
	if r := m.w.rec.cycle(state, p); r != nil {
		r.status(&r.preBindStatus, m.w.plugin, s)
	}
	return s
}

type bindM struct{ w *wrapped }

// Bind: DefaultBinder's request, with the attempt's annotations in the
// Binding's metadata (the API server copies them onto the pod with the
// node): a successful attempt costs no request of its own. Another bind
// plugin is delegated to, and its pod gets no explanation.
func (m bindM) Bind(ctx context.Context, state fwk.CycleState, p *v1.Pod, node string) *fwk.Status {
	r := m.w.rec.cycle(state, p)
	if r == nil || m.w.plugin != defaultBinderName {
		return m.w.orig.(fwk.BindPlugin).Bind(ctx, state, p, node)
	}
	r.selectNode(node)
	return m.w.rec.bind(ctx, m.w.h, p, node, r, m.w.plugin)
}

type postBindM struct{ w *wrapped }

func (m postBindM) PostBind(ctx context.Context, state fwk.CycleState, p *v1.Pod, node string) {
	m.w.orig.(fwk.PostBindPlugin).PostBind(ctx, state, p, node)
}

// wrap returns the wrapper of plugin p, of the type with p's interfaces.
func wrap(w *wrapped) (fwk.Plugin, error) {
	c := capsOf(w.orig)
	make, ok := combos[c]
	if !ok {
		return nil, fmt.Errorf("explain: no wrapper for plugin %s's interfaces (%v)", w.plugin, c)
	}
	return make(w), nil
}
