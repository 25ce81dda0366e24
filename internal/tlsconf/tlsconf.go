package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// Files are the PEM files of one side of a TLS connection.
type Files struct {
	// CAFile is a PEM bundle of CA certificates: for a client, the CAs
	// trusted to sign the server's certificate ("" = the system roots);
	// for a server, the CAs that sign client certificates ("" = no
	// client certificates are asked for).
	CAFile string
	// CertFile and KeyFile are this side's PEM certificate (chain) and
	// private key: a server's own, or a client's for mutual TLS.
	CertFile, KeyFile string
	// ServerName is the name a client checks the server certificate
	// against ("" = the host it dials).
	ServerName string
	// MinVersion is "1.2" (the default) or "1.3".
	MinVersion string
	// InsecureSkipVerify makes a client accept any server certificate.
	InsecureSkipVerify bool
}

// Version parses a min_version value: "" and "1.2" are TLS 1.2, "1.3" is
// TLS 1.3.
func Version(v string) (uint16, error) {
	switch v {
	case "", "1.2":
		return tls.VersionTLS12, nil
	case "1.3":
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("min_version %q: want \"1.2\" or \"1.3\"", v)
}

// Client returns a client configuration for f.
func Client(f Files) (*tls.Config, error) {
	v, err := Version(f.MinVersion)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{MinVersion: v, ServerName: f.ServerName, InsecureSkipVerify: f.InsecureSkipVerify}
	if f.CAFile != "" {
		pool, err := CertPool(f.CAFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, errors.New("set both cert_file and key_file (mutual TLS), or neither")
	}
	if f.CertFile != "" {
		kp, err := newKeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, err
		}
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return kp.get() }
	}
	return c, nil
}

// Server returns a server configuration for f: its certificate and key
// are required; with a CAFile, every client must present a certificate
// signed by one of its CAs.
func Server(f Files) (*tls.Config, error) {
	v, err := Version(f.MinVersion)
	if err != nil {
		return nil, err
	}
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("a TLS server needs cert_file and key_file")
	}
	kp, err := newKeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{MinVersion: v, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return kp.get() }}
	if f.CAFile != "" {
		pool, err := CertPool(f.CAFile)
		if err != nil {
			return nil, err
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// CertPool reads a PEM bundle of CA certificates.
func CertPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("CA file %s: certificate %d: %w", path, n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("CA file %s: no PEM certificate in it (want -----BEGIN CERTIFICATE----- blocks)", path)
	}
	return pool, nil
}

// keyPairCheckInterval is how often at most the files of a key pair are
// checked for changes.
const keyPairCheckInterval = 10 * time.Second

// keyPair is a certificate and key read again when their files change.
type keyPair struct {
	cert, key string

	mu       sync.Mutex
	current  *tls.Certificate
	mod      [2]time.Time
	checked  time.Time
	interval time.Duration
}

func newKeyPair(cert, key string) (*keyPair, error) {
	kp := &keyPair{cert: cert, key: key, interval: keyPairCheckInterval}
	c, mod, err := kp.load()
	if err != nil {
		return nil, err
	}
	kp.current, kp.mod, kp.checked = c, mod, time.Now()
	return kp, nil
}

func (kp *keyPair) load() (*tls.Certificate, [2]time.Time, error) {
	var mod [2]time.Time
	for i, p := range []string{kp.cert, kp.key} {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, mod, err
		}
		mod[i] = fi.ModTime()
	}
	c, err := tls.LoadX509KeyPair(kp.cert, kp.key)
	if err != nil {
		// LoadX509KeyPair's errors name neither file.
		return nil, mod, fmt.Errorf("cert_file %s, key_file %s: %w", kp.cert, kp.key, err)
	}
	if len(c.Certificate) > 0 {
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err == nil {
			c.Leaf = leaf
		}
	}
	return &c, mod, nil
}

// get returns the pair, read again if a file changed; a pair that fails
// to load keeps the one loaded before (a rotation may write the two files
// one after the other).
func (kp *keyPair) get() (*tls.Certificate, error) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if time.Since(kp.checked) < kp.interval {
		return kp.current, nil
	}
	kp.checked = time.Now()
	var mod [2]time.Time
	for i, p := range []string{kp.cert, kp.key} {
		if fi, err := os.Stat(p); err == nil {
			mod[i] = fi.ModTime()
		}
	}
	if mod == kp.mod {
		return kp.current, nil
	}
	if c, m, err := kp.load(); err == nil {
		kp.current, kp.mod = c, m
	}
	return kp.current, nil
}

// Describe says in words why a TLS handshake with peer (e.g. "broker")
// failed, from err (a crypto/tls or crypto/x509 error, or a TLS alert
// from the peer), with what to check; ok is false if err is not a TLS
// failure.
func Describe(err error, peer string) (what string, ok bool) {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
		alert    tls.AlertError
		recHdr   tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &unknown):
		return "TLS handshake failed: the " + peer + "'s certificate is signed by an authority that is not trusted (check tls.ca_file: it must hold the CA that signed the " + peer + "'s certificate)", true
	case errors.As(err, &hostname):
		return fmt.Sprintf("TLS handshake failed: the "+peer+"'s certificate is not valid for %q (%s; connect by a name in the certificate, or set tls.server_name)", hostname.Host, certNames(hostname.Certificate)), true
	case errors.As(err, &invalid):
		switch invalid.Reason {
		case x509.Expired:
			return "TLS handshake failed: the " + peer + "'s certificate has expired or is not valid yet (" + invalid.Detail + ")", true
		}
		return "TLS handshake failed: the " + peer + "'s certificate is not valid: " + invalid.Error(), true
	case errors.As(err, &verify):
		return "TLS handshake failed: the " + peer + "'s certificate could not be verified: " + verify.Err.Error(), true
	case errors.As(err, &recHdr):
		return "TLS handshake failed: the " + peer + " did not answer in TLS (is this a plaintext or SASL_PLAINTEXT listener? then turn tls off, or use the " + peer + "'s TLS port)", true
	case errors.As(err, &alert):
		return "TLS handshake failed: the " + peer + " refused it: " + alert.Error() + certHint(alert.Error(), peer), true
	}
	// Alerts wrapped as plain errors ("remote error: tls: ...").
	if s := err.Error(); strings.Contains(s, "remote error: tls:") {
		return "TLS handshake failed: the " + peer + " refused it: " + s[strings.Index(s, "remote error: tls:")+len("remote error: "):] + certHint(s, peer), true
	}
	return "", false
}

// certHint says what a peer's alert usually means.
func certHint(s, peer string) string {
	switch {
	case strings.Contains(s, "certificate required"):
		return " (it needs a client certificate: set tls.cert_file and tls.key_file)"
	case strings.Contains(s, "expired"):
		return " (the client certificate in tls.cert_file has expired)"
	case strings.Contains(s, "unknown certificate authority"), strings.Contains(s, "bad certificate"):
		return " (the client certificate in tls.cert_file is not signed by a CA the " + peer + " trusts, or has expired)"
	}
	return ""
}

func certNames(c *x509.Certificate) string {
	if c == nil {
		return "no certificate"
	}
	var names []string
	names = append(names, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 {
		return "it names none (CN " + c.Subject.CommonName + ")"
	}
	return "it is for " + strings.Join(names, ", ")
}
