package cluster

import (
	"fmt"
	"net"
	"strconv"
)

// ZonesPerNode is Config.Zones for zone mode, a zone per node (issue 38):
// every node runs its own NB, SB, ovn-northd and ovn-ic (its databases on
// unix sockets only) and its zone's `ovnkube master --zone`; the control
// plane adds the interconnection NB and SB and `ovnkube cluster-manager`.
const ZonesPerNode = "per-node"

// ZoneModes are the -zones values ("": central mode, one NB and SB).
var ZoneModes = []string{"", ZonesPerNode}

// The interconnection databases' ports on the control-plane node (ovn-ic's
// defaults).
const (
	icNBPort = 6645
	icSBPort = 6646
)

func (c *Cluster) zoned() bool { return c.Zones == ZonesPerNode }

// icAddress is the interconnection NB's or SB's address.
func (c *Cluster) icAddress(port int) string {
	return "tcp:" + net.JoinHostPort(c.ControlPlane().IP, strconv.Itoa(port))
}

// startInterconnect starts the interconnection NB and SB on the
// control-plane node; every zone's ovn-ic reaches them at its address.
func (c *Cluster) startInterconnect(n *Node, icNBSchema, icSBSchema string) error {
	for _, db := range []struct {
		name, schema string
		port         int
	}{{"ovn_ic_nb_db", icNBSchema, icNBPort}, {"ovn_ic_sb_db", icSBSchema, icSBPort}} {
		if err := c.startDB(n, db.name, db.schema, []string{"--remote=ptcp:" + strconv.Itoa(db.port) + ":" + n.IP}); err != nil {
			return err
		}
	}
	return nil
}

// startZoneOVN starts a node's zone: its NB, SB and ovn-northd on unix
// sockets, and ovn-ic between them and the interconnection databases
// (ovn-ic waits until the zone's master names the NB).
func (c *Cluster) startZoneOVN(n *Node, nbSchema, sbSchema string) error {
	for _, db := range []struct{ name, schema string }{{"ovnnb_db", nbSchema}, {"ovnsb_db", sbSchema}} {
		if err := c.startDB(n, db.name, db.schema, nil); err != nil {
			return err
		}
	}
	if err := c.startNorthd(n); err != nil {
		return err
	}
	return c.start(n, "ovn-ic", "ovn-ic", "--ovnnb-db=unix:/run/ovn/ovnnb_db.sock", "--ovnsb-db=unix:/run/ovn/ovnsb_db.sock",
		"--ic-nb-db="+c.icAddress(icNBPort), "--ic-sb-db="+c.icAddress(icSBPort), "--unixctl=/run/ovn/ovn-ic.ctl", "--no-chdir")
}

// startClusterManager starts zone mode's cluster-wide part on the
// control-plane node: host subnets, and the transit switch in the
// interconnection NB.
func (c *Cluster) startClusterManager(n *Node) error {
	return c.start(n, "ovnkube-cluster-manager", c.bin("ovnkube"), "--loglevel", "4", "cluster-manager",
		"--kubeconfig", Kubeconfig, "--ic-nb-address", c.icAddress(icNBPort), "--cluster-subnet", c.clusterSubnetFlag(),
		"--leader-elect-resource-namespace", distNamespace)
}

// startZoneMaster starts the master of n's zone on n, against its own NB.
// Wildcard DNS names (the dnstap stream, which CoreDNS sends to one
// address) are left out: one zone's master could take it.
func (c *Cluster) startZoneMaster(n *Node) error {
	return c.start(n, "ovnkube-master", c.bin("ovnkube"), "--loglevel", "4", "master",
		"--kubeconfig", Kubeconfig, "--nb-address", "unix:/run/ovn/ovnnb_db.sock", "--zone", n.Name,
		"--leader-elect-resource-namespace", distNamespace,
		"--ic-db-address", c.icAddress(icNBPort)+","+c.icAddress(icSBPort), // kept from pods
		"--cluster-subnet", c.clusterSubnetFlag(), "--service-cidr", c.serviceCIDRFlag(), "--external-ip-cidrs", externalCIDRs,
		"--dns-servers", c.dnsIP())
}

// startMasters starts the master on the control-plane node cp in central
// mode; in zone mode the cluster manager there and every zone's master.
func (c *Cluster) startMasters(cp *Node) error {
	if !c.zoned() {
		return c.startMaster(cp)
	}
	if err := c.ensureNamespace(distNamespace); err != nil { // the Leases'
		return err
	}
	if err := c.startClusterManager(cp); err != nil {
		return err
	}
	return c.each(c.startZoneMaster)
}

// sbAddress is where n's ovn-controller finds its SB: the control plane's
// in central mode, its own zone's in zone mode.
func (c *Cluster) sbAddress(n *Node) []string {
	if c.zoned() {
		return []string{"--sb-address", "unix:/run/ovn/ovnsb_db.sock", "--zone", n.Name}
	}
	return []string{"--sb-address", fmt.Sprintf("tcp:%s:%d", c.ControlPlane().IP, sbPort)}
}

// zonesLine is the zone mode for the cluster's first log line.
func (c *Cluster) zonesLine() string {
	if !c.zoned() {
		return "central"
	}
	return "zones " + c.Zones
}
