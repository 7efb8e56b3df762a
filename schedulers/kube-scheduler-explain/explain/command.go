// Package explain: kube-scheduler whose in-tree plugins are wrapped to
// record what each returns, per scheduling attempt, written on the pod in
// the annotations of kubernetes-sigs/kube-scheduler-simulator (its keys
// and JSON layout) plus batkube.io/scheduling-attempt and
// batkube.io/scheduling-message. See ../README.md.
package explain

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/tools/events"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	schedulerserverconfig "k8s.io/kubernetes/cmd/kube-scheduler/app/config"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"
	config "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
)

// NewCommand is kube-scheduler's command (the same flags, parsed by the
// same options) whose scheduler has its in-tree plugins wrapped.
//
// Why not app.NewSchedulerCommand with app.WithPlugin: the framework's
// registry starts with the in-tree plugins and refuses another plugin of
// the same name, so the wrappers need names of their own and the profiles
// must name them; the profiles are only complete (defaults merged, the
// --config file read) inside app.Setup, right before scheduler.New, with no
// hook in between. So this command runs the same steps as upstream's
// (options, logging, app.Setup's sequence, app.Run) with the profiles
// translated between the two.
func NewCommand() *cobra.Command {
	opts := options.NewOptions()
	cmd := &cobra.Command{
		Use:  "kube-scheduler",
		Long: "kube-scheduler whose in-tree plugins record their results on each pod (BATKUBE_EXPLAIN=1).",
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return opts.ComponentGlobalsRegistry.Set()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, opts)
		},
		Args: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				if a != "" {
					return fmt.Errorf("%q does not take any arguments, got %q", cmd.CommandPath(), args)
				}
			}
			return nil
		},
	}
	nfs := opts.Flags
	verflag.AddFlags(nfs.FlagSet("global"))
	globalflag.AddGlobalFlags(nfs.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	for _, f := range nfs.FlagSets {
		cmd.Flags().AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, *nfs, cols)
	return cmd
}

func run(cmd *cobra.Command, opts *options.Options) error {
	verflag.PrintAndExitIfRequested()
	fg := opts.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
	if err := logsapi.ValidateAndApply(opts.Logs, fg); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	cliflag.PrintFlags(cmd.Flags())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-server.SetupSignalHandler()
		cancel()
	}()

	cc, sched, err := setup(ctx, opts)
	if err != nil {
		return err
	}
	fg.(featuregate.MutableFeatureGate).AddMetrics()
	opts.ComponentGlobalsRegistry.AddMetrics()
	return app.Run(ctx, cc, sched)
}

// setup is app.Setup's sequence, with the profiles naming the wrappers.
func setup(ctx context.Context, opts *options.Options) (*schedulerserverconfig.CompletedConfig, *scheduler.Scheduler, error) {
	cfg, err := latest.Default()
	if err != nil {
		return nil, nil, err
	}
	opts.ComponentConfig = cfg
	if errs := opts.Validate(); len(errs) > 0 {
		return nil, nil, fmt.Errorf("%v", errs)
	}
	c, err := opts.Config(ctx)
	if err != nil {
		return nil, nil, err
	}
	cc := c.Complete()

	rec := newRecorder(nil)
	reg, inTree := registry(rec)
	profiles, weights := translate(cc.ComponentConfig.Profiles, inTree)
	rec.weights = weights
	klog.FromContext(ctx).Info("explain: in-tree plugins wrapped, recording each scheduling attempt on its pod", "suffix", Suffix)

	recorderFactory := func(name string) events.EventRecorder {
		return cc.EventBroadcaster.NewRecorder(name)
	}
	var completed []config.KubeSchedulerProfile
	sched, err := scheduler.New(ctx,
		cc.Client,
		cc.InformerFactory,
		cc.DynInformerFactory,
		recorderFactory,
		scheduler.WithComponentConfigVersion(cc.ComponentConfig.TypeMeta.APIVersion),
		scheduler.WithKubeConfig(cc.KubeConfig),
		scheduler.WithProfiles(profiles...),
		scheduler.WithPercentageOfNodesToScore(cc.ComponentConfig.PercentageOfNodesToScore),
		scheduler.WithFrameworkOutOfTreeRegistry(reg),
		scheduler.WithPodMaxBackoffSeconds(cc.ComponentConfig.PodMaxBackoffSeconds),
		scheduler.WithPodInitialBackoffSeconds(cc.ComponentConfig.PodInitialBackoffSeconds),
		scheduler.WithPodMaxInUnschedulablePodsDuration(cc.PodMaxInUnschedulablePodsDuration),
		scheduler.WithExtenders(cc.ComponentConfig.Extenders...),
		scheduler.WithParallelism(cc.ComponentConfig.Parallelism),
		scheduler.WithBuildFrameworkCapturer(func(p config.KubeSchedulerProfile) {
			completed = append(completed, p)
		}),
	)
	if err != nil {
		return nil, nil, err
	}
	if err := options.LogOrWriteConfig(klog.FromContext(ctx), opts.WriteConfigTo, &cc.ComponentConfig, completed); err != nil {
		return nil, nil, err
	}
	return &cc, sched, nil
}
