package app_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/streamd/streamd/internal/daemon/app"
	"github.com/streamd/streamd/internal/daemon/config"
)

// testCA makes a CA and a certificate it signs for 127.0.0.1 (server) or
// a client, written as PEM files in dir.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	file string
}

func newTestCA(t *testing.T, dir string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "streamd test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	file := filepath.Join(dir, "ca.pem")
	writeFile(t, file, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	return &testCA{cert, key, pool, file}
}

func (ca *testCA) issue(t *testing.T, dir, name string, client bool) (tls.Certificate, string, string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	cf, kf := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writeFile(t, cf, string(certPEM))
	writeFile(t, kf, string(keyPEM))
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair, cf, kf
}

// TestRegistryClientTLSAndAuth: the [schema_registry] client speaks TLS with
// a private CA and a client certificate (mutual TLS), and sends basic auth
// or a bearer token; a wrong CA or a missing client certificate fails with
// a TLS error, and no error or log line shows a secret.
func TestRegistryClientTLSAndAuth(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	serverCert, _, _ := ca.issue(t, dir, "server", false)
	_, clientCert, clientKey := ca.issue(t, dir, "client", true)
	other := newTestCA(t, t.TempDir())

	for _, tc := range []struct {
		name, auth, want string
		rc               config.SchemaRegistry
	}{
		{"basic", "Basic " + base64.StdEncoding.EncodeToString([]byte("svc:s3cret-pw")), "",
			config.SchemaRegistry{Username: "svc", Password: "s3cret-pw", TLS: &config.RegistryTLS{CAFile: ca.file, CertFile: clientCert, KeyFile: clientKey}}},
		{"bearer", "Bearer t0ken-value", "",
			config.SchemaRegistry{BearerToken: "t0ken-value", TLS: &config.RegistryTLS{CAFile: ca.file, CertFile: clientCert, KeyFile: clientKey}}},
		{"wrong password", "Basic " + base64.StdEncoding.EncodeToString([]byte("svc:s3cret-pw")), "User not authorized",
			config.SchemaRegistry{Username: "svc", Password: "wr0ng-pw", TLS: &config.RegistryTLS{CAFile: ca.file, CertFile: clientCert, KeyFile: clientKey}}},
		{"unknown CA", "Bearer t0ken-value", "certificate signed by unknown authority",
			config.SchemaRegistry{BearerToken: "t0ken-value", TLS: &config.RegistryTLS{CAFile: other.file, CertFile: clientCert, KeyFile: clientKey}}},
		{"no client certificate", "Bearer t0ken-value", "certificate required",
			config.SchemaRegistry{BearerToken: "t0ken-value", TLS: &config.RegistryTLS{CAFile: ca.file}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := srfake.NewRegistry(srfake.WithAuth(tc.auth))
			srv := httptest.NewUnstartedServer(f.Handler())
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.pool}
			srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshake failures are expected
			srv.StartTLS()
			defer srv.Close()
			rc := tc.rc
			rc.URL, rc.Timeout = srv.URL, config.Duration{Duration: 5 * time.Second}
			cl, err := app.NewRegistryClient(&rc)
			if err != nil {
				t.Fatal(err)
			}
			_, err = cl.Subjects(context.Background())
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want success: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if err != nil {
				for _, secret := range []string{"s3cret-pw", "wr0ng-pw", "t0ken-value"} {
					if strings.Contains(err.Error(), secret) {
						t.Fatalf("error shows a secret: %v", err)
					}
				}
			}
		})
	}
	// A CA file without a certificate is refused when the client is made.
	bad := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(bad, []byte("no pem here"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := app.NewRegistryClient(&config.SchemaRegistry{URL: "https://127.0.0.1:1", TLS: &config.RegistryTLS{CAFile: bad}}); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("empty CA file: %v", err)
	}
}
