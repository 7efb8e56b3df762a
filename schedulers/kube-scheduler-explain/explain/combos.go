// The wrapper types: one per set of interfaces that in-tree plugins of the
// pinned Kubernetes implement (TestEveryInTreePluginHasAWrapperOfItsInterfaces
// checks that each in-tree plugin finds its own). Written from that
// test's list; a release with a new combination fails the test.

package explain

import fwk "k8s.io/kube-scheduler/framework"

// w0: DefaultBinder.
type w0 struct {
	*wrapped
	bindM
}

// w1: DefaultPreemption.
type w1 struct {
	*wrapped
	preEnqueueM
	postFilterM
	enqueueM
}

// w2: DynamicResources.
type w2 struct {
	*wrapped
	preEnqueueM
	preFilterM
	filterM
	postFilterM
	scoreM
	reserveM
	preBindM
	enqueueM
	signM
}

// w3: GangScheduling.
type w3 struct {
	*wrapped
	preEnqueueM
	reserveM
	permitM
	enqueueM
}

// w4: ImageLocality.
type w4 struct {
	*wrapped
	scoreM
	signM
}

// w5: InterPodAffinity, NodeAffinity, NodeResourcesFit, PodTopologySpread.
type w5 struct {
	*wrapped
	preFilterM
	filterM
	preScoreM
	scoreM
	enqueueM
	signM
}

// w6: NodeDeclaredFeatures, NodePorts, NodeVolumeLimits, VolumeRestrictions, VolumeZone.
type w6 struct {
	*wrapped
	preFilterM
	filterM
	enqueueM
	signM
}

// w7: NodeName, NodeUnschedulable.
type w7 struct {
	*wrapped
	filterM
	enqueueM
	signM
}

// w8: NodeResourcesBalancedAllocation.
type w8 struct {
	*wrapped
	preScoreM
	scoreM
	signM
}

// w9: PrioritySort.
type w9 struct {
	*wrapped
	queueSortM
}

// w10: SchedulingGates.
type w10 struct {
	*wrapped
	preEnqueueM
	enqueueM
}

// w11: TaintToleration.
type w11 struct {
	*wrapped
	filterM
	preScoreM
	scoreM
	enqueueM
	signM
}

// w12: VolumeBinding.
type w12 struct {
	*wrapped
	preFilterM
	filterM
	preScoreM
	scoreM
	reserveM
	preBindM
	enqueueM
	signM
}

var combos = map[caps]func(*wrapped) fwk.Plugin{
	capBind: func(w *wrapped) fwk.Plugin { return w0{w, bindM{w}} },
	capPreEnqueue | capPostFilter | capEnqueue: func(w *wrapped) fwk.Plugin { return w1{w, preEnqueueM{w}, postFilterM{w}, enqueueM{w}} },
	capPreEnqueue | capPreFilter | capFilter | capPostFilter | capScore | capReserve | capPreBind | capEnqueue | capSign: func(w *wrapped) fwk.Plugin {
		return w2{w, preEnqueueM{w}, preFilterM{w}, filterM{w}, postFilterM{w}, scoreM{w}, reserveM{w}, preBindM{w}, enqueueM{w}, signM{w}}
	},
	capPreEnqueue | capReserve | capPermit | capEnqueue: func(w *wrapped) fwk.Plugin { return w3{w, preEnqueueM{w}, reserveM{w}, permitM{w}, enqueueM{w}} },
	capScore | capSign: func(w *wrapped) fwk.Plugin { return w4{w, scoreM{w}, signM{w}} },
	capPreFilter | capFilter | capPreScore | capScore | capEnqueue | capSign: func(w *wrapped) fwk.Plugin {
		return w5{w, preFilterM{w}, filterM{w}, preScoreM{w}, scoreM{w}, enqueueM{w}, signM{w}}
	},
	capPreFilter | capFilter | capEnqueue | capSign:           func(w *wrapped) fwk.Plugin { return w6{w, preFilterM{w}, filterM{w}, enqueueM{w}, signM{w}} },
	capFilter | capEnqueue | capSign:                          func(w *wrapped) fwk.Plugin { return w7{w, filterM{w}, enqueueM{w}, signM{w}} },
	capPreScore | capScore | capSign:                          func(w *wrapped) fwk.Plugin { return w8{w, preScoreM{w}, scoreM{w}, signM{w}} },
	capQueueSort:                                              func(w *wrapped) fwk.Plugin { return w9{w, queueSortM{w}} },
	capPreEnqueue | capEnqueue:                                func(w *wrapped) fwk.Plugin { return w10{w, preEnqueueM{w}, enqueueM{w}} },
	capFilter | capPreScore | capScore | capEnqueue | capSign: func(w *wrapped) fwk.Plugin { return w11{w, filterM{w}, preScoreM{w}, scoreM{w}, enqueueM{w}, signM{w}} },
	capPreFilter | capFilter | capPreScore | capScore | capReserve | capPreBind | capEnqueue | capSign: func(w *wrapped) fwk.Plugin {
		return w12{w, preFilterM{w}, filterM{w}, preScoreM{w}, scoreM{w}, reserveM{w}, preBindM{w}, enqueueM{w}, signM{w}}
	},
}
