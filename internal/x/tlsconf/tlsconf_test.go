package tlsconf

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/streamd/streamd/internal/tests/testenv"
)

// TestKeyPairRotation: a certificate rewritten in its files is served
// from the next check on, without a restart; a half-written pair keeps
// the one before.
func TestKeyPairRotation(t *testing.T) {
	a, b := testenv.NewCerts(t), testenv.NewCerts(t)
	dir := t.TempDir()
	cert, key := dir+"/c.pem", dir+"/k.pem"
	cp := func(src, dst string) { copyFile(t, src, dst) }
	cp(a.ServerCert, cert)
	cp(a.ServerKey, key)
	kp, err := newKeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	kp.interval = 0
	first := kp.get()
	cp(b.ServerCert, cert) // the key is still a's: a mismatched pair
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(cert, later, later); err != nil {
		t.Fatal(err)
	}
	if c := kp.get(); !bytes.Equal(c.Certificate[0], first.Certificate[0]) {
		t.Fatal("a mismatched pair replaced the good one")
	}
	cp(b.ServerKey, key)
	if err := os.Chtimes(key, later, later); err != nil {
		t.Fatal(err)
	}
	c := kp.get()
	if bytes.Equal(c.Certificate[0], first.Certificate[0]) {
		t.Fatal("the rotated certificate is not served")
	}
}

func TestFilesErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/empty.pem", []byte("no pem here"), 0o600); err != nil {
		t.Fatal(err)
	}
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
		return serveTLS(t, sc)
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
			if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
				t.Fatal(err)
			}
			_, err = conn.Read(make([]byte, 1))
			_ = conn.Close()
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

// TestCARotation: a CA bundle rewritten to trust a new CA is used from
// the next connection on, by a Dialer (the client side: a broker whose
// certificate moved to a new CA) and by a Server (the client certificates
// it accepts), while a configuration built before keeps the old one. The
// host name is still checked.
func TestCARotation(t *testing.T) {
	a, b := testenv.NewCerts(t), testenv.NewCerts(t)
	dir := t.TempDir()
	caFile, cert, key := dir+"/ca.pem", dir+"/c.pem", dir+"/k.pem"
	cp := func(src, dst string) { copyFile(t, src, dst) }
	// handshake dials addr and reads the server's byte: a refused client
	// certificate shows there under TLS 1.3.
	handshake := func(dial func(context.Context, string, string) (net.Conn, error), addr string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := dial(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close() }()
		if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			return err
		}
		_, err = conn.Read(make([]byte, 1))
		return err
	}

	t.Run("dialer", func(t *testing.T) {
		cp(a.ServerCert, cert)
		cp(a.ServerKey, key)
		cp(a.CA, caFile)
		sc, err := server(Files{CertFile: cert, KeyFile: key}, 0)
		if err != nil {
			t.Fatal(err)
		}
		addr := serveTLS(t, sc)
		d, err := NewDialer(Files{CAFile: caFile})
		if err != nil {
			t.Fatal(err)
		}
		d.ca.interval = 0
		before, err := Client(Files{CAFile: caFile})
		if err != nil {
			t.Fatal(err)
		}
		static := func(ctx context.Context, network, addr string) (net.Conn, error) {
			c := before.Clone()
			c.ServerName = "127.0.0.1"
			return (&tls.Dialer{Config: c}).DialContext(ctx, network, addr)
		}
		if err := handshake(d.DialContext, addr); err != nil {
			t.Fatalf("before the rotation: %v", err)
		}
		// The broker's certificate moves to CA b, and the CA file with it.
		cp(b.ServerCert, cert)
		cp(b.ServerKey, key)
		cp(b.CA, caFile)
		if err := handshake(d.DialContext, addr); err != nil {
			t.Fatalf("after the rotation: %v", err)
		}
		if err := handshake(static, addr); err == nil {
			t.Fatal("a configuration built before the rotation trusts the new CA: the test proves nothing")
		}
		// The host name is still checked: the certificate is for
		// 127.0.0.1 and localhost.
		named, err := NewDialer(Files{CAFile: caFile, ServerName: "kafka.example.com"})
		if err != nil {
			t.Fatal(err)
		}
		if err := handshake(named.DialContext, addr); err == nil || !strings.Contains(err.Error(), "kafka.example.com") {
			t.Fatalf("a certificate for another name: %v", err)
		}
	})

	t.Run("server client CAs", func(t *testing.T) {
		cp(a.CA, caFile)
		sc, err := server(Files{CertFile: a.ServerCert, KeyFile: a.ServerKey, CAFile: caFile}, 0)
		if err != nil {
			t.Fatal(err)
		}
		addr := serveTLS(t, sc)
		client := func(c *testenv.Certs) func(context.Context, string, string) (net.Conn, error) {
			d, err := NewDialer(Files{CAFile: a.CA, CertFile: c.ClientCert, KeyFile: c.ClientKey})
			if err != nil {
				t.Fatal(err)
			}
			return d.DialContext
		}
		if err := handshake(client(a), addr); err != nil {
			t.Fatalf("a client of CA a before: %v", err)
		}
		if err := handshake(client(b), addr); err == nil {
			t.Fatal("a client of CA b was let in before the rotation")
		}
		cp(b.CA, caFile)
		if err := handshake(client(b), addr); err != nil {
			t.Fatalf("a client of CA b after the rotation: %v", err)
		}
		if err := handshake(client(a), addr); err == nil {
			t.Fatal("a client of CA a is let in after its CA left the bundle")
		}
	})
}

// serveTLS serves sc on a loopback port until the test ends: each
// connection that completes the handshake is sent one byte and closed.
func serveTLS(t *testing.T, sc *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				if conn.(*tls.Conn).Handshake() == nil {
					_, _ = conn.Write([]byte{1}) // the client's read says whether it came
				}
				_ = conn.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// copyFile writes src's bytes to dst, with a modification time a minute
// ahead, so that a check that follows at once sees it changed.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	bs, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, bs, 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(dst, later, later); err != nil {
		t.Fatal(err)
	}
}
