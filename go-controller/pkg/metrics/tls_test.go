package metrics

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// With delegated auth the endpoint serves HTTPS only (a self-signed
// certificate without files): a scrape in clear, which would carry the token
// in clear, gets no metrics.
func TestDelegatedEndpointServesHTTPSOnly(t *testing.T) {
	tlsConfig, err := ServingTLS("", "", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := Server{Address: addr, Registry: prometheus.NewRegistry(), Delegated: true, Kube: (&fakeAPI{}).client(), TLS: tlsConfig}
	if err := s.Listen(t.Context(), logr.Discard()); err != nil {
		t.Fatal(err)
	}
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := insecure.Get("https://" + addr + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("https /healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	if cert := resp.TLS.PeerCertificates[0]; cert.VerifyHostname("127.0.0.1") != nil || cert.VerifyHostname("localhost") != nil {
		t.Errorf("the self-signed certificate names %v %v, want 127.0.0.1 and localhost", cert.IPAddresses, cert.DNSNames)
	}
	resp, err = http.Get("http://" + addr + "/metrics")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP scrape: %d, want 400 (an HTTP request to an HTTPS server)", resp.StatusCode)
		}
	}
}

// writePair writes a self-signed certificate for name and its key.
func writePair(t *testing.T, dir, name string) {
	t.Helper()
	cert, err := selfSigned(name)
	if err != nil {
		t.Fatal(err)
	}
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})
	for f, b := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// A certificate from files is read again when they change (a rotated
// Secret); unreadable files fail at start naming them.
func TestServingTLSReadsRotatedFiles(t *testing.T) {
	dir := t.TempDir()
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if _, err := ServingTLS(crt, key, ""); err == nil {
		t.Fatal("missing files accepted")
	}
	writePair(t, dir, "first.example")
	cfg, err := ServingTLS(crt, key, "")
	if err != nil {
		t.Fatal(err)
	}
	name := func() string {
		c, err := cfg.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		x, _ := x509.ParseCertificate(c.Certificate[0])
		return fmt.Sprint(x.DNSNames)
	}
	if n := name(); !bytes.Contains([]byte(n), []byte("first.example")) {
		t.Fatalf("serving %s", n)
	}
	time.Sleep(10 * time.Millisecond) // a new modification time
	writePair(t, dir, "second.example")
	if n := name(); !bytes.Contains([]byte(n), []byte("second.example")) {
		t.Errorf("after rotation still serving %s", n)
	}
}
