package explain

import (
	"encoding/json"
	"sort"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// The kube-scheduler-simulator's annotation keys (its layout: every value a
// JSON document in a string, maps written by encoding/json, so with sorted
// keys; scores as decimal strings), and ours.
const (
	keyPreFilterStatus = "kube-scheduler-simulator.sigs.k8s.io/prefilter-result-status"
	keyPreFilterResult = "kube-scheduler-simulator.sigs.k8s.io/prefilter-result"
	keyFilter          = "kube-scheduler-simulator.sigs.k8s.io/filter-result"
	keyPostFilter      = "kube-scheduler-simulator.sigs.k8s.io/postfilter-result"
	keyPreScore        = "kube-scheduler-simulator.sigs.k8s.io/prescore-result"
	keyScore           = "kube-scheduler-simulator.sigs.k8s.io/score-result"
	keyFinalScore      = "kube-scheduler-simulator.sigs.k8s.io/finalscore-result"
	keyReserve         = "kube-scheduler-simulator.sigs.k8s.io/reserve-result"
	keyPermit          = "kube-scheduler-simulator.sigs.k8s.io/permit-result"
	keyPermitTimeout   = "kube-scheduler-simulator.sigs.k8s.io/permit-result-timeout"
	keyPreBind         = "kube-scheduler-simulator.sigs.k8s.io/prebind-result"
	keyBind            = "kube-scheduler-simulator.sigs.k8s.io/bind-result"
	keySelectedNode    = "kube-scheduler-simulator.sigs.k8s.io/selected-node"
	// Ours: the attempt's number for this pod (from 1) and why it failed
	// (the PodScheduled condition's message; "" on success).
	keyAttempt = "batkube.io/scheduling-attempt"
	keyMessage = "batkube.io/scheduling-message"

	// The simulator's words.
	passed           = "passed"
	success          = "success"
	wait             = "wait"
	preemptionVictim = "preemption victim"
)

// stateKey holds an attempt's record in its scheduling cycle's CycleState,
// so that every plugin call of the cycle (PreFilter to Bind, the binding
// cycle included) finds it.
const stateKey fwk.StateKey = "batkube.io/explain"

type table map[string]map[string]string // node -> plugin -> value

func (t table) set(node, plugin, v string) {
	m := t[node]
	if m == nil {
		m = map[string]string{}
		t[node] = m
	}
	m[plugin] = v
}

// record is what one scheduling attempt of one pod returned, plugin by
// plugin. Filter and Score run on several nodes at once: guarded by mu.
type record struct {
	mu      sync.Mutex
	attempt uint64
	// PostFilter has started: the filters it runs (preemption's dry runs,
	// on copies of the cycle's state, which share this record) are not
	// the attempt's.
	inPostFilter      bool
	preFilterRejected bool
	postReasons       []string // the rejecting PostFilter plugins' reasons so far

	preFilterStatus  map[string]string   // plugin -> "success" or message
	preFilterResult  map[string][]string // plugin -> the nodes it kept
	filterResult     table
	postFilterResult table
	preScoreStatus   map[string]string
	scores, final    table
	reserveStatus    map[string]string
	permitStatus     map[string]string
	permitTimeout    map[string]string
	preBindStatus    map[string]string
	selected         string
}

func newRecord(attempt uint64) *record {
	return &record{
		attempt:          attempt,
		preFilterStatus:  map[string]string{},
		preFilterResult:  map[string][]string{},
		filterResult:     table{},
		postFilterResult: table{},
		preScoreStatus:   map[string]string{},
		scores:           table{},
		final:            table{},
		reserveStatus:    map[string]string{},
		permitStatus:     map[string]string{},
		permitTimeout:    map[string]string{},
		preBindStatus:    map[string]string{},
	}
}

// Clone shares the record: the framework clones the cycle's state to run
// filters with nominated pods added, which are the attempt's filters too.
func (r *record) Clone() fwk.StateData { return r }

func message(s *fwk.Status, ok string) string {
	if s.IsSuccess() {
		return ok
	}
	return s.Message()
}

func (r *record) status(m *map[string]string, plugin string, s *fwk.Status) {
	r.mu.Lock()
	(*m)[plugin] = message(s, success)
	r.mu.Unlock()
}

func (r *record) preFilter(plugin string, res *fwk.PreFilterResult, s *fwk.Status) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.preFilterStatus[plugin] = message(s, success)
	if s.IsRejected() {
		r.preFilterRejected = true
	}
	if res != nil {
		nodes := make([]string, 0, len(res.NodeNames))
		for n := range res.NodeNames {
			nodes = append(nodes, n)
		}
		sort.Strings(nodes)
		r.preFilterResult[plugin] = nodes
	}
}

func (r *record) filter(node, plugin string, s *fwk.Status) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inPostFilter {
		return
	}
	r.filterResult.set(node, plugin, message(s, passed))
}

func (r *record) enterPostFilter() {
	r.mu.Lock()
	r.inPostFilter = true
	r.mu.Unlock()
}

// postFilter: every node the filters refused -> {}, the node preemption
// nominated -> {plugin: "preemption victim"}, as the simulator writes it.
func (r *record) postFilter(plugin string, res *fwk.PostFilterResult, s *fwk.Status, statuses fwk.NodeToStatusReader) {
	nominated := ""
	if s.IsSuccess() && res != nil && res.NominatingInfo != nil {
		nominated = res.NominatedNodeName
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := statuses.(interface {
		ForEachExplicitNode(func(string, *fwk.Status))
	}); ok {
		m.ForEachExplicitNode(func(node string, _ *fwk.Status) {
			if r.postFilterResult[node] == nil {
				r.postFilterResult[node] = map[string]string{}
			}
		})
	}
	if nominated != "" {
		r.postFilterResult.set(nominated, plugin, preemptionVictim)
	}
}

// postFilterStatus: the PostFilter phase's status when it ends with this
// plugin's s (last: the profile's last PostFilter plugin), as the framework
// composes it; false while it goes on.
func (r *record) postFilterStatus(s *fwk.Status, last bool) (*fwk.Status, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.IsSuccess() || s.Code() == fwk.UnschedulableAndUnresolvable || !s.IsRejected() {
		return s, true
	}
	r.postReasons = append(r.postReasons, s.Reasons()...)
	if !last {
		return nil, false
	}
	return fwk.NewStatus(fwk.Unschedulable, r.postReasons...), true
}

// score: the raw score, and raw times weight until the plugin's
// NormalizeScore (if any) replaces it, as the simulator records them.
func (r *record) score(node, plugin string, v int64, weight int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scores.set(node, plugin, strconv.FormatInt(v, 10))
	r.final.set(node, plugin, strconv.FormatInt(v*weight, 10))
}

func (r *record) normalized(plugin string, scores fwk.NodeScoreList, weight int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range scores {
		r.final.set(s.Name, plugin, strconv.FormatInt(s.Score*weight, 10))
	}
}

func (r *record) permit(plugin string, s *fwk.Status, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case s.IsSuccess():
		r.permitStatus[plugin] = success
	case s.IsWait():
		r.permitStatus[plugin] = wait
	default:
		r.permitStatus[plugin] = s.Message()
	}
	r.permitTimeout[plugin] = d.String()
}

func (r *record) selectNode(node string) {
	r.mu.Lock()
	r.selected = node
	r.mu.Unlock()
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Maps of strings always encode.
		panic(err)
	}
	return string(b)
}

// annotations: every key of the simulator but result-history, and ours.
// bind is the bind plugin's result ("" when the attempt did not bind).
func (r *record) annotations(bindPlugin, bindResult, msg string) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	bind := map[string]string{}
	if bindPlugin != "" {
		bind[bindPlugin] = bindResult
	}
	return map[string]string{
		keyPreFilterStatus: encode(r.preFilterStatus),
		keyPreFilterResult: encode(r.preFilterResult),
		keyFilter:          encode(r.filterResult),
		keyPostFilter:      encode(r.postFilterResult),
		keyPreScore:        encode(r.preScoreStatus),
		keyScore:           encode(r.scores),
		keyFinalScore:      encode(r.final),
		keyReserve:         encode(r.reserveStatus),
		keyPermit:          encode(r.permitStatus),
		keyPermitTimeout:   encode(r.permitTimeout),
		keyPreBind:         encode(r.preBindStatus),
		keyBind:            encode(bind),
		keySelectedNode:    r.selected,
		keyAttempt:         strconv.FormatUint(r.attempt, 10),
		keyMessage:         msg,
	}
}

// podKey names a pod across its attempts.
func podKey(p *v1.Pod) string {
	if p.UID != "" {
		return string(p.UID)
	}
	return p.Namespace + "/" + p.Name
}
