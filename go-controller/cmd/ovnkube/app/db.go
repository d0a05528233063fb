package app

import (
	"crypto/tls"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
)

// tlsFlags are the TLS settings of one OVN database (db is "nb" or "sb"),
// the same three flags on every command that reaches that database.
func tlsFlags(db string) []cli.Flag {
	up := strings.ToUpper(db)
	return []cli.Flag{
		&cli.StringFlag{Name: db + "-client-cert", Usage: "client certificate (PEM) for ssl: " + up + " addresses"},
		&cli.StringFlag{Name: db + "-client-privkey", Usage: "private key (PEM) of that certificate"},
		&cli.StringFlag{Name: db + "-client-cacert", Usage: "CA certificate (PEM) that signed the " + up + " server's certificate"},
	}
}

// tlsFiles are the three files named by a database's TLS flags.
type tlsFiles struct{ Cert, Key, CA string }

// dbTLSFiles reads a database's TLS flags. With an ssl: address all three
// files must be given and readable; without one they are not needed.
func dbTLSFiles(c *cli.Context, db string, endpoints []string) (tlsFiles, error) {
	f := tlsFiles{Cert: c.String(db + "-client-cert"), Key: c.String(db + "-client-privkey"), CA: c.String(db + "-client-cacert")}
	usesSSL := false
	for _, ep := range endpoints {
		usesSSL = usesSSL || strings.HasPrefix(ep, "ssl:")
	}
	if !usesSSL {
		return tlsFiles{}, nil
	}
	for _, flag := range []struct{ name, path string }{{db + "-client-cert", f.Cert}, {db + "-client-privkey", f.Key}, {db + "-client-cacert", f.CA}} {
		if flag.path == "" {
			return f, flagError(flag.name, fmt.Errorf("is required with an ssl: --%s-address", db))
		}
		if _, err := os.Stat(flag.path); err != nil {
			return f, flagError(flag.name, err)
		}
	}
	return f, nil
}

// dbConnection parses a database address flag and its TLS flags into the
// endpoints and TLS configuration to dial (nil for unix: and tcp:).
func dbConnection(c *cli.Context, db string) ([]string, *tls.Config, error) {
	name := db + "-address"
	endpoints, err := config.ParseOVSDBAddress(c.String(name))
	if err != nil {
		return nil, nil, flagError(name, err)
	}
	files, err := dbTLSFiles(c, db, endpoints)
	if err != nil {
		return nil, nil, err
	}
	tlsConfig, err := ovndb.TLSConfig(endpoints, files.Cert, files.Key, files.CA)
	if err != nil {
		return nil, nil, flagError(db+"-client-cert", err)
	}
	return endpoints, tlsConfig, nil
}
