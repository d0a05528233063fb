// Package ovndb is the thin I/O layer over libovsdb: it connects (and keeps
// reconnecting) to an OVSDB server, turns desired rows into the minimal
// operations against the client cache, and commits them in batched transactions.
package ovndb

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// NBModel is the Northbound client model with the client-side indexes the
// controllers look rows up by (switch and router names are not schema indexes).
func NBModel() (model.ClientDBModel, error) {
	m, err := nbdb.FullDatabaseModel()
	if err != nil {
		return m, err
	}
	byName := func(col string) []model.ClientIndex {
		return []model.ClientIndex{{Columns: []model.ColumnKey{{Column: col}}}}
	}
	// Load balancers, NATs, router policies and static routes are also found by owner name:
	// the cache is the only index (one kept from events would not survive a
	// cache refill on reconnect), and an EgressIP's NATs must be found among
	// every gateway router's without scanning them.
	byOwner := model.ClientIndex{Columns: []model.ColumnKey{{Column: "external_ids", Key: topology.OwnerNameKey}}}
	m.SetIndexes(map[string][]model.ClientIndex{
		nbdb.LogicalSwitchTable:       byName("name"),
		nbdb.LogicalRouterTable:       byName("name"),
		nbdb.LoadBalancerTable:        append(byName("name"), byOwner),
		nbdb.NATTable:                 {byOwner},
		nbdb.LogicalRouterPolicyTable: {byOwner},
		// A node's host routes are found among the cluster router's
		// thousands without scanning them (EnsureNode).
		nbdb.LogicalRouterStaticRouteTable: {byOwner},
	})
	return m, nil
}

// Unmonitored names, by table, the columns a client leaves out of its monitor:
// the server sends no update for a change to them alone, and cached rows hold
// their zero value. Only columns no controller reads belong here.
type Unmonitored map[string][]string

// NBUnmonitored are the Northbound columns the controllers do without:
//   - Logical_Switch_Port.up, which ovn-northd sets on every new port (a second
//     monitor update for every pod);
//   - Logical_Switch.ports, which grows with every pod: each change would make
//     every client copy the whole switch and diff the whole set. A port exists
//     only while a switch holds it (Logical_Switch_Port is not a root table),
//     so Txn inserts only new ports and detaches old ones from whichever switch
//     holds them; a switch's ports are read from the server where a sync must
//     list them (FetchByName).
//   - Load_Balancer_Group.load_balancer, which grows with every Service: each
//     change made every client copy the whole group twice (make bench-scale).
//     The services controller inserts a balancer it writes and reads the
//     members from the server where it must know them (FetchByName).
//   - Address_Set.addresses, up to thousands per set: every change made every
//     client copy the whole set and diff it, and a sync inserting large sets
//     waited for its own echo to be decoded (make bench, adminpolicies).
//     SetMembers changes them from the members ovndb keeps (members.go).
var NBUnmonitored = Unmonitored{
	nbdb.LogicalSwitchPortTable: {"up"},
	nbdb.LogicalSwitchTable:     {"ports"},
	nbdb.LoadBalancerGroupTable: {"load_balancer"},
	nbdb.AddressSetTable:        {"addresses"},
}

// Connect dials the endpoints (comma-separated OVSDB remotes already split),
// retrying with backoff until ctx ends, and monitors every table of the model,
// each with all its columns but the unmonitored ones. The client reconnects by
// itself after a lost connection and refills its cache, and drops a connection
// whose server stops answering echoes (probe.go).
// tlsConfig is required for ssl: endpoints and ignored otherwise.
func Connect(ctx context.Context, endpoints []string, dbModel model.ClientDBModel, skip Unmonitored, log logr.Logger, tlsConfig ...*tls.Config) (client.Client, error) {
	// libovsdb logs every transaction at V(4); keep that below our own debug level.
	quiet := log.V(3)
	opts := []client.Option{
		client.WithLogger(&quiet),
		// MaxElapsedTime 0: never give up reconnecting (libovsdb panics if the backoff stops).
		client.WithReconnect(10*time.Second, &backoff.ExponentialBackOff{
			InitialInterval: 200 * time.Millisecond, RandomizationFactor: 0.2, Multiplier: 2,
			MaxInterval: 5 * time.Second, MaxElapsedTime: 0, Stop: backoff.Stop, Clock: backoff.SystemClock,
		}),
	}
	for _, ep := range endpoints {
		opts = append(opts, client.WithEndpoint(ep))
	}
	// Several endpoints are the servers of a clustered (RAFT) database: talk
	// to the leader only, and move when leadership moves (a follower's cache
	// can lag the leader's). One endpoint is used whatever its role.
	if len(endpoints) > 1 {
		opts = append(opts, client.WithLeaderOnly(true))
	}
	if len(tlsConfig) > 0 && tlsConfig[0] != nil {
		opts = append(opts, client.WithTLSConfig(tlsConfig[0]))
	}
	c, err := client.NewOVSDBClient(dbModel, opts...)
	if err != nil {
		return nil, fmt.Errorf("OVSDB client for %v: %w", endpoints, err)
	}
	delay := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = c.Connect(cctx)
		cancel()
		if err == nil {
			break
		}
		log.Info("OVSDB not reachable yet; retrying", "endpoints", endpoints, "attempt", attempt, "error", err.Error())
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connecting to OVSDB %v: %w (is ovsdb-server running and the address right?)", endpoints, err)
		case <-time.After(delay):
		}
		if delay < 5*time.Second {
			delay *= 2
		}
	}
	monitor, err := skip.monitor(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	if _, err := c.Monitor(ctx, monitor); err != nil {
		c.Close()
		return nil, fmt.Errorf("monitoring OVSDB %v: %w", endpoints, err)
	}
	return withProbe(c, probeEvery, probeTimeout, log), nil
}

// monitor requests every table of the model; a table with unmonitored columns
// lists the model's other columns (the model is generated from the oldest
// supported schema, so each of them exists on every supported server).
func (skip Unmonitored) monitor(c client.Client) (*client.Monitor, error) {
	m := c.NewMonitor()
	for table, typ := range c.Cache().DatabaseModel().Types() {
		tm := client.TableMonitor{Table: table}
		if len(skip[table]) > 0 {
			tm.Fields = columnsExcept(typ, skip[table])
			if len(tm.Fields) == 0 {
				return nil, fmt.Errorf("monitor of %s would have no column", table)
			}
		}
		m.Tables = append(m.Tables, tm)
	}
	return m, nil
}

// columnsExcept lists the OVSDB columns of a model type (its ovsdb tags but
// _uuid, which every update carries anyway) less those named in skip.
func columnsExcept(typ reflect.Type, skip []string) []string {
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	var cols []string
	for i := range typ.NumField() {
		col := typ.Field(i).Tag.Get("ovsdb")
		if col != "" && col != "_uuid" && !slices.Contains(skip, col) {
			cols = append(cols, col)
		}
	}
	return cols
}

// TLSConfig loads the client certificate, key and CA for ssl: endpoints.
// It returns nil when no endpoint uses ssl.
func TLSConfig(endpoints []string, certFile, keyFile, caFile string) (*tls.Config, error) {
	usesSSL := false
	for _, ep := range endpoints {
		usesSSL = usesSSL || strings.HasPrefix(ep, "ssl:")
	}
	if !usesSSL {
		return nil, nil
	}
	if certFile == "" || keyFile == "" || caFile == "" {
		return nil, fmt.Errorf("ssl: OVSDB addresses need a client certificate, key and CA certificate")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading OVSDB client certificate %s / key %s: %w", certFile, keyFile, err)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading OVSDB CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	// OVN certificates name the role (e.g. "ovnnb"), not the host: verify the
	// chain against the CA, as ovsdb-server's own clients do, not the host name.
	return &tls.Config{
		Certificates:       []tls.Certificate{cert},
		RootCAs:            pool,
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return fmt.Errorf("OVSDB server sent no certificate")
			}
			leaf, err := x509.ParseCertificate(raw[0])
			if err != nil {
				return err
			}
			inter := x509.NewCertPool()
			for _, r := range raw[1:] {
				if c, err := x509.ParseCertificate(r); err == nil {
					inter.AddCert(c)
				}
			}
			_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter})
			return err
		},
	}, nil
}

// ConnectNB connects to the OVN Northbound database with NBModel.
func ConnectNB(ctx context.Context, endpoints []string, log logr.Logger, tlsConfig ...*tls.Config) (client.Client, error) {
	m, err := NBModel()
	if err != nil {
		return nil, err
	}
	return Connect(ctx, endpoints, m, NBUnmonitored, log, tlsConfig...)
}

// ConnectNBFull is ConnectNB monitoring every column, NBUnmonitored
// included: for tests and tools that check all the database holds.
func ConnectNBFull(ctx context.Context, endpoints []string, log logr.Logger, tlsConfig ...*tls.Config) (client.Client, error) {
	m, err := NBModel()
	if err != nil {
		return nil, err
	}
	return Connect(ctx, endpoints, m, nil, log, tlsConfig...)
}

// FetchByName reads the listed columns (fields: pointers into row) and the
// UUID of the row named like row from the server, not the cache, into row: for
// columns the client does not monitor. False when no row has that name.
func FetchByName(ctx context.Context, c client.Client, row model.Model, fields ...any) (bool, error) {
	tc := c.Cache()
	if tc == nil || c.CurrentEndpoint() == "" {
		return false, ErrNotConnected
	}
	dbm := tc.DatabaseModel()
	info, err := dbm.NewModelInfo(row)
	if err != nil {
		return false, err
	}
	cols := []string{"_uuid"}
	for _, f := range fields {
		col, err := info.ColumnByPtr(f)
		if err != nil {
			return false, err
		}
		cols = append(cols, col)
	}
	table, name := info.Metadata.TableName, rowName(row)
	op := ovsdb.Operation{Op: ovsdb.OperationSelect, Table: table, Columns: cols,
		Where: []ovsdb.Condition{ovsdb.NewCondition("name", ovsdb.ConditionEqual, name)}}
	results, err := c.Transact(ctx, op)
	if err != nil {
		return false, fmt.Errorf("reading %s %q: %w", table, name, err)
	}
	if err := checkResults(results, []ovsdb.Operation{op}); err != nil {
		return false, fmt.Errorf("reading %s %q: %w", table, name, err)
	}
	switch rows := results[0].Rows; len(rows) {
	case 0:
		return false, nil
	case 1:
		uuid, ok := rows[0]["_uuid"].(ovsdb.UUID)
		if !ok {
			return false, fmt.Errorf("reading %s %q: the server sent no _uuid", table, name)
		}
		setUUID(row, uuid.GoUUID)
		return true, dbm.Mapper.GetRowData(&rows[0], info)
	default:
		return false, fmt.Errorf("%d %s rows are named %q", len(rows), table, name)
	}
}

// Owned lists the cached rows of T's table (T a model struct such as
// nbdb.NAT) that owner owns, through the client index on the owner's name
// (NBModel gives load balancers, NATs and router policies one): no scan of
// the table.
func Owned[T any, PT interface {
	*T
	model.Model
}](c client.Client, owner topology.Owner) []T {
	var out []T
	probe := PT(new(T))
	field := reflect.ValueOf(probe).Elem().FieldByName("ExternalIDs").Addr().Interface()
	_ = c.WhereAny(probe, model.Condition{Field: field, Function: ovsdb.ConditionIncludes,
		Value: map[string]string{topology.OwnerNameKey: owner.Name}}).List(context.Background(), &out)
	return slices.DeleteFunc(out, func(row T) bool { return !topology.OwnedBy(ExternalIDs(PT(&row)), owner) })
}

// OwnedChildren are the rows of T's table that owner owns (Owned) and a
// parent references in uuids, one of its set columns: a node's routes among
// the cluster router's, found in time independent of the router's size.
func OwnedChildren[T any, PT interface {
	*T
	model.Model
}](c client.Client, owner topology.Owner, uuids []string) []model.Model {
	var out []model.Model
	for _, row := range Owned[T, PT](c, owner) {
		if p := PT(&row); slices.Contains(uuids, getUUID(p)) {
			out = append(out, p)
		}
	}
	return out
}
