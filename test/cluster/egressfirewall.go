package cluster

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/dnsname"
	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/policy"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// egressFirewall proves the demo namespace's EgressFirewall with packets
// from the demo's client pod to the external host, in every family of the
// cluster, as rows of r:
//
//   - with no firewall externalWeb2 answers (externalWeb did in the
//     demo's paths), and a closed port refuses: what a probe that gets
//     through sees instead of a timeout;
//   - created (Allow the external host's address on TCP externalWeb, then
//     Deny everything): externalWeb answers (still SNATed to the node's
//     address), externalWeb2 times out (a drop: a refusal would mean the
//     packet got through), and the web Service's ClusterIP (pods) still
//     answers;
//   - edited live (Allow externalName, resolved by the master through the
//     cluster's DNS, on TCP externalWeb2, then Deny everything): the name's
//     address set holds the external host's addresses, externalWeb2
//     answers and externalWeb times out;
//   - edited live again (Allow *.wildDomain on externalWeb2, then Deny
//     everything): its set is empty and externalWeb2 times out until the
//     client pod itself asks the cluster's DNS for wildName (curl by name):
//     CoreDNS's dnstap stream tells the master, the set holds the external
//     host's addresses and the connection goes through;
//   - deleted: its rows are gone and both ports answer.
//
// Every verdict is polled (report.check) until it holds or 20 s pass.
func (c *Cluster) egressFirewall(ctx context.Context, r *report) error {
	stop, err := c.serveExternal()
	if err != nil {
		return err
	}
	defer stop()
	dyn, err := c.dynamicClient()
	if err != nil {
		return err
	}
	efs := dyn.Resource(k8sovnv1.EgressFirewallResource).Namespace(demoNS)
	svc, err := c.Client.CoreV1().Services(demoNS).Get(ctx, "web", metaGet)
	if err != nil {
		return err
	}
	worker := c.Nodes[1]
	name := demoNS + "/" + k8sovnv1.EgressFirewallName
	from := func(f ipFamily) string { return "client (" + worker.Name + ")" + f.tag }
	ext := func(f ipFamily, port int32) string { return "external " + hostPort(f.external, port) }
	answers := func(f ipFamily, port int32) func() (string, error) {
		return func() (string, error) { return c.externalAnswers(f, port) }
	}
	dropped := func(f ipFamily, port int32) func() (string, error) {
		return func() (string, error) { return c.externalDropped(f, port) }
	}
	for _, f := range c.families() {
		r.check(from(f), ext(f, externalWeb2), "no EgressFirewall yet", answers(f, externalWeb2))
		r.check(from(f), ext(f, externalClosed), "no EgressFirewall yet, closed port", func() (string, error) {
			return c.externalRefused(f, externalClosed)
		})
	}

	// a, b: a CIDR on one port allowed, everything else denied.
	var rules []k8sovnv1.EgressFirewallRule
	for _, f := range c.families() {
		rules = append(rules, efRule(k8sovnv1.EgressFirewallRuleAllow, k8sovnv1.EgressFirewallDestination{CIDRSelector: hostCIDR(f)}, externalWeb))
	}
	rules = append(rules, c.efDenyAll()...)
	if err := c.createEF(ctx, efs, rules); err != nil {
		return err
	}
	r.check("master", "EgressFirewall "+name+" created", "status", c.efApplied(ctx, efs))
	for _, f := range c.families() {
		r.check(from(f), ext(f, externalWeb), "EgressFirewall allow CIDR:"+fmt.Sprint(externalWeb), answers(f, externalWeb))
		r.check(from(f), ext(f, externalWeb2), "EgressFirewall deny", dropped(f, externalWeb2))
		vip := f.of(svc.Spec.ClusterIPs)
		r.check(from(f), "web "+hostPort(vip, 80), "EgressFirewall: pods not its business", func() (string, error) {
			return c.kubectlExec("client", "curl", "-s", "-m", "2", "http://"+hostPort(vip, 80)+"/hostname")
		})
	}

	// c: edited live: the DNS name on the other port allowed, everything
	// else denied.
	rules = []k8sovnv1.EgressFirewallRule{efRule(k8sovnv1.EgressFirewallRuleAllow, k8sovnv1.EgressFirewallDestination{DNSName: externalName}, externalWeb2)}
	rules = append(rules, c.efDenyAll()...)
	if err := c.updateEF(ctx, efs, rules); err != nil {
		return err
	}
	// The status has no observedGeneration: it says "applied" before the
	// edit is too; the packets below tell.
	r.check("master", "EgressFirewall "+name+" edited live", "status", c.efApplied(ctx, efs))
	r.check("master", "dnsName "+externalName, "--dns-servers "+c.dnsIP()+" (CoreDNS hosts)", c.domainSetHolds(externalName, c.perFamily(externalIP, externalIP6)))
	for _, f := range c.families() {
		r.check(from(f), ext(f, externalWeb2), "EgressFirewall allow dnsName:"+fmt.Sprint(externalWeb2)+", edited live", answers(f, externalWeb2))
		r.check(from(f), ext(f, externalWeb), "EgressFirewall deny, edited live", dropped(f, externalWeb))
	}

	// c2: a wildcard name, edited live: it matches the addresses the
	// cluster's DNS gave pods for names under it (CoreDNS's dnstap stream to
	// the master), none before a pod asks. Only the pod ever asks for
	// wildName.
	wild := dnsname.Wildcard + wildDomain
	rules = []k8sovnv1.EgressFirewallRule{efRule(k8sovnv1.EgressFirewallRuleAllow, k8sovnv1.EgressFirewallDestination{DNSName: wild}, externalWeb2)}
	rules = append(rules, c.efDenyAll()...)
	if err := c.updateEF(ctx, efs, rules); err != nil {
		return err
	}
	r.check("master", "EgressFirewall "+name+" dnsName "+wild, "status", c.efApplied(ctx, efs))
	r.check("master", "dnsName "+wild, "no pod asked yet: empty", c.domainSetHolds(wild, nil))
	for _, f := range c.families() {
		r.check(from(f), ext(f, externalWeb2), "EgressFirewall allow "+wild+", no name under it asked yet: deny", dropped(f, externalWeb2))
	}
	for _, f := range c.families() {
		r.check(from(f), "http://"+hostPort(wildName, externalWeb2), "the pod resolves "+wildName+" ("+c.tapPath()+"): allowed", func() (string, error) {
			got, _, err := c.clientCurlHost(f, wildName, externalWeb2)
			if node := f.node(c.Nodes[1]); err == nil && got != node {
				err = fmt.Errorf("the external server saw %q, not node address %s", got, node)
			}
			return "server saw " + got, err
		})
	}
	r.check("master", "dnsName "+wild, "what CoreDNS answered the pod for "+wildName, c.domainSetHolds(wild, c.perFamily(externalIP, externalIP6)))

	// d: deleted.
	if err := efs.Delete(ctx, k8sovnv1.EgressFirewallName, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting EgressFirewall %s: %w", name, err)
	}
	r.check("master", "EgressFirewall "+name+" deleted", "port group, ACLs and DNS sets removed", c.efRowsGone(ctx, efs, externalName, wild))
	for _, f := range c.families() {
		for _, port := range []int32{externalWeb, externalWeb2} {
			r.check(from(f), ext(f, port), "EgressFirewall deleted", answers(f, port))
		}
	}
	return nil
}

// externalClosed is a port of the external host nothing listens on.
const externalClosed = 9999

// hostCIDR is the external host's address of f as a CIDR of one address.
func hostCIDR(f ipFamily) string {
	if f.v6 {
		return f.external + "/128"
	}
	return f.external + "/32"
}

// efRule is a rule of type t to to, on TCP port.
func efRule(t k8sovnv1.EgressFirewallRuleType, to k8sovnv1.EgressFirewallDestination, port int32) k8sovnv1.EgressFirewallRule {
	return k8sovnv1.EgressFirewallRule{Type: t, To: to, Ports: []k8sovnv1.EgressFirewallPort{{Protocol: string(corev1.ProtocolTCP), Port: port}}}
}

// efDenyAll denies everything of the cluster's families.
func (c *Cluster) efDenyAll() []k8sovnv1.EgressFirewallRule {
	var out []k8sovnv1.EgressFirewallRule
	for _, cidr := range c.perFamily("0.0.0.0/0", "::/0") {
		out = append(out, k8sovnv1.EgressFirewallRule{Type: k8sovnv1.EgressFirewallRuleDeny, To: k8sovnv1.EgressFirewallDestination{CIDRSelector: cidr}})
	}
	return out
}

// createEF creates the demo namespace's EgressFirewall with rules.
func (c *Cluster) createEF(ctx context.Context, efs dynamic.ResourceInterface, rules []k8sovnv1.EgressFirewallRule) error {
	ef := &k8sovnv1.EgressFirewall{TypeMeta: metav1.TypeMeta{APIVersion: k8sovnv1.GroupVersion.String(), Kind: "EgressFirewall"},
		ObjectMeta: metav1.ObjectMeta{Name: k8sovnv1.EgressFirewallName, Namespace: demoNS}, Spec: k8sovnv1.EgressFirewallSpec{Egress: rules}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ef)
	if err != nil {
		return err
	}
	if _, err := efs.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating EgressFirewall %s/%s: %w", demoNS, ef.Name, err)
	}
	return nil
}

// updateEF replaces the rules of the demo namespace's EgressFirewall (an
// Update of the same object).
func (c *Cluster) updateEF(ctx context.Context, efs dynamic.ResourceInterface, rules []k8sovnv1.EgressFirewallRule) error {
	u, err := efs.Get(ctx, k8sovnv1.EgressFirewallName, metaGet)
	if err != nil {
		return err
	}
	ef := new(k8sovnv1.EgressFirewall)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ef); err != nil {
		return err
	}
	ef.Spec.Egress = rules
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ef)
	if err != nil {
		return err
	}
	if _, err := efs.Update(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating EgressFirewall %s/%s: %w", demoNS, ef.Name, err)
	}
	return nil
}

// efApplied is a probe: the EgressFirewall's status says it is applied.
func (c *Cluster) efApplied(ctx context.Context, efs dynamic.ResourceInterface) func() (string, error) {
	return func() (string, error) {
		u, err := efs.Get(ctx, k8sovnv1.EgressFirewallName, metaGet)
		if err != nil {
			return "", err
		}
		status, _, _ := unstructured.NestedString(u.Object, "status", "status")
		msgs, _, _ := unstructured.NestedStringSlice(u.Object, "status", "messages")
		if status != k8sovnv1.EgressFirewallApplied {
			return "", fmt.Errorf("status %q %q", status, msgs)
		}
		return fmt.Sprintf("%q, %d rules", status, len(rulesOf(u))), nil
	}
}

// clientCurl is curl -m 2 from the demo's client pod to the external host's
// port in f: what the server answered and curl's exit code (-1 when
// kubectl did not run it).
func (c *Cluster) clientCurl(f ipFamily, port int32) (string, int, error) {
	return c.clientCurlHost(f, f.external, port)
}

// clientCurlHost is clientCurl to host (an address or a name, resolved by
// the pod through the cluster's DNS, in f's family).
func (c *Cluster) clientCurlHost(f ipFamily, host string, port int32) (string, int, error) {
	fam := "-4"
	if f.v6 {
		fam = "-6"
	}
	got, err := c.kubectlExec("client", "curl", fam, "-s", "-m", "2", "http://"+hostPort(host, port)+"/")
	var exit *exec.ExitError
	switch {
	case err == nil:
		return got, 0, nil
	case errors.As(err, &exit):
		return got, exit.ExitCode(), err
	}
	return got, -1, err
}

// externalAnswers is a probe: the external host's port answers the client
// pod, and saw the client's node address (the gateway router's SNAT).
func (c *Cluster) externalAnswers(f ipFamily, port int32) (string, error) {
	node := f.node(c.Nodes[1])
	got, _, err := c.clientCurl(f, port)
	if err == nil && got != node {
		err = fmt.Errorf("the external server saw %q, not node address %s", got, node)
	}
	return "server saw " + got, err
}

// externalDropped is a probe: a connection from the client pod to the
// external host's port times out (curl's exit code 28), as it does when
// its packets are dropped; a refusal (7) or an answer means they got
// through.
func (c *Cluster) externalDropped(f ipFamily, port int32) (string, error) {
	got, code, err := c.clientCurl(f, port)
	switch code {
	case 28:
		return "timed out (curl exit 28): dropped", nil
	case 0:
		return "", fmt.Errorf("answered %q: not dropped", got)
	case 7:
		return "", fmt.Errorf("refused (curl exit 7): the packets got through")
	}
	return "", fmt.Errorf("curl exit %d, not a timeout: %v", code, err)
}

// externalRefused is a probe: a connection from the client pod to the
// external host's port is refused (curl's exit code 7): the host's reset
// came back.
func (c *Cluster) externalRefused(f ipFamily, port int32) (string, error) {
	got, code, err := c.clientCurl(f, port)
	if code != 7 {
		return "", fmt.Errorf("curl exit %d (%q), not a refusal: %v", code, got, err)
	}
	return "refused (curl exit 7)", nil
}

// nbctl runs ovn-nbctl on the control-plane node's NB and returns its
// standard output alone: the nodes' ovn-nbctl may be older than the NB's
// schema and warn on stderr about rows it cannot parse (an ACL's "pass").
func (c *Cluster) nbctl(args ...string) (string, error) {
	cmd := c.Command(c.ControlPlane(), append([]string{"ovn-nbctl", "--db=unix:/run/ovn/ovnnb_db.sock"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// domainSetHolds is a probe: the address sets of a DNS name (one per
// family of the cluster) hold exactly want.
func (c *Cluster) domainSetHolds(domain string, want []string) func() (string, error) {
	set := policy.DomainSet{Domain: domain}.Name()
	return func() (string, error) {
		var got, names []string
		for _, f := range c.families() {
			name := topology.FamilySetName(set, f.v6)
			out, err := c.nbctl("--bare", "--columns=addresses", "find", "address_set", "name="+name)
			if err != nil {
				return "", err
			}
			got, names = append(got, strings.Fields(out)...), append(names, name)
		}
		slices.Sort(got)
		sorted := slices.Sorted(slices.Values(want))
		if !slices.Equal(got, sorted) {
			return "", fmt.Errorf("%s hold %v, want %v", strings.Join(names, ", "), got, sorted)
		}
		return strings.Join(names, ", ") + " = " + strings.Join(got, ", "), nil
	}
}

// efRowsGone is a probe: the demo namespace's firewall left no port group,
// ACL or address set of the DNS name behind, and the API no object.
func (c *Cluster) efRowsGone(ctx context.Context, efs dynamic.ResourceInterface, domains ...string) func() (string, error) {
	pg := policy.AdminPortGroup(policy.KindEF, demoNS)
	queries := [][]string{
		{"find", "port_group", "name=" + pg},
		{"find", "acl", `external_ids:"k8s.ovn.org/owner-type"="` + policy.KindEF + `"`},
	}
	var sets []string
	for _, d := range domains {
		set := policy.DomainSet{Domain: d}.Name()
		sets = append(sets, set)
		queries = append(queries, []string{"find", "address_set", "name=" + set}, []string{"find", "address_set", "name=" + topology.FamilySetName(set, true)})
	}
	return func() (string, error) {
		if _, err := efs.Get(ctx, k8sovnv1.EgressFirewallName, metaGet); !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("the object is still there (%v)", err)
		}
		var left []string
		for _, q := range queries {
			out, err := c.nbctl(append([]string{"--bare", "--columns=_uuid"}, q...)...)
			if err != nil {
				return "", err
			}
			if out != "" {
				left = append(left, fmt.Sprintf("%s: %d rows", strings.Join(q[1:], " "), len(strings.Fields(out))))
			}
		}
		if len(left) > 0 {
			return "", fmt.Errorf("left: %s", strings.Join(left, "; "))
		}
		return pg + ", its ACLs, " + strings.Join(sets, ", ") + " gone", nil
	}
}

// rulesOf are an EgressFirewall's spec.egress.
func rulesOf(u *unstructured.Unstructured) []any {
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "egress")
	return rules
}
