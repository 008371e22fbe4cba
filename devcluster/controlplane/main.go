// Command devcluster-controlplane runs one Kubernetes control-plane component, chosen by its first
// argument, so devcluster builds and caches a single binary instead of four. Every component is the
// unmodified upstream one; only etcd gets a small flag front end over its embedding API, because the
// full etcd command line drags in proxies and gateways a single-member test cluster never uses.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

const usage = "usage: devcluster-controlplane etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet-api [flags]"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	component, args := os.Args[1], os.Args[2:]
	switch component {
	case "etcd":
		os.Exit(runEtcd(args))
	case "kube-apiserver":
		os.Exit(runCobra(apiserver.NewAPIServerCommand(), args))
	case "kube-controller-manager":
		os.Exit(runCobra(controllermanager.NewControllerManagerCommand(), args))
	case "kube-scheduler":
		os.Exit(runCobra(scheduler.NewSchedulerCommand(), args))
	case "kubelet-api":
		os.Exit(runKubeletAPI(args))
	case "version":
		fmt.Println(versions())
		os.Exit(0)
	default:
		fmt.Fprintf(os.Stderr, "unknown component %q\n%s\n", component, usage)
		os.Exit(2)
	}
}

// runCobra runs an upstream component command with the arguments after the component name;
// cobra would otherwise parse os.Args[1:], which starts with the component name itself.
func runCobra(command *cobra.Command, args []string) int {
	command.SetArgs(args)
	return cli.Run(command)
}

// etcdFlags are the few etcd settings a single-member, loopback-only cluster needs.
type etcdFlags struct {
	name        string
	dataDir     string
	clientURL   string
	peerURL     string
	logLevel    string
	unsafeFsync bool
	quotaBytes  int64
}

func runEtcd(args []string) int {
	var flags etcdFlags
	set := flag.NewFlagSet("etcd", flag.ContinueOnError)
	set.StringVar(&flags.name, "name", "default", "member name")
	set.StringVar(&flags.dataDir, "data-dir", "", "directory for the member's data (required)")
	set.StringVar(&flags.clientURL, "client-url", "", "URL to serve clients on, also advertised (required)")
	set.StringVar(&flags.peerURL, "peer-url", "", "URL to serve peers on, also advertised (required)")
	set.StringVar(&flags.logLevel, "log-level", "warn", "debug, info, warn or error")
	set.BoolVar(&flags.unsafeFsync, "unsafe-no-fsync", false, "skip fsync: faster, loses data on a machine crash")
	set.Int64Var(&flags.quotaBytes, "quota-backend-bytes", 0, "backend size quota in bytes (0: etcd's default)")
	if err := set.Parse(args); err != nil {
		return 2
	}
	cfg, err := flags.config()
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 2
	}
	server, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: starting the server in %s: %v\n", flags.dataDir, err)
		return 1
	}
	defer server.Close()

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-server.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd: ready, serving clients on %s\n", flags.clientURL)
	case <-time.After(5 * time.Minute):
		server.Server.Stop()
		fmt.Fprintln(os.Stderr, "etcd: not ready after 5 minutes, giving up")
		return 1
	case sig := <-signals:
		fmt.Fprintf(os.Stderr, "etcd: %v before ready, stopping\n", sig)
		return 0
	}
	select {
	case err := <-server.Err():
		fmt.Fprintf(os.Stderr, "etcd: server failed: %v\n", err)
		return 1
	case sig := <-signals:
		fmt.Fprintf(os.Stderr, "etcd: %v, stopping\n", sig)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopped := make(chan struct{})
		go func() { server.Close(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			fmt.Fprintln(os.Stderr, "etcd: close took longer than 10 s, exiting anyway")
		}
		return 0
	}
}

func (f etcdFlags) config() (*embed.Config, error) {
	if f.dataDir == "" || f.clientURL == "" || f.peerURL == "" {
		return nil, errors.New("--data-dir, --client-url and --peer-url are required")
	}
	client, err := url.Parse(f.clientURL)
	if err != nil {
		return nil, fmt.Errorf("--client-url %q: %w", f.clientURL, err)
	}
	peer, err := url.Parse(f.peerURL)
	if err != nil {
		return nil, fmt.Errorf("--peer-url %q: %w", f.peerURL, err)
	}
	cfg := embed.NewConfig()
	cfg.Name = f.name
	cfg.Dir = f.dataDir
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(f.name)
	cfg.LogLevel = strings.ToLower(f.logLevel)
	cfg.UnsafeNoFsync = f.unsafeFsync
	if f.quotaBytes > 0 {
		cfg.QuotaBackendBytes = f.quotaBytes
	}
	return cfg, nil
}
