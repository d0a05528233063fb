package cluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
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

// icAddress is the interconnection NB's or SB's address: in clear for the
// harness's own daemons, ssl: for an installed cluster (configureICTLS).
func (c *Cluster) icAddress(port int) string {
	scheme := "tcp:"
	if c.Dist {
		scheme = "ssl:"
	}
	return scheme + net.JoinHostPort(c.ControlPlane().IP, strconv.Itoa(port))
}

// startInterconnect starts the interconnection NB and SB on the
// control-plane node; every zone's ovn-ic reaches them at its address. An
// installed cluster's take their TLS listeners from the databases, as
// OVN central's do (dbtls.go).
func (c *Cluster) startInterconnect(n *Node, icNBSchema, icSBSchema string) error {
	if c.Dist {
		if err := c.makeDBPKI(); err != nil {
			return err
		}
	}
	for _, db := range []struct {
		name, schema, model string
		port                int
	}{{"ovn_ic_nb_db", icNBSchema, "OVN_IC_Northbound", icNBPort}, {"ovn_ic_sb_db", icSBSchema, "OVN_IC_Southbound", icSBPort}} {
		remotes := []string{"--remote=ptcp:" + strconv.Itoa(db.port) + ":" + n.IP}
		if c.Dist {
			remotes = centralTLSArgs(db.model)
		}
		if err := c.startDB(n, db.name, db.schema, remotes); err != nil {
			return err
		}
	}
	if c.Dist {
		return c.configureICTLS(bg)
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
	args := []string{"ovn-ic", "--ovnnb-db=unix:/run/ovn/ovnnb_db.sock", "--ovnsb-db=unix:/run/ovn/ovnsb_db.sock",
		"--ic-nb-db=" + c.icAddress(icNBPort), "--ic-sb-db=" + c.icAddress(icSBPort), "--unixctl=/run/ovn/ovn-ic.ctl", "--no-chdir"}
	if c.Dist {
		// The node's chassis certificate (makeDBPKI), as dist/README.md
		// tells an operator to start ovn-ic.
		args = append(args, "-p", chassisTLSDir+"/tls.key", "-c", chassisTLSDir+"/tls.crt", "-C", chassisTLSDir+"/ca.crt")
	}
	return c.start(n, "ovn-ic", args...)
}

// startClusterManager starts zone mode's cluster-wide part on the
// control-plane node: host subnets, the transit switch in the
// interconnection NB, and CoreDNS's dnstap stream (where the master takes
// it in central mode), whose answers it relays to the zones.
func (c *Cluster) startClusterManager(n *Node) error {
	return c.start(n, "ovnkube-cluster-manager", c.bin("ovnkube"), "--loglevel", "4", "cluster-manager",
		"--kubeconfig", Kubeconfig, "--ic-nb-address", c.icAddress(icNBPort), "--cluster-subnet", c.clusterSubnetFlag(),
		"--leader-elect-resource-namespace", distNamespace, "--dns-tap-address", fmt.Sprintf(":%d", dnsTapPort))
}

// startZoneMaster starts the master of n's zone on n, against its own NB;
// it learns the cluster DNS's answers from the cluster manager
// (--dns-tap-address: where the stream goes).
func (c *Cluster) startZoneMaster(n *Node) error {
	return c.start(n, "ovnkube-master", c.bin("ovnkube"), "--loglevel", "4", "master",
		"--kubeconfig", Kubeconfig, "--nb-address", "unix:/run/ovn/ovnnb_db.sock", "--zone", n.Name,
		"--leader-elect-resource-namespace", distNamespace,
		"--ic-db-address", c.icAddress(icNBPort)+","+c.icAddress(icSBPort), // kept from pods
		"--cluster-subnet", c.clusterSubnetFlag(), "--service-cidr", c.serviceCIDRFlag(), "--external-ip-cidrs", externalCIDRs,
		"--dns-servers", c.dnsIP(), "--dns-tap-address", fmt.Sprintf(":%d", dnsTapPort))
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

// CheckICTLS is CheckDBTLS for an installed cluster in zone mode, read from
// the databases' state and from what their listeners do:
//
//   - the interconnection NB and SB offer only pssl:, and every zone's
//     ovn-ic registered its availability zone through them (under its
//     node's chassis certificate);
//   - every zone's NB and SB serve their unix sockets only;
//   - from another node: a clear-text OVSDB client, a TLS client without a
//     certificate and one whose certificate another CA signed get no
//     session with either; the cluster manager's certificate gets one with
//     the IC NB;
//   - from a pod: no session with either without a certificate.
func (c *Cluster) CheckICTLS(ctx context.Context) (string, error) {
	var b strings.Builder
	cp := c.ControlPlane()
	query := c.execWords
	nbAddr := net.JoinHostPort(cp.IP, strconv.Itoa(icNBPort))
	sbAddr := net.JoinHostPort(cp.IP, strconv.Itoa(icSBPort))
	for _, db := range []struct{ ctl, sock, want string }{
		{"ovn-ic-nbctl", "ovn_ic_nb_db", "pssl:" + strconv.Itoa(icNBPort) + ":" + cp.IP},
		{"ovn-ic-sbctl", "ovn_ic_sb_db", "pssl:" + strconv.Itoa(icSBPort) + ":" + cp.IP},
	} {
		if got := query(cp, db.ctl, "--db=unix:/run/ovn/"+db.sock+".sock", "--bare", "--columns=target", "list", "Connection"); got != db.want {
			return b.String(), fmt.Errorf("%s connections %q, want only %s", db.sock, got, db.want)
		}
	}
	var names []string
	for _, n := range c.Nodes {
		names = append(names, n.Name)
		for _, db := range []string{"ovnnb_db", "ovnsb_db"} {
			want := "punix:/run/ovn/" + db + ".sock"
			if got := query(n, "ovs-appctl", "-t", "/run/ovn/"+db+".ctl", "ovsdb-server/list-remotes"); got != want {
				return b.String(), fmt.Errorf("zone %s's %s serves %q, want only %s: a zone's databases are its host's only", n.Name, db, got, want)
			}
		}
	}
	slices.Sort(names)
	azs := strings.Fields(query(cp, "ovn-ic-sbctl", "--db=unix:/run/ovn/ovn_ic_sb_db.sock", "--bare", "--columns=name", "list", "Availability_Zone"))
	slices.Sort(azs)
	if !slices.Equal(azs, names) {
		return b.String(), fmt.Errorf("IC SB availability zones %v, want every node's %v (each zone's ovn-ic over ssl:)", azs, names)
	}
	fmt.Fprintf(&b, "=== interconnection databases over TLS ===\nIC NB listens only on pssl:%d, IC SB only on pssl:%d; zones %v registered over ssl:; every zone's NB and SB serve only their unix sockets\n",
		icNBPort, icSBPort, azs)
	worker := c.Nodes[len(c.Nodes)-1]
	if err := c.refusesStrangers(&b, worker, map[string]string{"IC NB": nbAddr, "IC SB": sbAddr}, "IC NB", nbAddr, "OVN_IC_Northbound"); err != nil {
		return b.String(), err
	}
	err := c.podKeptFrom(ctx, &b, nbAddr, sbAddr)
	return b.String(), err
}
