package harness

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// KubeAPI is a real etcd and kube-apiserver on 127.0.0.1.
type KubeAPI struct {
	Dir        string
	URL        string
	Kubeconfig string
	Client     kubernetes.Interface
	Config     *rest.Config

	api  *Process
	args []string
}

const adminToken = "ovn-k8s-test-admin-token"

// StartKubeAPI starts etcd and kube-apiserver on free ports and waits until
// the API answers. serviceRanges are its --service-cluster-ip-range, one
// per family, the primary first; none: both families, IPv4 first.
func StartKubeAPI(t T, serviceRanges ...string) *KubeAPI {
	t.Helper()
	if len(serviceRanges) == 0 {
		serviceRanges = []string{Plans[IPv4].ServiceCIDR, Plans[IPv6].ServiceCIDR}
	}
	// The kubernetes Service's endpoint is the advertised address, of the
	// primary service range's family (the API server insists).
	advertise := "127.0.0.1"
	if netip.MustParsePrefix(serviceRanges[0]).Addr().Is6() {
		advertise = "::1"
	}
	LookPath(t, "etcd")
	LookPath(t, "openssl")
	apiserver := Binary(t, "kube-apiserver")
	dir := t.TempDir()
	clientPort, peerPort, apiPort := FreePort(t), FreePort(t), FreePort(t)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	Start(t, dir, "etcd", "etcd", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", peerPort),
		"--unsafe-no-fsync")
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(adminToken+",admin,admin,system:masters\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Run("openssl", "genrsa", "-out", filepath.Join(dir, "sa.key"), "2048"); err != nil {
		t.Fatal(err)
	}
	args := []string{apiserver, "--etcd-servers=" + etcdURL, "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", apiPort),
		"--cert-dir=" + filepath.Join(dir, "certs"), "--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC", "--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=" + strings.Join(serviceRanges, ","), "--advertise-address=" + advertise,
		"--kubelet-preferred-address-types=InternalIP", "--allow-privileged=true",
		"--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000"}
	k := &KubeAPI{Dir: dir, URL: fmt.Sprintf("https://127.0.0.1:%d", apiPort), args: args}
	k.api = Start(t, dir, "kube-apiserver", args...)
	// The same client settings as ovnkube master: high QPS, protobuf.
	k.Config = &rest.Config{Host: k.URL, BearerToken: adminToken, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 2000, Burst: 4000,
		ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf", AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json"}}
	var err error
	if k.Client, err = kubernetes.NewForConfig(k.Config); err != nil {
		t.Fatal(err)
	}
	k.waitReady(t)
	k.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(k.Kubeconfig, []byte(TokenKubeconfig(k.URL, adminToken)), 0o600); err != nil {
		t.Fatal(err)
	}
	k.EnsureNamespace(t, "default")
	// ovnkube master's leader Lease lives here (its --leader-elect default).
	k.EnsureNamespace(t, "ovn-kubernetes")
	return k
}

func (k *KubeAPI) waitReady(t T) {
	t.Helper()
	Eventually(t, 60*time.Second, "kube-apiserver ready", func() error {
		if k.api.Exited() {
			t.Fatalf("kube-apiserver exited:\n%s", k.api.Tail(20))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		body, err := k.Client.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%v %s", err, body)
		}
		return nil
	})
}

// RestartAPIServer kills kube-apiserver (etcd keeps the data) and starts it
// again on the same port; clients see their watches break and resume.
func (k *KubeAPI) RestartAPIServer(t T) {
	t.Helper()
	k.api.Kill()
	k.api = Start(t, k.Dir, "kube-apiserver", k.args...)
	k.waitReady(t)
}

// TokenKubeconfig is a kubeconfig for a test API server: a bearer token,
// the server's self-signed certificate not verified.
func TokenKubeconfig(server, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: %q}
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
`, server, token)
}

// EnsureNamespace creates a namespace and its default ServiceAccount (no
// controller-manager runs to create it, and pods need it).
func (k *KubeAPI) EnsureNamespace(t T, name string) { k.EnsureLabelledNamespace(t, name, nil) }

// EnsureLabelledNamespace is EnsureNamespace with labels for a namespace it
// creates (one that exists keeps its own).
func (k *KubeAPI) EnsureLabelledNamespace(t T, name string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	_, err := k.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, err = k.Client.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
