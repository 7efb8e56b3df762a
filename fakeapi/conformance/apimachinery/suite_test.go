// Package apimachinery is a test binary of Kubernetes' e2e suite holding
// only its API-machinery tests (k8s.io/kubernetes/test/e2e/apimachinery),
// for CI's conformance subset (fakeapi/conformance/run.sh --ci): the same
// tests, flags and suite setup as the whole e2e.test (the e2e package's
// RunE2ETests), without compiling the suite's other areas (storage,
// networking, nodes, apps, ...), which cost most of its build.
package apimachinery

import (
	"flag"
	"os"
	"testing"

	"k8s.io/kubernetes/test/e2e"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	manifests "k8s.io/kubernetes/test/e2e/testing-manifests"

	// The tests, and what the whole suite's binary also links in: its
	// feature names, and the framework's debug, metrics and node hooks.
	_ "k8s.io/kubernetes/test/e2e/apimachinery"
	_ "k8s.io/kubernetes/test/e2e/feature"
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
)

func TestMain(m *testing.M) {
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	testfiles.AddFileSource(manifests.GetE2ETestingManifestsFS())
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

func TestAPIMachinery(t *testing.T) {
	e2e.RunE2ETests(t)
}
