package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DefaultStack is the OVN stack the tests, the demo and the benchmark run on
// when the OVN environment variable is not set: the current one (OVN 25.03,
// OVS 3.5, etcd 3.6). The other supported stack is Debian 12's own (23.03:
// OVN 23.03, OVS 3.1, etcd 3.4). `make deps` lays each out in
// _output/stacks/ovn-<name> (see hack/stacks/build.sh).
const DefaultStack = "25.03"

// Stack is the stack this process runs its components from.
type Stack struct {
	Name string // "25.03"
	Dir  string // _output/stacks/ovn-25.03 in the checkout
	err  error  // why the stack cannot be used
}

// CurrentStack is chosen once, when the harness is loaded: the OVN variable
// (or DefaultStack), with its bin directory put first in PATH, so that every
// command the harness and its children run by name (ovsdb-server,
// ovn-northd, ovs-vswitchd, ovn-nbctl, etcd, ...) is the stack's.
var CurrentStack = selectStack()

func selectStack() Stack {
	s := Stack{Name: os.Getenv("OVN")}
	if s.Name == "" {
		s.Name = DefaultStack
	}
	root, err := findRepoRoot()
	if err != nil {
		s.err = err
		return s
	}
	s.Dir = filepath.Join(root, "_output", "stacks", "ovn-"+s.Name)
	if _, err := os.Stat(filepath.Join(s.Dir, "pin")); err != nil {
		pins, _ := filepath.Glob(filepath.Join(root, "hack", "stacks", "ovn-*.pin"))
		var names []string
		for _, p := range pins {
			names = append(names, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "ovn-"), ".pin"))
		}
		s.err = fmt.Errorf("the OVN %s stack is not in %s: run `make deps` (OVN= takes one of: %s)",
			s.Name, s.Dir, strings.Join(names, ", "))
		return s
	}
	// A stack built from a root of its own runs through that root's
	// interpreter, whose absolute path is baked into its commands.
	if interp, err := os.ReadFile(filepath.Join(s.Dir, "interpreter")); err == nil {
		if _, err := os.Stat(strings.TrimSpace(string(interp))); err != nil {
			s.err = fmt.Errorf("the OVN %s stack in %s was built for another checkout path (%v): "+
				"remove it and run `make deps`", s.Name, s.Dir, err)
			return s
		}
	}
	os.Setenv("PATH", filepath.Join(s.Dir, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	return s
}

// Check fails the test when the stack cannot be used.
func (s Stack) Check(t T) {
	t.Helper()
	if s.err != nil {
		t.Fatal(s.err)
	}
}

// The schemas a stack has, for Schema.
const (
	NBSchema   = "ovn/ovn-nb.ovsschema"
	SBSchema   = "ovn/ovn-sb.ovsschema"
	ICNBSchema = "ovn/ovn-ic-nb.ovsschema"
	ICSBSchema = "ovn/ovn-ic-sb.ovsschema"
	OVSSchema  = "openvswitch/vswitch.ovsschema"
)

// Schema is the path of one of the stack's schemas, e.g. "ovn/ovn-nb.ovsschema".
func (s Stack) Schema(t T, name string) string {
	t.Helper()
	p, err := s.SchemaPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// SchemaPath is Schema for programs without a T.
func (s Stack) SchemaPath(name string) (string, error) {
	if s.err != nil {
		return "", s.err
	}
	return filepath.Join(s.Dir, "share", name), nil
}

// Versions is what the stack has installed: "package version, ...".
func (s Stack) Versions() string {
	data, _ := os.ReadFile(filepath.Join(s.Dir, "versions"))
	return strings.Join(strings.Split(strings.TrimSpace(string(data)), "\n"), ", ")
}
