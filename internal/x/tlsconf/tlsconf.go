package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
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

// Client returns a client configuration for f: its certificate is read
// again when its files change, its CA bundle is the one read now (a
// Dialer reads that again too).
func Client(f Files) (*tls.Config, error) {
	d, err := NewDialer(f)
	if err != nil {
		return nil, err
	}
	return d.Config(), nil
}

// Dialer dials TLS connections as configured by Files, whose files are
// read again when they change (checked at most every 10 s): a rotated
// client certificate, or a CA bundle rewritten to trust a new CA, is used
// from the next connection on, without a restart. A *tls.Config alone
// cannot do it for the CA bundle: crypto/tls verifies against the RootCAs
// it holds when the handshake starts.
type Dialer struct {
	base *tls.Config
	ca   *watched[*x509.CertPool] // nil: the system roots
	net  net.Dialer
}

// NewDialer returns a Dialer for f, having read its files once (an error
// names the file and what is wrong with it).
func NewDialer(f Files) (*Dialer, error) {
	v, err := Version(f.MinVersion)
	if err != nil {
		return nil, err
	}
	d := &Dialer{base: &tls.Config{MinVersion: v, ServerName: f.ServerName, InsecureSkipVerify: f.InsecureSkipVerify},
		net: net.Dialer{Timeout: 10 * time.Second}}
	if f.CAFile != "" {
		if d.ca, err = newCAPool(f.CAFile); err != nil {
			return nil, err
		}
	}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, errors.New("set both cert_file and key_file (mutual TLS), or neither")
	}
	if f.CertFile != "" {
		kp, err := newKeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, err
		}
		d.base.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return kp.get(), nil }
	}
	return d, nil
}

// Config returns the configuration of the next connection: the CA bundle
// as its file is now.
func (d *Dialer) Config() *tls.Config {
	c := d.base.Clone()
	if d.ca != nil {
		c.RootCAs = d.ca.get()
	}
	return c
}

// DialContext connects to addr (host:port) and completes the TLS
// handshake, checking the server's certificate against the host unless
// Files.ServerName names another.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c := d.Config()
	if c.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		c.ServerName = host
	}
	td := tls.Dialer{NetDialer: &d.net, Config: c}
	return td.DialContext(ctx, network, addr)
}

// Server returns a server configuration for f: its certificate and key
// are required; with a CAFile, every client must present a certificate
// signed by one of its CAs. The files are read again when they change
// (checked at most every 10 s), so a rotated certificate or CA bundle
// serves from the next handshake on.
func Server(f Files) (*tls.Config, error) { return server(f, checkInterval) }

// server is Server with its files checked at most every interval.
func server(f Files, interval time.Duration) (*tls.Config, error) {
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
	kp.interval = interval
	c := &tls.Config{MinVersion: v, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return kp.get(), nil }}
	if f.CAFile == "" {
		return c, nil
	}
	ca, err := newCAPool(f.CAFile)
	if err != nil {
		return nil, err
	}
	ca.interval = interval
	c.ClientCAs, c.ClientAuth = ca.get(), tls.RequireAndVerifyClientCert
	base := c.Clone()
	c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		hc := base.Clone()
		hc.ClientCAs = ca.get()
		return hc, nil
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

// checkInterval is how often at most the files of a key pair or a CA
// bundle are checked for changes.
const checkInterval = 10 * time.Second

// watched is a value loaded from files and loaded again when one of them
// changes (its modification time), checked at most every interval; a load
// that fails keeps the value loaded before (a rotation may write the
// files one after the other, or write one in place).
type watched[T any] struct {
	files []string
	load  func() (T, error)

	mu       sync.Mutex
	current  T
	mod      []time.Time
	checked  time.Time
	interval time.Duration
}

func newWatched[T any](load func() (T, error), files ...string) (*watched[T], error) {
	w := &watched[T]{files: files, load: load, interval: checkInterval}
	w.mod = w.stat()
	v, err := load()
	if err != nil {
		return nil, err
	}
	w.current, w.checked = v, time.Now()
	return w, nil
}

// stat returns the files' modification times (zero for one that cannot
// be read).
func (w *watched[T]) stat() []time.Time {
	mod := make([]time.Time, len(w.files))
	for i, p := range w.files {
		if fi, err := os.Stat(p); err == nil {
			mod[i] = fi.ModTime()
		}
	}
	return mod
}

// get returns the value, loaded again if a file changed.
func (w *watched[T]) get() T {
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Since(w.checked) < w.interval {
		return w.current
	}
	w.checked = time.Now()
	mod := w.stat()
	if slices.Equal(mod, w.mod) {
		return w.current
	}
	if v, err := w.load(); err == nil {
		w.current, w.mod = v, mod
	}
	return w.current
}

// newKeyPair watches a certificate and its key.
func newKeyPair(cert, key string) (*watched[*tls.Certificate], error) {
	return newWatched(func() (*tls.Certificate, error) { return loadKeyPair(cert, key) }, cert, key)
}

func loadKeyPair(cert, key string) (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		// LoadX509KeyPair's errors name neither file.
		return nil, fmt.Errorf("cert_file %s, key_file %s: %w", cert, key, err)
	}
	if len(c.Certificate) > 0 {
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err == nil {
			c.Leaf = leaf
		}
	}
	return &c, nil
}

// newCAPool watches a CA bundle.
func newCAPool(path string) (*watched[*x509.CertPool], error) {
	return newWatched(func() (*x509.CertPool, error) { return CertPool(path) }, path)
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
