package cluster

import (
	"fmt"
	"net"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// CoreDNSImage is the image `make images` builds from our CoreDNS binary.
const CoreDNSImage = "localhost/ovn-k8s/coredns:v1.14.7"

// externalName is the external host's name in the cluster's DNS (the
// egress firewall's dnsName rule); wildName is another, under wildDomain
// (its wildcard rule), which only a pod ever asks for.
const (
	externalName = "external.ovnk.test"
	wildDomain   = "wild.ovnk.test"
	wildName     = "www." + wildDomain
)

// dnsTapPort is where the master takes CoreDNS's dnstap stream
// (--dns-tap-address), on every address of its node.
const dnsTapPort = 6053

// dnsTapTarget is where CoreDNS sends its dnstap stream: the management
// address of the master's node (primary family), which pods reach with
// their own addresses, so that the master can tell CoreDNS's pods from any
// other; "" when the master takes no stream (the dist/ install's) or the
// node has no subnet yet.
func (c *Cluster) dnsTapTarget() string {
	if c.Dist || c.Client == nil || len(c.Nodes) == 0 {
		return ""
	}
	n, err := c.Client.CoreV1().Nodes().Get(bg, c.Nodes[0].Name, metaGet)
	if err != nil {
		return ""
	}
	subnets, err := annotations.ParseNodeSubnets(n.Annotations[annotations.NodeSubnets])
	if err != nil || len(subnets) == 0 {
		return ""
	}
	return net.JoinHostPort(topology.ManagementIP(subnets[0]).String(), fmt.Sprint(dnsTapPort))
}

// tapPath is how an answer CoreDNS gave a pod reaches the masters.
func (c *Cluster) tapPath() string {
	if c.zoned() {
		return "CoreDNS → dnstap → cluster manager → DNSNameResolver → zone master"
	}
	return "CoreDNS → dnstap → master"
}

// corefile serves the external host's name (a hosts block: its address of
// each family of the cluster), the cluster zone and the reverse zones;
// there is no forward plugin, so other names outside the cluster are
// refused here instead of being sent off the machine.
func (c *Cluster) corefile() string {
	var hosts strings.Builder
	for _, ip := range c.perFamily(externalIP, externalIP6) {
		fmt.Fprintf(&hosts, "        %s %s %s\n", ip, externalName, wildName)
	}
	tap := ""
	if addr := c.dnsTapTarget(); addr != "" {
		tap = "    dnstap tcp://" + addr + " full\n"
	}
	return `.:53 {
    errors
` + tap + `    health {
        lameduck 5s
    }
    ready
    hosts {
` + hosts.String() + `        fallthrough
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    cache 30
    loop
    reload
    loadbalance
}
`
}

// deployDNS creates CoreDNS as kubeadm does: a Deployment on the pod
// network behind the kube-dns Service at the kubelets' clusterDNS address.
func (c *Cluster) deployDNS() error {
	const ns = "kube-system"
	labels := map[string]string{"k8s-app": "kube-dns"}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	}
	replicas := int32(2)
	cs := c.Client
	if err := ignoreExists(cs.CoreV1().ServiceAccounts(ns).Create(bg, &corev1.ServiceAccount{ObjectMeta: meta("coredns")}, metav1.CreateOptions{})); err != nil {
		return err
	}
	if err := ignoreExists(cs.RbacV1().ClusterRoles().Create(bg, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}, metav1.CreateOptions{})); err != nil {
		return err
	}
	if err := ignoreExists(cs.RbacV1().ClusterRoleBindings().Create(bg, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:coredns"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "coredns", Namespace: ns}},
	}, metav1.CreateOptions{})); err != nil {
		return err
	}
	if err := ignoreExists(cs.CoreV1().ConfigMaps(ns).Create(bg, &corev1.ConfigMap{ObjectMeta: meta("coredns"), Data: map[string]string{"Corefile": c.corefile()}}, metav1.CreateOptions{})); err != nil {
		return err
	}
	probe := func(path string, port int) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(int32(port))}},
			PeriodSeconds: 2, TimeoutSeconds: 2, FailureThreshold: 5}
	}
	if err := ignoreExists(cs.AppsV1().Deployments(ns).Create(bg, &appsv1.Deployment{
		ObjectMeta: meta("coredns"),
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: "coredns",
					DNSPolicy:          corev1.DNSDefault,
					Tolerations:        []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}},
					Containers: []corev1.Container{{
						Name: "coredns", Image: CoreDNSImage, ImagePullPolicy: corev1.PullNever,
						Args: []string{"-conf", "/etc/coredns/Corefile"},
						Ports: []corev1.ContainerPort{
							{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
							{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
						},
						VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
						ReadinessProbe: probe("/ready", 8181),
						LivenessProbe:  probe("/health", 8080),
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "coredns"}},
					}}},
				},
			},
		},
	}, metav1.CreateOptions{})); err != nil {
		return err
	}
	return ignoreExists(cs.CoreV1().Services(ns).Create(bg, &corev1.Service{
		ObjectMeta: meta("kube-dns"),
		Spec: corev1.ServiceSpec{
			Selector:  labels,
			ClusterIP: c.dnsIP(),
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
			},
		},
	}, metav1.CreateOptions{}))
}

// dnsReady reports why CoreDNS is not serving yet.
func (c *Cluster) dnsReady() error {
	d, err := c.Client.AppsV1().Deployments("kube-system").Get(bg, "coredns", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if d.Status.ReadyReplicas < 1 {
		pods, _ := c.Client.CoreV1().Pods("kube-system").List(bg, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		var states []string
		for _, p := range pods.Items {
			states = append(states, fmt.Sprintf("%s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase))
		}
		return fmt.Errorf("coredns: %d of %d replicas ready; pods: %v", d.Status.ReadyReplicas, *d.Spec.Replicas, states)
	}
	return nil
}
