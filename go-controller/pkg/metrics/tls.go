package metrics

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"sync"

	"k8s.io/client-go/util/cert"
)

// ServingTLS is the endpoint's HTTPS configuration: the certificate and key
// in certFile and keyFile (PEM), read again whenever either file changes
// (a rotated Secret), or, when both are empty, a self-signed certificate
// made now for host (and localhost), as Kubernetes' components make one
// without --tls-cert-file.
func ServingTLS(certFile, keyFile, host string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		cert, err := selfSigned(host)
		if err != nil {
			return nil, err
		}
		return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
	}
	kp := &keyPair{certFile: certFile, keyFile: keyFile}
	if _, err := kp.get(nil); err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: kp.get}, nil
}

// keyPair is a certificate and key read from files, re-read when either
// file's modification time or size changes.
type keyPair struct {
	certFile, keyFile string
	mu                sync.Mutex
	stamp             string
	cert              *tls.Certificate
}

func (k *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	stamp, err := fileStamp(k.certFile, k.keyFile)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cert != nil && stamp == k.stamp {
		return k.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		if k.cert != nil {
			return k.cert, nil // half-written during a rotation: keep serving the old pair
		}
		return nil, fmt.Errorf("certificate %s and key %s: %w", k.certFile, k.keyFile, err)
	}
	k.cert, k.stamp = &cert, stamp
	return k.cert, nil
}

func fileStamp(files ...string) (string, error) {
	s := ""
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		s += fmt.Sprintf("%d.%d;", fi.ModTime().UnixNano(), fi.Size())
	}
	return s, nil
}

// selfSigned makes a certificate for host (an address or a name; empty:
// this machine's host name) and localhost, as Kubernetes' components make
// theirs (client-go's cert.GenerateSelfSignedCertKey).
func selfSigned(host string) (tls.Certificate, error) {
	if host == "" || net.ParseIP(host).IsUnspecified() {
		host, _ = os.Hostname()
	}
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(host, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, []string{"localhost"})
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}
