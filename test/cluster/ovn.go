package cluster

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// startOVNCentral starts the NB and SB databases and ovn-northd on the
// control-plane node; both also listen on the node address, the SB for the
// other nodes' ovn-controllers, the NB for masters run by the Deployment:
// in clear (tcp:) for the harness's own daemons, only over TLS with client
// certificates (pssl:, the SB with the ovn-controller role) for an
// installed cluster (dbtls.go).
func (c *Cluster) startOVNCentral(n *Node, nbSchema, sbSchema string) error {
	dbs := []struct {
		name, schema string
		remote       []string
	}{
		{"ovnnb_db", nbSchema, []string{"--remote=ptcp:" + strconv.Itoa(nbPort) + ":" + n.IP}},
		{"ovnsb_db", sbSchema, []string{"--remote=ptcp:" + strconv.Itoa(sbPort) + ":" + n.IP}},
	}
	if c.Dist {
		// An installed cluster's databases as dist/README.md sets them up:
		// TLS listeners and certificates kept in the databases
		// (configureCentralTLS), nothing in clear on the network.
		if err := c.makeDBPKI(); err != nil {
			return err
		}
		dbs[0].remote = centralTLSArgs("OVN_Northbound")
		dbs[1].remote = centralTLSArgs("OVN_Southbound")
	}
	for _, db := range dbs {
		if err := c.startDB(n, db.name, db.schema, db.remote); err != nil {
			return err
		}
	}
	if err := c.startNorthd(n); err != nil {
		return err
	}
	if c.Dist {
		return c.configureCentralTLS(bg)
	}
	return nil
}

// startDB creates an OVSDB database of the schema on n and serves it on
// /run/ovn/<name>.sock and the remotes given.
func (c *Cluster) startDB(n *Node, name, schema string, remotes []string) error {
	file := "/var/lib/ovn/" + name + ".db"
	if _, err := c.Exec(n, "ovsdb-tool", "create", file, schema); err != nil {
		return err
	}
	args := append([]string{"ovsdb-server", file, "--remote=punix:/run/ovn/" + name + ".sock",
		"--unixctl=/run/ovn/" + name + ".ctl", "--no-chdir"}, remotes...)
	if err := c.start(n, name, args...); err != nil {
		return err
	}
	return waitFile(n.hostPath("/run/ovn/" + name + ".sock"))
}

// startNorthd starts ovn-northd between n's NB and SB.
func (c *Cluster) startNorthd(n *Node) error {
	return c.start(n, "ovn-northd", "ovn-northd", "--ovnnb-db=unix:/run/ovn/ovnnb_db.sock",
		"--ovnsb-db=unix:/run/ovn/ovnsb_db.sock", "--unixctl=/run/ovn/ovn-northd.ctl", "--no-chdir")
}

// startMaster starts `ovnkube master` next to OVN central. It resolves the
// DNS names of egress firewalls and admin policies with the cluster's DNS
// (the kube-dns ClusterIP of the primary family, reached through the node's
// management port once the network is up; until then the resolver retries),
// never with the host's.
func (c *Cluster) startMaster(n *Node) error {
	// The master's leader Lease lives in the namespace dist/ installs it in.
	if err := c.ensureNamespace(distNamespace); err != nil {
		return err
	}
	return c.start(n, "ovnkube-master", c.bin("ovnkube"), "--loglevel", "4", "master",
		"--kubeconfig", Kubeconfig, "--nb-address", "unix:/run/ovn/ovnnb_db.sock",
		"--sb-address", fmt.Sprintf("tcp:%s:%d", n.IP, sbPort), // pods are kept from it
		"--cluster-subnet", c.clusterSubnetFlag(), "--service-cidr", c.serviceCIDRFlag(), "--external-ip-cidrs", externalCIDRs,
		"--dns-servers", c.dnsIP(), "--dns-tap-address", fmt.Sprintf(":%d", dnsTapPort))
}

func (c *Cluster) ensureNamespace(name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// gatewayBridge is the bridge nics-to-bridge made of every node's NIC.
const gatewayBridge = "brul0"

// startOVNNode starts ovn-controller and `ovnkube node` (which writes OVS's
// external_ids for ovn-controller, builds the management port and gives the
// node its shared gateway on brul0).
func (c *Cluster) startOVNNode(n *Node) error {
	if c.Dist {
		if err := c.prepareChassis(n); err != nil {
			return err
		}
	}
	if err := c.start(n, "ovn-controller", "ovn-controller", "unix:/run/openvswitch/db.sock", "--no-chdir", "--monitor"); err != nil {
		return err
	}
	if c.Dist {
		return nil // the DaemonSet's
	}
	return c.startNodeDaemon(n)
}

// nodeDaemonLog is the end of n's node daemon log, for errors.
func (c *Cluster) nodeDaemonLog(n *Node) string {
	if c.Dist {
		return c.distDiagnostics()
	}
	return tail(c.logPath(n, "ovnkube-node"), 15)
}

func (c *Cluster) startNodeDaemon(n *Node) error {
	args := append([]string{c.bin("ovnkube"), "--loglevel", "4", "node", "--node-name", n.Name, "--encap-ip", n.IP}, c.sbAddress(n)...)
	args = append(args, "--kubeconfig", Kubeconfig, "--datapath-type", "netdev",
		"--cluster-subnet", c.clusterSubnetFlag(), "--service-cidr", c.serviceCIDRFlag(),
		"--bridge-interface", gatewayBridge, "--physical-ip", c.physicalIPs(n),
		"--external-ip-cidrs", externalCIDRs, "--cni-server-socket", cniServerSocket)
	return c.start(n, "ovnkube-node", args...)
}

// cniServerSocket is where the shipped conflist's ovn_cni shim finds the
// node daemon (dist/cni/10-ovn-k8s.conflist, cniServerSocket).
const cniServerSocket = "/run/ovn-kubernetes/cni/ovn-cni-server.sock"
