package node

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	libovsdbclient "github.com/ovn-org/libovsdb/client"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// addGateway creates GR_<node> with its join port at ip, as gateway-init's
// first pass does, guarded when the address is fresh.
func addGateway(nb libovsdbclient.Client, node string, ip netip.Prefix, fresh bool) error {
	t := ovndb.NewTxn(nb)
	if fresh {
		guardJoinIP(t, ip)
	}
	lrp := &nbdb.LogicalRouterPort{Name: topology.RouterToGatewayJoinPort(node), MAC: "0a:58:64:40:00:02", Networks: []string{ip.String()}}
	uuid := t.Ensure(lrp, []any{&lrp.Networks}, nil)
	gr := &nbdb.LogicalRouter{Name: topology.GatewayRouter(node), ExternalIDs: topology.Owner{Type: topology.OwnerNode, Name: node}.ExternalIDs()}
	t.Ensure(gr, []any{&gr.ExternalIDs}, &gr.Ports, uuid)
	ops, err := t.Ops()
	if err != nil {
		return err
	}
	return ovndb.Transact(context.Background(), nb, ops)
}

func removeGateway(t *testing.T, nb libovsdbclient.Client, node string) {
	t.Helper()
	txn := ovndb.NewTxn(nb)
	if gr := ovndb.Lookup(txn, &nbdb.LogicalRouter{Name: topology.GatewayRouter(node)}); gr != nil {
		txn.Delete(gr) // its join port goes with it
	}
	ops, _ := txn.Ops()
	if err := ovndb.Transact(context.Background(), nb, ops); err != nil {
		t.Fatal(err)
	}
}

func waitJoinPort(t *testing.T, nb libovsdbclient.Client, node string, present bool) {
	t.Helper()
	harness.Eventually(t, 5*time.Second, "join port of "+node+" in the cache", func() error {
		err := nb.Get(context.Background(), &nbdb.LogicalRouterPort{Name: topology.RouterToGatewayJoinPort(node)})
		if (err == nil) != present {
			return fmt.Errorf("present=%v, want %v", err == nil, present)
		}
		return nil
	})
}

// Item 8: node churn far beyond the join subnet's size never exhausts it:
// a removed gateway's address returns to the pool.
func TestGatewayJoinAddressesAreReused(t *testing.T) {
	nb := ovndbtest.Connect(t, ovndbtest.NewServer(t))
	join := netip.MustParsePrefix("100.64.0.0/29") // .2 to .6 for gateways
	seen := map[string]bool{}
	for i := 0; i < 20; i++ {
		node := fmt.Sprintf("n%d", i)
		ip, fresh, err := gatewayJoinIP(nb, node, join)
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		if !fresh || !join.Contains(ip.Addr()) || ip.Addr() == join.Addr().Next() {
			t.Fatalf("node %d got %v (fresh %v)", i, ip, fresh)
		}
		if err := addGateway(nb, node, ip, fresh); err != nil {
			t.Fatal(err)
		}
		waitJoinPort(t, nb, node, true)
		if again, fresh, _ := gatewayJoinIP(nb, node, join); again != ip || fresh {
			t.Fatalf("node %d asked again got %v (fresh %v), holds %v", i, again, fresh, ip)
		}
		seen[ip.String()] = true
		if i >= 2 { // keep two gateways, remove the older ones
			old := fmt.Sprintf("n%d", i-2)
			removeGateway(t, nb, old)
			waitJoinPort(t, nb, old, false)
		}
	}
	if len(seen) > 5 {
		t.Fatalf("used %d addresses of a /29", len(seen))
	}
}

// Two gateways choosing from the same view cannot both take one address.
func TestGatewayJoinAddressGuard(t *testing.T) {
	nb := ovndbtest.Connect(t, ovndbtest.NewServer(t))
	join := netip.MustParsePrefix("100.64.0.0/16")
	a, _, _ := gatewayJoinIP(nb, "a", join)
	b, _, _ := gatewayJoinIP(nb, "b", join)
	if a != b {
		t.Fatalf("same view, different choices %v %v", a, b)
	}
	if err := addGateway(nb, "a", a, true); err != nil {
		t.Fatal(err)
	}
	if err := addGateway(nb, "b", b, true); err == nil {
		t.Fatalf("b took %v, which a holds", b)
	}
	waitJoinPort(t, nb, "a", true)
	if next, _, _ := gatewayJoinIP(nb, "b", join); next == a {
		t.Fatalf("b offered a's address %v again", a)
	}
}
