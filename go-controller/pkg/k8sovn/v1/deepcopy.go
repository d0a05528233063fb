package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// Hand-written deep copies (what deepcopy-gen would write): every slice and
// pointer is copied, so that a copy can be changed without touching the
// informer's object.

func (in *EgressFirewall) DeepCopyInto(out *EgressFirewall) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	in.Status.DeepCopyInto(&out.Status)
}

func (in *EgressFirewall) DeepCopy() *EgressFirewall {
	if in == nil {
		return nil
	}
	out := new(EgressFirewall)
	in.DeepCopyInto(out)
	return out
}

func (in *EgressFirewall) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

func (in *EgressFirewallSpec) DeepCopyInto(out *EgressFirewallSpec) {
	*out = *in
	if in.Egress != nil {
		out.Egress = make([]EgressFirewallRule, len(in.Egress))
		for i := range in.Egress {
			in.Egress[i].DeepCopyInto(&out.Egress[i])
		}
	}
}

func (in *EgressFirewallRule) DeepCopyInto(out *EgressFirewallRule) {
	*out = *in
	if in.Ports != nil {
		out.Ports = make([]EgressFirewallPort, len(in.Ports))
		copy(out.Ports, in.Ports)
	}
	in.To.DeepCopyInto(&out.To)
}

func (in *EgressFirewallDestination) DeepCopyInto(out *EgressFirewallDestination) {
	*out = *in
	out.NodeSelector = in.NodeSelector.DeepCopy() // nil stays nil
}

func (in *EgressFirewallStatus) DeepCopyInto(out *EgressFirewallStatus) {
	*out = *in
	if in.Messages != nil {
		out.Messages = make([]string, len(in.Messages))
		copy(out.Messages, in.Messages)
	}
}

func (in *EgressFirewallList) DeepCopyInto(out *EgressFirewallList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]EgressFirewall, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

func (in *EgressFirewallList) DeepCopy() *EgressFirewallList {
	if in == nil {
		return nil
	}
	out := new(EgressFirewallList)
	in.DeepCopyInto(out)
	return out
}

func (in *EgressFirewallList) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

func (in *EgressIP) DeepCopyInto(out *EgressIP) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	in.Status.DeepCopyInto(&out.Status)
}

func (in *EgressIP) DeepCopy() *EgressIP {
	if in == nil {
		return nil
	}
	out := new(EgressIP)
	in.DeepCopyInto(out)
	return out
}

func (in *EgressIP) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

func (in *EgressIPSpec) DeepCopyInto(out *EgressIPSpec) {
	*out = *in
	if in.EgressIPs != nil {
		out.EgressIPs = make([]string, len(in.EgressIPs))
		copy(out.EgressIPs, in.EgressIPs)
	}
	in.NamespaceSelector.DeepCopyInto(&out.NamespaceSelector)
	in.PodSelector.DeepCopyInto(&out.PodSelector)
}

func (in *EgressIPStatus) DeepCopyInto(out *EgressIPStatus) {
	*out = *in
	if in.Items != nil {
		out.Items = make([]EgressIPStatusItem, len(in.Items))
		copy(out.Items, in.Items)
	}
}

func (in *EgressIPList) DeepCopyInto(out *EgressIPList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]EgressIP, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

func (in *EgressIPList) DeepCopy() *EgressIPList {
	if in == nil {
		return nil
	}
	out := new(EgressIPList)
	in.DeepCopyInto(out)
	return out
}

func (in *EgressIPList) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

func (in *DNSNameResolver) DeepCopyInto(out *DNSNameResolver) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if in.Status.ResolvedAddresses != nil {
		out.Status.ResolvedAddresses = make([]ResolvedAddress, len(in.Status.ResolvedAddresses))
		copy(out.Status.ResolvedAddresses, in.Status.ResolvedAddresses)
	}
}

func (in *DNSNameResolver) DeepCopy() *DNSNameResolver {
	if in == nil {
		return nil
	}
	out := new(DNSNameResolver)
	in.DeepCopyInto(out)
	return out
}

func (in *DNSNameResolver) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

func (in *DNSNameResolverList) DeepCopyInto(out *DNSNameResolverList) {
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]DNSNameResolver, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

func (in *DNSNameResolverList) DeepCopy() *DNSNameResolverList {
	if in == nil {
		return nil
	}
	out := new(DNSNameResolverList)
	in.DeepCopyInto(out)
	return out
}

func (in *DNSNameResolverList) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}
