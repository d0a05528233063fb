// Package v1 holds the k8s.ovn.org/v1 API kinds ovn-k8s serves:
// EgressFirewall (here), EgressIP (egressip.go) and DNSNameResolver
// (dnsnameresolver.go, ours: zone mode's relay of DNS answers). The first two
// are upstream OVN-Kubernetes's, so that manifests written for it work
// unchanged; the CustomResourceDefinitions are
// dist/kubernetes/05-crd-egressfirewalls.yaml, 05-crd-egressips.yaml and
// 05-crd-dnsnameresolvers.yaml.
// Objects come from the API server through the dynamic client
// (NewEgressFirewallInformer, NewEgressIPInformer), converted into these
// types; no generated clientset.
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of the kinds in this package.
var GroupVersion = schema.GroupVersion{Group: "k8s.ovn.org", Version: "v1"}

// EgressFirewallResource is the resource EgressFirewalls are served as.
var EgressFirewallResource = GroupVersion.WithResource("egressfirewalls")

// EgressFirewallName is the only name an EgressFirewall may have: there is
// at most one per namespace (the CRD refuses any other).
const EgressFirewallName = "default"

// EgressFirewall is the egress firewall of a namespace: traffic from its pods
// to a destination outside the cluster is checked against each rule in
// order; the first that matches allows or denies it; with no rule matching
// (or no EgressFirewall) it is allowed.
type EgressFirewall struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EgressFirewallSpec   `json:"spec"`
	Status EgressFirewallStatus `json:"status,omitempty"`
}

// EgressFirewallSpec is the ordered list of rules.
type EgressFirewallSpec struct {
	Egress []EgressFirewallRule `json:"egress"`
}

// EgressFirewallRuleType is what a rule does with the traffic it matches.
type EgressFirewallRuleType string

const (
	EgressFirewallRuleAllow EgressFirewallRuleType = "Allow"
	EgressFirewallRuleDeny  EgressFirewallRuleType = "Deny"
)

// EgressFirewallRule matches traffic to one destination, on the ports listed
// (every port and protocol when none are).
type EgressFirewallRule struct {
	Type  EgressFirewallRuleType    `json:"type"`
	Ports []EgressFirewallPort      `json:"ports,omitempty"`
	To    EgressFirewallDestination `json:"to"`
}

// EgressFirewallDestination is exactly one of a CIDR, a DNS name (a leading
// "*." matches its subdomains) or the nodes a label selector selects.
type EgressFirewallDestination struct {
	CIDRSelector string                `json:"cidrSelector,omitempty"`
	DNSName      string                `json:"dnsName,omitempty"`
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
}

// EgressFirewallPort is a protocol (TCP, UDP or SCTP) and a port of it.
type EgressFirewallPort struct {
	Protocol string `json:"protocol"`
	Port     int32  `json:"port,omitempty"`
}

// EgressFirewallStatus is what the master reports of an EgressFirewall:
// EgressFirewallApplied or EgressFirewallNotApplied, and why not.
type EgressFirewallStatus struct {
	Status   string   `json:"status,omitempty"`
	Messages []string `json:"messages,omitempty"`
}

// The values of EgressFirewallStatus.Status, upstream's.
const (
	EgressFirewallApplied    = "EgressFirewall Rules applied"
	EgressFirewallNotApplied = "EgressFirewall Rules not correctly applied"
)

// EgressFirewallList is a list of EgressFirewalls.
type EgressFirewallList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []EgressFirewall `json:"items"`
}
