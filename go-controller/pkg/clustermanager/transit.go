package clustermanager

import (
	"context"
	"fmt"
	"maps"
	"time"

	libovsdbclient "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/icnbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// ICModel is the client model of the interconnection NB tables written here.
func ICModel() (model.ClientDBModel, error) {
	return model.NewClientDBModel("OVN_IC_Northbound", map[string]model.Model{
		icnbdb.TransitSwitchTable: &icnbdb.TransitSwitch{},
	})
}

// transitOwner marks the transit switch as ours.
var transitOwner = topology.Owner{Type: topology.OwnerCluster, Name: topology.TransitSwitch}

// EnsureTransitSwitch creates the interconnection NB's transit switch
// (ovn-ic makes it a switch in every zone's NB), or gives it our owner ids.
// A switch of that name made by hand is adopted: zones cannot tell them apart.
func EnsureTransitSwitch(ctx context.Context, ic libovsdbclient.Client) error {
	want := transitOwner.ExternalIDs()
	ts := &icnbdb.TransitSwitch{Name: topology.TransitSwitch}
	var ops []ovsdb.Operation
	var err error
	switch getErr := ic.Get(ctx, ts); {
	case getErr == libovsdbclient.ErrNotFound:
		ts.ExternalIDs = want
		ops, err = ic.Create(ts)
	case getErr != nil:
		return fmt.Errorf("reading transit switch %s from the interconnection NB: %w", topology.TransitSwitch, getErr)
	case !topology.OwnedBy(ts.ExternalIDs, transitOwner):
		ids := maps.Clone(ts.ExternalIDs)
		if ids == nil {
			ids = map[string]string{}
		}
		maps.Copy(ids, want)
		ts.ExternalIDs = ids
		ops, err = ic.Where(ts).Update(ts, &ts.ExternalIDs)
	default:
		return nil
	}
	if err != nil {
		return err
	}
	if err := ovndb.Transact(ctx, ic, ops); err != nil {
		return fmt.Errorf("writing transit switch %s in the interconnection NB: %w", topology.TransitSwitch, err)
	}
	return nil
}

// keepTransitSwitch ensures the transit switch now and whenever it is
// deleted or the client reconnects (a wiped IC NB), retrying failures.
func (m *Manager) keepTransitSwitch(ctx context.Context) {
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	m.ic.Cache().AddEventHandler(&transitHandler{poke: poke})
	go ovndb.WatchReconnects(ctx, m.ic, time.Second, m.log, poke)
	poke()
	retry := time.NewTimer(0)
	<-retry.C
	delay := 50 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-retry.C:
		}
		if err := EnsureTransitSwitch(ctx, m.ic); err != nil {
			m.log.Error(err, "transit switch not in place; retrying", "in", delay)
			retry.Reset(delay)
			delay = min(2*delay, 30*time.Second)
			continue
		}
		delay = 50 * time.Millisecond
	}
}

// transitHandler pokes on every change or deletion of a transit switch.
type transitHandler struct{ poke func() }

func (h *transitHandler) OnAdd(string, model.Model) {}

func (h *transitHandler) OnUpdate(table string, _, _ model.Model) { h.on(table) }

func (h *transitHandler) OnDelete(table string, _ model.Model) { h.on(table) }

func (h *transitHandler) on(table string) {
	if table == icnbdb.TransitSwitchTable {
		h.poke()
	}
}
