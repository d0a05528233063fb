package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// Images are the archives every node's containerd imports (`make images`).
var Images = []string{"pause.tar", "agnhost.tar", "coredns.tar", "regression-issue-74839.tar"}

// Up builds the cluster and waits until every node is Ready and CoreDNS
// serves. On failure the host is left for Down, which the caller runs
// (logs stay in Dir/logs).
func (c *Cluster) Up(ctx context.Context) error {
	if Running(c.Dir) {
		return fmt.Errorf("a cluster is already recorded in %s: run `down` first", c.Dir)
	}
	if err := hostFree("/var/run/netns", "/sys/fs/cgroup"); err != nil {
		return err
	}
	start := time.Now()
	if !slices.Contains(cgroupHierarchies(), "pids") {
		return fmt.Errorf("no cgroup v1 pids hierarchy in /sys/fs/cgroup: the cluster finds every process it started (containers too) through it, and its kubelets run with cgroup v1")
	}
	stack := harness.CurrentStack
	schemas := map[string]string{}
	needed := []string{harness.NBSchema, harness.SBSchema, harness.OVSSchema}
	if c.zoned() {
		needed = append(needed, harness.ICNBSchema, harness.ICSBSchema)
	}
	for _, s := range needed {
		p, err := stack.SchemaPath(s)
		if err != nil {
			return err
		}
		schemas[s] = p
	}
	var images []string
	wanted := Images
	if c.Dist {
		wanted = append(slices.Clone(Images), distImage)
	}
	for _, img := range wanted {
		p := filepath.Join(c.Repo, "_output", "images", img)
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("image %s is missing: run `make images`", p)
		}
		images = append(images, p)
	}
	for _, b := range []string{"kube-apiserver", "kubelet", "kube-controller-manager", "kube-scheduler", "kubectl", "ovnkube", "ovn_cni"} {
		if _, err := os.Stat(c.bin(b)); err != nil {
			return fmt.Errorf("%s is missing: run `make build deps`", c.bin(b))
		}
	}
	if err := os.MkdirAll(filepath.Join(c.Dir, "ns"), 0o755); err != nil {
		return err
	}
	_ = os.RemoveAll(filepath.Join(c.Dir, "logs"))
	_ = os.RemoveAll(filepath.Join(c.Dir, "nodes"))
	sysctls, err := readSysctls()
	if err != nil {
		return err
	}
	// The directory holding the mount namespace files must be a private
	// mount, or binding a namespace onto a file there is refused.
	nsDir := filepath.Join(c.Dir, "ns")
	if err := c.record(func(st *state) { st.Sysctls, st.PrivateDir = sysctls, nsDir }); err != nil {
		return err
	}
	if _, err := run("mount", "--bind", nsDir, nsDir); err != nil {
		return err
	}
	if _, err := run("mount", "--make-private", nsDir); err != nil {
		return err
	}
	c.Log("cluster: OVN %s (%s), %d nodes, %s", stack.Name, stack.Versions(), len(c.Nodes), c.zonesLine())
	if err := c.makeUnderlay(); err != nil {
		return err
	}
	if err := c.makeExternalHost(); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		if err := c.makeNamespaces(n); err != nil {
			return err
		}
	}
	if err := c.each(func(n *Node) error { return c.startOVS(n, schemas[harness.OVSSchema]) }); err != nil {
		return err
	}
	cp := c.ControlPlane()
	if c.zoned() {
		err = c.startInterconnect(cp, schemas[harness.ICNBSchema], schemas[harness.ICSBSchema])
		if err == nil {
			err = c.each(func(n *Node) error { return c.startZoneOVN(n, schemas[harness.NBSchema], schemas[harness.SBSchema]) })
		}
	} else {
		err = c.startOVNCentral(cp, schemas[harness.NBSchema], schemas[harness.SBSchema])
	}
	if err != nil {
		return err
	}
	if err := c.startControlPlane(cp); err != nil {
		return err
	}
	if c.Client, err = c.client(); err != nil {
		return err
	}
	c.Log("cluster: control plane up after %s", time.Since(start).Round(time.Second))
	// The CRDs (dist/kubernetes/05-crd-*.yaml: the network-policy-api's,
	// EgressFirewall's) are served before the master starts, so that it
	// finds their APIs.
	if c.Dist {
		err = c.installDist(ctx) // they come first in file order
	} else if err = c.installPolicyCRDs(); err == nil {
		err = c.startMasters(cp)
	}
	if err != nil {
		return err
	}
	if err := c.each(func(n *Node) error {
		if err := c.installCNI(n); err != nil {
			return err
		}
		if err := c.startContainerd(n, images); err != nil {
			return err
		}
		if err := c.startKubelet(n); err != nil {
			return err
		}
		if err := poll(ctx, 60*time.Second, "node "+n.Name+" registered", func() error {
			_, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metaGet)
			return err
		}); err != nil {
			return fmt.Errorf("%w\n%s", err, tail(c.logPath(n, "kubelet"), 20))
		}
		return c.startOVNNode(n)
	}); err != nil {
		return err
	}
	if c.Dist {
		err = c.labelMasterNodes()
	} else {
		err = c.labelControlPlane(cp)
	}
	if err != nil {
		return err
	}
	for _, n := range c.Nodes {
		if err := poll(ctx, 120*time.Second, "node "+n.Name+" Ready", func() error { return c.nodeReady(n.Name) }); err != nil {
			return fmt.Errorf("%w\n%s\n%s", err, tail(c.logPath(n, "kubelet"), 15), c.nodeDaemonLog(n))
		}
	}
	if c.Dist {
		if err := poll(ctx, 120*time.Second, "dist/kubernetes/ workloads ready", c.distReady); err != nil {
			return fmt.Errorf("%w\n%s", err, c.distDiagnostics())
		}
	}
	c.Log("cluster: %d nodes Ready after %s", len(c.Nodes), time.Since(start).Round(time.Second))
	if err := c.deployDNS(); err != nil {
		return fmt.Errorf("creating CoreDNS objects: %w", err)
	}
	if err := poll(ctx, 180*time.Second, "CoreDNS ready", c.dnsReady); err != nil {
		return err
	}
	c.Log("cluster: CoreDNS serving; up after %s", time.Since(start).Round(time.Second))
	return nil
}

// each runs f for every node concurrently and joins the errors.
func (c *Cluster) each(f func(*Node) error) error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.Nodes))
	for i, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(n)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// client is a client-go client for the API server, whose connections are
// opened inside the control-plane node's network namespace: the host has
// no route to the cluster's addresses, and needs none.
func (c *Cluster) client() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(c.restConfig())
}

// dynamicClient is client's dynamic twin, for the kinds without a typed
// clientset (k8s.ovn.org/v1).
func (c *Cluster) dynamicClient() (dynamic.Interface, error) {
	return dynamic.NewForConfig(c.restConfig())
}

// restConfig is the API server's admin config, dialling from the
// control-plane node's network namespace.
func (c *Cluster) restConfig() *rest.Config {
	nsPath := "/var/run/netns/" + c.ControlPlane().NetNS
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		err := ns.WithNetNSPath(nsPath, func(ns.NetNS) error {
			var err error
			conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return conn, err
	}
	return &rest.Config{Host: c.APIServer(), BearerToken: adminToken, TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		Dial: dial, QPS: 100, Burst: 200}
}

// Attach connects to a running cluster recorded in Dir.
func (c *Cluster) Attach() error {
	if !Running(c.Dir) {
		return fmt.Errorf("no cluster in %s: run `up` first", c.Dir)
	}
	st, err := loadState(c.Dir)
	if err != nil {
		return err
	}
	c.st = st
	c.Client, err = c.client()
	return err
}
