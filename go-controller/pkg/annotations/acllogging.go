package annotations

import (
	"encoding/json"
	"fmt"
)

// ACLLogging is the decoded k8s.ovn.org/acl-logging annotation of a
// Namespace or an admin policy: the syslog severity ovn-controller logs
// the packets allowed, denied (and, by an admin policy, passed to the next
// tier) at, "" for none.
type ACLLogging struct {
	Allow string `json:"allow,omitempty"`
	Deny  string `json:"deny,omitempty"`
	Pass  string `json:"pass,omitempty"`
}

var severities = map[string]bool{"alert": true, "warning": true, "notice": true, "info": true, "debug": true}

// ParseACLLogging decodes the annotation; an unknown severity is an error
// naming it (nothing of the annotation is then used).
func ParseACLLogging(value string) (ACLLogging, error) {
	var l ACLLogging
	if err := json.Unmarshal([]byte(value), &l); err != nil {
		return ACLLogging{}, fmt.Errorf("%s %q: %w; want e.g. {\"deny\": \"alert\", \"allow\": \"notice\"}", NamespaceACLLogging, value, err)
	}
	for _, s := range []string{l.Allow, l.Deny, l.Pass} {
		if s != "" && !severities[s] {
			return ACLLogging{}, fmt.Errorf("%s %q: severity %q is not one of alert, warning, notice, info, debug", NamespaceACLLogging, value, s)
		}
	}
	return l, nil
}
