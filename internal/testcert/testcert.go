// Package testcert makes throwaway certificates for tests: a CA, a server
// certificate for 127.0.0.1 and localhost, and a client certificate, all
// signed by the CA and written as PEM files.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Files are the PEM files Generate wrote.
type Files struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
	// CAPool holds the CA, for a tls.Config.
	CAPool *x509.CertPool
	// Client is the client certificate, for a tls.Config.
	Client tls.Certificate
}

// ClientConfig trusts the CA, and presents the client certificate if
// withCert.
func (f *Files) ClientConfig(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: f.CAPool, MinVersion: tls.VersionTLS12}
	if withCert {
		c.Certificates = []tls.Certificate{f.Client}
	}
	return c
}

// Generate writes a fresh CA, server and client certificate under dir.
func Generate(t testing.TB, dir string) *Files {
	t.Helper()
	caKey := key(t)
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redlock-proxy test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	f := &Files{CAPool: x509.NewCertPool()}
	f.CAPool.AddCert(caCert)
	f.CA = write(t, dir, "ca.pem", "CERTIFICATE", caDER)
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage) (string, string, tls.Certificate) {
		k := key(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			DNSNames:     []string{"localhost"},
			IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		cert := write(t, dir, name+".pem", "CERTIFICATE", der)
		keyFile := write(t, dir, name+"-key.pem", "EC PRIVATE KEY", kb)
		pair, err := tls.LoadX509KeyPair(cert, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		return cert, keyFile, pair
	}
	f.ServerCert, f.ServerKey, _ = leaf(2, "server", x509.ExtKeyUsageServerAuth)
	f.ClientCert, f.ClientKey, f.Client = leaf(3, "client", x509.ExtKeyUsageClientAuth)
	return f
}

func key(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func write(t testing.TB, dir, name, typ string, der []byte) string {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
