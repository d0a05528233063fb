package master

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// hostRoutes lists the cluster router's routes to node addresses, as "prefix via nexthop".
func (e *env) hostRoutes() []string {
	var routes []nbdb.LogicalRouterStaticRoute
	if err := e.nb.List(context.Background(), &routes); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, r := range routes {
		if strings.HasPrefix(r.ExternalIDs[topology.RowIDKey], topology.HostRouteIDPrefix) {
			out = append(out, r.IPPrefix+" via "+r.Nexthop)
		}
	}
	slices.Sort(out)
	return out
}

func (e *env) setNodeIP(name, ip string) {
	e.t.Helper()
	n, err := e.kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}}
	if _, err := e.kube.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) waitHostRoutes(want ...string) {
	e.t.Helper()
	harness.Eventually(e.t, 10*time.Second, fmt.Sprintf("host routes %v", want), func() error {
		if got := e.hostRoutes(); !slices.Equal(got, want) {
			return fmt.Errorf("host routes are %v", got)
		}
		return nil
	})
}

// Pods reach a node's own addresses through its management port: the route
// follows the node's InternalIP and goes with the node.
func TestHostRoutesFollowNodeAddresses(t *testing.T) {
	e := newEnv(t)
	e.createNode("n1")
	e.setNodeIP("n1", "172.30.0.11")
	e.start()
	mgmt := topology.ManagementIP(e.nodeSubnets("n1")[0]).String()
	e.waitHostRoutes("172.30.0.11/32 via " + mgmt)

	e.setNodeIP("n1", "172.30.0.21")
	e.waitHostRoutes("172.30.0.21/32 via " + mgmt)

	e.deleteNode("n1")
	e.waitHostRoutes()
}
