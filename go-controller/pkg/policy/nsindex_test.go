package policy

import (
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
)

// A set's namespaces are found through the label index when its selector
// requires one label value, and are exactly those matching every namespace
// would give, for every kind of selector.
func TestNamespacesOfThroughTheLabelIndex(t *testing.T) {
	ns := func(name string, kv ...string) *corev1.Namespace {
		l := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	}
	cs := fake.NewSimpleClientset(ns("a", "team", "t1"), ns("b", "team", "t2"), ns("c", "team", "t1", "env", "prod"), ns("d"))
	f := informers.NewSharedInformerFactory(cs, 0)
	c := New(f, ovndbtest.Connect(t, ovndbtest.NewServer(t)), nil, Options{}, logr.Discard(), time.Second)
	stop := make(chan struct{})
	defer close(stop)
	f.Start(stop)
	f.WaitForCacheSync(stop)
	if c.nsIndexer == nil {
		t.Fatal("no namespace label index")
	}
	for _, tc := range []struct {
		selector string
		indexed  bool
		want     []string
	}{
		{"team=t1", true, []string{"a", "c"}},
		{"team==t2", true, []string{"b"}},
		{"team in (t1)", true, []string{"a", "c"}},
		{"team=t1,env=prod", true, []string{"c"}},
		{"env!=prod,team=t1", true, []string{"a"}},
		{"team in (t1,t2)", false, []string{"a", "b", "c"}},
		{"team", false, []string{"a", "b", "c"}},
		{"!team", false, []string{"d"}},
		{"", false, []string{"a", "b", "c", "d"}},
		{"team=t9", true, nil},
	} {
		sel, err := labels.Parse(tc.selector)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := indexedLabel(sel); ok != tc.indexed {
			t.Errorf("%q: indexed %v, want %v", tc.selector, ok, tc.indexed)
		}
		got := c.namespacesOf(PeerSet{Namespaces: sel})
		slices.Sort(got)
		idx := c.nsIndexer
		c.nsIndexer = nil // every namespace matched: the reference
		all := c.namespacesOf(PeerSet{Namespaces: sel})
		c.nsIndexer = idx
		slices.Sort(all)
		if !slices.Equal(got, tc.want) || !slices.Equal(all, tc.want) {
			t.Errorf("%q: through the index %v, matching all %v, want %v", tc.selector, got, all, tc.want)
		}
	}
}
