package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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

// Certs are PEM files of a test PKI in a temporary directory: a CA, a
// server certificate for 127.0.0.1 and localhost, a client certificate
// (CN "streamd-client"), an expired server certificate, and a second CA
// that signed nothing the others trust.
type Certs struct {
	Dir                     string
	CA, OtherCA             string // CA certificates
	ServerCert, ServerKey   string
	ClientCert, ClientKey   string
	ExpiredCert, ExpiredKey string // a server certificate that expired
	OtherCert, OtherKey     string // a client certificate signed by OtherCA
	caCert, otherCert       *x509.Certificate
	caKey, otherKey         *ecdsa.PrivateKey
	serial                  int64
}

// NewCerts writes a fresh test PKI into a directory removed with the test.
func NewCerts(tb testing.TB) *Certs {
	tb.Helper()
	c := &Certs{Dir: tb.TempDir()}
	c.caCert, c.caKey, c.CA = c.newCA(tb, "streamd test CA", "ca.pem")
	c.otherCert, c.otherKey, c.OtherCA = c.newCA(tb, "some other CA", "other-ca.pem")
	now := time.Now()
	c.ServerCert, c.ServerKey = c.leaf(tb, "server", "127.0.0.1", c.caCert, c.caKey, now.Add(-time.Hour), now.Add(24*time.Hour), true)
	c.ClientCert, c.ClientKey = c.leaf(tb, "client", "streamd-client", c.caCert, c.caKey, now.Add(-time.Hour), now.Add(24*time.Hour), false)
	c.ExpiredCert, c.ExpiredKey = c.leaf(tb, "expired", "127.0.0.1", c.caCert, c.caKey, now.Add(-48*time.Hour), now.Add(-24*time.Hour), true)
	c.OtherCert, c.OtherKey = c.leaf(tb, "other-client", "intruder", c.otherCert, c.otherKey, now.Add(-time.Hour), now.Add(24*time.Hour), false)
	return c
}

func (c *Certs) next() *big.Int { c.serial++; return big.NewInt(c.serial) }

func (c *Certs) newCA(tb testing.TB, cn, file string) (*x509.Certificate, *ecdsa.PrivateKey, string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: c.next(), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-72 * time.Hour), NotAfter: time.Now().Add(72 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	path := filepath.Join(c.Dir, file)
	writePEM(tb, path, "CERTIFICATE", der)
	return cert, key, path
}

func (c *Certs) leaf(tb testing.TB, name, cn string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, from, to time.Time, server bool) (string, string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: c.next(), Subject: pkix.Name{CommonName: cn}, NotBefore: from, NotAfter: to,
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, keyPath := filepath.Join(c.Dir, name+".pem"), filepath.Join(c.Dir, name+"-key.pem")
	writePEM(tb, cert, "CERTIFICATE", der)
	writePEM(tb, keyPath, "PRIVATE KEY", kb)
	return cert, keyPath
}

func writePEM(tb testing.TB, path, typ string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
}
