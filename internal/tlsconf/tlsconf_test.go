package tlsconf

import (
	"bytes"
	"crypto/tls"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/testenv"
)

// TestKeyPairRotation: a certificate rewritten in its files is served
// from the next check on, without a restart; a half-written pair keeps
// the one before.
func TestKeyPairRotation(t *testing.T) {
	a, b := testenv.NewCerts(t), testenv.NewCerts(t)
	dir := t.TempDir()
	cert, key := dir+"/c.pem", dir+"/k.pem"
	cp := func(src, dst string) {
		t.Helper()
		bs, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, bs, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cp(a.ServerCert, cert)
	cp(a.ServerKey, key)
	kp, err := newKeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	kp.interval = 0
	first, _ := kp.get()
	cp(b.ServerCert, cert) // the key is still a's: a mismatched pair
	later := time.Now().Add(time.Minute)
	os.Chtimes(cert, later, later)
	if c, _ := kp.get(); !bytes.Equal(c.Certificate[0], first.Certificate[0]) {
		t.Fatal("a mismatched pair replaced the good one")
	}
	cp(b.ServerKey, key)
	os.Chtimes(key, later, later)
	c, _ := kp.get()
	if bytes.Equal(c.Certificate[0], first.Certificate[0]) {
		t.Fatal("the rotated certificate is not served")
	}
}

func TestFilesErrors(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/empty.pem", []byte("no pem here"), 0o600)
	for _, tc := range []struct {
		name string
		f    Files
		want string
	}{
		{"missing CA", Files{CAFile: dir + "/none.pem"}, "CA file: open " + dir + "/none.pem"},
		{"CA without a certificate", Files{CAFile: dir + "/empty.pem"}, "no PEM certificate in it"},
		{"cert without key", Files{CertFile: dir + "/empty.pem"}, "set both cert_file and key_file"},
		{"bad key pair", Files{CertFile: dir + "/empty.pem", KeyFile: dir + "/empty.pem"}, "cert_file " + dir + "/empty.pem, key_file"},
		{"version", Files{MinVersion: "1.1"}, `min_version "1.1"`},
	} {
		if _, err := Client(tc.f); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := Server(Files{}); err == nil {
		t.Error("a server without a certificate")
	}
}

// TestDescribe: the handshake failures a client meets, in words.
func TestDescribe(t *testing.T) {
	c := testenv.NewCerts(t)
	serve := func(cert, key, ca string) string {
		sc, err := Server(Files{CertFile: cert, KeyFile: key, CAFile: ca})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := tls.Listen("tcp", "127.0.0.1:0", sc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					conn.(*tls.Conn).Handshake()
					conn.Close()
				}()
			}
		}()
		return ln.Addr().String()
	}
	good := serve(c.ServerCert, c.ServerKey, "")
	expired := serve(c.ExpiredCert, c.ExpiredKey, "")
	mtls := serve(c.ServerCert, c.ServerKey, c.CA)
	dial := func(addr string, f Files) error {
		cc, err := Client(f)
		if err != nil {
			t.Fatal(err)
		}
		if cc.ServerName == "" {
			cc.ServerName = "127.0.0.1"
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cc)
		if err == nil {
			// TLS 1.3: a refused client certificate shows on the first read.
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		return err
	}
	for _, tc := range []struct {
		name string
		addr string
		f    Files
		want string
	}{
		{"unknown CA", good, Files{CAFile: c.OtherCA}, "signed by an authority that is not trusted"},
		{"host name", good, Files{CAFile: c.CA, ServerName: "kafka.example.com"}, `not valid for "kafka.example.com" (it is for localhost, 127.0.0.1`},
		{"expired", expired, Files{CAFile: c.CA}, "has expired or is not valid yet"},
		{"no client certificate", mtls, Files{CAFile: c.CA}, "needs a client certificate"},
	} {
		err := dial(tc.addr, tc.f)
		what, ok := Describe(err, "broker")
		if !ok || !strings.Contains(what, tc.want) {
			t.Errorf("%s: %v -> %q, want %q", tc.name, err, what, tc.want)
		}
	}
	if _, ok := Describe(os.ErrNotExist, "broker"); ok {
		t.Error("a non-TLS error described as TLS")
	}
}
