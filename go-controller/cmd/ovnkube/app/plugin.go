package app

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// PluginName is the name under which kubectl runs ovnkube as its plugin:
// a link to the binary named kubectl-ovnk on the PATH makes
// `kubectl ovnk trace …` and `kubectl ovnk diff …`.
const PluginName = "kubectl-ovnk"

// clusterConfig is the ConfigMap every component's settings come from
// (dist/kubernetes/20-config.yaml); the plugin reads its defaults there.
const clusterConfig = "ovn-kubernetes/ovn-config"

// configFlags map the ConfigMap's keys to the flags they stand for.
var configFlags = []struct{ key, flag string }{
	{"nb_address", "nb-address"},
	{"sb_address", "sb-address"},
	{"cluster_subnet", "cluster-subnet"},
	{"service_cidr", "service-cidr"},
	{"external_ip_cidrs", "external-ip-cidrs"},
	{"dns_servers", "dns-servers"},
}

// pluginCommands are the read-only commands as kubectl's plugin: the
// kubeconfig is kubectl's (KUBECONFIG, else ~/.kube/config) and every
// setting the cluster's ConfigMap holds is the default of its flag.
func pluginCommands() []*cli.Command {
	cmds := []*cli.Command{traceCommand(), diffCommand()}
	for _, cmd := range cmds {
		for _, f := range cmd.Flags {
			if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "kubeconfig" {
				sf.Usage = "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, as kubectl)"
				if _, err := os.Stat(clientcmd.RecommendedHomeFile); err == nil {
					sf.Value = clientcmd.RecommendedHomeFile
				}
			}
		}
		cmd.Flags = append(cmd.Flags, &cli.StringFlag{Name: "ovn-config", Value: clusterConfig,
			Usage: "NAMESPACE/NAME of the ConfigMap whose nb_address, sb_address, cluster_subnet, service_cidr, external_ip_cidrs and dns_servers are the defaults of the flags of those names (empty: none)"})
		action := cmd.Action
		cmd.Action = func(c *cli.Context) error {
			if err := configDefaults(c); err != nil {
				return err
			}
			return action(c)
		}
	}
	return cmds
}

// configDefaults sets each flag of the command that the command line left
// unset to the value the cluster's ConfigMap gives it. A ConfigMap that is
// not there changes nothing (the flags must then be given).
func configDefaults(c *cli.Context) error {
	ref := c.String("ovn-config")
	if ref == "" {
		return nil
	}
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" {
		return flagError("ovn-config", fmt.Errorf("%q is not NAMESPACE/NAME", ref))
	}
	k, err := kubeConfig(c)
	if err != nil {
		return err
	}
	kube, err := kubeClient(k, PluginName)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
	defer cancel()
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the ConfigMap %s for the flags' defaults (--ovn-config \"\" reads none): %w", ref, err)
	}
	for _, cf := range configFlags {
		v, ok := cm.Data[cf.key]
		if !ok || c.IsSet(cf.flag) || !hasFlag(c, cf.flag) {
			continue
		}
		if err := c.Set(cf.flag, v); err != nil {
			return fmt.Errorf("the ConfigMap %s's %s %q: %w", ref, cf.key, v, err)
		}
	}
	return nil
}

func hasFlag(c *cli.Context, name string) bool {
	for _, f := range c.Command.Flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}
