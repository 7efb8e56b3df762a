// Command apidiff-informer is a client-go program doing what informers do,
// recorded by fakeapi's differential harness (tests/differential/record.rs)
// against a real kube-apiserver: an informer of the shared factory (client-go
// 1.35 starts it with a streaming list, sendInitialEvents), writes it sees,
// and a reflector whose first watch asks for version 1, as a client away for
// long would: kube-apiserver 1.35 answers 410 Gone once etcd has compacted
// that version, and until then (as in a short recording) serves the history
// since from etcd.
//
// Usage: apidiff-informer (KUBECONFIG, NS and CONTENT=json|protobuf from the
// environment). Every
// step waits on what the informers saw, never on a timer, and the program
// exits once its last change is in both caches.
package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// tooOld makes a reflector's first watch start from version 1, older than
// anything the watch cache keeps: what a client that was away long sends.
type tooOld struct {
	lw    *cache.ListWatch
	mu    sync.Mutex
	first bool
}

func (t *tooOld) List(o metav1.ListOptions) (runtime.Object, error) { return t.lw.List(o) }

func (t *tooOld) Watch(o metav1.ListOptions) (watch.Interface, error) {
	t.mu.Lock()
	if t.first {
		t.first = false
		o.ResourceVersion = "1"
	}
	t.mu.Unlock()
	return t.lw.Watch(o)
}

// The reflector's classic list then watch: this wrapper has no streaming list.
func (t *tooOld) IsWatchListSemanticsUnSupported() bool { return true }

// seen waits until a cache holds what want says.
func seen(what string, store cache.Store, want func(cache.Store) bool) {
	deadline := time.Now().Add(60 * time.Second)
	for !want(store) {
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "apidiff-informer: the cache never saw %s\n", what)
			os.Exit(1)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func value(store cache.Store, ns, name string) (string, bool) {
	o, ok, _ := store.GetByKey(ns + "/" + name)
	if !ok {
		return "", false
	}
	return o.(*corev1.ConfigMap).Data["v"], true
}

func main() {
	ns := os.Getenv("NS")
	if ns == "" {
		fmt.Fprintln(os.Stderr, "apidiff-informer: set NS to the namespace to work in")
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "apidiff-informer: %v\n", err)
		os.Exit(2)
	}
	// JSON bodies: the harness's cases are JSON. With CONTENT=protobuf,
	// client-go's own defaults (protobuf for built-in kinds, bodies and
	// answers): fakeapi's protobuf is tested with it (tests/protobuf.rs).
	if os.Getenv("CONTENT") != "protobuf" {
		cfg.ContentType = "application/json"
		cfg.AcceptContentTypes = "application/json"
	} else {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())

	// One object before the informers start: their initial list has it.
	cms := cs.CoreV1().ConfigMaps(ns)
	mk := func(name, v string) {
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": v}}, metav1.CreateOptions{})
		if err != nil {
			fmt.Fprintf(os.Stderr, "apidiff-informer: create %s: %v\n", name, err)
			os.Exit(1)
		}
	}
	mk("before", "1")

	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	shared := factory.Core().V1().ConfigMaps().Informer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), shared.HasSynced) {
		fmt.Fprintln(os.Stderr, "apidiff-informer: the shared informer never synced")
		os.Exit(1)
	}

	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", ns, fields.Everything())
	relisting := cache.NewStore(cache.MetaNamespaceKeyFunc)
	r := cache.NewReflector(&tooOld{lw: lw, first: true}, &corev1.ConfigMap{}, relisting, 0)
	done := make(chan struct{})
	go func() { r.Run(ctx.Done()); close(done) }()
	seen("before (relisting)", relisting, func(s cache.Store) bool { _, ok := value(s, ns, "before"); return ok })

	mk("a", "1")
	seen("a", shared.GetStore(), func(s cache.Store) bool { _, ok := value(s, ns, "a"); return ok })
	a, err := cms.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "apidiff-informer: get a: %v\n", err)
		os.Exit(1)
	}
	a.Data["v"] = "2"
	if _, err := cms.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		fmt.Fprintf(os.Stderr, "apidiff-informer: update a: %v\n", err)
		os.Exit(1)
	}
	if err := cms.Delete(ctx, "before", metav1.DeleteOptions{}); err != nil {
		fmt.Fprintf(os.Stderr, "apidiff-informer: delete before: %v\n", err)
		os.Exit(1)
	}
	for _, s := range []cache.Store{shared.GetStore(), relisting} {
		seen("a=2 and before gone", s, func(s cache.Store) bool {
			v, _ := value(s, ns, "a")
			_, there := value(s, ns, "before")
			return v == "2" && !there
		})
	}
	cancel()
	<-done
	factory.Shutdown()
}
