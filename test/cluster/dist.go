package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/leader"
)

// An installed cluster (Config.Dist) runs ovn-k8s as an operator would:
// the ovnkube image (`make images`) in every node's containerd, OVS and
// ovn-controller on the hosts, and dist/kubernetes/ applied with kubectl,
// the ConfigMap holding this cluster's settings. The master is then the
// Deployment's two replicas (every node may run one) and the node daemon,
// ovn_cni and the conflist come from the DaemonSet.
const (
	distNamespace = leader.DefaultNamespace // the Lease's, and dist/'s
	distImage     = "ovnkube.tar"
	nbPort        = 6641
)

// distConfig is the ConfigMap dist/kubernetes/20-config.yaml stands for.
func (c *Cluster) distConfig() *corev1.ConfigMap {
	cp := c.ControlPlane()
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "ovn-config", Namespace: distNamespace},
		Data: map[string]string{
			"cluster_subnet":    c.clusterSubnetFlag(),
			"service_cidr":      c.serviceCIDRFlag(),
			"nb_address":        "ssl:" + cp.IP + ":" + strconv.Itoa(nbPort),
			"sb_address":        "ssl:" + cp.IP + ":" + strconv.Itoa(sbPort),
			"k8s_apiserver":     c.APIServer(),
			"gateway_interface": gatewayBridge,
			"datapath_type":     "netdev",
			"external_ip_cidrs": externalCIDRs,
			"dns_servers":       c.dnsIP(), // names resolve as pods resolve them
			"dns_tap_address":   "",        // CoreDNS streams to the master of `make northsouth` alone
			"ic_nb_address":     c.zoneConfig(icNBPort),
			"ic_sb_address":     c.zoneConfig(icSBPort),
		},
	}
}

// zoneConfig is the interconnection database's address in zone mode, ""
// (unused) in central mode.
func (c *Cluster) zoneConfig(port int) string {
	if !c.zoned() {
		return ""
	}
	return c.icAddress(port)
}

// distFiles are what an operator applies, in order: dist/kubernetes/*.yaml,
// in zone mode with zones/ in place of the central master's and node's
// workloads.
func (c *Cluster) distFiles() ([]string, error) {
	dir := filepath.Join(c.Repo, "dist", "kubernetes")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no dist/kubernetes/*.yaml in %s", c.Repo)
	}
	sort.Strings(files)
	if !c.zoned() {
		return files, nil
	}
	files = slices.DeleteFunc(files, func(f string) bool { return slices.Contains(centralWorkloads, filepath.Base(f)) })
	zones, err := filepath.Glob(filepath.Join(dir, "zones", "*.yaml"))
	if err != nil || len(zones) == 0 {
		return nil, fmt.Errorf("no dist/kubernetes/zones/*.yaml in %s", c.Repo)
	}
	sort.Strings(zones)
	return append(files, zones...), nil
}

// centralWorkloads are dist/kubernetes/'s files that zones/ replaces.
var centralWorkloads = []string{"30-master.yaml", "40-node.yaml"}

// installDist applies dist/kubernetes/ in file order (the network-policy-api
// CRDs first, each waited for until it is served), with distConfig in
// place of the example ConfigMap and, beside it, the Secret holding the
// master's NB client certificate (dbtls.go).
func (c *Cluster) installDist(ctx context.Context) error {
	secret, err := c.dbTLSSecretObject()
	if err != nil {
		return err
	}
	files, err := c.distFiles()
	if err != nil {
		return err
	}
	for _, f := range files {
		if filepath.Base(f) == "20-config.yaml" {
			if _, err := c.Client.CoreV1().ConfigMaps(distNamespace).Create(ctx, c.distConfig(), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("ConfigMap ovn-config: %w", err)
			}
			if _, err := c.Client.CoreV1().Secrets(distNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("Secret %s: %w", dbTLSSecret, err)
			}
			continue
		}
		if err := c.kubectlApply(f); err != nil {
			return err
		}
		if strings.HasPrefix(filepath.Base(f), "05-crd-") {
			if err := c.waitEstablished([]string{f}); err != nil {
				return err
			}
		}
	}
	return nil
}

// labelMasterNodes lets every node run a master replica: the Deployment
// wants control-plane nodes, one replica each.
func (c *Cluster) labelMasterNodes() error {
	for _, n := range c.Nodes {
		if err := c.labelControlPlane(n); err != nil {
			return err
		}
	}
	return nil
}

// distDiagnostics is what an operator would look at when the install does
// not come up: the workloads' pods and the last lines of their logs.
func (c *Cluster) distDiagnostics() string {
	var b strings.Builder
	out, _ := c.Exec(c.ControlPlane(), c.bin("kubectl"), "--kubeconfig", Kubeconfig, "get", "pods", "-n", distNamespace, "-o", "wide")
	fmt.Fprintf(&b, "--- kubectl get pods -n %s:\n%s", distNamespace, out)
	pods, err := c.Client.CoreV1().Pods(distNamespace).List(bg, metav1.ListOptions{})
	if err != nil {
		return b.String() + err.Error()
	}
	lines := int64(15)
	for _, p := range pods.Items {
		for _, ct := range p.Spec.Containers {
			logs, err := c.Client.CoreV1().Pods(distNamespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: ct.Name, TailLines: &lines}).DoRaw(bg)
			fmt.Fprintf(&b, "--- %s/%s:\n%s%s", p.Name, ct.Name, logs, errOrEmpty(err))
		}
	}
	return b.String()
}

// distReady reports why the installed workloads are not all ready: every
// node runs a ready node daemon (zone mode: and its zone's master), and one
// replica of the cluster-wide Deployment holds its Lease.
func (c *Cluster) distReady() error {
	for _, name := range c.distDaemonSets() {
		ds, err := c.Client.AppsV1().DaemonSets(distNamespace).Get(bg, name, metaGet)
		if err != nil {
			return err
		}
		if int(ds.Status.NumberReady) != len(c.Nodes) {
			return fmt.Errorf("DaemonSet %s: %d of %d ready", name, ds.Status.NumberReady, len(c.Nodes))
		}
	}
	return c.holderReady(c.distLease())
}

// distDaemonSets are the installed DaemonSets, one pod per node each.
func (c *Cluster) distDaemonSets() []string {
	if c.zoned() {
		return []string{"ovnkube-node", "ovnkube-zone-master"}
	}
	return []string{"ovnkube-node"}
}

// distLease is the Lease of the cluster-wide Deployment's leader: the
// master's, in zone mode the cluster manager's.
func (c *Cluster) distLease() string {
	if c.zoned() {
		return clusterManagerLease
	}
	return leader.DefaultLeaseName
}

// clusterManagerLease is `ovnkube cluster-manager`'s default Lease.
const clusterManagerLease = "ovnkube-cluster-manager"

// holderReady reports why the pod holding the Lease is not ready.
func (c *Cluster) holderReady(lease string) error {
	holder, err := c.leaseHolder(lease)
	if err != nil {
		return err
	}
	pod, err := c.Client.CoreV1().Pods(distNamespace).Get(bg, holder, metaGet)
	if err != nil {
		return fmt.Errorf("the Lease %s's holder %q: %w", lease, holder, err)
	}
	if !podReady(pod) {
		return fmt.Errorf("%s holds the Lease %s but is not ready", holder, lease)
	}
	return nil
}

// leaseHolder is the pod holding the Lease.
func (c *Cluster) leaseHolder(lease string) (string, error) {
	l, err := c.Client.CoordinationV1().Leases(distNamespace).Get(bg, lease, metaGet)
	if err != nil {
		return "", err
	}
	if !leaseHeld(l) {
		return "", fmt.Errorf("Lease %s is not held", lease)
	}
	return *l.Spec.HolderIdentity, nil
}

func leaseHeld(l *coordinationv1.Lease) bool {
	return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" && l.Spec.RenewTime != nil &&
		l.Spec.LeaseDurationSeconds != nil &&
		time.Since(l.Spec.RenewTime.Time) < time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second
}

func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Install is the installed cluster's check, after Up: the demo's paths,
// then the leading replica of the cluster-wide Deployment (the master; in
// zone mode the cluster manager) deleted (as `kubectl delete pod` or a
// drain would) and another taking over: it holds the Lease within 15 s. In
// zone mode a zone's master pod is deleted too and the DaemonSet's new pod
// takes the zone's Lease over. Then a new pod (in zone mode on that zone's
// node) gets its address. (A leader killed with SIGKILL is
// test/integration's TestLeaderKilledMidChurn...) Last, the databases serve
// only TLS clients with certificates, pods included (CheckDBTLS, zone mode:
// CheckICTLS).
func (c *Cluster) Install(ctx context.Context) (string, error) {
	report, err := c.Demo(ctx)
	if err != nil {
		return report, err
	}
	var b strings.Builder
	b.WriteString(report)
	if !c.zoned() { // ovnkube trace and diff read central mode's NB
		report, err = c.kubectlOVNK()
		b.WriteString(report)
		if err != nil {
			return b.String(), err
		}
	}
	if err := c.replaceLeader(ctx, &b, c.distLease(), 15*time.Second); err != nil {
		return b.String(), fmt.Errorf("%w\n%s", err, c.distDiagnostics())
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "after-takeover", Namespace: demoNS},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: agnhostImg, Args: []string{"pause"}}}},
	}
	if c.zoned() {
		// The zone's master is replaced when the old pod's lease runs out
		// (it was not released).
		zone := c.Nodes[1].Name
		if err := c.replaceLeader(ctx, &b, leader.DefaultLeaseName+"-"+zone, time.Minute); err != nil {
			return b.String(), fmt.Errorf("%w\n%s", err, c.distDiagnostics())
		}
		pod.Spec.NodeName = zone
	}
	if _, err := c.Client.CoreV1().Pods(demoNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return b.String(), err
	}
	if err := poll(ctx, 60*time.Second, "pod after-takeover Running with an address", func() error {
		p, err := c.Client.CoreV1().Pods(demoNS).Get(ctx, pod.Name, metaGet)
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			return fmt.Errorf("phase %s, IP %q", p.Status.Phase, p.Status.PodIP)
		}
		return nil
	}); err != nil {
		return b.String(), fmt.Errorf("%w\n%s", err, c.distDiagnostics())
	}
	fmt.Fprintf(&b, "a new pod %s got its address\n", pod.Spec.NodeName)
	check := c.CheckDBTLS
	if c.zoned() {
		check = c.CheckICTLS
	}
	report, err = check(ctx)
	b.WriteString(report)
	return b.String(), err
}

// replaceLeader deletes the pod holding the Lease at once and waits until
// another pod holds it.
func (c *Cluster) replaceLeader(ctx context.Context, b *strings.Builder, lease string, within time.Duration) error {
	old, err := c.leaseHolder(lease)
	if err != nil {
		return err
	}
	zero := int64(0)
	killed := time.Now()
	if err := c.Client.CoreV1().Pods(distNamespace).Delete(ctx, old, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		return err
	}
	var holder string
	if err := poll(ctx, within, "another pod holding the Lease "+lease+" after "+old+" was deleted", func() error {
		var err error
		if holder, err = c.leaseHolder(lease); err == nil && holder == old {
			err = fmt.Errorf("still %s", holder)
		}
		return err
	}); err != nil {
		return err
	}
	fmt.Fprintf(b, "=== failover: Lease %s ===\ndeleted its holder %s; %s held it after %s\n",
		lease, old, holder, time.Since(killed).Round(100*time.Millisecond))
	return nil
}

// kubectlOVNK runs `kubectl ovnk` as an operator would on the installed
// cluster: kubectl's plugin (ovnkube linked as kubectl-ovnk on the PATH)
// with kubectl's kubeconfig, the databases' ssl: addresses and the ranges
// from the ConfigMap ovn-config, and certificates of its own for the
// databases (the master's for the NB, the control plane's chassis
// certificate for the SB, which only lets it read). The client's trace to
// the web Service is delivered out of a web pod's port, and the NB is in
// sync with what the master wants (diff exit 0).
func (c *Cluster) kubectlOVNK() (string, error) {
	cp := c.ControlPlane()
	pki := func(name string) string { return filepath.Join(centralPKIDir, name) }
	ovnk := func(args ...string) (string, error) {
		return c.Exec(cp, append([]string{"env", "PATH=" + filepath.Dir(c.bin("kubectl")) + ":" + os.Getenv("PATH"),
			"KUBECONFIG=" + Kubeconfig, "kubectl", "ovnk"}, args...)...)
	}
	nbTLS := []string{"--nb-client-cert", pki(masterCN + "-cert.pem"), "--nb-client-privkey", pki(masterCN + "-privkey.pem"), "--nb-client-cacert", pki(caName + "-ca.pem")}
	sbTLS := []string{"--sb-client-cert", filepath.Join(chassisTLSDir, "tls.crt"), "--sb-client-privkey", filepath.Join(chassisTLSDir, "tls.key"), "--sb-client-cacert", filepath.Join(chassisTLSDir, "ca.crt")}
	var b strings.Builder
	trace, err := ovnk(append(append([]string{"trace", demoNS + "/client", "svc/" + demoNS + "/web"}, nbTLS...), sbTLS...)...)
	fmt.Fprintf(&b, "=== kubectl ovnk trace %s/client svc/%s/web (the ConfigMap's ssl: databases) ===\n%s\n", demoNS, demoNS, trace)
	first, _, _ := strings.Cut(trace, "\n")
	if err != nil || !strings.HasPrefix(first, "DELIVERED") || !strings.Contains(first, "(out of port "+demoNS+"_web") {
		return b.String(), fmt.Errorf("kubectl ovnk trace: %v: %s", err, first)
	}
	diff, err := ovnk(append([]string{"diff"}, nbTLS...)...)
	fmt.Fprintf(&b, "=== kubectl ovnk diff ===\n%s\n", diff)
	if err != nil {
		return b.String(), fmt.Errorf("kubectl ovnk diff: %w", err)
	}
	return b.String(), nil
}
