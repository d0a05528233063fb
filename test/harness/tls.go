package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is a test certificate authority with PEM files on disk.
type PKI struct {
	Dir    string
	CACert string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

// NewPKI makes a CA named cn in a temporary directory.
func NewPKI(t T, cn string) *PKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	p := &PKI{Dir: t.TempDir(), ca: ca, caKey: key}
	p.CACert = p.write(t, cn+"-ca.pem", "CERTIFICATE", der)
	return p
}

// Issue signs a certificate for cn (valid for 127.0.0.1 too) and returns
// the certificate and key files.
func (p *PKI) Issue(t T, cn string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{cn},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &k.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, cn+"-cert.pem", "CERTIFICATE", der), p.write(t, cn+"-key.pem", "EC PRIVATE KEY", kder)
}

func (p *PKI) write(t T, name, typ string, der []byte) string {
	path := filepath.Join(p.Dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// StartTLSNB starts an NB ovsdb-server (empty database) that listens with
// TLS on 127.0.0.1 (server certificate from pki, clients verified against
// pki's CA) and on a unix socket for inspection; it returns the ssl:
// address and the unix socket.
func StartTLSNB(t T, pki *PKI) (sslAddress, sock string) {
	t.Helper()
	dir := t.TempDir()
	db := filepath.Join(dir, "nb.db")
	if _, err := Run("ovsdb-tool", "create", db, CurrentStack.Schema(t, NBSchema)); err != nil {
		t.Fatal(err)
	}
	cert, key := pki.Issue(t, "ovnnb")
	port := FreePort(t)
	sock = filepath.Join(dir, "nb.sock")
	p := Start(t, dir, "nb-tls", "ovsdb-server", db, "--remote=punix:"+sock,
		fmt.Sprintf("--remote=pssl:%d:127.0.0.1", port), "--private-key="+key, "--certificate="+cert, "--ca-cert="+pki.CACert,
		"--unixctl="+filepath.Join(dir, "nb.ctl"), "--no-chdir")
	Eventually(t, 10*time.Second, "TLS NB listening", func() error {
		if p.Exited() {
			t.Fatalf("ovsdb-server exited:\n%s", p.Tail(20))
		}
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return err
		}
		return c.Close()
	})
	return fmt.Sprintf("ssl:127.0.0.1:%d", port), sock
}

// NewPKIDir makes a CA named cn whose files (cn-ca.pem, cn-ca-key.pem)
// live in dir, for callers without a T (the cluster in a box).
func NewPKIDir(dir, cn string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	p := &PKI{Dir: dir, ca: ca, caKey: key}
	if p.CACert, err = writePEM(filepath.Join(dir, cn+"-ca.pem"), "CERTIFICATE", der); err != nil {
		return nil, err
	}
	if _, err := writePEM(filepath.Join(dir, cn+"-ca-key.pem"), "EC PRIVATE KEY", kder); err != nil {
		return nil, err
	}
	return p, nil
}

// IssueTo signs a client and server certificate whose subject CN is cn
// (what ovsdb-server's RBAC compares with a chassis name), valid for ips,
// and writes it and its key to certFile and keyFile.
func (p *PKI) IssueTo(certFile, keyFile, cn string, ips ...net.IP) error {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: ips, DNSNames: []string{cn},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &k.PublicKey, p.caKey)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return err
	}
	for _, f := range []string{certFile, keyFile} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return err
		}
	}
	if _, err := writePEM(certFile, "CERTIFICATE", der); err != nil {
		return err
	}
	_, err = writePEM(keyFile, "EC PRIVATE KEY", kder)
	return err
}

func writePEM(path, typ string, der []byte) (string, error) {
	return path, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
