package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/streamd/streamd/internal/x/tlsconf"
)

// Cluster is how to reach one Kafka cluster: its brokers, TLS and SASL,
// and the settings of the topics created there. Options are the franz-go
// options every client of the cluster starts with; a Source, a Sink or
// any other client (a journal's, a fluid bridge's) takes them. Errors the
// sources and sinks of a cluster report pass through Explain, so that a
// user reads one line naming the cluster, the broker and what was
// refused.
//
// The zero Cluster is a plaintext cluster with no seeds.
type Cluster struct {
	// Name is the cluster's name in errors ("default" when empty).
	Name string
	// Seeds are the bootstrap brokers, host:port.
	Seeds []string
	// ClientID is the client id sent to the brokers.
	ClientID string
	// TLS, when not nil, encrypts every connection (franz-go sets the
	// server name of each broker unless TLS.ServerName is set).
	TLS *tls.Config
	// DialTLS, when not nil, makes every connection instead, TLS
	// handshake included (TLS then only says that the cluster uses TLS):
	// a dialer that reads its CA bundle and certificate again when their
	// files change, such as a tlsconf.Dialer's DialContext.
	DialTLS func(ctx context.Context, network, host string) (net.Conn, error)
	// SASL, when not nil, authenticates every connection; SASLUser is
	// who it authenticates as, for errors ("" when not a user name).
	SASL     sasl.Mechanism
	SASLUser string
	// Rack is the client's rack: consumers fetch from the closest replica
	// where the brokers allow it (KIP-392).
	Rack string
	// ReplicationFactor of the topics created on demand: 0 is 1 on a
	// one-broker cluster, else the broker's default.
	ReplicationFactor int16
	// TopicConfigs of the topics created on demand.
	TopicConfigs map[string]*string
	// Opts are more franz-go options for every client of the cluster.
	Opts []kgo.Opt
	// StorageErr, when set, returns the error the cluster's broker last
	// got writing its data, nil if none lately: streamd's embedded broker
	// runs in the process and knows it (a full disk under data_dir).
	// Explain names it for the broker's UNKNOWN_SERVER_ERROR and
	// KAFKA_STORAGE_ERROR answers, which say nothing more (franz-go does
	// not pass on a produce response's KIP-467 error message, and kfake
	// sends none).
	StorageErr func() error

	offeredMu sync.Mutex
	offered   []string // mechanisms a broker said it offers
}

// dialOpts are the options that make the cluster's connections.
func (c *Cluster) dialOpts() []kgo.Opt {
	switch {
	case c.DialTLS != nil:
		return []kgo.Opt{kgo.Dialer(c.DialTLS)}
	case c.TLS != nil:
		return []kgo.Opt{kgo.DialTLSConfig(c.TLS.Clone())}
	}
	return nil
}

// name is the cluster's name for errors.
func (c *Cluster) name() string {
	if c == nil || c.Name == "" {
		return "default"
	}
	return c.Name
}

// Options returns the franz-go options of the cluster's clients: seeds,
// client id, TLS, SASL, rack and Opts.
func (c *Cluster) Options() []kgo.Opt {
	if c == nil {
		return nil
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(c.Seeds...)}, c.dialOpts()...)
	if c.ClientID != "" {
		opts = append(opts, kgo.ClientID(c.ClientID))
	}
	if c.SASL != nil {
		opts = append(opts, kgo.SASL(c.SASL))
	}
	if c.Rack != "" {
		opts = append(opts, kgo.Rack(c.Rack))
	}
	return append(opts, c.Opts...)
}

// Error is an error of a client of a cluster, in words a user can act on:
// which cluster and broker, what was being done, what was refused and what
// to check. It wraps the client's error.
type Error struct {
	// Cluster is the cluster's name.
	Cluster string
	// Broker is the broker's address, or the seeds when the broker is
	// not known.
	Broker string
	// Op is what was being done: "connect", "produce to topic orders.v1",
	// "read topic orders (group g)".
	Op string
	// What says what happened and what to check.
	What string
	// Err is the client's error.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kafka cluster %q (broker %s): %s: %s", e.Cluster, e.Broker, e.Op, e.What)
	if e.Err != nil {
		if s := e.Err.Error(); !strings.Contains(e.What, s) {
			b.WriteString(" (" + s + ")")
		}
	}
	return b.String()
}

// Unwrap returns the client's error.
func (e *Error) Unwrap() error { return e.Err }

// Explain returns err, from a client of the cluster doing op, as an
// *Error naming the cluster, the broker at addr ("" = the seeds), what was
// refused and what to check. Errors it cannot say better (the context's,
// an *Error already) come back as they are.
func (c *Cluster) Explain(err error, addr, op string) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) && !isDialTimeout(err) {
		return err
	}
	var already *Error
	if errors.As(err, &already) {
		return err
	}
	if addr == "" && c != nil {
		addr = strings.Join(c.Seeds, ",")
	}
	return &Error{Cluster: c.name(), Broker: addr, Op: op, What: c.describe(err), Err: err}
}

func isDialTimeout(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// describe says err in words.
func (c *Cluster) describe(err error) string {
	mech, user := "", ""
	if c != nil && c.SASL != nil {
		mech = c.SASL.Name()
		user = c.SASLUser
	}
	who := mech
	if user != "" {
		who = fmt.Sprintf("user %q (%s)", user, mech)
	}
	if what, ok := tlsconf.Describe(err, "broker"); ok {
		return what
	}
	var eof *kgo.ErrFirstReadEOF
	var op *net.OpError
	var dns *net.DNSError
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		if mech == "OAUTHBEARER" {
			return "authentication failed: the broker refused the OAUTHBEARER token (expired, not yet valid, wrong audience or scope, or not signed by a key it trusts): check sasl.token, token_file or the token endpoint"
		}
		if mech == "AWS_MSK_IAM" {
			return "authentication failed: the broker refused the AWS credentials (wrong or expired keys, or no IAM policy allowing kafka-cluster:Connect)"
		}
		return fmt.Sprintf("authentication failed: the broker refused %s: a wrong password, or no such user on the cluster; check sasl.username and sasl.password", who)
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		offered := c.offeredList()
		if offered != "" {
			return fmt.Sprintf("the broker does not offer SASL mechanism %s on this listener (it offers %s): set sasl.mechanism to one of them, or use the listener that has %s", mech, offered, mech)
		}
		return fmt.Sprintf("the broker does not offer SASL mechanism %s on this listener: set sasl.mechanism to one it has, or use the listener that has %s", mech, mech)
	case errors.Is(err, kerr.IllegalSaslState):
		return "the broker rejected the SASL exchange (IllegalSaslState): the listener's security protocol is not the one configured (SASL over TLS or plaintext?)"
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return "not authorized: the user's ACLs do not allow this on the topic (grant it with kafka-acls, or ask the cluster's admin)"
	case errors.Is(err, kerr.GroupAuthorizationFailed):
		return "not authorized: the user's ACLs do not allow READ on the consumer group"
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return "not authorized: the user's ACLs do not allow this on the cluster"
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return "not authorized: the user's ACLs do not allow this transactional id"
	case errors.As(err, &eof):
		switch {
		case c != nil && c.TLS == nil:
			return "the broker closed the connection at once: this listener wants TLS or SASL, which the cluster's settings do not have (add tls, or sasl, or use the broker's plaintext port)"
		case mech == "":
			return "the broker closed the connection at once: the listener wants SASL authentication (add sasl) or a client certificate (tls.cert_file, tls.key_file)"
		}
		return "the broker closed the connection at once: the listener wants something else (another SASL mechanism, a client certificate, or no TLS)"
	case errors.Is(err, kerr.UnknownServerError) || errors.Is(err, kerr.KafkaStorageError):
		if c != nil && c.StorageErr != nil {
			if serr := c.StorageErr(); serr != nil {
				return "the broker cannot write its data: " + serr.Error()
			}
		}
		if errors.Is(err, kerr.KafkaStorageError) {
			return "the broker cannot write to its log directory (a full or failing disk on the broker; it takes the directory offline, see its log)"
		}
		return err.Error()
	case errors.As(err, &dns):
		return fmt.Sprintf("cannot resolve %q: check the broker address", dns.Name)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused: no broker listens there (is the address right, is the broker up?)"
	case errors.As(err, &op) && op.Op == "dial":
		return "cannot connect: " + op.Err.Error()
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
		switch {
		case mech != "":
			// Some brokers (kfake) hang up on failed credentials instead
			// of answering SASL_AUTHENTICATION_FAILED.
			return fmt.Sprintf("the broker closed the connection: when it does so during SASL authentication, it refused %s (a wrong password, or no such user); else the listener is not a SASL one, or not TLS", who)
		case c != nil && c.TLS == nil:
			return "the broker closed the connection: is this a TLS listener? (then add tls)"
		}
		return "the broker closed the connection: is this a TLS listener? (if not, turn tls off)"
	}
	return err.Error()
}

// offeredList returns the SASL mechanisms a broker said it offers, as
// text, "" when not known.
func (c *Cluster) offeredList() string {
	if c == nil {
		return ""
	}
	c.offeredMu.Lock()
	defer c.offeredMu.Unlock()
	return strings.Join(c.offered, ", ")
}

// learnOffered asks a broker which SASL mechanisms it offers, once, with
// a client that sends only ApiVersions and SaslHandshake (what a broker
// answers before authentication).
func (c *Cluster) learnOffered(ctx context.Context) {
	if c == nil || c.SASL == nil {
		return
	}
	c.offeredMu.Lock()
	known := c.offered != nil
	c.offeredMu.Unlock()
	if known {
		return
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(c.Seeds...), kgo.RequestRetries(0)}, c.dialOpts()...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Mechanism = c.SASL.Name()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.SupportedMechanisms) == 0 {
		return
	}
	sort.Strings(resp.SupportedMechanisms)
	c.offeredMu.Lock()
	c.offered = resp.SupportedMechanisms
	c.offeredMu.Unlock()
}

// explainReady is Explain for a Ready check, learning first what the
// broker offers when it refused the mechanism.
func (c *Cluster) explainReady(ctx context.Context, err error, addr, op string) error {
	if errors.Is(err, kerr.UnsupportedSaslMechanism) {
		c.learnOffered(ctx)
	}
	return c.Explain(err, addr, op)
}

// checkAccess checks, before anything is read or written, that the user
// may do op (kmsg.ACLOperationRead for a source, ...Write for a sink) on
// topics: a metadata request with the topics' authorized operations
// (KIP-430). A topic the user may not even describe, or may not do op on,
// is an *Error naming it; a broker that does not say (no authorizer, an
// old broker) passes.
func (c *Cluster) checkAccess(ctx context.Context, cl *kgo.Client, op kmsg.ACLOperation, topics ...string) error {
	if len(topics) == 0 {
		return nil
	}
	req := kmsg.NewPtrMetadataRequest()
	req.IncludeTopicAuthorizedOperations = true
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil // Ready's other checks report the connection
	}
	opName := strings.ToUpper(op.String())
	for _, t := range resp.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if err := kerr.ErrorForCode(t.ErrorCode); errors.Is(err, kerr.TopicAuthorizationFailed) {
			return c.Explain(err, "", fmt.Sprintf("%s topic %q", strings.ToLower(opName), name))
		}
		if t.AuthorizedOperations == math.MinInt32 || t.ErrorCode != 0 {
			continue // not told, or the topic is missing (created later)
		}
		if t.AuthorizedOperations&(1<<uint(op)) == 0 {
			return &Error{Cluster: c.name(), Broker: strings.Join(c.Seeds, ","), Op: fmt.Sprintf("%s topic %q", strings.ToLower(opName), name),
				What: fmt.Sprintf("not authorized: the user's ACLs do not allow %s on topic %q (it may %s); grant it with kafka-acls, or ask the cluster's admin",
					opName, name, opsList(t.AuthorizedOperations)), Err: kerr.TopicAuthorizationFailed}
		}
	}
	return nil
}

// checkGroup checks that the user may use group: a group it may not
// describe is an *Error naming it.
func (c *Cluster) checkGroup(ctx context.Context, cl *kgo.Client, group string) error {
	if group == "" {
		return nil
	}
	described, err := kadm.NewClient(cl).DescribeGroups(ctx, group)
	if err != nil {
		var se *kadm.ShardErrors
		if !errors.As(err, &se) {
			return nil
		}
		for _, e := range se.Errs {
			if errors.Is(e.Err, kerr.GroupAuthorizationFailed) {
				return c.Explain(e.Err, "", fmt.Sprintf("read group %q", group))
			}
		}
		return nil
	}
	if g, ok := described[group]; ok && errors.Is(g.Err, kerr.GroupAuthorizationFailed) {
		return c.Explain(g.Err, "", fmt.Sprintf("read group %q", group))
	}
	return nil
}

// opsList names the operations an authorized-operations bitfield allows.
func opsList(bits int32) string {
	var names []string
	for op := kmsg.ACLOperation(2); op <= 14; op++ {
		if bits&(1<<uint(op)) != 0 {
			names = append(names, strings.ToUpper(op.String()))
		}
	}
	if len(names) == 0 {
		return "nothing"
	}
	return strings.Join(names, ", ")
}

// groupWatch is a franz-go hook that remembers a group member's last
// error (an ACL denial, a coordinator that refuses) and which group
// protocol the member runs: "consumer" once a ConsumerGroupHeartbeat
// succeeded (KIP-848), "classic" once a JoinGroup did.
type groupWatch struct {
	mu       sync.Mutex
	err      error
	at       time.Time
	protocol string
}

// OnGroupManageError implements kgo.HookGroupManageError.
func (w *groupWatch) OnGroupManageError(err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
		return
	}
	w.mu.Lock()
	w.err, w.at = err, time.Now()
	w.mu.Unlock()
}

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (w *groupWatch) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if e2e.Err() != nil {
		return
	}
	var p string
	switch key {
	case int16(kmsg.ConsumerGroupHeartbeat):
		p = "consumer"
	case int16(kmsg.JoinGroup):
		p = "classic"
	default:
		return
	}
	w.mu.Lock()
	w.protocol = p
	w.mu.Unlock()
}

// state returns the protocol in use ("" before the first join) and the
// last group error if it is fresh.
func (w *groupWatch) state() (protocol string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil && time.Since(w.at) <= conditionTTL {
		err = w.err
	}
	return w.protocol, err
}

// lastAddr returns the address of the broker whose connection or request
// failed last, "" if none did recently.
func (w *brokerWatch) lastAddr() string {
	return w.lastFailure().addr
}

// topicSettings returns the replication factor and configs of topics the
// cluster's clients create: the cluster's, or the defaults for nil.
func (c *Cluster) topicSettings() (int16, map[string]*string) {
	if c == nil {
		return 0, nil
	}
	return c.ReplicationFactor, c.TopicConfigs
}

// ready is a source's or sink's Ready check on cluster c (nil: a plain
// cluster): the brokers answer; the topics exist (created if missing,
// unless regex); the user may do op on them; the user may use group.
func (c *Cluster) ready(ctx context.Context, cl *kgo.Client, w *brokerWatch, op kmsg.ACLOperation, group string, partitions int32, regex bool, topics ...string) error {
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	err := cl.Ping(pctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if pctx.Err() != nil {
			// franz-go was still retrying: say what failed last.
			if last := w.condition(); last != nil {
				err = errors.Unwrap(last)
			} else {
				err = fmt.Errorf("no broker answered within %s", pingTimeout)
			}
		}
		return c.explainReady(ctx, err, w.lastAddr(), "connect")
	}
	if regex {
		return c.checkGroup(ctx, cl, group)
	}
	if _, err := ensureTopics(ctx, cl, c, partitions, topics...); err != nil {
		if errors.Is(err, kerr.TopicAuthorizationFailed) {
			// Not allowed to describe it, or to create it: say which.
			if aerr := c.checkAccess(ctx, cl, op, topics...); aerr != nil {
				return aerr
			}
		}
		return c.explainReady(ctx, err, w.lastAddr(), "create missing topics "+strings.Join(topics, ", "))
	}
	if err := c.checkAccess(ctx, cl, op, topics...); err != nil {
		return err
	}
	return c.checkGroup(ctx, cl, group)
}

// pingTimeout bounds a Ready check's first request: a broker that does
// not answer (a TLS handshake with a plaintext listener can hang) is
// reported with the last connection error instead of waiting forever.
const pingTimeout = 20 * time.Second

// explainCondition is a broker watch's condition, explained.
func (c *Cluster) explainCondition(w *brokerWatch) error {
	err := w.condition()
	if err == nil {
		return nil
	}
	return c.Explain(errors.Unwrap(err), w.lastAddr(), "connect")
}
