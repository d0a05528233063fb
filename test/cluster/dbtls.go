package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// The installed cluster's OVN databases are reached only over TLS with
// client certificates, as dist/README.md tells an operator to set them up:
//
//   - OVN central (the control-plane node) takes its listeners and its
//     certificate from the databases (ovsdb-server --remote=db:...), set with
//     `ovn-nbctl set-connection pssl:6641` / `ovn-sbctl set-connection
//     role=ovn-controller pssl:6642` and set-ssl; nothing listens in clear.
//   - the master's NB client certificate is the Secret dbTLSSecret, which
//     30-master.yaml mounts;
//   - every chassis has its own certificate in chassisTLSDir on the host,
//     CN = its OVS system-id (set before ovn-controller starts), because the
//     SB's ovn-controller role lets a chassis write only the rows of the
//     chassis its certificate names. 40-node.yaml mounts that directory at
//     the same path and the node daemon writes it to OVS's SSL table, where
//     ovn-controller (on the host) reads it.
const (
	dbTLSSecret    = "ovn-k8s-db-tls"
	chassisTLSDir  = "/etc/openvswitch/ovn-tls"
	centralPKIDir  = "/var/lib/ovn/pki"
	masterCN       = "ovnkube-master"
	clusterMgrCN   = "ovnkube-cluster-manager" // zone mode's IC NB client
	caName         = "ovn-k8s"
	sbChassisRole  = "ovn-controller"
	ovsdbProbeWait = 5 * time.Second
)

// pkiFile is a file of OVN central's PKI directory on the control-plane
// node, as the host sees it.
func (c *Cluster) pkiFile(name string) string {
	return c.ControlPlane().hostPath(filepath.Join(centralPKIDir, name))
}

// makeDBPKI makes the CA and every certificate: the NB's and SB's server
// certificates, the master's NB client certificate and one per chassis.
func (c *Cluster) makeDBPKI() error {
	cp := c.ControlPlane()
	pki, err := harness.NewPKIDir(c.pkiFile(""), caName)
	if err != nil {
		return err
	}
	cns := []string{"ovnnb", "ovnsb", masterCN}
	if c.zoned() {
		cns = []string{"ovnicnb", "ovnicsb", clusterMgrCN}
	}
	for _, cn := range cns {
		if err := pki.IssueTo(c.pkiFile(cn+"-cert.pem"), c.pkiFile(cn+"-privkey.pem"), cn, net.ParseIP(cp.IP)); err != nil {
			return err
		}
	}
	for _, n := range c.Nodes {
		dir := n.hostPath(chassisTLSDir)
		if err := pki.IssueTo(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), n.Name, net.ParseIP(n.IP)); err != nil {
			return err
		}
		if err := copyFile(pki.CACert, filepath.Join(dir, "ca.crt"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// centralTLSArgs are ovsdb-server's options that take the listeners and the
// certificate from the database itself (as ovn-ctl starts it).
func centralTLSArgs(db string) []string {
	table := map[string]string{"OVN_Northbound": "NB_Global", "OVN_Southbound": "SB_Global",
		"OVN_IC_Northbound": "IC_NB_Global", "OVN_IC_Southbound": "IC_SB_Global"}[db]
	return []string{"--remote=db:" + db + "," + table + ",connections",
		"--private-key=db:" + db + ",SSL,private_key", "--certificate=db:" + db + ",SSL,certificate",
		"--ca-cert=db:" + db + ",SSL,ca_cert"}
}

// configureCentralTLS is what an operator runs once on OVN central: the
// certificates and the pssl: listeners, the SB's with the ovn-controller
// role. Then it waits until both answer a client with a certificate.
func (c *Cluster) configureCentralTLS(ctx context.Context) error {
	cp := c.ControlPlane()
	if out, err := c.Exec(cp, "ovn-nbctl", "--db=unix:/run/ovn/ovnnb_db.sock", "--no-wait", "init"); err != nil {
		return fmt.Errorf("ovn-nbctl init: %w: %s", err, out)
	}
	if err := c.listenTLS("ovn-nbctl", "ovnnb_db", "ovnnb", fmt.Sprintf("pssl:%d:%s", nbPort, cp.IP)); err != nil {
		return err
	}
	// SB_Global is ovn-northd's to create.
	if err := poll(ctx, 20*time.Second, "ovn-northd creating SB_Global", func() error {
		out, err := c.Exec(cp, "ovn-sbctl", "--db=unix:/run/ovn/ovnsb_db.sock", "--bare", "--columns=_uuid", "list", "SB_Global")
		if err == nil && strings.TrimSpace(out) == "" {
			err = fmt.Errorf("no row")
		}
		return err
	}); err != nil {
		return err
	}
	if err := c.listenTLS("ovn-sbctl", "ovnsb_db", "ovnsb", "role="+sbChassisRole, fmt.Sprintf("pssl:%d:%s", sbPort, cp.IP)); err != nil {
		return err
	}
	return c.waitTLS(ctx, "OVN central", nbPort, sbPort)
}

// configureICTLS is configureCentralTLS for zone mode's interconnection
// NB and SB (set-connection makes their Global rows).
func (c *Cluster) configureICTLS(ctx context.Context) error {
	cp := c.ControlPlane()
	if err := c.listenTLS("ovn-ic-nbctl", "ovn_ic_nb_db", "ovnicnb", fmt.Sprintf("pssl:%d:%s", icNBPort, cp.IP)); err != nil {
		return err
	}
	if err := c.listenTLS("ovn-ic-sbctl", "ovn_ic_sb_db", "ovnicsb", fmt.Sprintf("pssl:%d:%s", icSBPort, cp.IP)); err != nil {
		return err
	}
	return c.waitTLS(ctx, "the interconnection databases", icNBPort, icSBPort)
}

// listenTLS gives the control plane's database db (its socket's name) the
// server certificate cert and makes connection (set-connection's
// arguments) its only listener, with ctl (ovn-nbctl, ovn-ic-sbctl, ...).
func (c *Cluster) listenTLS(ctl, db, cert string, connection ...string) error {
	base := []string{ctl, "--db=unix:/run/ovn/" + db + ".sock"}
	for _, cmd := range [][]string{
		append(slices.Clone(base), "set-ssl", c.pkiFile(cert+"-privkey.pem"), c.pkiFile(cert+"-cert.pem"), c.pkiFile(caName+"-ca.pem")),
		append(append(slices.Clone(base), "set-connection"), connection...),
	} {
		if out, err := c.Exec(c.ControlPlane(), cmd...); err != nil {
			return fmt.Errorf("%v: %w: %s", cmd, err, out)
		}
	}
	return nil
}

// waitTLS waits until the control plane's ports answer the Secret's
// certificate.
func (c *Cluster) waitTLS(ctx context.Context, what string, ports ...int) error {
	cfg, err := c.secretTLSConfig()
	if err != nil {
		return err
	}
	cp := c.ControlPlane()
	for _, port := range ports {
		addr := net.JoinHostPort(cp.IP, strconv.Itoa(port))
		if err := poll(ctx, 20*time.Second, what+" serving TLS on "+addr, func() error {
			_, err := ovsdbListDBs("/var/run/netns/"+cp.NetNS, addr, cfg)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// dbClientCN is the client whose certificate the Secret dbTLSSecret holds:
// the master's (NB) in central mode, the cluster manager's (IC NB) in zone
// mode, whose zone masters reach their NB on a unix socket.
func (c *Cluster) dbClientCN() string {
	if c.zoned() {
		return clusterMgrCN
	}
	return masterCN
}

// dbTLSSecretObject is the Secret 30-master.yaml (zone mode:
// zones/30-cluster-manager.yaml) mounts: the client certificate of
// dbClientCN, its key and the CA of the servers' certificates.
func (c *Cluster) dbTLSSecretObject() (*corev1.Secret, error) {
	data := map[string][]byte{}
	cn := c.dbClientCN()
	for key, file := range map[string]string{
		"ca.crt":  c.pkiFile(caName + "-ca.pem"),
		"tls.crt": c.pkiFile(cn + "-cert.pem"),
		"tls.key": c.pkiFile(cn + "-privkey.pem"),
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		data[key] = b
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: dbTLSSecret, Namespace: distNamespace},
		Type:       corev1.SecretTypeTLS,
		Data:       data,
	}, nil
}

// prepareChassis gives the node's OVS the system-id its certificate names
// (the chassis name the SB's RBAC checks), before ovn-controller starts and
// before the node daemon, which keeps a system-id already set.
func (c *Cluster) prepareChassis(n *Node) error {
	_, err := c.Exec(n, "ovs-vsctl", "set", "Open_vSwitch", ".", "external_ids:system-id="+n.Name)
	return err
}

// secretTLSConfig presents the Secret's certificate (dbClientCN).
func (c *Cluster) secretTLSConfig() (*tls.Config, error) {
	cn := c.dbClientCN()
	return clientTLSConfig(c.pkiFile(cn+"-cert.pem"), c.pkiFile(cn+"-privkey.pem"))
}

// clientTLSConfig presents cert, always: Go's client would otherwise send
// none when its issuer is not among the CAs the server asks for, and a
// certificate from another CA would never reach the server. The server's
// certificate is not checked (these probes test what the server accepts).
func clientTLSConfig(certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{InsecureSkipVerify: true}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	return cfg, nil
}

// ovsdbListDBs dials addr from inside the network namespace nsPath (in
// clear when cfg is nil), sends the OVSDB list_dbs request and returns the
// databases the server names. An error means no OVSDB session: refused,
// reset, or no JSON-RPC reply.
func ovsdbListDBs(nsPath, addr string, cfg *tls.Config) ([]string, error) {
	var dbs []string
	err := ns.WithNetNSPath(nsPath, func(ns.NetNS) error {
		conn, err := net.DialTimeout("tcp", addr, ovsdbProbeWait)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(ovsdbProbeWait))
		if cfg != nil {
			tc := tls.Client(conn, cfg)
			if err := tc.Handshake(); err != nil {
				return fmt.Errorf("TLS handshake: %w", err)
			}
			conn = tc
		}
		if _, err := conn.Write([]byte(`{"method":"list_dbs","params":[],"id":1}`)); err != nil {
			return err
		}
		var reply struct {
			Result []string `json:"result"`
		}
		if err := json.NewDecoder(conn).Decode(&reply); err != nil {
			return fmt.Errorf("no OVSDB reply: %w", err)
		}
		if len(reply.Result) == 0 {
			return fmt.Errorf("list_dbs named no database")
		}
		dbs = reply.Result
		return nil
	})
	return dbs, err
}

// tcpReachable reports whether addr accepts a TCP connection from nsPath.
func tcpReachable(nsPath, addr string) bool {
	return ns.WithNetNSPath(nsPath, func(ns.NetNS) error {
		conn, err := net.DialTimeout("tcp", addr, ovsdbProbeWait)
		if err == nil {
			conn.Close()
		}
		return err
	}) == nil
}

// podNetNS is a /proc path of the network namespace holding ip, found among
// the processes of node n (the pod's sandbox and containers).
func podNetNS(n *Node, ip string) (string, error) {
	seen := map[string]bool{}
	for _, pid := range cgroupPIDs(n.Cgroup) {
		p := fmt.Sprintf("/proc/%d/ns/net", pid)
		id, err := os.Readlink(p)
		if err != nil || seen[id] {
			continue
		}
		seen[id] = true
		found := false
		_ = ns.WithNetNSPath(p, func(ns.NetNS) error {
			addrs, _ := net.InterfaceAddrs()
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok && ipn.IP.String() == ip {
					found = true
				}
			}
			return nil
		})
		if found {
			return p, nil
		}
	}
	return "", fmt.Errorf("no process of node %s in a network namespace holding %s", n.Name, ip)
}

// CheckDBTLS is the installed cluster's database check, read from the
// databases' state and from what their listeners do, not from logs:
//
//   - the NB offers only pssl:, the SB only pssl: with the ovn-controller
//     role, and every node's ovn-controller is a chassis over ssl:
//     (ovn-remote) under its own certificate's name;
//   - from another node: a clear-text OVSDB client, a TLS client without a
//     certificate and one whose certificate another CA signed get no
//     session with the NB; the master's certificate gets one;
//   - a chassis certificate cannot create or delete another chassis's row;
//   - from a pod: no session with the NB or the SB without a certificate.
func (c *Cluster) CheckDBTLS(ctx context.Context) (string, error) {
	var b strings.Builder
	cp := c.ControlPlane()
	nbctl := []string{"ovn-nbctl", "--db=unix:/run/ovn/ovnnb_db.sock", "--bare"}
	sbctl := []string{"ovn-sbctl", "--db=unix:/run/ovn/ovnsb_db.sock", "--bare"}
	query := func(args ...string) string { return c.execWords(cp, args...) }
	nbAddr := net.JoinHostPort(cp.IP, strconv.Itoa(nbPort))
	sbAddr := net.JoinHostPort(cp.IP, strconv.Itoa(sbPort))
	if got, want := query(append(nbctl, "--columns=target", "list", "Connection")...), fmt.Sprintf("pssl:%d:%s", nbPort, cp.IP); got != want {
		return b.String(), fmt.Errorf("NB connections %q, want only %s", got, want)
	}
	if got := query(append(sbctl, "--columns=target,role", "list", "Connection")...); got != fmt.Sprintf("pssl:%d:%s %s", sbPort, cp.IP, sbChassisRole) {
		return b.String(), fmt.Errorf("SB connections %q, want only pssl:%d:%s with role %s", got, sbPort, cp.IP, sbChassisRole)
	}
	var names []string
	for _, n := range c.Nodes {
		names = append(names, n.Name)
		remote, _ := c.Exec(n, "ovs-vsctl", "get", "Open_vSwitch", ".", "external_ids:ovn-remote")
		if !strings.Contains(remote, "ssl:"+sbAddr) {
			return b.String(), fmt.Errorf("node %s: ovn-remote %s, want ssl:%s", n.Name, strings.TrimSpace(remote), sbAddr)
		}
		ssl, _ := c.Exec(n, "ovs-vsctl", "get-ssl")
		if !strings.Contains(ssl, "Certificate: "+chassisTLSDir+"/tls.crt") {
			return b.String(), fmt.Errorf("node %s: OVS's SSL table is not the chassis certificate:\n%s", n.Name, ssl)
		}
	}
	slices.Sort(names)
	chassis := strings.Fields(query(append(sbctl, "--columns=name", "list", "Chassis")...))
	slices.Sort(chassis)
	if !slices.Equal(chassis, names) {
		return b.String(), fmt.Errorf("SB chassis %v, want every node %v (each ovn-controller over ssl: under its certificate's name)", chassis, names)
	}
	fmt.Fprintf(&b, "=== OVN databases over TLS ===\nNB listens only on pssl:%d, SB only on pssl:%d with role %s; chassis %v registered over ssl:\n",
		nbPort, sbPort, sbChassisRole, chassis)

	worker := c.Nodes[len(c.Nodes)-1]
	if err := c.refusesStrangers(&b, worker, map[string]string{"NB": nbAddr, "SB": sbAddr}, "NB", nbAddr, "OVN_Northbound"); err != nil {
		return b.String(), err
	}

	// The ovn-controller role: worker's certificate names worker's chassis
	// only. ovn-sbctl as ovn-controller would send it, from the worker.
	victim := cp.Name
	asChassis := []string{"ovn-sbctl", "--db=ssl:" + sbAddr, "--timeout=10",
		"-p", chassisTLSDir + "/tls.key", "-c", chassisTLSDir + "/tls.crt", "-C", chassisTLSDir + "/ca.crt"}
	_, _ = c.Exec(worker, append(slices.Clone(asChassis), "chassis-add", "impostor", "geneve", "172.18.0.250")...)
	_, _ = c.Exec(worker, append(slices.Clone(asChassis), "chassis-del", victim)...)
	after := strings.Fields(query(append(sbctl, "--columns=name", "list", "Chassis")...))
	if slices.Contains(after, "impostor") || !slices.Contains(after, victim) {
		return b.String(), fmt.Errorf("worker %s's chassis certificate wrote other chassis: SB chassis now %v", worker.Name, after)
	}
	if out, err := c.Exec(worker, append(slices.Clone(asChassis), "--columns=name", "list", "Chassis")...); err != nil || !strings.Contains(out, victim) {
		return b.String(), fmt.Errorf("worker %s's chassis certificate cannot read the SB: %v %s", worker.Name, err, out)
	}
	fmt.Fprintf(&b, "node %s's chassis certificate reads the SB but cannot add chassis \"impostor\" nor delete %s (role %s)\n",
		worker.Name, victim, sbChassisRole)

	err := c.podKeptFrom(ctx, &b, nbAddr, sbAddr)
	return b.String(), err
}

// execWords runs a command on n and returns its output's words joined by
// single spaces ("" when it fails: the callers compare it with what they want).
func (c *Cluster) execWords(n *Node, args ...string) string {
	out, _ := c.Exec(n, args...)
	return strings.Join(strings.Fields(out), " ")
}

// refusesStrangers checks, from node worker, that none of the databases
// (name: address) gives a session to a clear-text OVSDB client, a TLS
// client without a certificate, or one (CN dbClientCN) whose certificate
// another CA signed; and that the Secret's certificate gets a session with
// the database own (at ownAddr, serving model).
func (c *Cluster) refusesStrangers(b *strings.Builder, worker *Node, dbs map[string]string, own, ownAddr, model string) error {
	workerNS := "/var/run/netns/" + worker.NetNS
	rogueDir, err := os.MkdirTemp(c.Dir, "rogue-pki")
	if err != nil {
		return err
	}
	defer os.RemoveAll(rogueDir)
	rogue, err := harness.NewPKIDir(rogueDir, "rogue")
	if err != nil {
		return err
	}
	cn := c.dbClientCN()
	rogueCert, rogueKey := filepath.Join(rogueDir, "cert.pem"), filepath.Join(rogueDir, "key.pem")
	if err := rogue.IssueTo(rogueCert, rogueKey, cn); err != nil {
		return err
	}
	noCert, _ := clientTLSConfig("", "")
	rogueCfg, err := clientTLSConfig(rogueCert, rogueKey)
	if err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(dbs))
	for _, name := range names {
		for _, p := range []struct {
			what string
			cfg  *tls.Config
		}{
			{"a clear-text (tcp:) OVSDB client", nil},
			{"a TLS client without a certificate", noCert},
			{"a TLS client whose certificate (CN " + cn + ") another CA signed", rogueCfg},
		} {
			if got, err := ovsdbListDBs(workerNS, dbs[name], p.cfg); err == nil {
				return fmt.Errorf("from node %s to the %s, %s got a session (list_dbs: %v)", worker.Name, name, p.what, got)
			}
			fmt.Fprintf(b, "from node %s to the %s, %s: no session\n", worker.Name, name, p.what)
		}
	}
	secret, err := c.secretTLSConfig()
	if err != nil {
		return err
	}
	got, err := ovsdbListDBs(workerNS, ownAddr, secret)
	if err != nil || !slices.Contains(got, model) {
		return fmt.Errorf("from node %s, the %s certificate got no %s session: %v %v", worker.Name, cn, own, got, err)
	}
	fmt.Fprintf(b, "from node %s, the %s certificate: %s session, list_dbs %v\n", worker.Name, cn, own, got)
	return nil
}

// podKeptFrom checks that the demo's client pod gets no TCP connection to
// any of the databases' addrs (the database guard on its switch drops
// them) and no session in clear or over TLS without a certificate.
func (c *Cluster) podKeptFrom(ctx context.Context, b *strings.Builder, addrs ...string) error {
	client, err := c.Client.CoreV1().Pods(demoNS).Get(ctx, "client", metaGet)
	if err != nil {
		return err
	}
	var host *Node
	for _, n := range c.Nodes {
		if n.Name == client.Spec.NodeName {
			host = n
		}
	}
	if host == nil || client.Status.PodIP == "" {
		return fmt.Errorf("pod client: node %q, IP %q", client.Spec.NodeName, client.Status.PodIP)
	}
	podNS, err := podNetNS(host, client.Status.PodIP)
	if err != nil {
		return err
	}
	noCert, _ := clientTLSConfig("", "")
	for _, addr := range addrs {
		if tcpReachable(podNS, addr) {
			return fmt.Errorf("pod client (%s) opened a TCP connection to %s through the database guard", client.Status.PodIP, addr)
		}
		for _, cfg := range []*tls.Config{nil, noCert} {
			if dbs, err := ovsdbListDBs(podNS, addr, cfg); err == nil {
				return fmt.Errorf("pod client (%s) got a session with %s without a certificate (list_dbs: %v)", client.Status.PodIP, addr, dbs)
			}
		}
		fmt.Fprintf(b, "from pod client (%s) to %s: no TCP connection (dropped by the node switch's database guard); no session in clear or over TLS without a certificate\n", client.Status.PodIP, addr)
	}
	return nil
}
